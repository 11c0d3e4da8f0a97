"""Peers under the same open-loop load as jobmesh: `.venv/bin/python -m benchmarks.peers --help`.

Some modules here run in the peers' own venv (`benchmarks/peers/venv.py`) and import only the standard
library and their peer's library; this package itself imports nothing.
"""
