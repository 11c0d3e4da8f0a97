"""Runs the Alembic migrations programmatically: `upgrade(url)` is `alembic upgrade head` without an ini."""

from __future__ import annotations

import functools
from pathlib import Path

from alembic import command
from alembic.config import Config
from alembic.runtime.migration import MigrationContext
from alembic.script import ScriptDirectory
from sqlalchemy import Connection, create_engine, text

MIGRATIONS = Path(__file__).resolve().parent / "migrations"
# Any constant shared by every jobmesh process: concurrent upgrades (replicas starting together) queue up.
_PG_MIGRATION_LOCK = 0x6A6D_0001


def alembic_config() -> Config:
    config = Config()
    config.set_main_option("script_location", str(MIGRATIONS))
    return config


@functools.cache
def _head_revision() -> str | None:
    """The newest migration's revision, read from the scripts once a process (they do not change under it)."""
    return ScriptDirectory.from_config(alembic_config()).get_current_head()


def _at_head(connection: Connection) -> bool:
    return MigrationContext.configure(connection).get_current_revision() == _head_revision()


def upgrade(url: str, revision: str = "head") -> None:
    """Brings the database at `url` to `revision`, in one transaction on PostgreSQL. A database already at
    head is left alone without running Alembic's environment (every store a process opens comes here)."""
    engine = create_engine(url)
    try:
        with engine.begin() as connection:
            if connection.dialect.name == "postgresql":
                connection.execute(text("SELECT pg_advisory_xact_lock(:key)"), {"key": _PG_MIGRATION_LOCK})
            if revision == "head" and _at_head(connection):
                return
            config = alembic_config()
            config.attributes["connection"] = connection
            command.upgrade(config, revision)
    finally:
        engine.dispose()
