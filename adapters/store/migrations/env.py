"""Alembic environment: runs on the connection `jobmesh.adapters.store.migrate.upgrade` hands over.

There is no alembic.ini: the URL never goes through configparser (a `%` in a password would break it).
"""

from __future__ import annotations

from alembic import context
from sqlalchemy.engine import Connection

from jobmesh.adapters.store.schema import metadata


def _run() -> None:
    connection = context.config.attributes.get("connection")
    if not isinstance(connection, Connection):
        raise RuntimeError("run migrations through jobmesh.adapters.store.migrate.upgrade(url)")
    context.configure(connection=connection, target_metadata=metadata, render_as_batch=False)
    with context.begin_transaction():
        context.run_migrations()


_run()
