"""`jobmesh.control.v1.ExecutorControl`: one bidirectional stream per executor (its protocol is documented in
`protos/jobmesh/control/v1/executor_control.proto`).

Each message carries a batch and becomes one store call: claims, heartbeats, progress, logs and results of
many runs cross in few statements. Stream work runs on threads of its own, never queued behind the API's
creates, and several messages of a stream are handled at once: a claim does not wait for the result batch
before it (each write is fenced by attempt, so their order does not matter). Logs, progress and results keep
their order among themselves.

A stream is an executor's identity: its hello must name the executor that the call's credential binds
(`current_principal().executor`), one live stream holds a name at a time (`server/executors/sessions.py`), its
claims are granted only for the queues (and namespaces) of its grant, and its reports about attempts it does
not hold are refused and logged (`server/executors/held_attempts.py`).

Heartbeats are never starved: the stream is read on while its other messages wait for a slot, and a heartbeat
batch goes at once to threads that do nothing else. Slow writes of results under load therefore never leave an
executor without the answers that keep its attempts running (`executor/liveness.py`).
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import AsyncIterator, Callable, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from datetime import timedelta
from typing import Any, TypeVar

import grpc
from grpc_status import rpc_status

from jobmesh.control.v1 import executor_control_pb2 as pb
from jobmesh.control.v1 import executor_control_pb2_grpc
from jobmesh.core.attempts import AttemptRef
from jobmesh.core.errors import JobmeshError, PermissionDenied, StoreUnavailable
from jobmesh.core.outage_log import OutageLog
from jobmesh.core.timestamps import to_duration
from jobmesh.server.admission.log_limits import AttemptLogCaps
from jobmesh.server.executors.attempt_reports import AttemptReports
from jobmesh.server.executors.held_attempts import HeldAttempts
from jobmesh.server.executors.queue_reach import queue_kind, refuse_unreachable
from jobmesh.server.executors.session_renewals import SessionRenewals
from jobmesh.server.executors.sessions import (
    ExecutorNameInUse,
    SessionQueue,
    Sessions,
    cancel_message,
    quiet_limit_of,
)
from jobmesh.server.principals import ExecutorGrant, Principal, current_principal
from jobmesh.server.status import status_of
from jobmesh.server.stream_lag import StreamLag
from jobmesh.server.workers import close_pools

log = logging.getLogger(__name__)
T = TypeVar("T")

Context = grpc.aio.ServicerContext[pb.ConnectRequest, pb.ConnectResponse]
CLAIMS_IN_FLIGHT_PER_STREAM = 3  # as many as an executor sends at once (executor/runtime.py)
# Messages of a stream read but not yet handled; past it the stream is read no further until one is handled
# (an executor sends a bounded backlog, this bounds what a broken one can make the server hold).
WAITING_PER_STREAM = 64
HEARTBEATS_PER_STREAM = 8
# An attempt's log lines keep their order, and its result comes after them (a follower of its log stops at the
# result); claims and heartbeats are fenced by attempt and may overtake them.
ORDERED = frozenset({"logs", "progress", "results"})
STREAM_THREADS = 8
HEARTBEAT_THREADS = 2


class ExecutorControl(executor_control_pb2_grpc.ExecutorControlServicer):
    def __init__(
        self,
        reports: AttemptReports,
        sessions: Sessions,
        renewals: SessionRenewals,
        stream_lag: StreamLag,
        *,
        server_id: str,
        heartbeat_interval: timedelta,
        in_process_queue: str,
        log_caps: AttemptLogCaps,
    ) -> None:
        self._reports = reports
        self._log_caps = log_caps
        self._in_process_queue = (
            in_process_queue  # the queue's `in_process_id`: see server/executors/queue_reach.py
        )
        self._sessions = sessions
        self._renewals = renewals
        self._stream_lag = stream_lag
        self._server_id = server_id
        self._heartbeat_interval = heartbeat_interval
        self._ended_by_store = OutageLog(log, "executor streams (the database is needed to take one)")
        self._threads = ThreadPoolExecutor(STREAM_THREADS, thread_name_prefix="jobmesh-stream")
        self._heartbeat_threads = ThreadPoolExecutor(HEARTBEAT_THREADS, thread_name_prefix="jobmesh-beat")

    def close(self) -> None:
        """Also waits for a release that a stream ended by the server's stop left running."""
        close_pools(self._threads, self._heartbeat_threads)

    async def _in_thread(self, work: Callable[[], T], threads: ThreadPoolExecutor | None = None) -> T:
        return await asyncio.get_running_loop().run_in_executor(threads or self._threads, work)

    async def Connect(  # type: ignore[override]
        self, request_iterator: AsyncIterator[pb.ConnectRequest], context: Context
    ) -> None:
        first = await anext(aiter(request_iterator), None)
        if first is None or first.WhichOneof("message") != "hello" or not first.hello.executor_id:
            await context.abort(
                grpc.StatusCode.INVALID_ARGUMENT, "the first message must be a hello with an executor_id"
            )
            return
        hello = first.hello
        queue = SessionQueue(
            asyncio.get_running_loop(), resend_cancels_after=self._heartbeat_interval.total_seconds()
        )
        try:
            grant = _granted(current_principal(), hello)
            refuse_unreachable(hello, self._in_process_queue)
            quiet_limit = quiet_limit_of(self._heartbeat_interval).total_seconds()
            self._sessions.register(hello.executor_id, queue, quiet_limit=quiet_limit)
            if not await self._in_thread(lambda: self._renewals.take(hello.executor_id)):
                self._sessions.unregister(hello.executor_id, queue)
                raise ExecutorNameInUse(hello.executor_id)
            self._sessions.hold(queue)
        except JobmeshError as error:
            log.warning(
                "executor %s refused: %s",
                hello.executor_id,
                error,
                extra={"executor": hello.executor_id, "subject": current_principal().subject},
            )
            await context.abort_with_status(rpc_status.to_status(status_of(error)))
            return
        log.info(
            "executor %s connected (%s, queues %s)", hello.executor_id, hello.hostname, list(hello.queues)
        )
        stream = _Stream(hello.executor_id, grant, queue, self._reports.held_by(hello.executor_id))
        try:
            await context.write(self._welcome())
            running = hello.running
            answers = await self._in_thread(lambda: self._reports.connected(hello.executor_id, running))
            self._ended_by_store.succeeded()
            stream.held.track(answers)
            for answer in _cancels_due(queue, answers):
                if answer.WhichOneof("message") != "heartbeat_answer":  # it answers batches, not a hello
                    queue.put(answer)
            reader = asyncio.create_task(self._read(stream, request_iterator))
            await self._write(context, queue, reader)
        except StoreUnavailable as error:
            # The executor reconnects with backoff; its unacknowledged reports are sent again.
            self._ended_by_store.failed(f"stream of executor {hello.executor_id} ended: {error}")
            await context.abort(error.code, error.message)
        except JobmeshError as error:
            log.warning("stream of executor %s ended: %s", hello.executor_id, error)
            await context.abort(error.code, error.message)
        except Exception:
            log.exception("stream of executor %s failed", hello.executor_id)
            await context.abort(grpc.StatusCode.INTERNAL, "internal error; see the server log")
        finally:
            if self._sessions.unregister(hello.executor_id, queue):
                with contextlib.suppress(RuntimeError):  # the server is closing: its sessions lapse instead
                    self._threads.submit(self._renewals.release, hello.executor_id)
            log.info("executor %s disconnected", hello.executor_id)

    def _welcome(self) -> pb.ConnectResponse:
        return pb.ConnectResponse(
            welcome=pb.ExecutorWelcome(
                heartbeat_interval=to_duration(self._heartbeat_interval),
                server_id=self._server_id,
                queue_kind=queue_kind(self._in_process_queue),
            )
        )

    async def _write(self, context: Context, queue: SessionQueue, reader: asyncio.Task[None]) -> None:
        message: asyncio.Task[pb.ConnectResponse | None] | None = None
        try:
            while True:
                message = asyncio.create_task(queue.get())
                done, _ = await asyncio.wait({message, reader}, return_when=asyncio.FIRST_COMPLETED)
                if message not in done:
                    reader.result()  # re-raise what ended the reader, if anything
                    return
                if (response := message.result()) is None:
                    log.warning("this stream's executor name was taken by a newer connection: ended")
                    return
                await context.write(response)
        finally:
            # Also when the call itself is cancelled (its executor died): a wait left pending would be
            # destroyed with the loop's next collection, and say so.
            for task in (message, reader):
                if task is not None:
                    task.cancel()
            with contextlib.suppress(asyncio.CancelledError, Exception):
                await reader

    async def _read(self, stream: _Stream, requests: AsyncIterator[pb.ConnectRequest]) -> None:
        """Handles the executor's messages, several at once. The first that fails ends the stream, at once:
        the executor reconnects and sends again what was not acknowledged (a failure is never dropped)."""
        lanes = _Lanes()
        pending: set[asyncio.Task[None]] = set()
        failed: asyncio.Future[None] = asyncio.get_running_loop().create_future()

        async def answer(request: pb.ConnectRequest, threads: ThreadPoolExecutor, token: int | None) -> None:
            def work() -> list[pb.ConnectResponse]:
                responses = _cancels_due(stream.queue, self._handle(stream, request))
                if token is not None:  # answered: its wait, and the store's time, are behind it
                    self._stream_lag.answered(token)
                stream.held.track(responses)
                return responses

            for response in await self._in_thread(work, threads):
                self._dispatch(stream.executor, stream.queue, response)

        async def handle(request: pb.ConnectRequest, kind: str | None, admitted: asyncio.Semaphore) -> None:
            # Claims are timed: a claim that waits delays a start the server has promised. Results and logs
            # may wait without harm (the executor holds them until they are acknowledged).
            token = self._stream_lag.arrived() if kind == "claims" else None
            try:
                if kind == "heartbeats":
                    await answer(request, self._heartbeat_threads, None)
                else:
                    async with lanes.turn(kind):
                        await answer(request, self._threads, token)
            finally:
                if token is not None:
                    self._stream_lag.abandoned(token)
                admitted.release()

        def settle(task: asyncio.Task[None]) -> None:
            pending.discard(task)
            if not task.cancelled() and (error := task.exception()) is not None and not failed.done():
                failed.set_exception(error)

        async def take() -> None:
            async for request in requests:
                stream.queue.heard()
                kind = request.WhichOneof("message")
                admitted = lanes.admission(kind)
                await admitted.acquire()
                task = asyncio.create_task(handle(request, kind, admitted))
                pending.add(task)
                task.add_done_callback(settle)
            while pending:  # the executor closed its side: what it sent is still answered
                await asyncio.wait(set(pending))

        taking = asyncio.create_task(take())
        try:
            await asyncio.wait({taking, failed}, return_when=asyncio.FIRST_COMPLETED)
            if not failed.done():
                taking.result()
            if failed.done():
                failed.result()
        finally:
            for task in (taking, *pending):
                task.cancel()

    def _dispatch(self, executor: str, queue: SessionQueue, response: pb.ConnectResponse) -> None:
        if response.WhichOneof("message") == "heartbeat_answer":
            self._renewals.answer_after_renewal(executor, queue, response)
        else:
            queue.put(response)

    def _handle(self, stream: _Stream, request: pb.ConnectRequest) -> list[pb.ConnectResponse]:
        kind = request.WhichOneof("message")
        held = stream.held
        handler: Callable[[str, Any], list[pb.ConnectResponse]] | None = {
            "claims": lambda e, r: self._reports.claims(e, r.claims.attempts, stream.grant),
            "heartbeats": lambda e, r: self._heartbeats(stream, r.heartbeats),
            "progress": lambda e, r: self._reports.progress(e, _held_only(held, r.progress.updates, kind)),
            "logs": lambda e, r: self._reports.logs(
                e, self._log_caps.admit(_held_only(held, r.logs.chunks, kind))
            ),
            # The store fences results on their own (and answers them fenced); this logs the forged ones.
            "results": lambda e, r: self._reports.results(e, _logged(held, r.results.results, kind)),
        }.get(kind or "")
        if handler is None:
            log.warning("executor %s sent an unexpected %s message", stream.executor, kind)
            return []
        return handler(stream.executor, request)

    def _heartbeats(self, stream: _Stream, batch: pb.HeartbeatBatch) -> list[pb.ConnectResponse]:
        received = filter(None, map(AttemptRef.from_proto_or_none, batch.cancels_received))
        stream.queue.cancels.acknowledged(received)
        return self._reports.heartbeats(stream.executor, batch.attempts)


