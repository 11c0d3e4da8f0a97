"""How the processes log: one line a record, with its time, level, the process that wrote it (its role, pid,
and worker when it is one of `jobmesh server --workers N`), its logger and message; as text, or as one JSON
object a line (`--log-format json`) that also carries the fields a call passed in `extra` (run, executor,
dependency, ...). Loads nothing but `logging` and `json`, so that the `jobmesh` command can set it up before
it knows which command runs."""

from __future__ import annotations

import json
import logging
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any

LINE_FORMAT = "%(asctime)s %(levelname)s %(role)s[%(process)d%(worker)s] %(name)s: %(message)s"
LEVELS = ("debug", "info", "warning", "error")
FORMATS = ("text", "json")
# What every LogRecord has: anything else on a record came from a call's `extra`.
_STANDARD = frozenset(vars(logging.LogRecord("", 0, "", 0, "", None, None))) | {
    "message",
    "asctime",
    "role",
    "worker",
    "taskName",
}


@dataclass(frozen=True, slots=True)
class LogSettings:
    log_level: str = "info"  # one of LEVELS
    log_format: str = "text"  # one of FORMATS


class _ProcessIdentity(logging.Filter):
    """Names the process on every record: two workers writing one log are told apart."""

    def __init__(self) -> None:
        super().__init__()
        self.role = "jobmesh"
        self.worker = ""
        self.settings = LogSettings()  # what configure_logging applied last

    def filter(self, record: logging.LogRecord) -> bool:
        record.role = self.role
        record.worker = self.worker
        return True


class JsonLines(logging.Formatter):
    """One JSON object a record: its time (UTC, ISO 8601), level, process, logger, message, the fields of
    its `extra`, and its traceback when it has one."""

    def format(self, record: logging.LogRecord) -> str:
        line: dict[str, Any] = {
            "time": datetime.fromtimestamp(record.created, UTC).isoformat(timespec="milliseconds"),
            "level": record.levelname,
            "process": getattr(record, "role", "jobmesh"),
            "pid": record.process,
            "logger": record.name,
            "message": record.getMessage(),
        }
        if worker := getattr(record, "worker", "").strip():
            line["worker"] = worker
        line.update({key: value for key, value in vars(record).items() if key not in _STANDARD})
        if record.exc_info:
            line["traceback"] = self.formatException(record.exc_info)
        return json.dumps(line, default=str)


_IDENTITY = _ProcessIdentity()
_STDERR = logging.StreamHandler()
_STDERR.addFilter(_IDENTITY)


def configure_logging(role: str = "jobmesh", worker: str = "", settings: LogSettings | None = None) -> None:
    """Lines go to stderr; `role` is the command (`server`, `watcher`, ...), `worker` a server worker's id.
    Called again, it renames the process and applies `settings` (when given) to the same handler."""
    _IDENTITY.role = role
    _IDENTITY.worker = f" {worker}" if worker else ""
    _IDENTITY.settings = current = settings or _IDENTITY.settings
    root = logging.getLogger()
    if not root.handlers:  # else whoever set them up (a test runner, an embedding program) keeps them
        root.addHandler(_STDERR)
    if _STDERR in root.handlers:
        _STDERR.setFormatter(JsonLines() if current.log_format == "json" else logging.Formatter(LINE_FORMAT))
        root.setLevel(current.log_level.upper())
    logging.getLogger("alembic").setLevel(logging.WARNING)


def current_log_settings() -> LogSettings:
    """What `configure_logging` applied last: a server worker logs as its parent was told to."""
    return _IDENTITY.settings
