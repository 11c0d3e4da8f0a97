"""Readiness: dependencies reported up or down from any thread, a listener told only when the process becomes
ready or stops being so, one log line when a dependency goes and one when it returns; the probes that report
them (a check that raises, one that hangs); and the loop's beat, for liveness."""

from __future__ import annotations

import asyncio
import logging
import threading
import time
from collections.abc import Callable, Iterator
from datetime import timedelta

import pytest

from jobmesh.core.readiness import NOT_CHECKED, Readiness, beat_forever, probe_forever
from tests.support import AT_ONCE, arrives

LOGGER = "jobmesh.core.readiness"
QUICK = timedelta(milliseconds=10)


def _up(readiness: Readiness, name: str) -> bool:
    return any(state.name == name and state.up for state in readiness.states())


def _detail(readiness: Readiness, name: str) -> str | None:
    """What `name` was last reported with; None before it is expected."""
    return next((state.detail for state in readiness.states() if state.name == name), None)


def _answered(readiness: Readiness, name: str) -> bool:
    return _detail(readiness, name) not in {None, NOT_CHECKED}


def _lines(caplog: pytest.LogCaptureFixture, level: int) -> list[str]:
    return [r.getMessage() for r in caplog.records if r.name == LOGGER and r.levelno == level]


# Dependencies and readiness -----------------------------------------------------------------------------


def test_a_dependency_not_reported_yet_counts_as_down() -> None:
    readiness = Readiness("server", expected=("store",))
    readiness.expect("queue")
    assert not readiness.ready()
    assert [(state.name, state.up, state.detail) for state in readiness.states()] == [
        ("queue", False, NOT_CHECKED),
        ("store", False, NOT_CHECKED),
    ]
    readiness.report("store", True)
    assert not readiness.ready(), "the queue, never reported, counted as up"


def test_ready_only_while_every_dependency_is_up() -> None:
    readiness = Readiness("server", expected=("store", "queue"))
    readiness.report("store", True)
    assert not readiness.ready()
    readiness.report("queue", True)
    assert readiness.ready()
    readiness.report("store", False, "StoreUnavailable: connection refused")
    assert not readiness.ready()
    assert _detail(readiness, "store") == "StoreUnavailable: connection refused"
    readiness.report("store", True)
    assert readiness.ready()


def test_expecting_a_dependency_again_keeps_what_was_reported() -> None:
    readiness = Readiness("watcher", expected=("lease",))
    readiness.report("lease", True, "leading")
    readiness.expect("lease")
    assert readiness.ready()
    assert _detail(readiness, "lease") == "leading"


def test_a_dependency_reported_without_being_expected_counts_too() -> None:
    readiness = Readiness("executor", expected=("stream",))
    readiness.report("stream", True)
    readiness.report("server", False, "ServerNotServing: NOT_SERVING")
    assert not readiness.ready()
    assert [state.name for state in readiness.states()] == ["server", "stream"]


def test_the_detail_is_the_latest_word_while_the_state_holds() -> None:
    """A watcher that stood by and now leads says so, with the time it became reachable unchanged."""
    readiness = Readiness("watcher", expected=("lease",))
    readiness.report("lease", True, "standing by")
    [before] = readiness.states()
    readiness.report("lease", True, "leading")
    [after] = readiness.states()
    assert after.detail == "leading"
    assert after.since == before.since


# Listeners ----------------------------------------------------------------------------------------------


def test_listeners_are_told_only_when_readiness_changes() -> None:
    readiness = Readiness("server", expected=("store", "queue"))
    told: list[bool] = []
    readiness.listen(told.append)

    readiness.report("store", True)  # the queue is still unknown: not ready yet
    assert told == []
    readiness.report("queue", True)
    assert told == [True]
    for _ in range(5):
        readiness.report("queue", True)
        readiness.report("store", True, "again")
    assert told == [True], "told again on a report that changed nothing"

    readiness.report("store", False, "StoreUnavailable: refused")
    readiness.report("store", False, "StoreUnavailable: timed out")
    readiness.report("queue", False, "QueueUnavailable: no broker")  # still not ready: nothing to tell
    assert told == [True, False]
    readiness.report("store", True)  # the queue is still away
    assert told == [True, False]
    readiness.report("queue", True)
    assert told == [True, False, True]


