"""The ports: what the domain needs from a database, a run queue and a signal bus, and nothing about which."""
