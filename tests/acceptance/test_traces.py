"""Traces and structured logs of the production mesh (server, watcher and executor processes on PostgreSQL,
Kafka and Redis), exported over OTLP by the standard variables to a real trace backend, Jaeger all-in-one
(`tests.acceptance.jaeger`), and found again through its query API."""

from __future__ import annotations

import json
import subprocess
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
from confluent_kafka import Consumer
from google.protobuf import duration_pb2

from jobmesh.adapters.queue.codec import topic_of
from jobmesh.control.v1 import dispatch_pb2
from jobmesh.core.run_traces import root_span_id_of, trace_id_hex
from jobmesh.v1 import job_pb2, job_service_pb2, run_pb2
from tests.acceptance.jaeger import INSTALLER, FoundSpan, Jaeger, built_jaeger, jaeger
from tests.acceptance.mesh import Mesh, command_job, create, wait_for_run, warm_up
from tests.support import eventually

pytestmark = pytest.mark.processes

ONE_RETRY = job_pb2.RetryPolicy(max_attempts=2, initial_backoff=duration_pb2.Duration(nanos=100_000_000))
BATCH = 100


@pytest.fixture
def traced(mesh: Mesh, tmp_path: Path) -> Iterator[Jaeger]:
    """Jaeger, and the mesh's processes exporting to it and logging JSON lines."""
    with jaeger(tmp_path) as backend:
        mesh.env.update(backend.environment())
        mesh.env["JOBMESH_LOG_FORMAT"] = "json"
        yield backend
        mesh.close()  # their last spans are exported while the backend still listens


def _trace_of(backend: Jaeger, trace_id: str, ends: int) -> list[FoundSpan]:
    """A run's trace once `ends` attempt ends and as many reports are in it."""

    def complete() -> list[FoundSpan] | None:
        spans = backend.trace(trace_id)
        names = [span.name for span in spans]
        done = names.count("jobmesh.attempt.end") >= ends and names.count("jobmesh.attempt.report") >= ends
        return spans if done else None

    try:
        return eventually(complete, 60, f"trace {trace_id}")
    except AssertionError as error:
        had = sorted((span.service, span.name) for span in backend.trace(trace_id))
        raise AssertionError(f"{error}; it has {had}") from None


def _attempt_of(span: FoundSpan) -> int:
    return int(str(span.attributes["jobmesh.attempt"]))


def _children(spans: list[FoundSpan], parent: FoundSpan) -> list[FoundSpan]:
    return [span for span in spans if span.parent_id == parent.span_id]


