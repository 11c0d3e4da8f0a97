"""Registered Python handlers: sync and async, progress and logs, exceptions, unknown names, stops."""

from __future__ import annotations

import asyncio
import threading
import time

import pytest

from jobmesh.core.states import StopReason
from jobmesh.executor.handlers import Handler, HandlerContext, HandlerRegistry
from jobmesh.executor.outcomes import Stop, TargetOutcome
from jobmesh.executor.runners import RunnerSettings, run_target
from jobmesh.v1 import run_pb2
from tests.executor.support import RecordingIO, dispatched, handler

# A cancel's grace here: long, so that a handler that ended within it was stopped by its cancel.
CANCEL_GRACE = 30.0


def call(
    handlers: dict[str, Handler],
    name: str,
    payload: bytes = b"",
    *,
    stop_after: float | None = None,
    timeout: float | None = None,
) -> tuple[TargetOutcome, RecordingIO, float]:
    async def scenario() -> tuple[TargetOutcome, RecordingIO, float]:
        io, stop = RecordingIO(), Stop()
        if stop_after is not None:
            loop = asyncio.get_running_loop()
            loop.call_later(stop_after, stop.request, StopReason.CANCEL, CANCEL_GRACE, "test")
        began = time.monotonic()
        settings = RunnerSettings(HandlerRegistry(handlers), cancel_grace=1.0)
        outcome = await run_target(dispatched(handler(name, payload), timeout=timeout), io, stop, settings)
        return outcome, io, time.monotonic() - began

    return asyncio.run(scenario())


def test_sync_handler_runs_on_a_thread_with_payload_logs_and_progress() -> None:
    seen: list[tuple[bytes, str, int, bool]] = []

    def work(context: HandlerContext) -> None:
        on_main = threading.current_thread() is threading.main_thread()
        seen.append((context.payload, context.run, context.attempt, on_main))
        context.log("first\nsecond")
        context.report_progress(0.5, "half")
        context.report_progress(7.0)  # clamped

    outcome, io, _ = call({"work": work}, "work", b"data")
    assert outcome.state == run_pb2.RUN_STATE_SUCCEEDED
    [(payload, run, attempt, on_main)] = seen
    assert (payload, attempt, on_main) == (b"data", 1, False)
    assert run.startswith("jobs/")
    assert io.texts(run_pb2.LOG_STREAM_STDOUT) == ["first", "second"]
    assert io.updates == [(0.5, "half"), (1.0, "")]


def test_async_handler() -> None:
    async def work(context: HandlerContext) -> None:
        await asyncio.sleep(0.01)
        context.log("async")

    outcome, io, _ = call({"work": work}, "work")
    assert outcome.state == run_pb2.RUN_STATE_SUCCEEDED
    assert io.texts(run_pb2.LOG_STREAM_STDOUT) == ["async"]


@pytest.mark.parametrize("asynchronous", [False, True])
def test_an_exception_fails_with_its_class_name(asynchronous: bool) -> None:
    class QuotaExceeded(Exception):
        pass

    def sync(context: HandlerContext) -> None:
        raise QuotaExceeded("over the limit")

    async def async_(context: HandlerContext) -> None:
        raise QuotaExceeded("over the limit")

    outcome, io, _ = call({"work": async_ if asynchronous else sync}, "work")
    assert outcome == TargetOutcome(run_pb2.RUN_STATE_FAILED, None, "QuotaExceeded", "over the limit")
    assert any("QuotaExceeded: over the limit" in line for line in io.texts(run_pb2.LOG_STREAM_STDOUT))


def test_system_exit_in_a_handler_fails_only_its_attempt() -> None:
    def leave(context: HandlerContext) -> None:
        raise SystemExit(3)

    outcome, _, _ = call({"leave": leave}, "leave")
    assert (outcome.state, outcome.error_type) == (run_pb2.RUN_STATE_FAILED, "SystemExit")


def test_unknown_handler() -> None:
    outcome, _, _ = call({"known": lambda context: None}, "missing")
    assert (outcome.state, outcome.error_type) == (run_pb2.RUN_STATE_FAILED, "UnknownHandler")
    assert "known" in outcome.error_message


