"""Waiting for what background threads deliver, without fixed sleeps."""

from __future__ import annotations

import threading
import time
from collections.abc import Callable
from typing import TypeVar

from jobmesh.core.attempts import AttemptRef
from jobmesh.core.ports.signals import CancelNotice

T = TypeVar("T")


class Inbox:
    """A cancel handler that keeps what it is given."""

    def __init__(self) -> None:
        self._changed = threading.Condition()
        self._notices: list[CancelNotice] = []

    def __call__(self, notice: CancelNotice) -> None:
        with self._changed:
            self._notices.append(notice)
            self._changed.notify_all()

    @property
    def notices(self) -> list[CancelNotice]:
        with self._changed:
            return list(self._notices)

    def wait_for(self, count: int, timeout: float = 3.0) -> list[CancelNotice]:
        """The notices once there are at least `count` of them (or whatever came within `timeout`)."""
        with self._changed:
            self._changed.wait_for(lambda: len(self._notices) >= count, timeout)
            return list(self._notices)


def eventually(predicate: Callable[[], bool], timeout: float, interval: float = 0.02) -> bool:
    deadline = time.monotonic() + timeout
    while not predicate():
        if time.monotonic() > deadline:
            return False
        time.sleep(interval)
    return True


def with_new_listeners(subscribe: Callable[[], T]) -> tuple[T, set[threading.Thread]]:
    """What `subscribe()` returns, and the listener threads it started (both adapters name theirs
    `jobmesh-signals:…`)."""
    before = set(threading.enumerate())
    subscribed = subscribe()
    started = {thread for thread in threading.enumerate() if thread not in before}
    return subscribed, {thread for thread in started if thread.name.startswith("jobmesh-signals:")}


def notice(number: int, executor: str = "executors/e1", reason: str = "cancelled by user") -> CancelNotice:
    return CancelNotice(
        executor_id=executor,
        attempts=(AttemptRef(f"j{number}", f"r{number}", 1), AttemptRef(f"j{number}", "s", 3)),
        reason=reason,
    )
