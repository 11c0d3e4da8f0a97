"""Closing a server's thread pools: what has started finishes before the store closes; the rest is dropped."""

from __future__ import annotations

import threading
from concurrent.futures import ThreadPoolExecutor

from jobmesh.server.workers import close_pools


def test_closing_waits_for_the_calls_under_way_and_drops_the_queued_ones() -> None:
    pools = [ThreadPoolExecutor(1), ThreadPoolExecutor(1)]
    started, release = threading.Event(), threading.Event()
    ran: list[str] = []

    def held() -> None:
        started.set()
        release.wait(30)
        ran.append("held")

    running = pools[1].submit(held)
    queued = pools[1].submit(ran.append, "queued")
    assert started.wait(30)
    closing = threading.Thread(target=close_pools, args=pools)
    closing.start()

    closing.join(0.5)
    assert closing.is_alive(), "close returned while a call was still running"
    release.set()
    closing.join(30)

    assert not closing.is_alive()
    assert running.done()
    assert queued.cancelled()
    assert ran == ["held"]
