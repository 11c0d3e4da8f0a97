"""Chooses the queue adapter from a URL (`--queue-url`, `JOBMESH_QUEUE_URL`).

- `memory://NAME` (NAME may be empty): the in-process queue. The same NAME gives the same queue within one
  process, so the server, watcher and executors of `jobmesh dev` meet on it.
- `kafka://HOST:PORT[,HOST:PORT...][?partitions=N&client_id=ID&session_timeout_ms=MS&delivery_timeout_ms=MS]`,
  or a bare `HOST:PORT[,...]` list: Kafka. TLS to the brokers: `security_protocol=SSL` with
  `ssl_ca_location=PATH`, and a client certificate with `ssl_certificate_location=PATH&ssl_key_location=PATH`
  (librdkafka's settings of those names).

`parse_queue_url` checks a URL without connecting to anything; `open_queue` opens what it names.
"""

from __future__ import annotations

import re
import threading
import urllib.parse
from dataclasses import dataclass

from jobmesh.adapters.queue.kafka import KafkaRunQueue
from jobmesh.adapters.queue.memory import MemoryRunQueue
from jobmesh.core.ports.queue import RunQueue

_HOST_PORT = re.compile(r"^(\[[0-9A-Fa-f:.]+\]|[A-Za-z0-9.-]+):\d{1,5}$")
_MEMORY_NAME = re.compile(r"^[A-Za-z0-9._-]*$")
# librdkafka's TLS settings, passed on as they are (`ssl_ca_location` → `ssl.ca.location`).
_KAFKA_SECURITY = {"security_protocol", "ssl_ca_location", "ssl_certificate_location", "ssl_key_location"}
_KAFKA_OPTIONS = {"partitions", "client_id", "session_timeout_ms", "delivery_timeout_ms", *_KAFKA_SECURITY}
_SECURITY_PROTOCOLS = ("PLAINTEXT", "SSL")
# The one shared registry docs/design.md allows ("Values"): in-process components meet only through process
# state.
_memory_queues: dict[str, MemoryRunQueue] = {}
_memory_lock = threading.Lock()


@dataclass(frozen=True, slots=True)
class MemoryQueueAddress:
    name: str


@dataclass(frozen=True, slots=True)
class KafkaQueueAddress:
    bootstrap: str
    client_id: str = "jobmesh"
    partitions: int = 3
    session_timeout_ms: int | None = None
    delivery_timeout_ms: int | None = None
    security: tuple[tuple[str, str], ...] = ()  # librdkafka settings: (name, value)


def parse_queue_url(url: str) -> MemoryQueueAddress | KafkaQueueAddress:
    """What a queue URL names; ValueError says what is wrong with it."""
    url = url.strip()
    scheme, sep, rest = url.partition("://")
    if not sep:
        return _kafka(url, "")
    if scheme == "memory":
        if not _MEMORY_NAME.match(rest):
            raise ValueError(f"bad in-process queue name {rest!r} in memory://NAME (letters, digits, . _ -)")
        return MemoryQueueAddress(rest)
    if scheme == "kafka":
        hosts, _, query = rest.partition("?")
        return _kafka(hosts, query)
    raise ValueError(f"unsupported queue URL {url!r}: use memory://NAME or kafka://HOST:PORT[,HOST:PORT]")


def open_queue(url: str) -> RunQueue:
    address = parse_queue_url(url)
    if isinstance(address, MemoryQueueAddress):
        with _memory_lock:
            return _memory_queues.setdefault(address.name, MemoryRunQueue())
    return KafkaRunQueue(
        address.bootstrap,
        client_id=address.client_id,
        partitions=address.partitions,
        session_timeout_ms=address.session_timeout_ms,
        delivery_timeout_ms=address.delivery_timeout_ms,
        security=dict(address.security),
    )


def _kafka(hosts: str, query: str) -> KafkaQueueAddress:
    bootstrap = [host.strip() for host in hosts.split(",")]
    if not all(_HOST_PORT.match(host) for host in bootstrap):
        raise ValueError(f"bad Kafka bootstrap {hosts!r}: expected HOST:PORT[,HOST:PORT...]")
    try:
        options = dict(urllib.parse.parse_qsl(query, keep_blank_values=True, strict_parsing=bool(query)))
    except ValueError:
        raise ValueError(f"bad Kafka queue URL options {query!r}: expected NAME=VALUE&...") from None
    if unknown := set(options) - _KAFKA_OPTIONS:
        raise ValueError(
            f"unknown Kafka queue URL options {sorted(unknown)}: known are {sorted(_KAFKA_OPTIONS)}"
        )
    partitions = options.get("partitions", "3")
    if not partitions.isdigit() or int(partitions) < 1:
        raise ValueError(f"partitions must be a positive integer, not {partitions!r}")
    session = _milliseconds(options, "session_timeout_ms")
    delivery = _milliseconds(options, "delivery_timeout_ms")
    protocol = options.get("security_protocol", "PLAINTEXT").upper()
    if protocol not in _SECURITY_PROTOCOLS:
        raise ValueError(
            f"Kafka security_protocol must be one of {', '.join(_SECURITY_PROTOCOLS)}, not {protocol!r}"
        )
    security = tuple(
        (name.replace("_", "."), options[name].upper() if name == "security_protocol" else options[name])
        for name in sorted(_KAFKA_SECURITY & set(options))
    )
    return KafkaQueueAddress(
        ",".join(bootstrap),
        client_id=options.get("client_id") or "jobmesh",
        partitions=int(partitions),
        session_timeout_ms=session,
        delivery_timeout_ms=delivery,
        security=security,
    )


def _milliseconds(options: dict[str, str], name: str) -> int | None:
    value = options.get(name, "")
    if value and (not value.isdigit() or int(value) < 100):
        raise ValueError(f"{name} must be a number of milliseconds (at least 100), not {value!r}")
    return int(value) if value else None
