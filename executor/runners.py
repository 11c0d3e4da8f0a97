"""Runs one attempt's target to its outcome: picks the runner, enforces the execution timeout, and turns a
stop into the state the server expects (CANCELLED, TIMED_OUT, or FAILED `Drained`)."""

from __future__ import annotations

import asyncio
from dataclasses import dataclass, field

from jobmesh.control.v1 import dispatch_pb2
from jobmesh.core.attempts import AttemptRef
from jobmesh.core.error_types import ErrorType
from jobmesh.core.names import DEFAULT_NAMESPACE, DEFAULT_QUEUE
from jobmesh.core.secret_refs import SecretQueues
from jobmesh.core.states import StopReason
from jobmesh.executor.clock import seconds_of
from jobmesh.executor.command import run_command
from jobmesh.executor.handlers import HandlerRegistry, run_handler
from jobmesh.executor.outcomes import AttemptIO, Stop, TargetOutcome, failed, stopped
from jobmesh.executor.policy import ExecutionPolicy
from jobmesh.executor.sandbox import Sandbox
from jobmesh.executor.secrets import DEFAULT_SECRET_SOURCE, SecretScope, SecretSource, open_secret_source
from jobmesh.executor.webhook import run_http


@dataclass(frozen=True, slots=True)
class RunnerSettings:
    handlers: HandlerRegistry
    cancel_grace: float = 5.0  # a timeout stops the target as politely as a cancel does
    http_timeout: float = 30.0  # for webhooks of jobs without an execution timeout
    policy: ExecutionPolicy = field(default_factory=ExecutionPolicy)  # by default: no command, public hosts
    secrets: SecretSource = field(default_factory=lambda: open_secret_source(DEFAULT_SECRET_SOURCE, {}))
    sandbox: Sandbox | None = None  # None: commands run as this process, not isolated (see executor/sandbox)
    secret_queues: SecretQueues = field(default_factory=SecretQueues)  # secrets granted to some queues only


async def run_target(
    run: dispatch_pb2.DispatchedRun, io: AttemptIO, stop: Stop, settings: RunnerSettings
) -> TargetOutcome:
    timeout = seconds_of(run.execution_timeout) if run.HasField("execution_timeout") else None
    if timeout is not None and timeout <= 0:
        timeout = None  # a zero duration means no limit, as an unset one does
    loop = asyncio.get_running_loop()
    timer = None
    if timeout is not None:
        message = f"ran past its execution timeout of {timeout:g}s"
        timer = loop.call_later(timeout, stop.request, StopReason.TIMEOUT, settings.cancel_grace, message)
    try:
        outcome = await _by_kind(run, io, stop, settings, timeout)
    finally:
        if timer is not None:
            timer.cancel()
    return _after_stop(stop, outcome)


async def _by_kind(
    run: dispatch_pb2.DispatchedRun,
    io: AttemptIO,
    stop: Stop,
    settings: RunnerSettings,
    timeout: float | None,
) -> TargetOutcome:
    target, kind = run.target, run.target.WhichOneof("kind")
    namespace, queue = run.namespace or DEFAULT_NAMESPACE, run.queue or DEFAULT_QUEUE
    scope = SecretScope(namespace, queue, settings.secret_queues)
    policy, secrets = settings.policy, settings.secrets
    identity = AttemptRef.from_proto(run.attempt)  # the queue's codec refuses a malformed one
    if kind == "command":
        return await run_command(
            target.command,
            io,
            stop,
            policy,
            secrets,
            identity=identity,
            sandbox=settings.sandbox,
            scope=scope,
            trace_context=run.trace_context,
        )
    if kind == "http":
        # The thread's own timeout is a backstop a little after the execution timeout, which decides.
        http_timeout = timeout + 1.0 if timeout is not None else settings.http_timeout
        return await run_http(
            target.http, io, stop, http_timeout, policy, identity=identity, secrets=secrets, scope=scope
        )
    if kind == "handler":
        handler, handlers = target.handler, settings.handlers
        return await run_handler(
            handler, handlers, run=identity.run_name, attempt=identity.attempt, io=io, stop=stop
        )
    return failed(ErrorType.INVALID_TARGET, "the run has no target")


def _after_stop(stop: Stop, outcome: TargetOutcome) -> TargetOutcome:
    """A requested stop decides the state; the exit code is kept when the target exited."""
    if stop.reason is None:
        return outcome
    message = stop.message or ("cancelled" if stop.reason is StopReason.CANCEL else "")
    # A fence: the outcome is never reported.
    return stopped(stop.reason, message, outcome.exit_code) or outcome
