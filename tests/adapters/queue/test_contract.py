"""The queue port's contract, run against every adapter (see conftest.py)."""

from __future__ import annotations

import threading
import time
from collections.abc import Sequence

import pytest

from jobmesh.adapters.queue.codec import LANES, lane_of, topic_of
from jobmesh.control.v1 import dispatch_pb2
from jobmesh.core.ports.queue import Delivery, RunConsumer
from tests.adapters.queue.support import DRAIN_TIMEOUT, Backend, drain, drain_until, names


def test_a_reachable_queue_passes_its_probe(backend: Backend) -> None:
    backend.queue.check_reachable()  # returns, again and again: a probe asks every second
    backend.queue.check_reachable()


def test_round_trip_preserves_every_field(backend: Backend) -> None:
    runs = [backend.run("a", "1", "high"), backend.run("b", "2", "normal"), backend.run("c", "3", "low")]
    backend.queue.publish(runs)

    got = drain(backend.consumer(), 3)

    assert sorted((d.run.SerializeToString(), d.lane) for d in got) == sorted(
        (run.SerializeToString(), lane_of(run)) for run in runs
    )
    assert all(d.trace_context == {} for d in got)


def test_each_run_carries_its_own_trace_context_in_its_headers(backend: Backend) -> None:
    runs = [backend.run("a", "1"), backend.run("b", "2"), backend.run("c", "3")]
    for index, run in enumerate(runs[:2], start=1):
        run.trace_context["traceparent"] = f"00-{index:032x}-{index:016x}-01"
    runs[1].trace_context["tracestate"] = "vendor=b"
    backend.queue.publish(runs)

    got = {d.run.attempt.run: d for d in drain(backend.consumer(), 3)}

    assert got[runs[0].attempt.run].trace_context == {"traceparent": f"00-{1:032x}-{1:016x}-01"}
    assert got[runs[1].attempt.run].trace_context == {
        "traceparent": f"00-{2:032x}-{2:016x}-01",
        "tracestate": "vendor=b",
    }
    assert got[runs[2].attempt.run].trace_context == {}  # an untraced run has no trace headers


def test_runs_of_one_job_arrive_in_publish_order(backend: Backend) -> None:
    runs = [backend.run(f"job{i % 5}", f"r{i:02d}") for i in range(40)]
    backend.queue.publish(runs)

    got = names(drain(backend.consumer(), 40))

    assert sorted(got) == sorted(names_of(runs))
    for job in range(5):
        mine = [name for name in got if name.startswith(f"jobs/job{job}/")]
        assert mine == sorted(mine)


def test_polls_favour_the_high_lane_but_serve_low_within_every_four(backend: Backend) -> None:
    consumer = backend.consumer()
    # One run per lane first, so every lane's consumer is assigned before the race starts.
    backend.queue.publish([backend.run("warm", lane, lane) for lane in LANES])
    consumer.commit(drain(consumer, 3))
    backend.queue.publish([backend.run(f"j{i}", f"{lane}{i}", lane) for lane in LANES for i in range(12)])
    time.sleep(backend.settle)

    lanes = [delivery.lane for _ in range(24) for delivery in consumer.poll(1, 5.0)]

    assert len(lanes) == 24
    assert [lane for lane in lanes if lane != "low"] == ["high"] * 12 + ["normal"] * 6
    assert all("low" in lanes[i : i + 4] for i in range(len(lanes) - 3))


def test_committed_runs_are_not_delivered_to_the_group_again(backend: Backend) -> None:
    first = backend.consumer()
    backend.queue.publish([backend.run("a", str(i)) for i in range(5)])
    first.commit(drain(first, 5))
    first.close()

    # A sentinel behind them (same job, so same lane and partition) proves the new consumer has caught up.
    second = backend.consumer()
    backend.queue.publish([backend.run("a", "sentinel")])

    assert names(drain_until(second, "jobs/a/runs/sentinel")) == ["jobs/a/runs/sentinel"]


def test_uncommitted_runs_come_back_after_the_consumer_closes(backend: Backend) -> None:
    first = backend.consumer()
    runs = [backend.run("a", str(i)) for i in range(5)]
    backend.queue.publish(runs)
    assert len(drain(first, 5)) == 5
    first.close()

    again = drain(backend.consumer(), 5)

    assert sorted(names(again)) == sorted(names_of(runs))


def test_every_group_gets_every_run(backend: Backend) -> None:
    executors, auditors = (
        backend.consumer(backend.group("executors")),
        backend.consumer(backend.group("audit")),
    )
    runs = [backend.run(f"j{i}", str(i), LANES[i % 3]) for i in range(9)]
    backend.queue.publish(runs)

    for consumer in (executors, auditors):
        assert sorted(names(drain(consumer, 9))) == sorted(names_of(runs))


