"""From the settings' values (parsed, None when unset) to the frozen configs that the components get
(`ServerConfig`, `WatcherConfig`, `ExecutorConfig`, `Connections`). A value that parsed but that a
config refuses raises `SettingsError`, naming the setting to blame."""

from __future__ import annotations

import dataclasses
import os
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field, fields
from datetime import timedelta
from typing import Any, TypeVar

from jobmesh.adapters.queue.factory import MemoryQueueAddress, parse_queue_url
from jobmesh.adapters.signals.factory import parse_signals_url
from jobmesh.core.errors import InvalidConfig
from jobmesh.executor.config import ExecutorConfig
from jobmesh.executor.policy import ExecutionPolicy
from jobmesh.processes.dashboard import DashboardConfig
from jobmesh.processes.logs import LogSettings
from jobmesh.processes.settings import (
    BY_NAME,
    POLICY_SETTINGS,
    SettingsError,
    default_database_url,
    default_journal_folder,
)
from jobmesh.server.auth.tls import ServerTls
from jobmesh.server.config import ServerConfig
from jobmesh.transport.tls import ChannelTls
from jobmesh.watcher.config import WatcherConfig

T = TypeVar("T")


EMBEDDED = "memory://dev"


@dataclass(frozen=True, slots=True)
class Connections:
    """The adapters a process opens, each named by a URL."""

    database_url: str = field(default_factory=default_database_url)
    queue_url: str = EMBEDDED
    signals_url: str = EMBEDDED
    # Run partitions older than this are dropped.
    retention: timedelta = timedelta(days=30)


def log_settings(values: Mapping[str, Any]) -> LogSettings:
    return _build(LogSettings, values)


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
    journal = values.get("journal_dir") or default_journal_folder()
    return _build(ServerConfig, {**values, "tls": server_tls(values), "journal_dir": journal})


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


def executor_config(values: Mapping[str, Any], *, dev: bool = False) -> ExecutorConfig:
    """An executor opens its queue and signal bus itself: by default the embedded ones, as every process.
    `jobmesh dev`'s executor runs anything, unless its allowlist settings say otherwise."""
    urls = {"queue_url": EMBEDDED, "signals_url": EMBEDDED, "tls": channel_tls(values)}
    base = ExecutionPolicy.unrestricted() if dev else ExecutionPolicy()
    policy = _build(lambda **given: dataclasses.replace(base, **given), values, fields_of=ExecutionPolicy)
    given = {k: v for k, v in values.items() if v is not None and k not in POLICY_SETTINGS}
    return _build(ExecutorConfig, {**urls, **given, "policy": policy})


def _build(config_type: Callable[..., T], values: Mapping[str, Any], *, fields_of: Any = None) -> T:
    known = {f.name for f in fields(fields_of or config_type)}  # type: ignore[arg-type]
    given = {name: value for name, value in values.items() if name in known and value is not None}
    try:
        return config_type(**given)
    except InvalidConfig as error:
        if error.field not in BY_NAME:
            raise  # a field no setting sets: the defaults themselves are wrong
        raise SettingsError(BY_NAME[error.field], error.message) from None
