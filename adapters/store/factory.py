"""Opens the store a URL names: `postgresql+psycopg://…` or `sqlite:///path/file.db`."""

from __future__ import annotations

from datetime import UTC, datetime

from jobmesh.adapters.store.sql import DEFAULT_PARTITION_AHEAD_DAYS, DEFAULT_RETENTION_DAYS, SqlStore


def open_store(
    url: str,
    *,
    migrate: bool = True,
    retention_days: int = DEFAULT_RETENTION_DAYS,
    partition_ahead_days: int = DEFAULT_PARTITION_AHEAD_DAYS,
) -> SqlStore:
    """A ready store: with `migrate`, the schema is brought to head and the run partitions made for today
    and the coming days (the watcher keeps calling `maintain_partitions` afterwards)."""
    if migrate:
        # Here: Alembic is a fifth of a second of CPU to import, for the processes that migrate only.
        from jobmesh.adapters.store import migrate as migrations

        migrations.upgrade(url)
    store = SqlStore(url, retention_days=retention_days, partition_ahead_days=partition_ahead_days)
    if migrate:
        try:
            store.maintain_partitions(datetime.now(UTC))
        except BaseException:
            store.close()
            raise
    return store
