"""The spans the tracing hook makes at each hop, exported to the SDK's in-memory exporter: their tree, their
links, and the trace context they put on the run (its Kafka headers, its command's `TRACEPARENT`)."""

from __future__ import annotations

from collections.abc import Iterator
from datetime import UTC, datetime

import pytest
from opentelemetry.sdk.trace import ReadableSpan, TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter
from opentelemetry.trace import SpanKind

from jobmesh.adapters.queue.codec import headers_of
from jobmesh.adapters.tracing.spans import RunIdGenerator, TracingHooks
from jobmesh.control.v1 import dispatch_pb2
from jobmesh.control.v1 import executor_control_pb2 as pb
from jobmesh.core.attempts import AttemptRef
from jobmesh.core.names import job_name, run_name
from jobmesh.core.ports.queue import Delivery
from jobmesh.core.records import JobRecord, JobState, Priority, RunRecord, RunState, RunTrigger, ScheduleKind
from jobmesh.core.run_traces import root_span_id_of, trace_id_of
from jobmesh.v1 import run_pb2

NOW = datetime(2026, 12, 5, tzinfo=UTC)


@pytest.fixture
def exported() -> InMemorySpanExporter:
    return InMemorySpanExporter()


@pytest.fixture
def hooks(exported: InMemorySpanExporter) -> Iterator[TracingHooks]:
    provider = TracerProvider(id_generator=RunIdGenerator())
    provider.add_span_processor(SimpleSpanProcessor(exported))
    hooks = TracingHooks(provider.get_tracer("test"), provider)
    yield hooks
    hooks.close()


def run_record(job_id: str, run_id: str, trigger: RunTrigger = RunTrigger.RUN_NOW) -> RunRecord:
    return RunRecord(job_id, run_id, NOW, NOW, RunState.SCHEDULED, trigger, Priority.NORMAL, "q", NOW, NOW)


def message(job_id: str, run_id: str, attempt: int = 1) -> dispatch_pb2.DispatchedRun:
    return dispatch_pb2.DispatchedRun(attempt=AttemptRef(job_id, run_id, attempt).to_proto(), queue="q")


def named(exported: InMemorySpanExporter, name: str) -> list[ReadableSpan]:
    return [span for span in exported.get_finished_spans() if span.name == name]


def test_a_call_that_creates_one_run_is_the_root_of_its_trace(
    hooks: TracingHooks, exported: InMemorySpanExporter
) -> None:
    hooks.create("jobmesh.v1.JobService/CreateJob", 1_000, [run_record("j", "r")])

    [span] = exported.get_finished_spans()
    assert span.name == "jobmesh.v1.JobService/CreateJob"
    assert span.kind is SpanKind.SERVER
    assert span.parent is None
    assert span.context is not None
    assert span.context.trace_id == trace_id_of(run_name("j", "r"))
    assert span.context.span_id == root_span_id_of(run_name("j", "r"))
    assert span.start_time == 1_000


def test_a_batch_create_makes_a_trace_per_run_linked_to_the_call(
    hooks: TracingHooks, exported: InMemorySpanExporter
) -> None:
    runs = [run_record("j1", "r"), run_record("j2", "r")]

    hooks.create("jobmesh.v1.JobService/BatchCreateJobs", 1_000, runs)

    [call] = named(exported, "jobmesh.v1.JobService/BatchCreateJobs")
    creates = named(exported, "jobmesh.run.create")
    assert call.context is not None
    assert {span.context.trace_id for span in creates if span.context} == {
        trace_id_of(run_name(run.job_id, run.run_id)) for run in runs
    }
    assert all(span.parent is None for span in creates)
    assert all([link.context for link in span.links] == [call.context] for span in creates)


