"""One log line per step of a run, from the hook chain: created, dispatched, taken, claimed, started,
reported, ended at DEBUG (an operator turns them on with `--log-level debug`), and a dead letter at WARNING.

Each line carries the run, its attempt and, when the run is traced, its trace id (`trace_id`, as trace
backends show it), in the fields a JSON log line shows (`--log-format json`). Below DEBUG, a hop costs one
level check per batch.
"""

from __future__ import annotations

import logging
from collections.abc import Collection, Sequence
from typing import Any

from jobmesh.control.v1 import dispatch_pb2
from jobmesh.control.v1 import executor_control_pb2 as pb
from jobmesh.core.attempts import AttemptEnd, AttemptRef, Dispatchable
from jobmesh.core.hooks import RunHooks
from jobmesh.core.names import run_name
from jobmesh.core.ports.queue import Delivery
from jobmesh.core.records import JobRecord, RunRecord, RunState
from jobmesh.core.run_traces import trace_id_hex
from jobmesh.v1 import run_pb2

log = logging.getLogger("jobmesh.runs")


class RunStepLog(RunHooks):
    """Logs the steps of runs; `traced`: the process traces runs, so its lines name their traces."""

    def __init__(self, *, traced: bool) -> None:
        self._traced = traced

    def _fields(self, name: str, attempt: int, **more: Any) -> dict[str, Any]:
        fields = {"run": name, "attempt": attempt, **more}
        if self._traced:
            fields["trace_id"] = trace_id_hex(name)
        return fields

    def _debug(self, step: str, runs: Sequence[dispatch_pb2.DispatchedRun]) -> None:
        if log.isEnabledFor(logging.DEBUG):
            for run in runs:
                name, attempt = run.attempt.run, run.attempt.attempt
                log.debug("%s#%d %s", name, attempt, step, extra=self._fields(name, attempt, queue=run.queue))

    def create(
        self, call: str, start_ns: int, runs: Sequence[RunRecord], jobs: Sequence[JobRecord] = ()
    ) -> None:
        if log.isEnabledFor(logging.DEBUG):
            for run in runs:
                name = run_name(run.job_id, run.run_id)
                fields = self._fields(name, run.attempt, queue=run.queue, trigger=run.trigger.value)
                log.debug("%s created by %s, due %s", name, call, run.due_time.isoformat(), extra=fields)

    def dispatch(self, runs: Sequence[dispatch_pb2.DispatchedRun]) -> None:
        self._debug("dispatched", runs)

    def consume(self, deliveries: Sequence[Delivery]) -> None:
        self._debug("taken from the queue", [delivery.run for delivery in deliveries])

    def claim(self, runs: Sequence[dispatch_pb2.DispatchedRun], granted: Collection[AttemptRef]) -> None:
        if log.isEnabledFor(logging.DEBUG):
            for run in runs:
                ref = AttemptRef.from_proto_or_none(run.attempt)
                step = "claimed" if ref in granted else "claim refused: skipped"
                self._debug(step, [run])

    def start(self, run: dispatch_pb2.DispatchedRun) -> None:
        self._debug("started", [run])

    def report(self, run: dispatch_pb2.DispatchedRun, result: pb.AttemptResult | None) -> None:
        if log.isEnabledFor(logging.DEBUG):
            state = "fenced: not reported" if result is None else run_pb2.RunState.Name(result.state)
            self._debug(f"reported {state}", [run])

    def end(self, ended: Sequence[tuple[Dispatchable, AttemptEnd]]) -> None:
        debug = log.isEnabledFor(logging.DEBUG)
        for current, attempt_end in ended:
            dead = attempt_end.run_state is RunState.DEAD_LETTERED
            if not (dead or debug):
                continue
            name = run_name(current.run.job_id, current.run.run_id)
            fields = self._fields(
                name,
                attempt_end.ref.attempt,
                queue=current.run.queue,
                state=attempt_end.attempt_state.value,
                run_state=attempt_end.run_state.value,
                error_type=attempt_end.error_type,
            )
            if dead:
                log.warning(
                    "%s dead-lettered: attempt %d ended %s (%s), its retries are spent",
                    name,
                    attempt_end.ref.attempt,
                    attempt_end.attempt_state.value,
                    attempt_end.error_type or "no error type",
                    extra=fields,
                )
            else:
                log.debug(
                    "%s#%d ended %s: run %s",
                    name,
                    attempt_end.ref.attempt,
                    attempt_end.attempt_state.value,
                    attempt_end.run_state.value,
                    extra=fields,
                )
