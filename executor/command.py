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

from jobmesh.executor.outcomes import SUCCEEDED, AttemptIO, Outcome, Stop, failed
from jobmesh.v1 import job_pb2, run_pb2

READ_CHUNK = 64 * 1024
MAX_LINE = 16 * 1024  # longer lines are split: a log line is a message field, not a file
READERS_GRACE = 1.0  # after the group is gone, how long a pipe held by an escaped process may stay open


async def run_command(command: job_pb2.Target.Command, io: AttemptIO, stop: Stop) -> Outcome:
    if not command.argv:
        return failed("SpawnError", "the command has no argv")
    try:
        process = await asyncio.create_subprocess_exec(
            *command.argv,
            stdin=asyncio.subprocess.DEVNULL,
            stdout=asyncio.subprocess.PIPE,
            stderr=asyncio.subprocess.PIPE,
            env={**os.environ, **command.env},
            cwd=command.working_dir or None,
            start_new_session=True,  # its own session, so its own process group whose id is its pid
        )
    except (OSError, ValueError) as exc:
        detail = exc.strerror if isinstance(exc, OSError) and exc.strerror else str(exc)
        where = f" in {command.working_dir!r}" if command.working_dir else ""
        return failed("SpawnError", f"cannot start {command.argv[0]!r}{where}: {detail}")
    assert process.stdout is not None and process.stderr is not None
    group = process.pid
    readers = [
        asyncio.create_task(_pump(process.stdout, run_pb2.LOG_STREAM_STDOUT, io)),
        asyncio.create_task(_pump(process.stderr, run_pb2.LOG_STREAM_STDERR, io)),
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
        try:
            await asyncio.wait(readers, timeout=READERS_GRACE)
        finally:
            for reader in readers:  # a process that left the group may still hold a pipe: stop listening
                reader.cancel()
        await asyncio.gather(*readers, return_exceptions=True)
    return _outcome_of(returncode)


def _outcome_of(returncode: int) -> Outcome:
    if returncode == 0:
        return Outcome(SUCCEEDED.state, exit_code=0)
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
                io.log(run_pb2.LOG_STREAM_SYSTEM, "jobmesh: still running: sending SIGKILL to the process group")
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


async def _pump(reader: asyncio.StreamReader, stream: run_pb2.LogStream.ValueType, io: AttemptIO) -> None:
    """Reads by chunks rather than `readline`, which fails on lines past its buffer limit."""
    pending = b""
    while chunk := await reader.read(READ_CHUNK):
        pending += chunk
        *lines, pending = pending.split(b"\n")
        for line in lines:
            _emit(io, stream, line)
        while len(pending) > MAX_LINE:
            _emit(io, stream, pending[:MAX_LINE])
            pending = pending[MAX_LINE:]
    if pending:
        _emit(io, stream, pending)


def _emit(io: AttemptIO, stream: run_pb2.LogStream.ValueType, line: bytes) -> None:
    io.log(stream, line.removesuffix(b"\r").decode("utf-8", errors="replace"))
