"""The `command` target: a subprocess under a supervisor of its own, its output streamed line by line.

The supervisor (`supervise.py`) holds the command's whole process tree, escapees from its process group
included, and kills all of it when the command exits, when the attempt is stopped, and when this executor dies
however it dies: no process of an attempt outlives it, so a retried attempt never runs beside the one before
(docs/design.md, "At least once").
"""

from __future__ import annotations

import asyncio
import contextlib
import dataclasses
import os
import signal
import sys
import time
from collections.abc import Mapping
from pathlib import Path

from jobmesh.core.attempts import AttemptRef
from jobmesh.core.limits import MAX_LOG_LINE_CHARS
from jobmesh.core.retries import SECRET_NOT_FOUND, TARGET_NOT_ALLOWED
from jobmesh.core.run_identity import identity_environment, trace_environment
from jobmesh.executor.outcomes import SUCCEEDED, AttemptIO, Stop, TargetOutcome, failed
from jobmesh.executor.policy import ExecutionPolicy, TargetRefused
from jobmesh.executor.redaction import OutputRedactor, Redactor
from jobmesh.executor.sandbox import Sandbox
from jobmesh.executor.secrets import (
    DEFAULT_SCOPE,
    SecretMissing,
    SecretScope,
    SecretSource,
    SecretSourceError,
    resolve_env,
)
from jobmesh.v1 import job_pb2, run_pb2

SUPERVISOR = str(Path(__file__).resolve().with_name("supervise.py"))
READERS_GRACE = 1.0  # after the tree is gone, how long the output pipes may take to drain


async def run_command(
    command: job_pb2.Target.Command,
    io: AttemptIO,
    stop: Stop,
    policy: ExecutionPolicy,
    secrets: SecretSource,
    *,
    identity: AttemptRef,
    sandbox: Sandbox | None = None,
    scope: SecretScope = DEFAULT_SCOPE,
    trace_context: Mapping[str, str] | None = None,
) -> TargetOutcome:
    """Runs the command if the policy allows its program, with the minimal environment, the job's `env`
    (the secrets of its `scope` resolved; their values are redacted from its output and its error text) and,
    over both, the run identity of `identity` and the W3C `trace_context` of its attempt (`TRACEPARENT`; none
    when tracing is off) (core/run_identity).
    `sandbox`: how it is isolated from this executor (None: not at all, as this process's user)."""
    if not command.argv:
        return failed("SpawnError", "the command has no argv")
    try:
        resolved = resolve_env(command.env, secrets, scope)
    except SecretMissing as exc:
        return failed(SECRET_NOT_FOUND, str(exc))
    except SecretSourceError as exc:
        return failed("SecretSourceError", str(exc))
    own = sandbox.environment() if sandbox is not None else {}
    env = {**policy.environment(os.environ), **own, **resolved.env, **identity_environment(identity)}
    if trace_context:
        env.update(trace_environment(trace_context))
    try:
        policy.check_env(command.env)
        program = policy.check_command(command.argv[0], command.working_dir, env)
    except TargetRefused as exc:
        return failed(TARGET_NOT_ALLOWED, str(exc))
    if program is None:
        return failed("SpawnError", f"cannot start {command.argv[0]!r}: not found on the command's PATH")
    redactor = Redactor(resolved.secrets)
    outcome = await _run([program, *command.argv[1:]], command, env, redactor, io, stop, sandbox)
    return dataclasses.replace(outcome, error_message=redactor.text(outcome.error_message))


