"""`jobmesh.v1.ExecutorControl`: one bidirectional stream per executor.

Each message carries a batch and becomes one store call: claims, heartbeats, progress, logs and results of
many runs cross in few statements. Stream work runs on threads of its own, never queued behind the API's
creates, and several messages of a stream are handled at once: a claim does not wait for the result batch
before it (each write is fenced by attempt, so their order does not matter). Logs, progress and results keep
their order among themselves.

Heartbeats are never starved: the stream is read on while its other messages wait for a slot, and a heartbeat
batch goes at once to threads that do nothing else. Slow writes of results under load therefore never leave an
executor without the answers that keep its attempts running (`executor/liveness.py`).
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import random
from collections.abc import AsyncIterator, Callable
from concurrent.futures import ThreadPoolExecutor
from datetime import timedelta
from typing import Any, TypeVar

import grpc

from jobmesh.core.errors import JobmeshError
from jobmesh.core.timestamps import to_duration
from jobmesh.server.attempt_reports import AttemptReports
from jobmesh.server.session_renewals import SessionRenewals
from jobmesh.server.sessions import SessionQueue, Sessions
from jobmesh.server.stream_lag import StreamLag
from jobmesh.v1 import executor_control_pb2 as pb
from jobmesh.v1 import executor_control_pb2_grpc

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
    ) -> None:
        self._reports = reports
        self._sessions = sessions
        self._renewals = renewals
        self._stream_lag = stream_lag
        self._server_id = server_id
        self._heartbeat_interval = heartbeat_interval
        self._threads = ThreadPoolExecutor(STREAM_THREADS, thread_name_prefix="jobmesh-stream")
        self._heartbeat_threads = ThreadPoolExecutor(HEARTBEAT_THREADS, thread_name_prefix="jobmesh-beat")

    def close(self) -> None:
        self._threads.shutdown(wait=False, cancel_futures=True)
        self._heartbeat_threads.shutdown(wait=False, cancel_futures=True)

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
        queue = SessionQueue(asyncio.get_running_loop())
        self._sessions.register(hello.executor_id, queue)
        log.info(
            "executor %s connected (%s, queues %s)", hello.executor_id, hello.hostname, list(hello.queues)
        )
        try:
            await context.write(self._welcome())
            running = hello.running
            for answer in await self._in_thread(lambda: self._reports.heartbeats(hello.executor_id, running)):
                if answer.WhichOneof("message") != "heartbeat_answer":  # it answers batches, not a hello
                    queue.put(answer)
            reader = asyncio.create_task(self._read(hello.executor_id, request_iterator, queue))
            await self._write(context, queue, reader)
        except JobmeshError as error:
            # The executor reconnects with backoff; its unacknowledged reports are sent again.
            log.warning("stream of executor %s ended: %s", hello.executor_id, error)
            await context.abort(error.code, error.message)
        except Exception:
            log.exception("stream of executor %s failed", hello.executor_id)
            await context.abort(grpc.StatusCode.INTERNAL, "internal error; see the server log")
        finally:
            self._sessions.unregister(hello.executor_id, queue)
            log.info("executor %s disconnected", hello.executor_id)

    def _welcome(self) -> pb.ConnectResponse:
        return pb.ConnectResponse(
            welcome=pb.ExecutorWelcome(
                heartbeat_interval=to_duration(self._heartbeat_interval), server_id=self._server_id
            )
        )

    async def _write(self, context: Context, queue: SessionQueue, reader: asyncio.Task[None]) -> None:
        try:
            while True:
                message = asyncio.create_task(queue.get())
                done, _ = await asyncio.wait({message, reader}, return_when=asyncio.FIRST_COMPLETED)
                if message not in done:
                    message.cancel()
                    reader.result()  # re-raise what ended the reader, if anything
                    return
                await context.write(message.result())
        finally:
            reader.cancel()
            with contextlib.suppress(asyncio.CancelledError, Exception):
                await reader

    async def _read(
        self, executor: str, requests: AsyncIterator[pb.ConnectRequest], queue: SessionQueue
    ) -> None:
        """Handles the executor's messages, several at once. The first that fails ends the stream, at once:
        the executor reconnects and sends again what was not acknowledged (a failure is never dropped)."""
        lanes = _Lanes()
        pending: set[asyncio.Task[None]] = set()
        failed: asyncio.Future[None] = asyncio.get_running_loop().create_future()

        async def answer(request: pb.ConnectRequest, threads: ThreadPoolExecutor, token: int | None) -> None:
            def work() -> list[pb.ConnectResponse]:
                if token is not None:
                    self._stream_lag.started(token)
                return self._handle(executor, request)

            for response in await self._in_thread(work, threads):
                self._dispatch(executor, queue, response)

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

    def _handle(self, executor: str, request: pb.ConnectRequest) -> list[pb.ConnectResponse]:
        kind = request.WhichOneof("message")
        handler: Callable[[str, Any], list[pb.ConnectResponse]] | None = {
            "claims": lambda e, r: self._reports.claims(e, r.claims.attempts),
            "heartbeats": lambda e, r: self._reports.heartbeats(e, r.heartbeats.attempts),
            "progress": lambda e, r: self._reports.progress(e, r.progress.updates),
            "logs": lambda e, r: self._reports.logs(e, r.logs.chunks),
            "results": lambda e, r: self._reports.results(e, r.results.results),
        }.get(kind or "")
        if handler is None:
            log.warning("executor %s sent an unexpected %s message", executor, kind)
            return []
        return handler(executor, request)


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


def new_server_id() -> str:
    return f"server-{random.randbytes(4).hex()}"
