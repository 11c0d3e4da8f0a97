"""Procrastinate on PostgreSQL, for the peers benchmark. Runs in the peers venv.

    procrastinate --app benchmarks.peers.procrastinate_app.app schema --apply
    procrastinate --app benchmarks.peers.procrastinate_app.app worker        # twice: 2 worker processes

Procrastinate's defaults: its psycopg connector, workers woken by LISTEN/NOTIFY, concurrency 1 per worker.
The job is an `async` task, which the asyncio worker runs on its loop (a sync one would go to a thread).
Jobs are deferred one by one with the synchronous API, as an application outside an event loop does.
"""

from __future__ import annotations

import contextlib
from collections.abc import Callable, Iterator

import procrastinate

from benchmarks.peers.stamps import BROKER_VARIABLE, record, setting

app = procrastinate.App(connector=procrastinate.PsycopgConnector(conninfo=setting(BROKER_VARIABLE)))


async def stamp(n: int) -> None:
    record(n)


# registered by a call, not a decorator: procrastinate is untyped in the project's venv, where lint runs
stamp_task = app.task(name="stamp")(stamp)


@contextlib.contextmanager
def sender() -> Iterator[Callable[[int], None]]:
    def submit(n: int) -> None:
        stamp_task.defer(n=n)

    with app.open():
        yield submit
