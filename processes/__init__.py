"""The process wiring: the settings model, opening adapters, and the `jobmesh` command."""
