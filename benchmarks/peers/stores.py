"""Where the peers keep their queues: the project's own Redis and PostgreSQL (`make services-up`), in a
Redis database number and a PostgreSQL database of the peers' own, emptied or dropped after each run.

The services are named by JOBMESH_REDIS_URL and JOBMESH_DATABASE_URL, or read from `.jobmesh/services/env`
when those are not set. The server process behind each (found by its listening port on this machine) is
measured for CPU too.
"""

from __future__ import annotations

import contextlib
import os
import re
import uuid
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from urllib.parse import urlsplit, urlunsplit

import psycopg
import redis
from psycopg import sql

REPO = Path(__file__).resolve().parents[2]
SERVICES_ENV = REPO / ".jobmesh" / "services" / "env"
URL_VARIABLES = ("JOBMESH_REDIS_URL", "JOBMESH_DATABASE_URL")


@dataclass(frozen=True, slots=True)
class Store:
    url: str  # what the peer's processes are given: a Redis URL, or a libpq conninfo
    pid: int | None  # the server's process, when it runs on this machine


def service_urls() -> dict[str, str]:
    """JOBMESH_REDIS_URL and JOBMESH_DATABASE_URL, from the environment or `.jobmesh/services/env`."""
    urls = {name: os.environ[name] for name in URL_VARIABLES if os.environ.get(name)}
    if len(urls) < len(URL_VARIABLES) and SERVICES_ENV.exists():
        exported = re.findall(r"^export (\w+)=['\"]?([^'\"\n]*)", SERVICES_ENV.read_text(), re.MULTILINE)
        urls = {**{name: value for name, value in exported if name in URL_VARIABLES}, **urls}
    if missing := [name for name in URL_VARIABLES if not urls.get(name)]:
        raise SystemExit(
            f"{', '.join(missing)} not set: `make services-up`, then source .jobmesh/services/env"
        )
    return urls


def listening_pid(port: int | None) -> int | None:
    """The process listening on this TCP port of the loopback, from /proc (Linux)."""
    if port is None:
        return None
    inodes = set()
    for table in ("/proc/net/tcp", "/proc/net/tcp6"):
        with contextlib.suppress(OSError), open(table, encoding="ascii") as rows:
            for row in list(rows)[1:]:
                fields = row.split()
                if fields[3] == "0A" and int(fields[1].rsplit(":", 1)[1], 16) == port:  # 0A: LISTEN
                    inodes.add(f"socket:[{fields[9]}]")
    for entry in os.scandir("/proc"):
        if not entry.name.isdigit():
            continue
        with contextlib.suppress(OSError):
            for fd in os.scandir(f"/proc/{entry.name}/fd"):
                if os.readlink(fd.path) in inodes:
                    return int(entry.name)
    return None


@contextlib.contextmanager
def redis_store(base_url: str, database: int) -> Iterator[Store]:
    """Database number `database` of the Redis at `base_url`, emptied before the run and after it."""
    parts = urlsplit(base_url)
    if parts.path.strip("/") == str(database):
        raise SystemExit(f"--redis-db {database} is the database jobmesh uses ({base_url}): choose another")
    url = urlunsplit(parts._replace(path=f"/{database}"))
    client = redis.Redis.from_url(url, socket_timeout=10)
    try:
        client.flushdb()
        yield Store(url, listening_pid(parts.port))
    finally:
        client.flushdb()
        client.close()


def libpq_url(url: str, database: str | None = None) -> str:
    """A SQLAlchemy URL (postgresql+psycopg://...) as libpq takes it, on another database if given."""
    parts = urlsplit(url)
    scheme = parts.scheme.split("+", 1)[0]
    return urlunsplit(parts._replace(scheme=scheme, path=f"/{database}" if database else parts.path))


@contextlib.contextmanager
def postgres_store(base_url: str) -> Iterator[Store]:
    """A new database on the PostgreSQL at `base_url`, dropped after the run (its connections cut)."""
    admin = libpq_url(base_url)
    name = f"jobmesh_peers_{uuid.uuid4().hex[:12]}"
    with psycopg.connect(admin, autocommit=True) as connection:
        connection.execute(sql.SQL("CREATE DATABASE {}").format(sql.Identifier(name)))
    try:
        yield Store(libpq_url(base_url, name), listening_pid(urlsplit(admin).port))
    finally:
        with psycopg.connect(admin, autocommit=True) as connection:
            connection.execute(
                sql.SQL("DROP DATABASE IF EXISTS {} WITH (FORCE)").format(sql.Identifier(name))
            )