def test_cancel_cancels_an_async_handler_at_once(caplog: pytest.LogCaptureFixture) -> None:
    ended: list[str] = []

    async def forever(context: HandlerContext) -> None:
        try:
            await asyncio.sleep(60)
        finally:
            ended.append("cancelled" if context.cancelled.is_set() else "slept")

    outcome, _, _ = call({"forever": forever}, "forever", stop_after=0.1)
    assert outcome.state == run_pb2.RUN_STATE_CANCELLED
    assert ended == ["cancelled"]  # it ended by its cancel, before the call returned
    assert "abandoning" not in caplog.text  # not at the stop's kill time


def test_a_sync_handler_sees_its_cancellation_event(caplog: pytest.LogCaptureFixture) -> None:
    seen: list[bool] = []

    def patient(context: HandlerContext) -> None:
        seen.append(context.cancelled.wait(60))

    outcome, _, _ = call({"patient": patient}, "patient", stop_after=0.1)
    assert outcome.state == run_pb2.RUN_STATE_CANCELLED
    assert seen == [True]  # it saw the event and returned before the call did
    assert "abandoning" not in caplog.text


def test_timeout_and_a_handler_that_ignores_its_stop_is_abandoned_after_the_grace() -> None:
    release = threading.Event()
    returned: list[bool] = []

    def stubborn(context: HandlerContext) -> None:
        release.wait(30)
        returned.append(True)

    try:
        outcome, _, took = call({"stubborn": stubborn}, "stubborn", timeout=0.1)
        still_running = not returned
    finally:
        release.set()
    assert (outcome.state, outcome.error_type) == (run_pb2.RUN_STATE_TIMED_OUT, "Timeout")
    assert took > 1.0  # the timeout, then the 1 s grace
    assert still_running  # abandoned at the grace's end, not waited for


def test_registry() -> None:
    registry = HandlerRegistry()

    @registry.handler("b")
    def b(context: HandlerContext) -> None:
        pass

    registry.register("a", b)
    assert registry.names() == ["a", "b"]
    assert "a" in registry
    assert len(registry) == 2
    with pytest.raises(ValueError, match="already registered"):
        registry.register("a", b)
    with pytest.raises(TypeError):
        registry.register("c", "not callable")  # type: ignore[arg-type]


# Results and error types ---------------------------------------------------------------------------------


def test_a_return_value_is_the_outcomes_result_as_json() -> None:
    async def total(context: HandlerContext) -> dict[str, object]:
        await asyncio.sleep(0)
        return {"sum": 5, "payload": context.payload.decode()}

    outcome, _, _ = call({"total": total, "none": lambda _: None}, "total", b"p")
    assert (outcome.state, outcome.result) == (run_pb2.RUN_STATE_SUCCEEDED, '{"sum":5,"payload":"p"}')
    outcome, _, _ = call({"none": lambda _: None}, "none")
    assert (outcome.state, outcome.result) == (run_pb2.RUN_STATE_SUCCEEDED, "")


def test_a_return_value_that_cannot_be_kept_fails_by_name() -> None:
    handlers: dict[str, Handler] = {"huge": lambda _: "x" * (64 * 1024), "odd": lambda _: object()}
    huge, _, _ = call(handlers, "huge")
    assert (huge.state, huge.error_type, huge.result) == (run_pb2.RUN_STATE_FAILED, "ResultTooLarge", "")
    odd, _, _ = call(handlers, "odd")
    assert (odd.state, odd.error_type) == (run_pb2.RUN_STATE_FAILED, "ResultNotSerializable")


def test_an_exception_may_name_its_error_type() -> None:
    class Declined(Exception):
        jobmesh_error_type = "billing.CardDeclined"

    def declined(_: HandlerContext) -> None:
        raise Declined("no")

    def plain(_: HandlerContext) -> None:
        raise KeyError("k")

    outcome, _, _ = call({"declined": declined}, "declined")
    assert (outcome.error_type, outcome.error_message) == ("billing.CardDeclined", "no")
    outcome, _, _ = call({"plain": plain}, "plain")
    assert outcome.error_type == "KeyError"