def test_every_listener_is_told_from_the_reporting_thread() -> None:
    readiness = Readiness("executor", expected=("stream",))
    threads: list[tuple[str, bool]] = []
    readiness.listen(lambda ready: threads.append(("first", ready)))
    readiness.listen(lambda ready: threads.append((threading.current_thread().name, ready)))

    reporter = threading.Thread(target=lambda: readiness.report("stream", True), name="reporter")
    reporter.start()
    reporter.join(5)
    assert threads == [("first", True), ("reporter", True)]


def test_a_listener_may_read_the_readiness_it_is_told_of() -> None:
    """It is called outside the lock: reading (or reporting) from it does not deadlock."""
    readiness = Readiness("server", expected=("store",))
    seen: list[tuple[bool, bool]] = []
    readiness.listen(lambda ready: seen.append((ready, readiness.ready())))
    done = threading.Event()

    def report() -> None:
        readiness.report("store", True)
        done.set()

    threading.Thread(target=report, daemon=True).start()
    assert done.wait(5), "the report deadlocked in its listener"
    assert seen == [(True, True)]


# One log line per change --------------------------------------------------------------------------------


def test_a_dependency_failing_again_and_again_logs_one_warning_and_its_return_one_info(
    caplog: pytest.LogCaptureFixture,
) -> None:
    readiness = Readiness("watcher", expected=("store",))
    caplog.set_level(logging.DEBUG, logger=LOGGER)
    readiness.report("store", True)
    assert _lines(caplog, logging.WARNING) == _lines(caplog, logging.INFO) == [], "the first up was logged"

    for attempt in range(10):
        readiness.report("store", False, f"StoreUnavailable: refused (attempt {attempt})")
    assert _lines(caplog, logging.WARNING) == [
        "watcher: store is unreachable: StoreUnavailable: refused (attempt 0)"
    ]
    assert _lines(caplog, logging.INFO) == []

    for _ in range(3):
        readiness.report("store", True)
    assert _lines(caplog, logging.INFO) == ["watcher: store is reachable"]
    assert len(_lines(caplog, logging.WARNING)) == 1


def test_a_dependency_down_from_the_start_logs_one_warning(caplog: pytest.LogCaptureFixture) -> None:
    readiness = Readiness("server", expected=("queue",))
    caplog.set_level(logging.DEBUG, logger=LOGGER)
    for _ in range(3):
        readiness.report("queue", False, "QueueUnavailable: the broker did not answer")
    assert _lines(caplog, logging.WARNING) == [
        "server: queue is unreachable: QueueUnavailable: the broker did not answer"
    ]
    readiness.report("queue", True)
    assert _lines(caplog, logging.INFO) == ["server: queue is reachable"]  # it returned: worth a line


def test_a_change_is_logged_with_its_fields(caplog: pytest.LogCaptureFixture) -> None:
    readiness = Readiness("server", expected=("signals",))
    caplog.set_level(logging.DEBUG, logger=LOGGER)
    readiness.report("signals", False, "SignalsUnavailable: refused")
    [record] = [r for r in caplog.records if r.name == LOGGER]
    fields = (record.dependency, record.reachable, record.detail)  # type: ignore[attr-defined]
    assert fields == ("signals", False, "SignalsUnavailable: refused")


# Probes -------------------------------------------------------------------------------------------------


class _Probing:
    """`probe_forever` on a check, in a task, until stopped."""

    def __init__(self, readiness: Readiness, check: Callable[[], None], **timings: timedelta) -> None:
        self.stop = asyncio.Event()
        self.task = asyncio.create_task(
            probe_forever(readiness, "store", check, self.stop, **{"interval": QUICK, **timings})
        )

    async def stopped(self) -> float:
        """Stops the probe; how long it took to end."""
        self.stop.set()
        started = time.monotonic()
        await asyncio.wait_for(self.task, 30)
        return time.monotonic() - started


class _Check:
    """A check that answers as told: fine, raising `error`, or hanging until released; counts its calls."""

    def __init__(self) -> None:
        self.calls = 0
        self.error: Exception | None = None
        self.released = threading.Event()
        self.released.set()

    def __call__(self) -> None:
        self.calls += 1
        self.released.wait(30)
        if self.error is not None:
            raise self.error


@pytest.fixture
def check() -> Iterator[_Check]:
    check = _Check()
    yield check
    check.released.set()  # no thread left hanging past the test