def test_a_cron_occurrence_is_linked_to_its_jobs_create(
    hooks: TracingHooks, exported: InMemorySpanExporter
) -> None:
    job = JobRecord(
        "cronjob", b"", "", {}, ScheduleKind.CRON, Priority.NORMAL, "q", JobState.ACTIVE, NOW, NOW, NOW
    )
    hooks.create("jobmesh.v1.JobService/CreateJob", 1_000, [], [job])
    hooks.create("jobmesh.watcher/materialize", 2_000, [run_record("cronjob", "r1", RunTrigger.SCHEDULE)])

    [job_root] = named(exported, "jobmesh.v1.JobService/CreateJob")
    [occurrence] = named(exported, "jobmesh.watcher/materialize")
    assert job_root.context is not None
    assert job_root.context.trace_id == trace_id_of(job_name("cronjob"))
    assert occurrence.context is not None
    assert occurrence.context.trace_id != job_root.context.trace_id  # a trace of its own
    [link] = occurrence.links
    assert (link.context.trace_id, link.context.span_id) == (
        job_root.context.trace_id,
        job_root.context.span_id,
    )


def test_each_dispatched_run_gets_its_own_traceparent_under_its_runs_create(
    hooks: TracingHooks, exported: InMemorySpanExporter
) -> None:
    runs = [message(f"j{i}", "r") for i in range(100)]

    hooks.dispatch(runs)

    traceparents = [run.trace_context["traceparent"] for run in runs]
    assert len(set(traceparents)) == 100
    publishes = named(exported, "jobmesh.run.publish")
    for run, publish in zip(runs, publishes, strict=True):
        assert publish.kind is SpanKind.PRODUCER
        assert publish.context is not None
        assert publish.parent is not None
        assert publish.parent.span_id == root_span_id_of(run.attempt.run)
        assert run.trace_context["traceparent"] == (
            f"00-{trace_id_of(run.attempt.run):032x}-{publish.context.span_id:016x}-01"
        )
        assert ("traceparent", run.trace_context["traceparent"]) in headers_of(run)


def test_an_attempt_is_consumed_claimed_run_and_reported_under_its_publish(
    hooks: TracingHooks, exported: InMemorySpanExporter
) -> None:
    run = message("j", "r", attempt=2)
    hooks.dispatch([run])
    [publish] = named(exported, "jobmesh.run.publish")
    taken = dispatch_pb2.DispatchedRun.FromString(run.SerializeToString())  # as the executor decodes it

    hooks.consume([Delivery(taken, "normal", None, dict(taken.trace_context))])
    hooks.claim([taken], {AttemptRef("j", "r", 2)})
    hooks.start(taken)
    target_sees = taken.trace_context["traceparent"]
    hooks.report(taken, pb.AttemptResult(attempt=taken.attempt, state=run_pb2.RUN_STATE_FAILED))

    [attempt] = named(exported, "jobmesh.attempt")
    assert attempt.kind is SpanKind.CONSUMER
    assert publish.context is not None
    assert attempt.parent is not None
    assert attempt.parent.span_id == publish.context.span_id
    assert [link.context.span_id for link in attempt.links] == [root_span_id_of(run.attempt.run)]
    assert not attempt.status.is_ok
    assert attempt.context is not None
    steps = {span.name: span for span in exported.get_finished_spans() if span.parent == attempt.context}
    assert set(steps) == {"jobmesh.attempt.claim", "jobmesh.attempt.run", "jobmesh.attempt.report"}
    run_span = steps["jobmesh.attempt.run"]
    assert run_span.context is not None
    assert target_sees == f"00-{attempt.context.trace_id:032x}-{run_span.context.span_id:016x}-01"
    assert publish.parent is not None  # a retry: under its run's create span, in the run's one trace
    assert publish.parent.span_id == root_span_id_of(run.attempt.run)


def test_a_refused_claim_ends_its_attempt_span(hooks: TracingHooks, exported: InMemorySpanExporter) -> None:
    run = message("j", "r")
    hooks.consume([Delivery(run, "normal", None, {})])  # untraced publisher: still the run's trace

    hooks.claim([run], set())

    [attempt] = named(exported, "jobmesh.attempt")
    assert attempt.attributes is not None
    assert attempt.attributes["jobmesh.skipped"] is True
    assert attempt.context is not None
    assert attempt.context.trace_id == trace_id_of(run.attempt.run)
    [claim] = named(exported, "jobmesh.attempt.claim")
    assert claim.attributes is not None
    assert claim.attributes["jobmesh.granted"] is False
    hooks.report(run, None)  # nothing is open any more: nothing more is made
    assert len(exported.get_finished_spans()) == 2


def test_an_untraced_run_shares_one_header_list() -> None:
    assert headers_of(message("a", "1")) is headers_of(message("b", "2"))