def test_a_run_retried_once_is_one_unbroken_trace_from_the_create_call_to_its_result(
    mesh: Mesh, traced: Jaeger, tmp_path: Path
) -> None:
    server = mesh.server()
    mesh.watcher()
    mesh.executor(server)
    jobs, search = mesh.stubs(server)
    warm_up(mesh, jobs, search)
    seen = tmp_path / "traceparents"
    script = f'echo "$TRACEPARENT" >> "{seen}"; test "$JOBMESH_ATTEMPT" = 2'
    run = create(jobs, command_job(mesh.queue, script, retry_policy=ONE_RETRY)).run
    wait_for_run(
        search, run.name, lambda r: r.state == run_pb2.RUN_STATE_SUCCEEDED, 60, "the retry to succeed"
    )

    spans = _trace_of(traced, trace_id_hex(run.name), ends=2)

    found = traced.search("jobmesh-server", tags={"jobmesh.run": run.name})  # as the README searches
    assert {span.trace_id for span in found} == {trace_id_hex(run.name)}
    assert {span.trace_id for span in spans} == {trace_id_hex(run.name)}  # one trace
    assert {"jobmesh-server", "jobmesh-executor"} <= {span.service for span in spans}
    by_id = {span.span_id: span for span in spans}
    assert all(span.parent_id in by_id for span in spans if span.parent_id), "a span's parent is missing"
    [root] = [span for span in spans if not span.parent_id]
    assert (root.name, root.kind, root.service) == (
        "jobmesh.v1.JobService/CreateJob",
        "server",
        "jobmesh-server",
    )
    assert root.span_id == f"{root_span_id_of(run.name):016x}"
    publishes = sorted((s for s in spans if s.kind == "producer"), key=_attempt_of)
    assert [p.attributes["jobmesh.attempt"] for p in publishes] == [1, 2]
    assert all(p.parent_id == root.span_id for p in publishes)
    attempts = [span for span in spans if span.name == "jobmesh.attempt"]
    assert len(attempts) == 2
    for publish in publishes:
        [attempt] = _children(spans, publish)  # the executor's span, across Kafka
        assert (attempt.kind, attempt.service) == ("consumer", "jobmesh-executor")
        assert attempt.attributes["jobmesh.attempt"] == publish.attributes["jobmesh.attempt"]
        assert (root.trace_id, root.span_id) in attempt.links  # linked to the creation context
        steps = {span.name: span for span in _children(spans, attempt)}
        assert set(steps) == {"jobmesh.attempt.claim", "jobmesh.attempt.run", "jobmesh.attempt.report"}
        assert steps["jobmesh.attempt.claim"].end_us <= steps["jobmesh.attempt.run"].start_us
    first, second = sorted(attempts, key=_attempt_of)
    assert first.error
    assert first.attributes["jobmesh.state"] == "RUN_STATE_FAILED"
    assert not second.error
    assert second.attributes["jobmesh.state"] == "RUN_STATE_SUCCEEDED"
    ends = sorted((s for s in spans if s.name == "jobmesh.attempt.end"), key=lambda s: s.start_us)
    assert [(e.attributes["jobmesh.attempt"], e.attributes["jobmesh.run_state"]) for e in ends] == [
        (1, "SCHEDULED"),
        (2, "SUCCEEDED"),
    ]
    assert all(end.parent_id == root.span_id for end in ends)
    # Each attempt's command saw the trace context of its own run span.
    runs = sorted((s for s in spans if s.name == "jobmesh.attempt.run"), key=lambda s: s.start_us)
    assert seen.read_text().split() == [f"00-{root.trace_id}-{span.span_id}-01" for span in runs]
    # Unbroken: from the final result back to the create call, parent by parent, across Kafka.
    [report] = [span for span in _children(spans, second) if span.name == "jobmesh.attempt.report"]
    assert _ancestry(by_id, report) == [
        ("jobmesh.attempt.report", "jobmesh-executor"),
        ("jobmesh.attempt", "jobmesh-executor"),
        ("jobmesh.run.publish", publishes[1].service),
        ("jobmesh.v1.JobService/CreateJob", "jobmesh-server"),
    ]


def _ancestry(by_id: dict[str, FoundSpan], span: FoundSpan) -> list[tuple[str, str]]:
    """(name, service) of `span`, its parent, and so on up to its trace's root."""
    line = [(span.name, span.service)]
    while span.parent_id:
        span = by_id[span.parent_id]
        line.append((span.name, span.service))
    return line


def _traceparents_on_kafka(bootstrap: str, topic: str, wanted: set[str]) -> dict[str, str]:
    """The `traceparent` header of each wanted run's message on `topic`, read by a group of its own."""
    consumer = Consumer(
        {
            "bootstrap.servers": bootstrap,
            "group.id": f"traces-{time.time_ns()}",
            "auto.offset.reset": "earliest",
            "enable.auto.commit": False,
            "session.timeout.ms": 6000,
        }
    )
    found: dict[str, str] = {}
    try:
        consumer.subscribe([topic])
        deadline = time.monotonic() + 60
        while not wanted <= found.keys() and time.monotonic() < deadline:
            message = consumer.poll(0.5)
            if message is None or message.error() is not None:
                continue
            name = dispatch_pb2.DispatchedRun.FromString(message.value() or b"").attempt.run
            raw = message.headers() or []
            headers = dict(_decoded(list(raw.items()) if isinstance(raw, dict) else raw))
            found[name] = headers.get("traceparent", "")
    finally:
        consumer.close()
    return found


def _decoded(headers: list[tuple[str, str | bytes | None]]) -> Iterator[tuple[str, str]]:
    for key, value in headers:
        yield key, value.decode() if isinstance(value, bytes) else value or ""


