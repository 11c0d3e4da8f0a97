"""What only the in-process adapter needs: competing consumers, many threads, and not growing forever."""

from __future__ import annotations

import threading

from jobmesh.adapters.queue.codec import topic_of
from jobmesh.adapters.queue.memory import MemoryRunQueue
from tests.adapters.queue.support import drain, make_run, names


def test_consumers_of_one_group_share_the_runs() -> None:
    queue = MemoryRunQueue()
    left, right = queue.consumer("g", ["q"]), queue.consumer("g", ["q"])
    queue.publish([make_run("q", "a", str(i)) for i in range(10)])

    got = names(left.poll(4, 0)) + names(right.poll(100, 0))

    assert sorted(got) == sorted(f"jobs/a/runs/{i}" for i in range(10))
    left.close()
    right.close()


def test_runs_published_from_many_threads_arrive_once_each() -> None:
    queue = MemoryRunQueue()
    consumer = queue.consumer("g", ["q"])
    publishers = [
        threading.Thread(target=queue.publish, args=([make_run("q", f"t{t}", str(i)) for i in range(250)],))
        for t in range(4)
    ]
    for publisher in publishers:
        publisher.start()
    got = drain(consumer, 1000, timeout=10)
    for publisher in publishers:
        publisher.join()

    assert len(set(names(got))) == len(got) == 1000
    assert consumer.poll(10, 0) == []
    consumer.close()


def test_runs_every_group_committed_are_dropped() -> None:
    queue = MemoryRunQueue()
    executors, audit = queue.consumer("executors", ["q"]), queue.consumer("audit", ["q"])
    queue.publish([make_run("q", "a", str(i)) for i in range(10)])
    topic = topic_of("q", "normal")

    executors.commit(executors.poll(10, 0))
    assert len(queue._broker.records(topic)) == 10  # the audit group has not had them yet
    audit.commit(audit.poll(10, 0))

    assert queue._broker.records(topic) == []
    executors.close()
    audit.close()
