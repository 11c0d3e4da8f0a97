"""The SQL store: PostgreSQL (partitioned runs) and SQLite behind one adapter, its schema and migrations."""
