"""The `command` target: a subprocess in its own process group, its output streamed line by line.

The whole group is signalled, never just the child: a shell's background children would otherwise outlive a
cancel or a timeout. For the same reason whatever is left in the group when the child exits is killed: the
attempt is over, and leftovers would hold the output pipes open (and the machine's resources) forever.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import signal
import time

from jobmesh.core.limits import MAX_LOG_LINE_CHARS
from jobmesh.executor.outcomes import SUCCEEDED, AttemptIO, Stop, TargetOutcome, failed
from jobmesh.v1 import job_pb2, run_pb2

READERS_GRACE = 1.0  # after the group is gone, how long a pipe held by an escaped process may stay open


async def run_command(command: job_pb2.Target.Command, io: AttemptIO, stop: Stop) -> TargetOutcome:
    if not command.argv:
        return failed("SpawnError", "the command has no argv")
    # Our own pipes rather than asyncio's: with those, Python 3.11's `Process.wait()` returns only once the
    # pipes close, which a background grandchild can put off forever; and ours can be closed at will.
    stdout, stderr = os.pipe(), os.pipe()
    try:
        process = await asyncio.create_subprocess_exec(
            *command.argv,
            stdin=asyncio.subprocess.DEVNULL,
            stdout=stdout[1],
            stderr=stderr[1],
            env={**os.environ, **command.env},
            cwd=command.working_dir or None,
            start_new_session=True,  # its own session, so its own process group whose id is its pid
        )
    except (OSError, ValueError) as exc:
        for fd in (*stdout, *stderr):
            os.close(fd)
        detail = exc.strerror if isinstance(exc, OSError) and exc.strerror else str(exc)
        where = f" in {command.working_dir!r}" if command.working_dir else ""
        return failed("SpawnError", f"cannot start {command.argv[0]!r}{where}: {detail}")
    os.close(stdout[1])
    os.close(stderr[1])
    group = process.pid
    outputs = [
        await _LineReader.open(stdout[0], run_pb2.LOG_STREAM_STDOUT, io),
        await _LineReader.open(stderr[0], run_pb2.LOG_STREAM_STDERR, io),
    ]
    waiter = asyncio.create_task(process.wait())
    stopper = asyncio.create_task(stop.wait())
    try:
        await asyncio.wait({waiter, stopper}, return_when=asyncio.FIRST_COMPLETED)
        if not waiter.done():
            await _terminate(group, stop, waiter, io)
        returncode = await waiter
    finally:
        stopper.cancel()
        if not waiter.done():  # we are being cancelled ourselves: never leave the group behind
            _signal_group(group, signal.SIGKILL)
        with contextlib.suppress(asyncio.CancelledError):
            await asyncio.shield(waiter)
        _signal_group(group, signal.SIGKILL)
        try:  # the rest of the output; a process that left the group may hold a pipe: not for long
            await asyncio.wait([output.done for output in outputs], timeout=READERS_GRACE)
        finally:
            for output in outputs:
                output.close()
    return _outcome_of(returncode)


class _LineReader(asyncio.Protocol):
    """Turns one pipe's bytes into log lines. Splits lines longer than MAX_LOG_LINE_CHARS (a log line is a
    message field, not a file) and decodes leniently."""

    def __init__(self, stream: run_pb2.LogStream.ValueType, io: AttemptIO) -> None:
        self._stream = stream
        self._io = io
        self._pending = b""
        self._transport: asyncio.BaseTransport | None = None
        self.done: asyncio.Future[None] = asyncio.get_running_loop().create_future()

    @classmethod
    async def open(cls, fd: int, stream: run_pb2.LogStream.ValueType, io: AttemptIO) -> _LineReader:
        reader = cls(stream, io)
        pipe = os.fdopen(fd, "rb", buffering=0)
        try:
            await asyncio.get_running_loop().connect_read_pipe(lambda: reader, pipe)
        except BaseException:
            pipe.close()
            raise
        return reader

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        self._transport = transport

    def data_received(self, data: bytes) -> None:
        *lines, self._pending = (self._pending + data).split(b"\n")
        for line in lines:
            self._emit(line)
        while len(self._pending) > MAX_LOG_LINE_CHARS:
            self._emit(self._pending[:MAX_LOG_LINE_CHARS])
            self._pending = self._pending[MAX_LOG_LINE_CHARS:]

    def connection_lost(self, exc: Exception | None) -> None:
        if self._pending:
            self._emit(self._pending)
            self._pending = b""
        if not self.done.done():
            self.done.set_result(None)

    def close(self) -> None:
        if self._transport is not None:
            self._transport.close()

    def _emit(self, line: bytes) -> None:
        line = line.removesuffix(b"\r")
        for start in range(0, max(len(line), 1), MAX_LOG_LINE_CHARS):
            self._io.log(
                self._stream, line[start : start + MAX_LOG_LINE_CHARS].decode("utf-8", errors="replace")
            )


def _outcome_of(returncode: int) -> TargetOutcome:
    if returncode == 0:
        return TargetOutcome(SUCCEEDED.state, exit_code=0)
    if returncode < 0:
        name = _signal_name(-returncode)
        return failed("Signal", f"killed by signal {name}")
    return failed("ExitCode", f"exited with code {returncode}", exit_code=returncode)


async def _terminate(group: int, stop: Stop, waiter: asyncio.Task[int], io: AttemptIO) -> None:
    """SIGTERM to the group, SIGKILL when `stop.kill_at` passes (a fence may bring it forward meanwhile)."""
    polite = stop.kill_at > time.monotonic()
    reason = stop.reason.value if stop.reason else "stopped"
    sent = "SIGTERM" if polite else "SIGKILL"
    io.log(run_pb2.LOG_STREAM_SYSTEM, f"jobmesh: {reason}: sending {sent} to the process group")
    _signal_group(group, signal.SIGTERM if polite else signal.SIGKILL)
    while not waiter.done():
        stop.changed.clear()  # before reading kill_at, so that a change in between is not missed
        remaining = stop.kill_at - time.monotonic()
        if remaining <= 0:
            if polite:
                io.log(
                    run_pb2.LOG_STREAM_SYSTEM, "jobmesh: still running: sending SIGKILL to the process group"
                )
            _signal_group(group, signal.SIGKILL)
            return
        changed = asyncio.create_task(stop.changed.wait())
        try:
            await asyncio.wait({waiter, changed}, timeout=remaining, return_when=asyncio.FIRST_COMPLETED)
        finally:
            changed.cancel()


def _signal_group(group: int, signum: signal.Signals) -> None:
    with contextlib.suppress(ProcessLookupError, PermissionError):
        os.killpg(group, signum)


def _signal_name(signum: int) -> str:
    try:
        return signal.Signals(signum).name
    except ValueError:
        return str(signum)
