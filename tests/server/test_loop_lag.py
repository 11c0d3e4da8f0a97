"""The event loop's lag, as the overload guard reads it: a stall counts while the loop is stalled and just
after, not for the second after a pause of the whole process; a loop that keeps stalling stays late."""

from __future__ import annotations

import asyncio
import time

from jobmesh.server.loop_lag import STALL_AFTERMATH, WINDOW, LoopLag

STALL = WINDOW * 1.5  # seconds: longer than the window, as a SIGSTOP of a few seconds is


async def _started() -> LoopLag:
    lag = LoopLag()
    lag.start()
    await asyncio.sleep(0.2)  # a few probes on time
    return lag


def test_a_stall_counts_until_the_loop_is_on_time_again() -> None:
    async def scenario() -> tuple[float, float]:
        lag = await _started()
        try:
            time.sleep(STALL)  # nothing runs on the loop: to it, the same as the process being stopped
            during = lag.current().total_seconds()
            await asyncio.sleep(STALL_AFTERMATH + 0.15)  # the probes run on time again
            return during, lag.current().total_seconds()
        finally:
            await lag.stop()

    during, after = asyncio.run(scenario())
    assert during >= STALL * 0.9
    # Before, the stall was the peak of the window for a whole second after the loop had caught up. (Half
    # the stall: room for a loaded machine's own lag.)
    assert after < STALL / 2


def test_a_loop_that_keeps_stalling_stays_late() -> None:
    async def scenario() -> list[float]:
        lag = await _started()
        seen = []
        try:
            for _ in range(3):
                time.sleep(STALL)
                await asyncio.sleep(0)  # the probe wakes, late, and the loop is busy again at once
                seen.append(lag.current().total_seconds())
        finally:
            await lag.stop()
        return seen

    assert all(late >= STALL * 0.9 for late in asyncio.run(scenario()))


def test_lags_shorter_than_the_window_count_for_the_whole_window() -> None:
    """Short lags are the overloaded loop's usual signal: the guard holds them for the window, as before."""

    async def scenario() -> float:
        lag = await _started()
        try:
            time.sleep(0.3)
            await asyncio.sleep(STALL_AFTERMATH + 0.15)
            return lag.current().total_seconds()
        finally:
            await lag.stop()

    assert asyncio.run(scenario()) >= 0.25
