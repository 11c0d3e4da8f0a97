"""Runs the Alembic migrations programmatically: `upgrade(url)` is `alembic upgrade head` without an ini."""

from __future__ import annotations

from pathlib import Path

from alembic import command
from alembic.config import Config
from sqlalchemy import create_engine, text

MIGRATIONS = Path(__file__).resolve().parent / "migrations"
# Any constant shared by every jobmesh process: concurrent upgrades (replicas starting together) queue up.
_PG_MIGRATION_LOCK = 0x6A6D_0001


def alembic_config() -> Config:
    config = Config()
    config.set_main_option("script_location", str(MIGRATIONS))
    return config


def upgrade(url: str, revision: str = "head") -> None:
    """Brings the database at `url` to `revision`, in one transaction on PostgreSQL."""
    engine = create_engine(url)
    try:
        with engine.begin() as connection:
            if connection.dialect.name == "postgresql":
                connection.execute(text("SELECT pg_advisory_xact_lock(:key)"), {"key": _PG_MIGRATION_LOCK})
            config = alembic_config()
            config.attributes["connection"] = connection
            command.upgrade(config, revision)
    finally:
        engine.dispose()
