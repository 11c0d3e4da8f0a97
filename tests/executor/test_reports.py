"""The outbox: batching, bounds, and results kept until acknowledged."""

from __future__ import annotations

import asyncio

from jobmesh.control.v1 import executor_control_pb2 as pb
from jobmesh.core.attempts import AttemptRef
from jobmesh.core.limits import MAX_LOG_LINE_CHARS
from jobmesh.executor.outbox import Outbox
from jobmesh.v1 import run_pb2

A, B = AttemptRef("a", "1", 1), AttemptRef("b", "1", 2)
OUT = run_pb2.LOG_STREAM_STDOUT


def result(key: AttemptRef) -> pb.AttemptResult:
    return pb.AttemptResult(attempt=key.to_proto(), state=run_pb2.RUN_STATE_SUCCEEDED)


def kinds(requests: list[pb.ConnectRequest]) -> list[str | None]:
    return [request.WhichOneof("message") for request in requests]


def lines_of(requests: list[pb.ConnectRequest]) -> dict[AttemptRef, list[str]]:
    found: dict[AttemptRef, list[str]] = {}
    for request in requests:
        for chunk in request.logs.chunks:
            found.setdefault(AttemptRef.from_proto(chunk.attempt), []).extend(
                line.text for line in chunk.lines
            )
    return found


def test_logs_then_progress_then_results_in_one_take() -> None:
    outbox = Outbox(flush_lines=3)
    outbox.log(A, OUT, "a1")
    outbox.log(B, OUT, "b1")
    outbox.progress(A, 0.1, "early")
    outbox.progress(A, 0.2, "later")  # coalesced
    assert not outbox.due.is_set()
    outbox.log(A, OUT, "a2")
    assert outbox.due.is_set()  # flush_lines reached
    outbox.result(A, result(A))
    requests = outbox.take()
    assert kinds(requests) == ["logs", "progress", "results"]
    assert lines_of(requests) == {A: ["a1", "a2"], B: ["b1"]}
    [line] = [line for line in requests[0].logs.chunks[1].lines]
    assert (line.attempt, line.stream) == (2, OUT)
    assert [(u.progress, u.message) for u in requests[1].progress.updates] == [(0.2, "later")]
    assert outbox.take() == []  # sent results wait for their ack, not for another take


def test_batches_hold_at_most_flush_lines_and_long_lines_are_split() -> None:
    outbox = Outbox(flush_lines=2)
    for index in range(5):
        outbox.log(A, OUT, str(index))
    outbox.log(B, OUT, "x" * (MAX_LOG_LINE_CHARS + 1))
    requests = outbox.take()
    assert [sum(len(c.lines) for c in r.logs.chunks) for r in requests] == [2, 2, 2, 1]
    assert [len(text) for text in lines_of(requests)[B]] == [MAX_LOG_LINE_CHARS, 1]


def test_output_that_cannot_wait_past_twice_the_buffer_is_counted_and_said_so() -> None:
    outbox = Outbox(max_log_bytes=250)  # a line of this size costs ~210 in memory: two fit in twice that
    for index in range(10):
        outbox.log(A, OUT, f"line {index}")
    assert outbox.logs.full()
    texts = lines_of(outbox.take())[A]
    assert texts[:3] == ["line 0", "line 1", "line 2"]
    assert texts[3].startswith("jobmesh: 7 lines (0.0 MiB) were not kept: the executor's log buffer")
    assert "unreachable or slower" in texts[3]
    assert not outbox.logs.full()
    outbox.log(A, OUT, "room again")
    assert lines_of(outbox.take())[A] == ["room again"]


def test_an_attempt_past_its_budget_ends_with_one_marker_that_counts_what_was_not_kept() -> None:
    outbox = Outbox(attempt_log_lines=3, attempt_log_bytes=1000)
    for index in range(10):
        outbox.log(A, OUT, f"line {index}")
    outbox.log(B, OUT, "another attempt has a budget of its own")
    outbox.result(A, result(A))
    requests = outbox.take()
    assert kinds(requests) == ["logs", "results"]  # the marker goes before the result
    assert lines_of(requests)[A] == [
        "line 0",
        "line 1",
        "line 2",
        "jobmesh: this attempt's log budget (0.0 MiB or 3 lines) was spent: "
        "7 more lines (0.0 MiB) were not kept",
    ]
    assert lines_of(requests)[B] == ["another attempt has a budget of its own"]


def test_the_byte_budget_counts_utf8() -> None:
    outbox = Outbox(attempt_log_bytes=10)
    outbox.log(A, OUT, "ééééé")  # 10 bytes: kept
    outbox.log(A, OUT, "é")
    outbox.result(A, result(A))
    texts = lines_of(outbox.take())[A]
    assert texts[0] == "ééééé"
    assert "1 more lines (0.0 MiB) were not kept" in texts[1]


def test_a_full_buffer_has_room_again_once_half_of_it_is_sent() -> None:
    async def scenario() -> None:
        outbox = Outbox(max_log_bytes=1000)
        for index in range(5):
            outbox.log(A, OUT, f"line {index}")
        assert outbox.logs.full()
        room = asyncio.ensure_future(outbox.logs.room())
        await asyncio.sleep(0)
        assert not room.done()
        outbox.take()
        await asyncio.wait_for(room, 1)

    asyncio.run(scenario())


def test_results_are_resent_until_acknowledged() -> None:
    async def scenario() -> None:
        outbox = Outbox()
        outbox.result(A, result(A))
        outbox.result(B, result(B))
        assert kinds(outbox.take()) == ["results"]
        outbox.acknowledge([A.to_proto()])
        outbox.unsend_all()  # a reconnect
        [again] = outbox.take()
        assert [AttemptRef.from_proto(r.attempt) for r in again.results.results] == [B]
        assert not await outbox.wait_acknowledged(0.01)
        outbox.acknowledge([B.to_proto()])
        assert await outbox.wait_acknowledged(0.01)

    asyncio.run(scenario())


def test_results_that_end_while_a_batch_awaits_its_ack_go_together_after_it() -> None:
    async def scenario() -> None:
        outbox = Outbox()
        outbox.result(A, result(A))
        assert kinds(outbox.take()) == ["results"]
        later = [AttemptRef("c", str(n), 1) for n in range(3)]
        for key in later:
            outbox.result(key, result(key))
        assert outbox.take() == []  # the first batch is still being written
        outbox.acknowledge([A.to_proto()])
        assert outbox.due.is_set()  # no need to wait for the next flush
        [batch] = outbox.take()
        assert [AttemptRef.from_proto(r.attempt) for r in batch.results.results] == later

    asyncio.run(scenario())


def test_put_back_restores_order_and_forget_drops_everything_of_an_attempt() -> None:
    outbox = Outbox()
    outbox.log(A, OUT, "1")
    outbox.log(B, OUT, "b")
    outbox.result(A, result(A))
    taken = outbox.take()
    outbox.log(A, OUT, "2")
    outbox.put_back(taken)
    assert lines_of(outbox.take()) == {A: ["1", "2"], B: ["b"]}
    outbox.put_back(taken)
    outbox.forget(A)
    requests = outbox.take()
    assert lines_of(requests) == {B: ["b"]}
    assert "results" not in kinds(requests)
    assert outbox.unacknowledged == 0


def test_the_result_buffer_is_bounded() -> None:
    outbox = Outbox(max_results=2)
    keys = [AttemptRef("j", f"{index}", 1) for index in range(3)]
    for key in keys:
        outbox.result(key, result(key))
    [request] = outbox.take()
    assert [AttemptRef.from_proto(r.attempt) for r in request.results.results] == keys[1:]
