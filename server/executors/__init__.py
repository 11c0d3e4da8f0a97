"""Executor sessions: their streams, claims and reports, kept through a database outage."""