def test_the_runs_of_one_batch_carry_their_own_traceparents_on_kafka(mesh: Mesh, traced: Jaeger) -> None:
    server = mesh.server()
    jobs, _ = mesh.stubs(server)
    requests = [job_service_pb2.CreateJobRequest(job=command_job(mesh.queue, "true")) for _ in range(BATCH)]

    answer = jobs.BatchCreateJobs(job_service_pb2.BatchCreateJobsRequest(requests=requests))

    runs = {result.run.name for result in answer.results}
    assert len(runs) == BATCH
    assert "" not in runs
    headers = _traceparents_on_kafka(
        mesh.env["JOBMESH_KAFKA_BOOTSTRAP"], topic_of(mesh.queue, "normal"), runs
    )
    assert headers.keys() >= runs
    parents = {name: headers[name] for name in runs}
    assert len(set(parents.values())) == BATCH  # 100 different traceparents
    for name, traceparent in parents.items():  # each in its own run's trace
        assert traceparent.startswith(f"00-{trace_id_hex(name)}-")

    # The call's server span, and each run's create span in its own trace, linked to it, as Jaeger has them.
    def call() -> list[FoundSpan]:
        spans = traced.search("jobmesh-server", "jobmesh.v1.JobService/BatchCreateJobs")
        return [span for span in spans if span.name == "jobmesh.v1.JobService/BatchCreateJobs"]

    [batch_call] = eventually(call, 30, "the call's span")

    def create_spans() -> list[FoundSpan] | None:
        spans = traced.search("jobmesh-server", "jobmesh.run.create")
        found = [span for span in spans if span.name == "jobmesh.run.create"]
        return found if len(found) >= BATCH else None

    creates = eventually(create_spans, 30, "the runs' create spans", interval=0.5)
    assert len(creates) == BATCH
    assert {s.trace_id for s in creates} == {trace_id_hex(name) for name in runs}
    assert all((batch_call.trace_id, batch_call.span_id) in s.links for s in creates)


def test_json_lines_parse_and_a_dead_letter_names_its_trace(mesh: Mesh, traced: Jaeger) -> None:
    server = mesh.server()
    mesh.watcher()
    mesh.executor(server)
    jobs, search = mesh.stubs(server)
    warm_up(mesh, jobs, search)
    # Dead-lettered once its retries are spent (a policy without retries ends the run FAILED instead).
    run = create(jobs, command_job(mesh.queue, "exit 3", retry_policy=ONE_RETRY)).run
    wait_for_run(search, run.name, lambda r: r.state == run_pb2.RUN_STATE_DEAD_LETTERED, 60, "a dead letter")

    def dead_letter_line() -> dict[str, object] | None:
        lines = [json.loads(line) for line in _log_lines(mesh)]
        return next(
            (line for line in lines if line.get("run") == run.name and "dead-letter" in str(line)), None
        )

    line = eventually(dead_letter_line, 30, "the dead letter's log line")
    assert line["level"] == "WARNING"
    assert line["trace_id"] == trace_id_hex(run.name)
    spans = _trace_of(traced, str(line["trace_id"]), ends=2)  # the id in the line is a trace Jaeger has
    end = max((span for span in spans if span.name == "jobmesh.attempt.end"), key=_attempt_of)
    assert (end.attributes["jobmesh.run_state"], end.error) == ("DEAD_LETTERED", True)


def _log_lines(mesh: Mesh) -> list[str]:
    """Every line the processes logged: all but what they print on their standard output (the banner, which
    says what serves where), which is not a log record."""
    lines: list[str] = []
    for process in mesh.processes:
        for text in process.log.read_text().splitlines():
            if text.startswith(("jobmesh ", "  ")) or not text:
                continue
            lines.append(text)
    return lines


def test_every_logged_line_is_json(mesh: Mesh, traced: Jaeger) -> None:
    server = mesh.server()
    mesh.watcher()
    mesh.executor(server)
    jobs, search = mesh.stubs(server)
    warm_up(mesh, jobs, search)

    lines = _log_lines(mesh)

    assert lines, "nothing was logged"
    for text in lines:
        line = json.loads(text)  # raises on a line that is not JSON
        assert {"time", "level", "process", "pid", "logger", "message"} <= line.keys()


def test_jaeger_is_the_pinned_version() -> None:
    binary = built_jaeger()
    pinned = next(
        line.split("=", 1)[1] for line in INSTALLER.read_text().splitlines() if line.startswith("JAEGER=")
    )
    done = subprocess.run([str(binary), "version"], capture_output=True, text=True, timeout=60, check=True)
    assert json.loads(done.stdout.strip().splitlines()[-1])["gitVersion"] == pinned
