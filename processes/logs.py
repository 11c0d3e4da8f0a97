"""How the processes log: one line a record, with its time, level and logger. Loads nothing but `logging`,
so that the `jobmesh` command can set it up before it knows which command runs."""

from __future__ import annotations

import logging


def configure_logging() -> None:
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(levelname)s %(name)s: %(message)s")
    logging.getLogger("alembic").setLevel(logging.WARNING)
