"""An executor's reported start and end are kept within the server's own record of the attempt (its claim's
start, the server's clock), and the clamping is said; a clock a little off is not a contradiction."""

from __future__ import annotations

from datetime import timedelta

from jobmesh.core.records import RunState
from jobmesh.server.executors.attempt_reports import CLOCK_TOLERANCE, clamp_times
from tests.adapters.store.builders import at, run

CLAIMED = at(100)
NOW = at(160)
RUNNING = run("j", "r", state=RunState.RUNNING, executor="e", start_time=CLAIMED)
TINY = CLOCK_TOLERANCE / 2


def test_times_within_the_record_are_kept() -> None:
    assert clamp_times(RUNNING, at(101), at(150), NOW) == (at(101), at(150), False)
    assert clamp_times(RUNNING, CLAIMED - TINY, NOW + TINY, NOW) == (CLAIMED - TINY, NOW + TINY, False)
    assert clamp_times(RUNNING, None, at(150), NOW) == (None, at(150), False)


def test_a_start_before_the_claim_or_after_now_is_clamped() -> None:
    assert clamp_times(RUNNING, CLAIMED - timedelta(hours=1), at(150), NOW) == (CLAIMED, at(150), True)
    assert clamp_times(RUNNING, NOW + timedelta(hours=1), NOW, NOW) == (NOW, NOW, True)


def test_an_end_after_now_or_before_the_start_is_clamped() -> None:
    assert clamp_times(RUNNING, at(101), NOW + timedelta(hours=1), NOW) == (at(101), NOW, True)
    assert clamp_times(RUNNING, at(120), at(110), NOW) == (at(120), at(120), True)
    assert clamp_times(RUNNING, None, CLAIMED - timedelta(hours=1), NOW) == (None, CLAIMED, True)
