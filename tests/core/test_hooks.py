"""The hook chain: what an empty chain is, the order hooks are called in at every hop, and the per-step log
lines (a dead letter at WARNING with its trace id; the rest at DEBUG only)."""

from __future__ import annotations

import logging
from collections.abc import Collection, Sequence
from datetime import UTC, datetime

import pytest

from jobmesh.control.v1 import dispatch_pb2
from jobmesh.control.v1 import executor_control_pb2 as pb
from jobmesh.core.attempts import AttemptEnd, AttemptRef, Dispatchable
from jobmesh.core.hooks import NO_HOOKS, HookChain, RunHooks, chain
from jobmesh.core.ports.queue import Delivery
from jobmesh.core.records import JobRecord, Priority, RunRecord, RunState, RunTrigger
from jobmesh.core.run_log import RunStepLog
from jobmesh.core.run_traces import trace_id_hex
from jobmesh.v1 import job_pb2, run_pb2

NOW = datetime(2026, 12, 5, tzinfo=UTC)
RUN = RunRecord("j", "r", NOW, NOW, RunState.RUNNING, RunTrigger.RUN_NOW, Priority.NORMAL, "q", NOW, NOW)
MESSAGE = dispatch_pb2.DispatchedRun(attempt=AttemptRef("j", "r", 1).to_proto(), queue="q")


class Recorder(RunHooks):
    def __init__(self, name: str, calls: list[str]) -> None:
        self.name = name
        self.calls = calls

    def create(
        self, call: str, start_ns: int, runs: Sequence[RunRecord], jobs: Sequence[JobRecord] = ()
    ) -> None:
        self.calls.append(f"{self.name}.create")

    def dispatch(self, runs: Sequence[dispatch_pb2.DispatchedRun]) -> None:
        self.calls.append(f"{self.name}.dispatch")

    def consume(self, deliveries: Sequence[Delivery]) -> None:
        self.calls.append(f"{self.name}.consume")

    def claim(self, runs: Sequence[dispatch_pb2.DispatchedRun], granted: Collection[AttemptRef]) -> None:
        self.calls.append(f"{self.name}.claim")

    def start(self, run: dispatch_pb2.DispatchedRun) -> None:
        self.calls.append(f"{self.name}.start")

    def report(self, run: dispatch_pb2.DispatchedRun, result: pb.AttemptResult | None) -> None:
        self.calls.append(f"{self.name}.report")

    def end(self, ended: Sequence[tuple[Dispatchable, AttemptEnd]]) -> None:
        self.calls.append(f"{self.name}.end")

    def close(self) -> None:
        self.calls.append(f"{self.name}.close")


def test_no_hook_is_the_do_nothing_hook_and_one_hook_is_itself() -> None:
    one = Recorder("a", [])

    assert chain() is NO_HOOKS
    assert chain(NO_HOOKS, NO_HOOKS) is NO_HOOKS
    assert chain(NO_HOOKS, one) is one


def test_a_chain_calls_each_hook_in_order_at_every_hop() -> None:
    calls: list[str] = []
    hooks = chain(Recorder("a", calls), Recorder("b", calls))
    assert isinstance(hooks, HookChain)

    hooks.create("call", 0, [RUN])
    hooks.dispatch([MESSAGE])
    hooks.consume([Delivery(MESSAGE, "normal", None)])
    hooks.claim([MESSAGE], set())
    hooks.start(MESSAGE)
    hooks.report(MESSAGE, None)
    hooks.end([])
    hooks.close()

    hops = ["create", "dispatch", "consume", "claim", "start", "report", "end", "close"]
    assert calls == [f"{name}.{hop}" for hop in hops for name in "ab"]


def _ended(run_state: RunState) -> list[tuple[Dispatchable, AttemptEnd]]:
    end = AttemptEnd(AttemptRef("j", "r", 2), RunState.FAILED, run_state, NOW, error_type="Exit")
    return [(Dispatchable(RUN, job_pb2.Job()), end)]


def test_a_dead_letter_is_logged_with_its_run_and_trace(caplog: pytest.LogCaptureFixture) -> None:
    caplog.set_level(logging.WARNING, "jobmesh.runs")

    RunStepLog(traced=True).end(_ended(RunState.DEAD_LETTERED))

    [record] = caplog.records
    assert record.levelno == logging.WARNING
    assert "dead-lettered" in record.getMessage()
    assert vars(record)["run"] == "jobs/j/runs/r"
    assert vars(record)["attempt"] == 2
    assert vars(record)["trace_id"] == trace_id_hex("jobs/j/runs/r")


def test_an_untraced_process_names_no_trace(caplog: pytest.LogCaptureFixture) -> None:
    caplog.set_level(logging.WARNING, "jobmesh.runs")

    RunStepLog(traced=False).end(_ended(RunState.DEAD_LETTERED))

    [record] = caplog.records
    assert "trace_id" not in vars(record)


def test_the_other_steps_are_logged_at_debug_only(caplog: pytest.LogCaptureFixture) -> None:
    steps = RunStepLog(traced=True)
    caplog.set_level(logging.INFO, "jobmesh.runs")
    steps.create("call", 0, [RUN])
    steps.dispatch([MESSAGE])
    steps.end(_ended(RunState.SCHEDULED))
    assert caplog.records == []

    caplog.set_level(logging.DEBUG, "jobmesh.runs")
    steps.create("call", 0, [RUN])
    steps.dispatch([MESSAGE])
    steps.claim([MESSAGE], {AttemptRef("j", "r", 1)})
    steps.start(MESSAGE)
    steps.report(MESSAGE, pb.AttemptResult(state=run_pb2.RUN_STATE_SUCCEEDED))
    steps.end(_ended(RunState.SCHEDULED))

    assert [r.levelno for r in caplog.records] == [logging.DEBUG] * 6
    assert all(vars(r)["run"] == "jobs/j/runs/r" for r in caplog.records)