async def _run(  # noqa: PLR0917 - the command's parts, resolved
    argv: list[str],
    command: job_pb2.Target.Command,
    env: dict[str, str],
    redactor: Redactor,
    io: AttemptIO,
    stop: Stop,
    sandbox: Sandbox | None,
) -> TargetOutcome:
    where = f" in {command.working_dir!r}" if command.working_dir else ""
    options: list[str] = []
    if sandbox is not None:
        options = sandbox.supervisor_options()
        argv = sandbox.wrap(argv, command.working_dir)
    # Our own pipes rather than asyncio's: ours can be closed at will. The control pipe tells the supervisor
    # what to do, and its end of file that this executor is gone; the status pipe brings back how it ended.
    stdout, stderr, control, status = os.pipe(), os.pipe(), os.pipe(), os.pipe()
    try:
        process = await asyncio.create_subprocess_exec(
            sys.executable,
            "-I",
            "-S",
            SUPERVISOR,
            str(control[0]),
            str(status[1]),
            *options,
            "--",
            *argv,
            stdin=asyncio.subprocess.DEVNULL,
            stdout=stdout[1],
            stderr=stderr[1],
            env=env,
            cwd=command.working_dir or None,
            start_new_session=True,  # its own session: a signal to the executor's group does not reach it
            pass_fds=(control[0], status[1]),
        )
    except (OSError, ValueError) as exc:
        for fd in (*stdout, *stderr, *control, *status):
            os.close(fd)
        detail = exc.strerror if isinstance(exc, OSError) and exc.strerror else str(exc)
        return failed("SpawnError", f"cannot start {command.argv[0]!r}{where}: {detail}")
    for fd in (stdout[1], stderr[1], control[0], status[1]):
        os.close(fd)
    tree = _Tree(control[1])
    outputs = [
        await _LineReader.open(stdout[0], run_pb2.LOG_STREAM_STDOUT, io, redactor.output()),
        await _LineReader.open(stderr[0], run_pb2.LOG_STREAM_STDERR, io, redactor.output()),
    ]
    ended = asyncio.create_task(_ending(status[0]))
    stopper = asyncio.create_task(stop.wait())
    try:
        await asyncio.wait({ended, stopper}, return_when=asyncio.FIRST_COMPLETED)
        if not ended.done():
            await _terminate(tree, stop, ended, io)
        line = await ended
    finally:
        stopper.cancel()
        if not ended.done():  # we are being cancelled ourselves: never leave the tree behind
            tree.send("KILL")
        tree.close()
        with contextlib.suppress(asyncio.CancelledError):
            await asyncio.shield(process.wait())
        try:  # the rest of the output: however long the server takes it, but not a grace past that
            await _drained(outputs)
        finally:
            for output in outputs:
                output.close()
    return _outcome_of(line, command.argv[0], where, process.returncode)


async def _drained(outputs: list[_LineReader]) -> None:
    """Waits for the pipes to end. A reader waiting for room in the log buffer is waited for (the server is
    taking the lines); otherwise READERS_GRACE at the most."""
    pending = {output.done for output in outputs}
    while pending:
        _, pending = await asyncio.wait(pending, timeout=READERS_GRACE)
        if pending and not any(output.paused for output in outputs):
            return


class _Tree:
    """The executor's end of the control pipe: `TERM` and `KILL` reach the whole tree; closing it, too."""

    def __init__(self, fd: int) -> None:
        self._fd: int | None = fd

    def send(self, command: str) -> None:
        if self._fd is not None:
            with contextlib.suppress(OSError):  # the supervisor has exited: the tree is gone already
                os.write(self._fd, f"{command}\n".encode())

    def close(self) -> None:
        if self._fd is not None:
            os.close(self._fd)
            self._fd = None


async def _ending(fd: int) -> str:
    """The supervisor's last word (`exit N`, `signal N`, `spawn-error MESSAGE`), or "" if it had none."""
    reader = asyncio.StreamReader()
    pipe = os.fdopen(fd, "rb", buffering=0)
    transport, _ = await asyncio.get_running_loop().connect_read_pipe(
        lambda: asyncio.StreamReaderProtocol(reader), pipe
    )
    try:
        return (await reader.read()).decode("utf-8", "replace").strip()
    finally:
        transport.close()


