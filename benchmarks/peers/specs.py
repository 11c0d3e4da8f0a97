"""The peers, and how each one's 2 worker processes are started (commands of the peers venv's bin folder).

`{queue}` in a command is this run's own name (a Celery queue and node name, a Dramatiq namespace, a
Procrastinate worker's name), `{index}` the command's place in `workers` (from 1).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Literal

CELERY = "benchmarks.peers.celery_app"
DRAMATIQ = "benchmarks.peers.dramatiq_actors"
PROCRASTINATE = "benchmarks.peers.procrastinate_app"


@dataclass(frozen=True, slots=True)
class Peer:
    name: str
    library: str  # its package in the lock, for the version shown
    module: str  # where its app and `sender()` live
    store: Literal["redis", "postgres"]
    workers: tuple[tuple[str, ...], ...]  # one command per worker process group
    setup: tuple[str, ...] = ()  # run once before the workers (the schema)
    env: Mapping[str, str] = field(default_factory=dict)
    worker_processes: int = 2  # processes that run jobs, all groups together


# One Celery worker with a prefork pool of 2 processes (the pool's default size is the number of cores).
_CELERY_WORKER = (
    *("celery", "-A", CELERY, "worker", "--pool", "prefork", "--concurrency", "2"),
    *("--loglevel", "WARNING", "--hostname", "{queue}@%h"),
)
# Procrastinate runs one asyncio worker per process: 2 processes, each with the default concurrency (1).
_PROCRASTINATE_WORKER = (
    "procrastinate",
    "--app",
    f"{PROCRASTINATE}.app",
    "worker",
    "--name",
    "{queue}-{index}",
)

PEERS: dict[str, Peer] = {
    peer.name: peer
    for peer in (
        Peer("celery", "celery", CELERY, "redis", (_CELERY_WORKER,)),
        Peer(
            "celery-durable",
            "celery",
            CELERY,
            "redis",
            (_CELERY_WORKER,),
            env={"JOBMESH_PEERS_CELERY_DURABLE": "1"},
        ),
        Peer(
            "dramatiq",
            "dramatiq",
            DRAMATIQ,
            "redis",
            (("dramatiq", DRAMATIQ, "--processes", "2", "--threads", "8"),),
        ),
        Peer(
            "procrastinate",
            "procrastinate",
            PROCRASTINATE,
            "postgres",
            (_PROCRASTINATE_WORKER, _PROCRASTINATE_WORKER),
            setup=("procrastinate", "--app", f"{PROCRASTINATE}.app", "schema", "--apply"),
        ),
    )
}