def test_a_consumer_stepped_aside_takes_nothing_and_its_group_gets_every_run(backend: Backend) -> None:
    busy, free = backend.consumer(), backend.consumer()
    warm = [backend.run(f"w{i}", "0") for i in range(12)]  # many jobs: every partition
    backend.queue.publish(warm)
    for consumer, deliveries in _drain_both(busy, free, len(warm)).items():
        consumer.commit(deliveries)

    busy.step_aside()
    runs = [backend.run(f"j{i}", "1") for i in range(12)]
    backend.queue.publish(runs)
    taken = drain(free, len(runs))
    assert sorted(names(taken)) == sorted(names_of(runs))
    assert busy.poll(len(runs), backend.settle) == []
    free.commit(taken)

    busy.rejoin()
    later = [backend.run(f"k{i}", "2") for i in range(12)]
    backend.queue.publish(later)
    both = _drain_both(busy, free, len(later))
    assert sorted(name for got in both.values() for name in names(got)) == sorted(names_of(later))
    assert busy.poll(1, 0.1) == []  # a member again: polled without error, and nothing is left


def _drain_both(first: RunConsumer, second: RunConsumer, count: int) -> dict[RunConsumer, list[Delivery]]:
    got: dict[RunConsumer, list[Delivery]] = {first: [], second: []}
    deadline = time.monotonic() + DRAIN_TIMEOUT
    while sum(map(len, got.values())) < count and time.monotonic() < deadline:
        for consumer in got:
            got[consumer] += consumer.poll(count, 0.2)
    return got


def test_dead_letters_go_to_the_dead_letter_topic_and_not_to_executors(backend: Backend) -> None:
    runs = [backend.run("a", "1"), backend.run("b", "2", "high")]

    backend.queue.publish_dead_letters(runs)
    backend.queue.publish([backend.run("a", "sentinel")])

    mine = [run for run in backend.dead_letters() if run.queue == backend.name]
    assert sorted(names_of(mine)) == sorted(names_of(runs))
    assert sorted(run.SerializeToString() for run in mine) == sorted(run.SerializeToString() for run in runs)
    assert names(drain_until(backend.consumer(), "jobs/a/runs/sentinel")) == ["jobs/a/runs/sentinel"]


def test_malformed_messages_are_skipped_without_committing_runs_before_them(backend: Backend) -> None:
    topic = topic_of(backend.name, "normal")
    backend.queue.publish([backend.run("a", "1")])
    backend.inject_raw(topic, b"a", b"\xff\xfe not a run")
    backend.inject_raw(topic, b"a", b"")  # parses as an empty DispatchedRun: no attempt, so malformed too
    backend.queue.publish([backend.run("a", "2")])

    first = backend.consumer()
    assert names(drain(first, 2)) == ["jobs/a/runs/1", "jobs/a/runs/2"]
    first.close()  # nothing committed: skipping the garbage must not have committed run 1 either

    second = backend.consumer()
    redelivered = drain(second, 2)
    assert names(redelivered) == ["jobs/a/runs/1", "jobs/a/runs/2"]
    second.commit(redelivered)
    second.close()

    backend.queue.publish([backend.run("a", "sentinel")])
    assert names(drain_until(backend.consumer(), "jobs/a/runs/sentinel")) == ["jobs/a/runs/sentinel"]


def test_poll_waits_for_the_first_run_and_returns_on_arrival(backend: Backend) -> None:
    consumer = backend.consumer()
    backend.queue.publish([backend.run("warm", "0")])
    consumer.commit(drain(consumer, 1))
    publisher = threading.Timer(0.3, backend.queue.publish, args=([backend.run("a", "1", "low")],))
    publisher.start()
    try:
        started = time.monotonic()
        got = consumer.poll(10, 10.0)
        waited = time.monotonic() - started
    finally:
        publisher.join()

    assert names(got) == ["jobs/a/runs/1"]
    assert 0.2 < waited < 5.0


@pytest.mark.timing
def test_poll_returns_nothing_once_the_timeout_passes(backend: Backend) -> None:
    consumer = backend.consumer()
    backend.queue.publish([backend.run("warm", "0")])  # joined: on Kafka, a close mid-join can take 5 s
    consumer.commit(drain(consumer, 1))
    started = time.monotonic()

    assert consumer.poll(10, 0.3) == []
    assert 0.25 < time.monotonic() - started < 3.0
    consumer.commit([])  # nothing to commit is not an error


def names_of(runs: Sequence[dispatch_pb2.DispatchedRun]) -> list[str]:
    return [run.attempt.run for run in runs]