def _cancels_due(queue: SessionQueue, responses: Sequence[pb.ConnectResponse]) -> list[pb.ConnectResponse]:
    """The responses, with the cancels of attempts still being cancelled narrowed to those due on this stream:
    never sent over it, or not acknowledged in time (`CancelsSent`). A heartbeat answer names what the stream
    still holds: the cancels of the others are forgotten."""
    kept = []
    for response in responses:
        kind = response.WhichOneof("message")
        if kind == "heartbeat_answer":
            queue.cancels.keep_only(map(AttemptRef.from_proto, response.heartbeat_answer.kept_alive))
        elif kind == "cancels":
            if due := queue.cancels.due(map(AttemptRef.from_proto, response.cancels.attempts)):
                kept.append(cancel_message(due, response.cancels.reason))
            continue
        kept.append(response)
    return kept


@dataclass(frozen=True, slots=True)
class _Stream:
    """One executor's stream: who it is, what its credential grants, where its answers go, what it holds."""

    executor: str
    grant: ExecutorGrant
    queue: SessionQueue
    held: HeldAttempts


def _granted(principal: Principal, hello: pb.ExecutorHello) -> ExecutorGrant:
    """The grant under which the hello's executor may connect; PermissionDenied when the credential binds
    no executor, another name, or not every queue the executor serves."""
    grant = principal.executor
    if grant is None:
        raise PermissionDenied(
            "this credential is not an executor's", detail=f"{principal.subject} holds no executor grant"
        )
    if not grant.allows_name(hello.executor_id):
        raise PermissionDenied(
            f"this credential may not connect as executor {hello.executor_id!r}",
            metadata={"executor": hello.executor_id},
            detail=f"{principal.subject} is bound to executor {grant.name!r}",
        )
    if refused := sorted(queue for queue in hello.queues if not grant.serves_queue(queue)):
        raise PermissionDenied(
            f"this credential may not serve the queues {refused}", metadata={"queues": ",".join(refused)}
        )
    return grant


