"""Units shared by the adapters: keys, decoding, lane order, and the Kafka commit ledger."""

from __future__ import annotations

import pytest

from jobmesh.adapters.queue import codec
from jobmesh.adapters.queue.kafka_consumer import _Ledger
from jobmesh.control.v1 import dispatch_pb2
from jobmesh.control.v1.executor_control_pb2 import AttemptRef
from tests.adapters.queue.support import make_run


@pytest.mark.parametrize(
    ("run_name", "key"),
    [
        ("jobs/nightly/runs/r1", "nightly"),
        ("jobs/x", "jobs/x"),
        ("odd-name", "odd-name"),
        ("jobs//runs/r", "jobs//runs/r"),
    ],
)
def test_the_key_is_the_job_id(run_name: str, key: str) -> None:
    run = make_run("q", "unused", "unused")
    run.attempt.run = run_name
    assert codec.job_key(run) == key


def test_decode_returns_what_encode_wrote() -> None:
    run = make_run("q", "a", "1")
    assert codec.decode(codec.encode(run), codec.CONTENT_TYPE) == run
    assert codec.decode(codec.encode(run), None) == run  # a producer without headers


def test_runs_published_under_the_old_package_name_are_still_read() -> None:
    run = make_run("q", "a", "1")
    assert codec.CONTENT_TYPE == "application/x-protobuf; messageType=jobmesh.control.v1.DispatchedRun"
    old = "application/x-protobuf; messageType=jobmesh.v1.DispatchedRun"  # before jobmesh.control.v1
    assert codec.decode(codec.encode(run), old) == run


def _with_attempt(run: str, attempt: int) -> bytes:
    return dispatch_pb2.DispatchedRun(attempt=AttemptRef(run=run, attempt=attempt)).SerializeToString()


@pytest.mark.parametrize(
    ("value", "content_type"),
    [
        (b"\xff\xfe garbage", None),
        (b"", None),  # parses, but names no attempt
        (None, None),
        (codec.encode(make_run("q", "a", "1")), "application/json"),
        (_with_attempt("jobs/a", 1), None),
        (_with_attempt("jobs/a/runs/1", 0), None),
    ],
)
def test_decode_refuses_what_is_not_a_run(value: bytes | None, content_type: str | None) -> None:
    with pytest.raises(codec.MalformedMessage):
        codec.decode(value, content_type)


def test_every_fourth_poll_takes_the_low_lane_first() -> None:
    order = codec.LaneOrder()
    firsts = [order.next()[0] for _ in range(8)]
    assert firsts == ["high", "high", "high", "low"] * 2


TP = ("topic", 0)


def test_a_skipped_message_with_nothing_outstanding_is_committed_at_once() -> None:
    ledger = _Ledger()
    assert ledger.skip(TP, 0) == 1
    ledger.handed(TP, 1)
    ledger.committed(TP, ledger.position(TP, 1))
    assert ledger.skip(TP, 2) == 3


def test_a_skipped_message_waits_for_the_deliveries_before_it() -> None:
    ledger = _Ledger()
    ledger.handed(TP, 0)
    assert ledger.skip(TP, 1) is None
    ledger.handed(TP, 2)
    assert ledger.skip(TP, 3) is None

    assert ledger.position(TP, 0) == 2  # run 0 done: the skipped 1 goes with it, not 2 (not committed)
    assert ledger.position(TP, 2) == 4  # run 2 done: the skipped 3 goes with it
    assert ledger.position(TP, 5) == 6


@pytest.mark.parametrize(
    ("lane", "late_by_ms", "expected"),
    [
        ("high", 0, "high"),
        ("normal", 2000, "normal"),  # sent again after a failed publish: still its own lane
        ("high", 2001, "normal"),
        ("normal", 30_000, "low"),
        ("low", 30_000, "low"),
        ("normal", -5000, "normal"),  # released ahead of its time, as the watcher does
    ],
)
def test_a_run_dispatched_late_goes_one_lane_below_its_priority(
    lane: str, late_by_ms: int, expected: str
) -> None:
    run = make_run("q", "a", "1", lane=lane)
    run.due_time.FromMilliseconds(1_800_000_000_000)
    run.dispatch_time.FromMilliseconds(1_800_000_000_000 + late_by_ms)
    assert codec.lane_of(run) == expected


def test_a_run_without_a_due_time_keeps_its_lane() -> None:
    run = make_run("q", "a", "1", lane="high")
    run.ClearField("due_time")
    run.dispatch_time.FromMilliseconds(1_800_000_000_000)
    assert codec.lane_of(run) == "high"
