"""What each setting's text may be: a parser turns it into the value (`timedelta` for durations),
or raises ValueError saying what it expected. The table of settings (`processes/settings.py`) names
one parser per setting."""

from __future__ import annotations

import math
import os
import re
from collections.abc import Callable
from datetime import timedelta
from pathlib import Path
from typing import TypeVar

from sqlalchemy.engine import make_url
from sqlalchemy.exc import ArgumentError

from jobmesh.adapters.queue.factory import parse_queue_url
from jobmesh.adapters.signals.factory import parse_signals_url
from jobmesh.core.errors import InvalidConfig
from jobmesh.core.names import QUEUE_NAME
from jobmesh.executor.policy import INHERIT_PATH
from jobmesh.executor.sandbox import ISOLATION_MODES, job_user
from jobmesh.executor.secrets import open_secret_source
from jobmesh.server.auth.jwt_tokens import ASYMMETRIC_ALGORITHMS

T = TypeVar("T")


_DURATION = re.compile(r"^\s*(\d+(?:\.\d*)?|\.\d+)\s*(ms|s|m|h|d)?\s*$")
_UNITS = {"ms": 0.001, "s": 1.0, "m": 60.0, "h": 3600.0, "d": 86400.0, None: 1.0}
_ADDRESS = re.compile(r"^(\[[0-9A-Fa-f:.]+\]|[A-Za-z0-9.\-]*):(\d{1,5})$")
_IDENTIFIER = re.compile(r"^[A-Za-z0-9][A-Za-z0-9_.:@\-]{0,127}$")
_HANDLERS = re.compile(r"^[A-Za-z_][\w.]*:[A-Za-z_][\w.]*$")


def duration(text: str) -> timedelta:
    """`500ms`, `20s`, `5m`, `1h`, `1d`, or a number of seconds (`1.5`)."""
    match = _DURATION.match(text)
    if match is None:
        raise ValueError(f"expected a duration such as 500ms, 20s, 5m or 1.5 (seconds), got {text!r}")
    seconds = float(match.group(1)) * _UNITS[match.group(2)]
    if not math.isfinite(seconds) or seconds > timedelta.max.total_seconds() / 2:
        raise ValueError(f"{text!r} is too long a duration")
    return timedelta(seconds=seconds)


def positive_duration(text: str) -> timedelta:
    value = duration(text)
    if value <= timedelta(0):
        raise ValueError(f"must be longer than zero, got {text!r}")
    return value


def positive_integer(text: str) -> int:
    if not text.strip().isdigit() or int(text) < 1 or int(text) > 1_000_000:
        raise ValueError(f"expected a whole number from 1 to 1000000, got {text!r}")
    return int(text)


_SIZE = re.compile(r"^\s*(\d+)\s*(|k|kib|m|mib|g|gib)\s*$", re.IGNORECASE)
_SIZE_UNITS = {"": 1, "k": 2**10, "kib": 2**10, "m": 2**20, "mib": 2**20, "g": 2**30, "gib": 2**30}


def size(text: str) -> int:
    """A number of bytes: `1048576`, `512KiB`, `10MiB`, `1GiB` (K, M, G alone mean the same)."""
    match = _SIZE.match(text)
    if match is None:
        raise ValueError(f"expected a size such as 512KiB, 10MiB or a number of bytes, got {text!r}")
    value = int(match.group(1)) * _SIZE_UNITS[match.group(2).lower()]
    if not 1 <= value <= 2**40:
        raise ValueError(f"expected a size from 1 byte to 1 TiB, got {text!r}")
    return value


def days(text: str) -> timedelta:
    return timedelta(days=positive_integer(text))


def address(text: str) -> str:
    """`HOST:PORT` (an IPv6 host in brackets), or a gRPC `unix:PATH`."""
    if text.startswith("unix:") and len(text) > len("unix:"):
        return text
    match = _ADDRESS.match(text)
    if match is None or int(match.group(2)) > 65535:
        raise ValueError(f"expected HOST:PORT (such as 127.0.0.1:50051) or unix:PATH, got {text!r}")
    return text


def database_url(text: str) -> str:
    """A SQLAlchemy URL of PostgreSQL or SQLite. Errors show the scheme only: a URL may hold a password."""
    try:
        url = make_url(text)
    except ArgumentError:
        raise ValueError(
            "expected postgresql+psycopg://USER@HOST:PORT/DB or sqlite:///PATH, not a URL of that form"
        ) from None
    if url.get_backend_name() not in ("postgresql", "sqlite"):
        raise ValueError(
            f"{url.get_backend_name()!r} is not supported: use postgresql+psycopg:// or sqlite:///"
        )
    return text