_Report = TypeVar("_Report", pb.LogChunk, pb.ProgressUpdate, pb.AttemptResult)


def _held_only(held: HeldAttempts, reports: Sequence[_Report], kind: str | None) -> list[_Report]:
    refused = _refused(held, reports, kind)
    return [report for report in reports if AttemptRef.from_proto_or_none(report.attempt) not in refused]


def _logged(held: HeldAttempts, reports: Sequence[_Report], kind: str | None) -> Sequence[_Report]:
    _refused(held, reports, kind)
    return reports


def _refused(held: HeldAttempts, reports: Sequence[_Report], kind: str | None) -> frozenset[AttemptRef]:
    refs = [ref for ref in (AttemptRef.from_proto_or_none(r.attempt) for r in reports) if ref is not None]
    return held.refused(refs, kind or "")


class _Lanes:
    """How one stream's messages wait: heartbeats on a lane of their own, claims for one of a few slots of
    theirs, and logs, progress and results for their turn."""

    def __init__(self) -> None:
        self._claim_slots = asyncio.Semaphore(CLAIMS_IN_FLIGHT_PER_STREAM)
        self._in_order = asyncio.Lock()  # fair: logs, progress and results are written in the order they came
        self._waiting = asyncio.Semaphore(WAITING_PER_STREAM)
        self._beating = asyncio.Semaphore(HEARTBEATS_PER_STREAM)

    def admission(self, kind: str | None) -> asyncio.Semaphore:
        """Taken before the next message is read: it bounds what one stream makes the server hold."""
        return self._beating if kind == "heartbeats" else self._waiting

    @contextlib.asynccontextmanager
    async def turn(self, kind: str | None) -> AsyncIterator[None]:
        if kind in ORDERED:
            async with self._in_order:  # one at a time, in the order they came
                yield
        else:  # claims: slots of their own, never behind a stream's slow result writes
            async with self._claim_slots:
                yield