def test_a_probe_reports_a_raising_check_down_with_its_type_and_first_line(check: _Check) -> None:
    readiness = Readiness("server")
    check.error = ConnectionRefusedError("connection refused\n  at 127.0.0.1:1\n  (a long trace)")

    async def scenario() -> None:
        probing = _Probing(readiness, check)
        await arrives(lambda: _answered(readiness, "store"), AT_ONCE, "a first answer")
        assert not readiness.ready()
        assert _detail(readiness, "store") == "ConnectionRefusedError: connection refused"
        check.error = None
        await arrives(lambda: _up(readiness, "store"), AT_ONCE, "the store back up")
        check.error = TimeoutError()
        await arrives(lambda: not _up(readiness, "store"), AT_ONCE, "the store down again")
        assert _detail(readiness, "store") == "TimeoutError"  # no message: the type alone
        await probing.stopped()

    asyncio.run(scenario())


def test_a_probe_expects_its_dependency_before_its_first_answer(check: _Check) -> None:
    readiness = Readiness("server")
    check.released.clear()

    async def scenario() -> None:
        probing = _Probing(readiness, check, timeout=timedelta(seconds=30))
        await arrives(lambda: check.calls == 1, AT_ONCE, "the check started")
        assert [(s.name, s.up, s.detail) for s in readiness.states()] == [("store", False, NOT_CHECKED)]
        check.released.set()
        await arrives(readiness.ready, AT_ONCE, "the first answer")
        await probing.stopped()

    asyncio.run(scenario())


def test_a_check_that_hangs_is_reported_down_and_not_started_again_while_it_hangs(check: _Check) -> None:
    readiness = Readiness("server")
    check.released.clear()

    async def scenario() -> None:
        probing = _Probing(readiness, check, timeout=timedelta(milliseconds=50))
        await arrives(lambda: _answered(readiness, "store"), AT_ONCE, "a verdict on the hang")
        assert not readiness.ready()
        assert _detail(readiness, "store") == "no answer within 0.05 s"
        await asyncio.sleep(0.3)  # six timeouts, thirty intervals
        assert check.calls == 1, "a check was started beside the one that hangs"
        assert not readiness.ready()

        check.released.set()  # the frozen peer answers at last
        await arrives(readiness.ready, AT_ONCE, "the store up once the check returned")
        await arrives(lambda: check.calls > 2, AT_ONCE, "checks started again")
        await probing.stopped()

    asyncio.run(scenario())


def test_a_probe_stops_at_once_while_its_check_hangs(check: _Check) -> None:
    readiness = Readiness("server")
    check.released.clear()

    async def scenario() -> float:
        # A timeout far longer than the test: a stop must not wait for it (nor for the check).
        probing = _Probing(readiness, check, timeout=timedelta(seconds=30))
        await arrives(lambda: check.calls == 1, AT_ONCE, "the check started")
        await asyncio.sleep(0.05)
        return await probing.stopped()

    assert asyncio.run(scenario()) < AT_ONCE
    assert check.calls == 1


def test_a_probe_stops_at_once_between_checks() -> None:
    readiness = Readiness("server")

    async def scenario() -> float:
        probing = _Probing(readiness, lambda: None, interval=timedelta(seconds=30))
        await arrives(readiness.ready, AT_ONCE, "the first answer")
        return await probing.stopped()

    assert asyncio.run(scenario()) < AT_ONCE


# Liveness -----------------------------------------------------------------------------------------------


def test_live_only_while_the_loop_beats() -> None:
    readiness = Readiness("server")
    # A beat every 10 ms, judged over 1 s: a loaded 2-core machine once left the beating task unscheduled for
    # over 100 ms, and 100 ms was the window.
    within = timedelta(seconds=1)
    assert readiness.live(within)  # a new process has just beaten

    async def scenario() -> None:
        stop = asyncio.Event()
        beating = asyncio.create_task(beat_forever(readiness, stop, QUICK))
        await asyncio.sleep(1.5)  # longer than `within`, beaten all along
        assert readiness.live(within)
        stop.set()
        await asyncio.wait_for(beating, AT_ONCE)

    asyncio.run(scenario())
    time.sleep(1.2)
    assert not readiness.live(within), "live with no beat for longer than `within`"
    assert readiness.live(timedelta(seconds=10))
    readiness.beat()
    assert readiness.live(within)


def test_a_stuck_loop_stops_beating() -> None:
    readiness = Readiness("server")
    within = timedelta(milliseconds=100)

    async def scenario() -> bool:
        stop = asyncio.Event()
        beating = asyncio.create_task(beat_forever(readiness, stop, QUICK))
        await asyncio.sleep(0.05)
        time.sleep(0.2)  # the loop is blocked: no beat
        live = readiness.live(within)
        stop.set()
        await beating
        return live

    assert not asyncio.run(scenario())