def queue_url(text: str) -> str:
    parse_queue_url(text)
    return text.strip()


def signals_url(text: str) -> str:
    parse_signals_url(text)
    return text.strip()


def queue_names(text: str) -> tuple[str, ...]:
    names = tuple(name.strip() for name in text.split(",") if name.strip())
    if not names:
        raise ValueError(f"expected comma-separated queue names, got {text!r}")
    if bad := [name for name in names if not QUEUE_NAME.match(name)]:
        raise ValueError(f"{bad[0][:100]!r} is not a queue name (1-63 of a-z, 0-9, `_`, `.`, `-`)")
    return names


def identifier(text: str) -> str:
    if not _IDENTIFIER.match(text):
        raise ValueError(
            f"expected 1-128 of A-Z, a-z, 0-9, `_.:@-`, starting with a letter or digit, got {text!r}"
        )
    return text


def switch(text: str) -> bool:
    """`on` or `off` (also `true`/`false`, `yes`/`no`, `1`/`0`)."""
    value = text.strip().lower()
    if value in ("on", "true", "yes", "1"):
        return True
    if value in ("off", "false", "no", "0"):
        return False
    raise ValueError(f"expected on or off, got {text!r}")


def existing_file(text: str) -> Path:
    """A path to a readable file (read when the process starts, and again when it changes)."""
    path = Path(text.strip()).expanduser()
    if not path.is_file():
        raise ValueError(f"expected a path to a file, got {text!r} (no such file)")
    return path


def existing_files(text: str) -> tuple[Path, ...]:
    """Comma-separated paths to files."""
    paths = tuple(existing_file(part) for part in text.split(",") if part.strip())
    if not paths:
        raise ValueError(f"expected comma-separated paths to files, got {text!r}")
    return paths


def jwt_algorithms(text: str) -> frozenset[str]:
    """Comma-separated JWS algorithms of public-key signatures (RS256, PS256, ES256, EdDSA, ...)."""
    names = frozenset(name.strip() for name in text.split(",") if name.strip())
    if not names or names - ASYMMETRIC_ALGORITHMS:
        raise ValueError(
            f"expected comma-separated algorithms among {', '.join(sorted(ASYMMETRIC_ALGORITHMS))}"
            f" (never HS* or none), got {text!r}"
        )
    return names


def open_services(text: str) -> frozenset[str]:
    """`health`, `reflection`, both (comma-separated) or `none`."""
    names = frozenset(name.strip().lower() for name in text.split(",") if name.strip())
    if names == {"none"}:
        return frozenset()
    if not names or names - {"health", "reflection"}:
        raise ValueError(f"expected health, reflection, both (comma-separated) or none, got {text!r}")
    return names


def non_empty(text: str) -> str:
    if not text.strip():
        raise ValueError("expected a value, got an empty one")
    return text.strip()


def rate(text: str) -> float:
    """A number of requests a second above zero (`0.5`, `1000`)."""
    try:
        value = float(text)
    except ValueError:
        raise ValueError(f"expected a number of requests a second, got {text!r}") from None
    if not 0 < value <= 1e9 or not math.isfinite(value):
        raise ValueError(f"expected a rate above zero, got {text!r}")
    return value


def tcp_address(text: str) -> str:
    """`HOST:PORT` with a real port: what a browser is pointed at."""
    match = _ADDRESS.match(text)
    if match is None or not 0 < int(match.group(2)) <= 65535:
        raise ValueError(f"expected HOST:PORT with a port from 1 to 65535 (127.0.0.1:8080), got {text!r}")
    return text


def http_address(text: str) -> str:
    """`HOST:PORT` of an HTTP endpoint (port 0 picks a free one, which the process prints)."""
    match = _ADDRESS.match(text)
    if match is None or int(match.group(2)) > 65535:
        raise ValueError(f"expected HOST:PORT (such as 127.0.0.1:8081), got {text!r}")
    return text


def folder(text: str) -> Path:
    """A folder's path (made when missing)."""
    if not text.strip():
        raise ValueError("expected a folder's path, got nothing")
    return Path(text).expanduser()


