"""The spans of a run, made at the hops of the hook chain (`jobmesh.core.hooks`).

One trace per run, its id derived from the run's name (`jobmesh.core.run_traces`), so that the server, the
watcher and the executors add to the same trace without storing or sending anything but the message's own
`traceparent`:

    create (SERVER: the create call when it made this run alone; else a span of the run, linked to the call's)
    ├── publish (PRODUCER, one per attempt: its `traceparent` is the one in that run's Kafka message)
    │   └── attempt (CONSUMER, in the executor; linked to the create span)
    │       ├── claim   (from the take to the server's answer)
    │       ├── run     (the target; a command gets its `TRACEPARENT`)
    │       └── report  (the result sent)
    └── end (where the attempt's end was written: the run's next state, a retry or a dead letter)

A retry is the run's next attempt: a publish and an attempt of their own in the same trace, under its create
span, so that a run's trace goes unbroken from its create call to its final result. A cron occurrence is a
run: a trace of its own, whose create span is linked to the job's.
"""

from __future__ import annotations

import contextvars
import time
from collections.abc import Collection, Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass

from opentelemetry import trace
from opentelemetry.context import Context
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.id_generator import IdGenerator, RandomIdGenerator
from opentelemetry.trace import Link, Span, SpanContext, SpanKind, Status, StatusCode, TraceFlags
from opentelemetry.trace.propagation.tracecontext import TraceContextTextMapPropagator

from jobmesh.control.v1 import dispatch_pb2
from jobmesh.control.v1 import executor_control_pb2 as pb
from jobmesh.core.attempts import AttemptEnd, AttemptRef, Dispatchable
from jobmesh.core.hooks import RunHooks
from jobmesh.core.names import job_name, run_name
from jobmesh.core.ports.queue import Delivery
from jobmesh.core.records import JobRecord, RunRecord, RunTrigger, ScheduleKind
from jobmesh.core.run_traces import root_span_id_of, trace_id_of
from jobmesh.core.states import FAILED_RUN_STATES
from jobmesh.v1 import run_pb2

# Spans of attempts this executor took and has not reported, kept at most this many (an attempt that is
# never reported, its grant lost with the stream, is dropped with the oldest).
MAX_OPEN_ATTEMPTS = 100_000
_PROPAGATOR = TraceContextTextMapPropagator()
_FORCED: contextvars.ContextVar[tuple[int, int] | None] = contextvars.ContextVar(
    "jobmesh_forced_ids", default=None
)


class RunIdGenerator(IdGenerator):
    """Random ids, except for the root span of a run (or job), whose ids are derived from its name."""

    def __init__(self) -> None:
        self._random = RandomIdGenerator()

    def generate_trace_id(self) -> int:
        forced = _FORCED.get()
        return forced[0] if forced is not None else self._random.generate_trace_id()

    def generate_span_id(self) -> int:
        forced = _FORCED.get()
        return forced[1] if forced is not None else self._random.generate_span_id()

    def is_trace_id_random(self) -> bool:
        return False  # a run's trace id is a hash of its name


@contextmanager
def _ids_of(name: str) -> Iterator[None]:
    token = _FORCED.set((trace_id_of(name), root_span_id_of(name)))
    try:
        yield
    finally:
        _FORCED.reset(token)


def root_context(name: str) -> Context:
    """The context of a run's (or job's) create span, as every process derives it: the parent of its spans."""
    span_context = SpanContext(
        trace_id_of(name), root_span_id_of(name), is_remote=True, trace_flags=TraceFlags(TraceFlags.SAMPLED)
    )
    return trace.set_span_in_context(trace.NonRecordingSpan(span_context))


def _root_link(name: str) -> Link:
    return Link(trace.get_current_span(root_context(name)).get_span_context())


@dataclass(slots=True)
class _OpenAttempt:
    attempt: Span
    claim: Span | None
    run: Span | None = None