class _LineReader(asyncio.Protocol):
    """Turns one pipe's bytes into log lines. Splits lines longer than MAX_LOG_LINE_CHARS (a log line is a
    message field, not a file) and decodes leniently. While the log buffer is full it reads no further: the
    command's writes block, and its output is slowed rather than lost (executor/log_buffer)."""

    def __init__(self, stream: run_pb2.LogStream.ValueType, io: AttemptIO, redact: OutputRedactor) -> None:
        self._stream = stream
        self._io = io
        self._redact = redact
        self._pending = b""
        self._transport: asyncio.ReadTransport | None = None
        self._resuming: asyncio.Task[None] | None = None
        self.done: asyncio.Future[None] = asyncio.get_running_loop().create_future()

    @property
    def paused(self) -> bool:
        return self._resuming is not None

    @classmethod
    async def open(
        cls, fd: int, stream: run_pb2.LogStream.ValueType, io: AttemptIO, redact: OutputRedactor
    ) -> _LineReader:
        reader = cls(stream, io, redact)
        pipe = os.fdopen(fd, "rb", buffering=0)
        try:
            await asyncio.get_running_loop().connect_read_pipe(lambda: reader, pipe)
        except BaseException:
            pipe.close()
            raise
        return reader

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        assert isinstance(transport, asyncio.ReadTransport)
        self._transport = transport

    def data_received(self, data: bytes) -> None:
        if self._io.spent():  # past the budget: counted, not split (a flood is read at the pipe's speed)
            self._count_spent(data)
            return
        data = self._redact.feed(data)  # before the split: a value across a line break is caught too
        *lines, self._pending = (self._pending + data).split(b"\n")
        for line in lines:
            self._emit(line)
        while len(self._pending) > MAX_LOG_LINE_CHARS:
            self._emit(self._pending[:MAX_LOG_LINE_CHARS])
            self._pending = self._pending[MAX_LOG_LINE_CHARS:]
        if self._io.full() and self._resuming is None and self._transport is not None:
            self._transport.pause_reading()
            self._resuming = asyncio.ensure_future(self._resume_when_room())

    def _count_spent(self, data: bytes) -> None:
        """Lines past the budget, counted as `data_received` would split them (at newlines, and into pieces of
        MAX_LOG_LINE_CHARS), without making them."""
        cut = data.rfind(b"\n")
        if cut >= 0:
            lines = data.count(b"\n")
            self._io.count_spent(lines, len(self._pending) + cut + 1 - lines)
            self._pending = data[cut + 1 :]
        else:
            self._pending += data
        if len(self._pending) > MAX_LOG_LINE_CHARS:
            pieces = len(self._pending) // MAX_LOG_LINE_CHARS
            self._io.count_spent(pieces, pieces * MAX_LOG_LINE_CHARS)
            self._pending = self._pending[pieces * MAX_LOG_LINE_CHARS :]

    async def _resume_when_room(self) -> None:
        await self._io.room()
        self._resuming = None
        if self._transport is not None and not self._transport.is_closing():
            self._transport.resume_reading()

    def connection_lost(self, exc: Exception | None) -> None:
        self._pending += self._redact.flush()
        if self._pending:
            self._emit(self._pending)
            self._pending = b""
        if not self.done.done():
            self.done.set_result(None)

    def close(self) -> None:
        if self._resuming is not None:
            self._resuming.cancel()
        if self._transport is not None:
            self._transport.close()

    def _emit(self, line: bytes) -> None:
        line = line.removesuffix(b"\r")
        for start in range(0, max(len(line), 1), MAX_LOG_LINE_CHARS):
            self._io.log(
                self._stream, line[start : start + MAX_LOG_LINE_CHARS].decode("utf-8", errors="replace")
            )


def _outcome_of(line: str, program: str, where: str, supervisor_code: int | None) -> TargetOutcome:
    kind, _, value = line.partition(" ")
    if kind == "exit" and value.lstrip("-").isdigit():
        code = int(value)
        if code == 0:
            return TargetOutcome(SUCCEEDED.state, exit_code=0)
        return failed("ExitCode", f"exited with code {code}", exit_code=code)
    if kind == "signal" and value.isdigit():
        return failed("Signal", f"killed by signal {_signal_name(int(value))}")
    if kind == "spawn-error":
        return failed("SpawnError", f"cannot start {program!r}{where}: {value}")
    return failed("SupervisorError", f"the command's supervisor ended without a status ({supervisor_code})")


async def _terminate(tree: _Tree, stop: Stop, ended: asyncio.Task[str], io: AttemptIO) -> None:
    """SIGTERM to the tree, SIGKILL when `stop.kill_at` passes (a fence may bring it forward meanwhile)."""
    polite = stop.kill_at > time.monotonic()
    reason = stop.reason.value if stop.reason else "stopped"
    sent = "SIGTERM" if polite else "SIGKILL"
    io.log(run_pb2.LOG_STREAM_SYSTEM, f"jobmesh: {reason}: sending {sent} to the process tree")
    tree.send("TERM" if polite else "KILL")
    while not ended.done():
        stop.changed.clear()  # before reading kill_at, so that a change in between is not missed
        remaining = stop.kill_at - time.monotonic()
        if remaining <= 0:
            if polite:
                io.log(
                    run_pb2.LOG_STREAM_SYSTEM, "jobmesh: still running: sending SIGKILL to the process tree"
                )
            tree.send("KILL")
            return
        changed = asyncio.create_task(stop.changed.wait())
        try:
            await asyncio.wait({ended, changed}, timeout=remaining, return_when=asyncio.FIRST_COMPLETED)
        finally:
            changed.cancel()


def _signal_name(signum: int) -> str:
    try:
        return signal.Signals(signum).name
    except ValueError:
        return str(signum)
