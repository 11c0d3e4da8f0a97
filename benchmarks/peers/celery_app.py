"""Celery on Redis, for the peers benchmark. Runs in the peers venv.

    celery -A benchmarks.peers.celery_app worker --concurrency 2 --loglevel WARNING

Celery's defaults (prefork pool, early acks, prefetch multiplier 4, no result backend), or, with
`JOBMESH_PEERS_CELERY_DURABLE=1`, configured for durability as its documentation describes: a task is
acknowledged once it has run (`task_acks_late`), and a worker process reserves one task at a time
(`worker_prefetch_multiplier=1`).
"""

from __future__ import annotations

import contextlib
import os
from collections.abc import Callable, Iterator

from celery import Celery

from benchmarks.peers.stamps import BROKER_VARIABLE, QUEUE_VARIABLE, record, setting

DURABLE_VARIABLE = "JOBMESH_PEERS_CELERY_DURABLE"

app = Celery("jobmesh_peers", broker=setting(BROKER_VARIABLE))
app.conf.task_default_queue = setting(QUEUE_VARIABLE)
# keeps today's behaviour and silences the notice that the default changes in Celery 6
app.conf.broker_connection_retry_on_startup = True
if os.environ.get(DURABLE_VARIABLE) == "1":
    app.conf.task_acks_late = True
    app.conf.worker_prefetch_multiplier = 1


def stamp(n: int) -> None:
    record(n)


# registered by a call rather than a decorator: celery is untyped in the project's venv, where lint runs
stamp_task = app.task(name="peers.stamp")(stamp)


@contextlib.contextmanager
def sender() -> Iterator[Callable[[int], None]]:
    def submit(n: int) -> None:
        stamp_task.delay(n)

    yield submit