def readable_file(text: str) -> Path:
    """A file that exists (it is read when the process starts, and again when it changes)."""
    path = Path(text.strip()).expanduser()
    if not path.is_file():
        raise ValueError(f"no such file: {text!r}")
    return path


def server_name(text: str) -> str:
    name = text.strip()
    if not name or not re.fullmatch(r"[A-Za-z0-9.\-:\[\]]{1,253}", name):
        raise ValueError(f"expected a host name or IP address, got {text!r}")
    return name


def handlers_spec(text: str) -> str:
    """`MODULE:ATTR`; the mapping it names is imported when the executor starts."""
    if not _HANDLERS.match(text.strip()):
        raise ValueError(f"expected MODULE:ATTR, such as myapp.tasks:handlers, got {text!r}")
    return text.strip()


def _items(text: str) -> tuple[str, ...]:
    """Comma-separated items; `none` (or nothing) is none."""
    items = tuple(item.strip() for item in text.split(",") if item.strip())
    return () if items == ("none",) else items


# The allowlist's values are checked by ExecutionPolicy itself; these only split them.
def command_patterns(text: str) -> tuple[str, ...]:
    """Absolute program paths or patterns (`*` within a segment, `**` across), comma-separated; `none`."""
    return _items(text)


def host_patterns(text: str) -> tuple[str, ...]:
    """Host names or patterns (`*.example.com`, `*` for any), comma-separated."""
    if not (hosts := _items(text)):
        raise ValueError(f"expected host names or patterns such as *.example.com, got {text!r}")
    return tuple(host.lower() for host in hosts)


def host_names(text: str) -> tuple[str, ...]:
    """Host names or IP literals (IPv6 in brackets), comma-separated."""
    found = _items(text)
    if not found or not all(re.fullmatch(r"[A-Za-z0-9.-]+|\[[0-9A-Fa-f:.]+\]", name) for name in found):
        raise ValueError(f"expected host names such as localhost,jobs.example.com,[::1], got {text!r}")
    return found


def networks(text: str) -> tuple[str, ...]:
    """CIDRs, `public` or `any`, comma-separated."""
    if not (found := _items(text)):
        raise ValueError(f"expected CIDRs (10.0.0.0/8), public or any, got {text!r}")
    return found


def ports(text: str) -> tuple[int, ...]:
    """Port numbers, comma-separated; `any`."""
    items = () if text.strip() == "any" else _items(text)
    if not all(item.isdigit() for item in items) or (not items and text.strip() != "any"):
        raise ValueError(f"expected port numbers, comma-separated, or any, got {text!r}")
    return tuple(int(item) for item in items)


def schemes(text: str) -> tuple[str, ...]:
    if not (found := tuple(item.lower() for item in _items(text))):
        raise ValueError(f"expected http, https or both, got {text!r}")
    return found


def command_path(text: str) -> str:
    """A PATH of absolute folders, or `inherit` (the executor's own)."""
    if text.strip() == INHERIT_PATH:
        return INHERIT_PATH
    folders = [folder for folder in text.split(os.pathsep) if folder]
    if not folders or not all(os.path.isabs(folder) for folder in folders):
        raise ValueError(f"expected absolute folders separated by {os.pathsep}, or inherit, got {text!r}")
    return os.pathsep.join(folders)


def isolation(text: str) -> str:
    if text.strip() not in ISOLATION_MODES:
        raise ValueError(f"expected one of {', '.join(ISOLATION_MODES)}, got {text!r}")
    return text.strip()


def one_of(*choices: str) -> Callable[[str], str]:
    """A parser of one of `choices`, in any case."""

    def parse(text: str) -> str:
        if (value := text.strip().lower()) not in choices:
            raise ValueError(f"expected one of {', '.join(choices)}, got {text!r}")
        return value

    return parse


def user(text: str) -> str:
    """A user of this machine, by name or uid."""
    try:
        job_user(text.strip())
    except InvalidConfig as exc:
        raise ValueError(exc.message) from None
    return text.strip()


def limit(parse: Callable[[str], int]) -> Callable[[str], int]:
    """`parse`'s value, or 0 for `none` (no limit)."""

    def parsed(text: str) -> int:
        return 0 if text.strip().lower() == "none" else parse(text)

    return parsed


def secret_source(text: str) -> str:
    """`env:PREFIX` or `file:PATH` (the file must exist and not be readable by anyone)."""
    open_secret_source(text.strip(), {})
    return text.strip()


# The table. ------------------------------------------------------------------------------------------------
