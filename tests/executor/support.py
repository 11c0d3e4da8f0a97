"""Builders and probes shared by the executor's tests."""

from __future__ import annotations

import contextlib
import itertools
import os
import time
import uuid
from collections.abc import AsyncIterator, Mapping, Sequence
from dataclasses import dataclass, field
from datetime import timedelta

from jobmesh.adapters.queue.factory import open_queue
from jobmesh.adapters.signals.factory import open_signals
from jobmesh.control.v1 import dispatch_pb2, executor_control_pb2
from jobmesh.core.attempts import AttemptRef
from jobmesh.core.ports.queue import RunQueue
from jobmesh.core.ports.signals import SignalBus
from jobmesh.executor.config import ExecutorConfig
from jobmesh.executor.handlers import Handler
from jobmesh.executor.policy import ExecutionPolicy
from jobmesh.executor.runtime import Executor
from jobmesh.v1 import job_pb2
from tests.executor.fake_control import FakeControl

_numbers = itertools.count(1)


@dataclass
class RecordingIO:
    """An AttemptIO that keeps what it is given."""

    lines: list[tuple[int, str]] = field(default_factory=list)
    updates: list[tuple[float, str]] = field(default_factory=list)

    def log(self, stream: int, text: str) -> None:
        self.lines.append((stream, text))

    def progress(self, fraction: float, message: str) -> None:
        self.updates.append((fraction, message))

    def texts(self, stream: int) -> list[str]:
        return [text for line_stream, text in self.lines if line_stream == stream]

    def full(self) -> bool:
        return False

    def spent(self) -> bool:
        return False

    def count_spent(self, lines: int, size: int) -> None:
        raise AssertionError("a RecordingIO keeps every line")

    async def room(self) -> None:
        return None


def command(*argv: str, env: Mapping[str, str] | None = None, cwd: str = "") -> job_pb2.Target:
    return job_pb2.Target(command=job_pb2.Target.Command(argv=argv, env=env or {}, working_dir=cwd))


def handler(name: str, payload: bytes = b"") -> job_pb2.Target:
    return job_pb2.Target(handler=job_pb2.Target.Handler(name=name, payload=payload))


def dispatched(
    target: job_pb2.Target,
    *,
    due_ns: int | None = None,
    timeout: float | None = None,
    heartbeat_timeout: float | None = None,
    queue: str = "default",
) -> dispatch_pb2.DispatchedRun:
    number = next(_numbers)
    run = dispatch_pb2.DispatchedRun(
        attempt=executor_control_pb2.AttemptRef(run=f"jobs/j{number}/runs/r{number}", attempt=1),
        target=target,
        queue=queue,
    )
    run.due_time.FromNanoseconds(due_ns if due_ns is not None else time.time_ns())
    if timeout is not None:
        run.execution_timeout.FromNanoseconds(int(timeout * 1e9))
    if heartbeat_timeout is not None:
        run.heartbeat_timeout.FromNanoseconds(int(heartbeat_timeout * 1e9))
    return run


def key(run: dispatch_pb2.DispatchedRun) -> AttemptRef:
    return AttemptRef.from_proto(run.attempt)


def gone(pid: int) -> bool:
    """Dead: no such process, or a zombie (its parent may be a PID 1 that never reaps)."""
    try:
        with open(f"/proc/{pid}/stat", encoding="ascii") as stat:
            return stat.read().rsplit(")", 1)[1].split()[0] == "Z"
    except FileNotFoundError:
        return True


def alive(pid: int) -> bool:
    return not gone(pid)


def gone_soon(pid: int, timeout: float = 10.0) -> bool:
    """Gone now or within `timeout`: a SIGKILL is delivered asynchronously."""
    deadline = time.monotonic() + timeout
    while not gone(pid):
        if time.monotonic() > deadline:
            return False
        time.sleep(0.01)
    return True


@dataclass
class Rig:
    fake: FakeControl
    executor: Executor
    queue: RunQueue
    bus: SignalBus

    def publish(self, *runs: dispatch_pb2.DispatchedRun) -> None:
        self.queue.publish(runs)


@contextlib.asynccontextmanager
async def running_executor(
    fake: FakeControl,
    handlers: Mapping[str, Handler] | None = None,
    *,
    bus: SignalBus | None = None,
    queue: RunQueue | None = None,
    connected: bool = True,
    **settings: object,
) -> AsyncIterator[Rig]:
    """An Executor on fresh in-process queue and bus names (or on `bus`, or on `queue`), connected to `fake`
    (or, with `connected` False, as soon as it runs); drained and awaited after."""
    import asyncio

    name = f"executor-test-{uuid.uuid4().hex[:10]}"
    values: dict[str, object] = {
        "server": fake.address,
        "queue_url": f"memory://{name}",
        "signals_url": f"memory://{name}",
        "concurrency": 4,
        "cancel_grace": timedelta(seconds=1),
        "drain_grace": timedelta(seconds=5),
        "reconnect_max": timedelta(milliseconds=200),
        "report_timeout": timedelta(seconds=2),
        "executor_id": f"test-{os.getpid()}-{name}",
        "policy": ExecutionPolicy.unrestricted(),  # these tests run local commands and call loopback servers
        # ... and follow their processes by pid, which a PID namespace would renumber (tests/executor/
        # test_sandbox.py covers `bwrap`)
        "isolation": "user",
    }
    values.update(settings)
    config = ExecutorConfig(**values)  # type: ignore[arg-type]
    bus = bus or open_signals(config.signals_url)
    executor = Executor(config, handlers, queue=queue, signals=bus)  # None: its own, from the URL
    task = asyncio.create_task(executor.run())
    try:
        await fake.wait_until(lambda: executor.stream.connected or task.done() or not connected)
        yield Rig(fake, executor, queue or open_queue(config.queue_url), bus)
    finally:
        executor.drain(grace=timedelta(0))
        await asyncio.wait_for(task, 15)
        bus.close()


def pids_of(lines: Sequence[str]) -> list[int]:
    return [int(line) for line in lines if line.strip().isdigit()]
