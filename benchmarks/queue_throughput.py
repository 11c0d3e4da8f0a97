"""Queue throughput: publish, then poll + commit, N runs through a real Kafka (JOBMESH_KAFKA_BOOTSTRAP).

    JOBMESH_KAFKA_BOOTSTRAP=127.0.0.1:29092 .venv/bin/python -m benchmarks.queue_throughput [--runs 50000]

Publishes in batches as the watcher does (one publish() per batch, each flushed and acknowledged), then
consumes with one consumer polling batches and committing each, as an executor does. Pass --url memory://
to measure the in-process adapter instead. The rates go to a results file (`benchmarks/results_file.py`).
"""

from __future__ import annotations

import argparse
import os
import sys
import time
import uuid
from collections.abc import Sequence
from datetime import UTC, datetime, timedelta

from benchmarks import results_file
from jobmesh.adapters.queue.factory import open_queue
from jobmesh.control.v1 import dispatch_pb2
from jobmesh.core.ports.queue import RunQueue
from jobmesh.v1 import job_pb2


def build_runs(queue: str, count: int) -> list[dispatch_pb2.DispatchedRun]:
    due = datetime.now(UTC) + timedelta(seconds=1)
    runs = []
    for i in range(count):
        run = dispatch_pb2.DispatchedRun(queue=queue, priority=job_pb2.PRIORITY_NORMAL)
        run.attempt.run = f"jobs/job-{i % 1000:04d}/runs/{uuid.uuid4().hex}"
        run.attempt.attempt = 1
        run.target.command.argv.extend(["/bin/true", str(i)])
        run.due_time.FromDatetime(due)
        run.execution_timeout.FromTimedelta(timedelta(minutes=5))
        run.heartbeat_timeout.FromTimedelta(timedelta(seconds=15))
        run.dispatch_time.FromDatetime(due)
        runs.append(run)
    return runs


def publish(queue: RunQueue, runs: list[dispatch_pb2.DispatchedRun], batch: int) -> float:
    started = time.perf_counter()
    for start in range(0, len(runs), batch):
        queue.publish(runs[start : start + batch], timeout=30)
    return time.perf_counter() - started


def consume(queue: RunQueue, name: str, count: int, batch: int) -> tuple[float, float, int]:
    """Seconds to the first delivery (group join), then seconds and runs from there to the last commit."""
    consumer = queue.consumer(f"{name}-bench", [name])
    try:
        started = time.perf_counter()
        first = consumer.poll(batch, 60)
        joined = time.perf_counter()
        consumer.commit(first)
        received = len(first)
        while received < count:
            deliveries = consumer.poll(batch, 10)
            if not deliveries:
                raise SystemExit(f"stalled after {received} of {count} runs")
            consumer.commit(deliveries)
            received += len(deliveries)
        return joined - started, time.perf_counter() - joined, received - len(first)
    finally:
        consumer.close()


def main(argv: Sequence[str] | None = None) -> None:
    recording = results_file.start("benchmarks.queue_throughput", argv)
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=50_000)
    parser.add_argument("--publish-batch", type=int, default=1000)
    parser.add_argument("--poll-batch", type=int, default=500)
    parser.add_argument("--url", default=os.environ.get("JOBMESH_KAFKA_BOOTSTRAP", ""))
    results_file.add_option(parser)
    args = parser.parse_args(argv)
    if not args.url:
        sys.exit("set JOBMESH_KAFKA_BOOTSTRAP (or pass --url)")

    name = f"bench{uuid.uuid4().hex[:8]}"
    runs = build_runs(name, args.runs)
    queue = open_queue(args.url)
    try:
        queue.publish(runs[:1])  # creates the topics and connects: not part of the measurement
        published = publish(queue, runs[1:], args.publish_batch)
        join, consumed, timed = consume(queue, name, args.runs, args.poll_batch)
    finally:
        queue.close()
    size = len(runs[0].SerializeToString())
    print(f"{args.runs} runs of ~{size} bytes via {args.url}")
    print(f"publish:       {(args.runs - 1) / published:10,.0f} runs/s  (batches of {args.publish_batch})")
    print(f"poll + commit: {timed / consumed:10,.0f} runs/s  (batches of {args.poll_batch};", end="")
    print(f" group join {join:.1f} s not counted)")
    result = {
        "runs": args.runs,
        "run_bytes": size,
        "url": args.url,
        "publish_runs_per_s": (args.runs - 1) / published,
        "poll_commit_runs_per_s": timed / consumed,
        "group_join_s": join,
    }
    recording.save(result, args.json)


if __name__ == "__main__":
    main()