@dataclass(frozen=True, slots=True)
class _Root:
    """What a root span (a run's or a cron job's create) is made of."""

    name: str
    span_name: str
    attributes: dict[str, str]
    links: tuple[Link, ...] = ()


def _run_root(run: RunRecord) -> _Root:
    name = run_name(run.job_id, run.run_id)
    # A cron occurrence is linked to its job's create.
    links = (_root_link(job_name(run.job_id)),) if run.trigger is RunTrigger.SCHEDULE else ()
    attributes = {"jobmesh.run": name, "jobmesh.trigger": run.trigger.value, "jobmesh.queue": run.queue}
    return _Root(name, "jobmesh.run.create", attributes, links)


def _job_root(job: JobRecord) -> _Root:
    name = job_name(job.job_id)
    return _Root(name, "jobmesh.job.create", {"jobmesh.job": name})


def _key(run: dispatch_pb2.DispatchedRun) -> tuple[str, int]:
    return run.attempt.run, run.attempt.attempt


def _attempt_attributes(run: dispatch_pb2.DispatchedRun) -> dict[str, str | int]:
    return {
        "jobmesh.run": run.attempt.run,
        "jobmesh.attempt": run.attempt.attempt,
        "jobmesh.queue": run.queue,
    }


class TracingHooks(RunHooks):
    """Makes the spans of runs with `tracer`, whose provider must use `RunIdGenerator`. `provider`, when
    given, is flushed and shut down by `close` (a process's last spans are exported before it exits)."""

    def __init__(self, tracer: trace.Tracer, provider: TracerProvider | None = None) -> None:
        self._tracer = tracer
        self._provider = provider
        self._open: dict[tuple[str, int], _OpenAttempt] = {}

    def close(self) -> None:
        if self._provider is not None:
            self._provider.shutdown()

    # Server and watcher ----------------------------------------------------------------------------------

    def create(
        self, call: str, start_ns: int, runs: Sequence[RunRecord], jobs: Sequence[JobRecord] = ()
    ) -> None:
        roots = [_run_root(run) for run in runs]
        roots += [_job_root(job) for job in jobs if job.schedule_kind is ScheduleKind.CRON]
        if not roots:
            return
        if len(roots) == 1:  # the call's own span is the root
            self._root(call, roots[0], start_ns, SpanKind.SERVER, [])
            return
        server = self._tracer.start_span(call, kind=SpanKind.SERVER, start_time=start_ns)
        server.set_attribute("jobmesh.roots", len(roots))
        link = [Link(server.get_span_context())]
        for root in roots:
            self._root(root.span_name, root, start_ns, SpanKind.INTERNAL, link)
        server.end()

    def _root(self, name: str, root: _Root, start_ns: int, kind: SpanKind, links: list[Link]) -> None:
        with _ids_of(root.name):
            span = self._tracer.start_span(
                name,
                context=Context(),
                kind=kind,
                links=[*links, *root.links],
                start_time=start_ns,
                attributes=root.attributes,
            )
        span.end()

    def dispatch(self, runs: Sequence[dispatch_pb2.DispatchedRun]) -> None:
        for run in runs:
            span = self._tracer.start_span(
                "jobmesh.run.publish",
                context=root_context(run.attempt.run),
                kind=SpanKind.PRODUCER,
                attributes={**_attempt_attributes(run), "messaging.system": "kafka"},
            )
            run.trace_context.clear()
            _PROPAGATOR.inject(run.trace_context, context=trace.set_span_in_context(span))
            span.end()

    def end(self, ended: Sequence[tuple[Dispatchable, AttemptEnd]]) -> None:
        now = time.time_ns()
        for current, attempt_end in ended:
            name = run_name(current.run.job_id, current.run.run_id)
            span = self._tracer.start_span(
                "jobmesh.attempt.end",
                context=root_context(name),
                start_time=now,
                attributes={
                    "jobmesh.run": name,
                    "jobmesh.attempt": attempt_end.ref.attempt,
                    "jobmesh.attempt_state": attempt_end.attempt_state.value,
                    "jobmesh.run_state": attempt_end.run_state.value,
                    "jobmesh.error_type": attempt_end.error_type or "",
                },
            )
            if attempt_end.run_state in FAILED_RUN_STATES:
                span.set_status(Status(StatusCode.ERROR, attempt_end.error_message or attempt_end.run_state))
            span.end()

    # Executor --------------------------------------------------------------------------------------------

    def consume(self, deliveries: Sequence[Delivery]) -> None:
        now = time.time_ns()
        for delivery in deliveries:
            run = delivery.run
            parent = _PROPAGATOR.extract(delivery.trace_context or run.trace_context)
            if not trace.get_current_span(parent).get_span_context().is_valid:
                parent = root_context(run.attempt.run)  # published without a trace: still the run's trace
            attempt = self._tracer.start_span(
                "jobmesh.attempt",
                context=parent,
                kind=SpanKind.CONSUMER,
                links=[_root_link(run.attempt.run)],
                start_time=now,
                attributes={**_attempt_attributes(run), "messaging.system": "kafka"},
            )
            claim = self._child("jobmesh.attempt.claim", attempt, now)
            while len(self._open) >= MAX_OPEN_ATTEMPTS:
                self._drop(next(iter(self._open)))
            self._drop(_key(run))
            self._open[_key(run)] = _OpenAttempt(attempt, claim)

    def claim(self, runs: Sequence[dispatch_pb2.DispatchedRun], granted: Collection[AttemptRef]) -> None:
        for run in runs:
            open_attempt = self._open.get(_key(run))
            if open_attempt is None or open_attempt.claim is None:
                continue
            ref = AttemptRef.from_proto_or_none(run.attempt)
            was_granted = ref in granted
            open_attempt.claim.set_attribute("jobmesh.granted", was_granted)
            open_attempt.claim.end()
            open_attempt.claim = None
            if not was_granted:  # skipped: a duplicate, cancelled or stale
                open_attempt.attempt.set_attribute("jobmesh.skipped", True)
                open_attempt.attempt.end()
                del self._open[_key(run)]

    def start(self, run: dispatch_pb2.DispatchedRun) -> None:
        open_attempt = self._open.get(_key(run))
        if open_attempt is None:
            return
        open_attempt.run = self._child("jobmesh.attempt.run", open_attempt.attempt, time.time_ns())
        run.trace_context.clear()  # what the target sees: the run span
        _PROPAGATOR.inject(run.trace_context, context=trace.set_span_in_context(open_attempt.run))

    def report(self, run: dispatch_pb2.DispatchedRun, result: pb.AttemptResult | None) -> None:
        open_attempt = self._open.pop(_key(run), None)
        if open_attempt is None:
            return
        now = time.time_ns()
        if open_attempt.run is not None:
            open_attempt.run.end(now)
        attempt = open_attempt.attempt
        if result is None:
            attempt.set_attribute("jobmesh.fenced", True)
        else:
            report = self._child("jobmesh.attempt.report", attempt, now)
            state = run_pb2.RunState.Name(result.state)
            report.set_attribute("jobmesh.state", state)
            attempt.set_attribute("jobmesh.state", state)
            if result.state != run_pb2.RUN_STATE_SUCCEEDED:
                attempt.set_status(Status(StatusCode.ERROR, f"{result.error.type}: {result.error.message}"))
            report.end()
        attempt.end()

    def _child(self, name: str, parent: Span, start_ns: int) -> Span:
        return self._tracer.start_span(name, context=trace.set_span_in_context(parent), start_time=start_ns)

    def _drop(self, key: tuple[str, int]) -> None:
        open_attempt = self._open.pop(key, None)
        if open_attempt is not None:
            for span in (open_attempt.claim, open_attempt.run, open_attempt.attempt):
                if span is not None:
                    span.end()
