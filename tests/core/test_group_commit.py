"""Group commit: concurrent callers' items written in shared batches, each caller answered with its own."""

from __future__ import annotations

import threading
from collections.abc import Sequence

import pytest

from jobmesh.core.errors import StoreFailure, StoreUnavailable
from jobmesh.core.group_commit import GroupCommit
from tests.support import eventually


class Recorder:
    """A store write that doubles its items, records each batch and the thread that wrote it, and can be
    held inside a write until released."""

    def __init__(self) -> None:
        self.batches: list[list[int]] = []
        self.writers: list[str] = []
        self.held = threading.Event()
        self.held.set()
        self.inside = threading.Event()
        self.refuse: set[int] = set()
        self.down = False

    def write(self, items: Sequence[int]) -> list[int]:
        self.inside.set()
        self.held.wait(30)
        self.batches.append(list(items))
        self.writers.append(threading.current_thread().name)
        if self.down:
            raise StoreUnavailable("the database is down")
        if self.refuse & set(items):
            raise StoreFailure("the database refused a row")
        return [item * 2 for item in items]


def _submit_in_threads(
    group: GroupCommit[int, int], calls: dict[str, list[int]]
) -> tuple[dict[str, list[int] | BaseException], list[threading.Thread]]:
    answers: dict[str, list[int] | BaseException] = {}

    def call(name: str, items: list[int]) -> None:
        try:
            answers[name] = group.submit(items)
        except BaseException as error:  # recorded for the test to look at
            answers[name] = error

    threads = [threading.Thread(target=call, args=(name, items), name=name) for name, items in calls.items()]
    for thread in threads:
        thread.start()
    return answers, threads


def _queued(group: GroupCommit[int, int], calls: int) -> None:
    eventually(lambda: len(group._waiting) == calls, 10, f"{calls} calls queued")


def test_a_lone_call_is_written_at_once() -> None:
    store = Recorder()
    group = GroupCommit(store.write, max_items=100)
    assert group.submit([1, 2]) == [2, 4]
    assert group.submit([]) == []
    assert store.batches == [[1, 2]]


def test_calls_that_queue_behind_a_write_share_the_next_one_and_each_gets_its_own_answers() -> None:
    store = Recorder()
    group = GroupCommit(store.write, max_items=100)
    store.held.clear()
    first, first_threads = _submit_in_threads(group, {"first": [1]})
    assert store.inside.wait(10)
    rest, threads = _submit_in_threads(group, {f"caller-{n}": [10 * n, 10 * n + 1] for n in range(1, 9)})
    _queued(group, 8)
    store.held.set()
    for thread in first_threads + threads:
        thread.join(10)
    assert first == {"first": [2]}
    assert rest == {f"caller-{n}": [20 * n, 20 * n + 2] for n in range(1, 9)}
    assert len(store.batches) == 2
    assert sorted(store.batches[1]) == sorted(item for n in range(1, 9) for item in (10 * n, 10 * n + 1))


def test_the_leader_hands_the_next_batch_to_a_waiting_caller() -> None:
    store = Recorder()
    group = GroupCommit(store.write, max_items=100)
    store.held.clear()
    _, first_threads = _submit_in_threads(group, {"leader": [1]})
    assert store.inside.wait(10)
    _, threads = _submit_in_threads(group, {"follower": [2]})
    _queued(group, 1)
    store.held.set()
    for thread in first_threads + threads:
        thread.join(10)
    assert store.writers == ["leader", "follower"]


def test_a_batch_holds_at_most_max_items_but_always_one_call() -> None:
    store = Recorder()
    group = GroupCommit(store.write, max_items=4)
    store.held.clear()
    _, first_threads = _submit_in_threads(group, {"first": [0]})
    assert store.inside.wait(10)
    answers, threads = _submit_in_threads(group, {"big": [1, 2, 3, 4, 5, 6]})
    _queued(group, 1)
    more, more_threads = _submit_in_threads(group, {"a": [7, 8], "b": [9, 10]})
    _queued(group, 3)
    store.held.set()
    for thread in first_threads + threads + more_threads:
        thread.join(10)
    assert answers == {"big": [2, 4, 6, 8, 10, 12]}
    assert more == {"a": [14, 16], "b": [18, 20]}
    assert [len(batch) for batch in store.batches] == [1, 6, 4]


def test_one_callers_refused_item_fails_that_caller_alone() -> None:
    store = Recorder()
    store.refuse = {13}
    group = GroupCommit(store.write, max_items=100)
    store.held.clear()
    _, first_threads = _submit_in_threads(group, {"first": [1]})
    assert store.inside.wait(10)
    answers, threads = _submit_in_threads(group, {"good": [2], "bad": [13], "also-good": [3]})
    _queued(group, 3)
    store.held.set()
    for thread in first_threads + threads:
        thread.join(10)
    assert answers["good"] == [4]
    assert answers["also-good"] == [6]
    assert isinstance(answers["bad"], StoreFailure)


def test_an_unreachable_store_fails_every_caller_of_the_batch_and_the_next_call_is_written() -> None:
    store = Recorder()
    group = GroupCommit(store.write, max_items=100)
    store.down = True
    store.held.clear()
    _, first_threads = _submit_in_threads(group, {"first": [1]})
    assert store.inside.wait(10)
    answers, threads = _submit_in_threads(group, {"a": [2], "b": [3]})
    _queued(group, 2)
    store.held.set()
    for thread in first_threads + threads:
        thread.join(10)
    assert all(isinstance(answer, StoreUnavailable) for answer in answers.values())
    assert len(store.batches) == 2  # not written again one by one: the store is down for all of them
    store.down = False
    assert group.submit([5]) == [10]


def test_many_callers_at_once_are_all_answered() -> None:
    store = Recorder()
    group = GroupCommit(store.write, max_items=50)
    answers, threads = _submit_in_threads(group, {f"caller-{n}": [n] for n in range(200)})
    for thread in threads:
        thread.join(30)
    assert answers == {f"caller-{n}": [2 * n] for n in range(200)}
    assert sorted(item for batch in store.batches for item in batch) == list(range(200))


@pytest.mark.parametrize("error", [KeyboardInterrupt(), RuntimeError("bug")])
def test_any_other_error_reaches_every_caller_of_the_batch(error: BaseException) -> None:
    def write(items: Sequence[int]) -> list[int]:
        raise error

    group: GroupCommit[int, int] = GroupCommit(write, max_items=10)
    with pytest.raises(type(error)):
        group.submit([1])
    assert not group._leading
