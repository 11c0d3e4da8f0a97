"""How the processes log: one line a record, with its time, level, the process that wrote it (its role, pid,
and worker when it is one of `jobmesh server --workers N`), and its logger. Loads nothing but `logging`, so
that the `jobmesh` command can set it up before it knows which command runs."""

from __future__ import annotations

import logging

LINE_FORMAT = "%(asctime)s %(levelname)s %(role)s[%(process)d%(worker)s] %(name)s: %(message)s"


class _ProcessIdentity(logging.Filter):
    """Names the process on every record: two workers writing one log are told apart."""

    def __init__(self) -> None:
        super().__init__()
        self.role = "jobmesh"
        self.worker = ""

    def filter(self, record: logging.LogRecord) -> bool:
        record.role = self.role
        record.worker = self.worker
        return True


_IDENTITY = _ProcessIdentity()


def configure_logging(role: str = "jobmesh", worker: str = "") -> None:
    """Lines go to stderr at INFO; `role` is the command (`server`, `watcher`, ...), `worker` a server
    worker's id. Called again, it only renames the process."""
    _IDENTITY.role = role
    _IDENTITY.worker = f" {worker}" if worker else ""
    root = logging.getLogger()
    if not root.handlers:
        stderr = logging.StreamHandler()
        stderr.setFormatter(logging.Formatter(LINE_FORMAT))
        root.addHandler(stderr)
        root.setLevel(logging.INFO)
    for handler in root.handlers:
        if _IDENTITY not in handler.filters:
            handler.addFilter(_IDENTITY)
    logging.getLogger("alembic").setLevel(logging.WARNING)
