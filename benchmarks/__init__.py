"""Benchmarks: run each as `.venv/bin/python -m benchmarks.NAME` (or by path) from the repository root."""
