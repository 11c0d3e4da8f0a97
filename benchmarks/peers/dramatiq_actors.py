"""Dramatiq on Redis, for the peers benchmark. Runs in the peers venv.

    dramatiq benchmarks.peers.dramatiq_actors --processes 2 --threads 8

Dramatiq's defaults: its Redis broker (keys under a namespace of this run's own), the default middleware,
and its documented worker defaults made explicit (2 processes, 8 threads each).
"""

from __future__ import annotations

import contextlib
from collections.abc import Callable, Iterator

import dramatiq
from dramatiq.brokers.redis import RedisBroker

from benchmarks.peers.stamps import BROKER_VARIABLE, QUEUE_VARIABLE, record, setting

broker = RedisBroker(url=setting(BROKER_VARIABLE), namespace=setting(QUEUE_VARIABLE))
dramatiq.set_broker(broker)


def stamp(n: int) -> None:
    record(n)


# registered by a call rather than a decorator: dramatiq is untyped in the project's venv, where lint runs
stamp_actor = dramatiq.actor(actor_name="stamp")(stamp)


@contextlib.contextmanager
def sender() -> Iterator[Callable[[int], None]]:
    def submit(n: int) -> None:
        stamp_actor.send(n)

    yield submit
