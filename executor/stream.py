"""The executor's `ExecutorControl.Connect` session: hello/welcome, one writer and one reader, claims answered
in order, and reconnection with backoff (100 ms doubling to 2 s, with jitter, reset by a stream that lasted)
until closed.

Each session opens a new channel: after a drain notice the address may route to another server replica, and
a channel would stick to the connection it has (a new channel also reads the TLS files again, so a renewed
client certificate is presented from the next session on). Requests are written by one task in the order
they are sent; a request not yet written when the stream breaks is handed back to the listener.
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections import deque
from collections.abc import Sequence
from datetime import timedelta
from typing import Protocol

import grpc

from jobmesh.control.v1 import executor_control_pb2 as pb
from jobmesh.control.v1 import executor_control_pb2_grpc
from jobmesh.core.attempts import AttemptRef
from jobmesh.core.backoff import backoff_delay
from jobmesh.core.limits import MAX_GRPC_MESSAGE_BYTES
from jobmesh.executor.clock import NANOS, now_ns, ns_of_timestamp, seconds_of, within
from jobmesh.executor.config import ExecutorConfig
from jobmesh.executor.queue_reach import QueueUnreachable, mismatch_of, refusal_of
from jobmesh.transport.tls import aio_channel

log = logging.getLogger(__name__)

KEEPALIVE_TIMEOUT_MS = 10_000
MAX_DOUBLINGS = 20  # of the reconnection delay: far past any cap it has
DRAIN_CLAIMS_WAIT = 2.0  # after a drain notice: how long claims in flight may take before reconnecting
# A credential the server refuses: the executor tries again (a token may be fixed meanwhile), loudly.
_REFUSED = frozenset({grpc.StatusCode.UNAUTHENTICATED, grpc.StatusCode.PERMISSION_DENIED})


class StreamDown(Exception):
    """The stream is not connected (or broke before the answer came)."""


class StreamListener(Protocol):
    def hello(self) -> pb.ExecutorHello: ...

    def connected(self, welcome: pb.ExecutorWelcome) -> None: ...

    def disconnected(self, unsent: list[pb.ConnectRequest]) -> None: ...

    def acks(self, acks: pb.AckBatch) -> None: ...

    def heartbeat_answer(self, answer: pb.HeartbeatAnswer) -> None: ...

    def cancels(self, cancels: pb.CancelBatch) -> None: ...


class ControlStream:
    def __init__(self, config: ExecutorConfig, listener: StreamListener) -> None:
        self._config = config
        self._listener = listener
        self.heartbeat_interval = config.heartbeat_interval.total_seconds()
        self.server_id = ""
        self._closing = False
        self._closed = asyncio.Event()
        self._leave = asyncio.Event()  # ends the current session: close() or a drain notice
        self._server_draining = False
        self._drain_deadline = 0  # ns
        self._connected = asyncio.Event()
        self._disconnected = asyncio.Event()
        self._disconnected.set()
        self._ready = asyncio.Event()  # connected and the server takes claims
        self._failed_in_a_row = 0  # sessions that were not established since the last that was
        self._outgoing: asyncio.Queue[pb.ConnectRequest] | None = None
        # The cancels this session received that the next heartbeat batch acknowledges.
        self._cancels_received: list[pb.AttemptRef] = []
        # Claims in flight, oldest first, by their first attempt: the server answers them in any order.
        # The claim batches awaiting their answers, each with its attempts: the answers come in any order, and
        # a batch is known by all of its attempts (a run delivered again may head two batches in flight).
        self._claims: deque[tuple[_BatchKey, asyncio.Future[list[pb.ClaimResult]]]] = deque()
        self._wrote = asyncio.Event()  # set by the writer after each request it writes
        self._no_claims = asyncio.Event()
        self._no_claims.set()
        # The identity of the in-process queue this executor reads (empty for Kafka), for its hello; and,
        # once its server said that this queue cannot be the mesh's, why: the stream is then closed.
        self.in_process_queue = ""
        self.unreachable: QueueUnreachable | None = None

    @property
    def connected(self) -> bool:
        return self._connected.is_set()

    async def wait_ready(self) -> None:
        await self._ready.wait()

    async def wait_connected(self) -> None:
        await self._connected.wait()

    async def wait_disconnected(self) -> None:
        await self._disconnected.wait()

    def backlog(self) -> int:
        return self._outgoing.qsize() if self._outgoing is not None else 0

    async def wait_backlog_below(self, limit: int) -> None:
        """Returns once fewer than `limit` requests wait for the writer (or the stream is down)."""
        while self.backlog() >= limit and self.connected:
            self._wrote.clear()
            await within(self._wrote.wait(), 1.0)

    def take_cancels_received(self) -> list[pb.AttemptRef]:
        """The cancels received on this session since the last call: a heartbeat batch acknowledges them."""
        taken, self._cancels_received = self._cancels_received, []
        return taken

    def send(self, request: pb.ConnectRequest) -> None:
        if self._outgoing is None or not self.connected:
            raise StreamDown("not connected")
        self._outgoing.put_nowait(request)

    async def claim(self, refs: Sequence[pb.AttemptRef]) -> list[pb.ClaimResult]:
        """The server's answers, in the order of `refs`. Raises StreamDown when the stream is not ready or
        breaks first: the caller keeps its deliveries and claims them again after the reconnect."""
        if not self._ready.is_set():
            raise StreamDown("not ready for claims")
        future: asyncio.Future[list[pb.ClaimResult]] = asyncio.get_running_loop().create_future()
        self.send(pb.ConnectRequest(claims=pb.ClaimBatch(attempts=refs)))
        self._claims.append((_batch_key(refs), future))
        self._no_claims.clear()
        return await future

    async def run(self) -> None:
        """Connects, and reconnects whenever the stream ends, until `close()`."""
        failures = 0
        while not self._closing:
            established = await self._session()
            if self._closing:
                break
            if self._server_draining:
                self._server_draining = False
                continue  # the server asked us to go elsewhere: at once
            # the count stops growing once the delay is at its cap: 2 ** n of a timedelta overflows in minutes
            failures = 1 if established else min(failures + 1, MAX_DOUBLINGS)
            self._failed_in_a_row = 0 if established else self._failed_in_a_row + 1
            delay = backoff_delay(self._config.reconnect_min, failures, cap=self._config.reconnect_max)
            await within(self._closed.wait(), delay.total_seconds())

    def close(self) -> None:
        self._closing = True
        self._closed.set()
        self._leave.set()

    async def _session(self) -> bool:
        """One stream, from hello to its end. True when it was established: welcomed, and up for at least the
        longest reconnection delay. A stream the server ends right after its welcome (its database down, say)
        is a failure like any other, and the delay keeps doubling: reset by each welcome, it made executors
        reconnect ten times a second through an outage."""
        self._leave.clear()
        if self._closing:
            return False
        try:
            metadata = self._config.call_token.metadata()
        except OSError as error:
            log.error("the token file cannot be read: %s", error)
            return False
        channel = aio_channel(self._config.server, self._config.tls, self._channel_options())
        call = executor_control_pb2_grpc.ExecutorControlStub(channel).Connect(metadata=metadata)
        welcomed, welcomed_at = False, 0.0
        outgoing: asyncio.Queue[pb.ConnectRequest] = asyncio.Queue()
        hello = self._listener.hello()
        hello.in_process_queue = self.in_process_queue
        try:
            async with asyncio.timeout(self._config.connect_timeout.total_seconds()):
                await call.write(pb.ConnectRequest(hello=hello))
                first = await call.read()
            if not isinstance(first, pb.ConnectResponse) or first.WhichOneof("message") != "welcome":
                log.warning("the server did not welcome this executor (answered %r)", first)
                return False
            if mismatch := mismatch_of(first.welcome, self.in_process_queue, self._config.server):
                self._stop_unreachable(mismatch)
                return False
            welcomed, welcomed_at = True, time.monotonic()
            self._welcomed(first.welcome, outgoing)
            await self._pump(call, outgoing)
        except (grpc.RpcError, asyncio.InvalidStateError, TimeoutError) as exc:
            if not welcomed and (refusal := refusal_of(exc)):
                self._stop_unreachable(refusal)
            else:
                self._log_end(exc, welcomed)
        finally:
            self._set_disconnected(outgoing, welcomed)
            call.cancel()
            await channel.close()
        return welcomed and time.monotonic() - welcomed_at >= self._config.reconnect_max.total_seconds()

    def _stop_unreachable(self, problem: QueueUnreachable) -> None:
        """Never to be welcomed with this queue: says so, and closes (`Executor.run()` raises it)."""
        log.error("%s", problem.message)
        self.unreachable = problem
        self.close()

    def _welcomed(self, welcome: pb.ExecutorWelcome, outgoing: asyncio.Queue[pb.ConnectRequest]) -> None:
        if welcome.HasField("heartbeat_interval") and seconds_of(welcome.heartbeat_interval) > 0:
            self.heartbeat_interval = seconds_of(welcome.heartbeat_interval)
        self.server_id = welcome.server_id
        self._outgoing = outgoing
        self._cancels_received = []  # a new session: the server sends again what was not acknowledged
        self._disconnected.clear()
        self._connected.set()
        self._ready.set()
        log.info("connected to %s (server %s)", self._config.server, welcome.server_id or "?")
        self._listener.connected(welcome)

    async def _pump(
        self,
        call: grpc.aio.StreamStreamCall[pb.ConnectRequest, pb.ConnectResponse],
        outgoing: asyncio.Queue[pb.ConnectRequest],
    ) -> None:
        tasks = [
            asyncio.create_task(self._write(call, outgoing)),
            asyncio.create_task(self._read(call)),
            asyncio.create_task(self._until_leave()),
        ]
        try:
            done, _ = await asyncio.wait(tasks, return_when=asyncio.FIRST_COMPLETED)
        finally:
            for task in tasks:
                task.cancel()
            await asyncio.gather(*tasks, return_exceptions=True)
        for task in done:
            if not task.cancelled() and (error := task.exception()) is not None:
                raise error

    async def _write(
        self,
        call: grpc.aio.StreamStreamCall[pb.ConnectRequest, pb.ConnectResponse],
        outgoing: asyncio.Queue[pb.ConnectRequest],
    ) -> None:
        while True:
            request = await outgoing.get()
            try:
                await call.write(request)
                self._wrote.set()
            except BaseException:
                outgoing.put_nowait(request)  # not known to be written: handed back with the rest
                raise

    async def _read(self, call: grpc.aio.StreamStreamCall[pb.ConnectRequest, pb.ConnectResponse]) -> None:
        while isinstance(response := await call.read(), pb.ConnectResponse):
            kind = response.WhichOneof("message")
            if kind == "claim_results":
                self._answer_claims(list(response.claim_results.results))
            elif kind == "acks":
                self._listener.acks(response.acks)
            elif kind == "heartbeat_answer":
                self._listener.heartbeat_answer(response.heartbeat_answer)
            elif kind == "cancels":
                self._cancels_received.extend(response.cancels.attempts)
                self._listener.cancels(response.cancels)
            elif kind == "drain":
                log.info("server %s is draining: reconnecting", self.server_id or "?")
                self._drain_deadline = (
                    ns_of_timestamp(response.drain.deadline) if response.drain.HasField("deadline") else 0
                )
                self._ready.clear()
                self._server_draining = True
                self._leave.set()
        log.warning("the server ended the stream")

    async def _until_leave(self) -> None:
        await self._leave.wait()
        if not self._closing:  # a drain: let the claims in flight be answered first, well before the deadline
            wait = DRAIN_CLAIMS_WAIT
            if self._drain_deadline:
                wait = min(wait, (self._drain_deadline - now_ns()) / NANOS / 2)
            await within(self._no_claims.wait(), wait)

    def _answer_claims(self, results: list[pb.ClaimResult]) -> None:
        if not self._claims:
            log.warning("claim results for no claim: ignored")
            return
        answered = _batch_key([result.attempt for result in results])
        index = next((i for i, (key, _) in enumerate(self._claims) if key == answered), None)
        if index is None:  # not one answer a claim: the batch it begins as, else the oldest
            index = next((i for i, (key, _) in enumerate(self._claims) if key[:1] == answered[:1]), 0)
        _, future = self._claims[index]
        del self._claims[index]
        if not self._claims:
            self._no_claims.set()
        if not future.done():
            future.set_result(results)

    def _set_disconnected(self, outgoing: asyncio.Queue[pb.ConnectRequest], welcomed: bool) -> None:
        self._ready.clear()
        self._connected.clear()
        self._disconnected.set()
        self._outgoing = None
        while self._claims:
            _, future = self._claims.popleft()
            if not future.done():
                future.set_exception(StreamDown("the stream broke before the claims were answered"))
        self._no_claims.set()
        if welcomed:
            unsent = []
            while not outgoing.empty():
                unsent.append(outgoing.get_nowait())
            self._listener.disconnected(unsent)

    def _log_end(self, error: BaseException, welcomed: bool) -> None:
        detail = error.details() if isinstance(error, grpc.aio.AioRpcError) else repr(error)
        if (
            isinstance(error, grpc.aio.AioRpcError)
            and error.code() == grpc.StatusCode.CANCELLED
            and self._closing
        ):
            return
        if isinstance(error, grpc.aio.AioRpcError) and error.code() in _REFUSED:
            log.error("%s refused this executor (%s): %s", self._config.server, error.code().name, detail)
        elif welcomed:
            # The first loss is news; the losses of the reconnections that follow (its server's database
            # away, say) are not, until a stream is established again.
            level = logging.WARNING if self._failed_in_a_row == 0 else logging.DEBUG
            log.log(level, "stream to %s lost: %s", self._config.server, detail)
        else:
            log.info("cannot connect to %s: %s", self._config.server, detail)

    def _channel_options(self) -> list[tuple[str, int]]:
        options = [
            ("grpc.max_receive_message_length", MAX_GRPC_MESSAGE_BYTES),
            ("grpc.max_send_message_length", MAX_GRPC_MESSAGE_BYTES),
            ("grpc.enable_retries", 0),  # a broken stream is the executor's business: it reconnects itself
        ]
        if self._config.keepalive > timedelta(
            0
        ):  # pings find a peer that vanished without closing the connection
            options += [
                ("grpc.keepalive_time_ms", int(self._config.keepalive.total_seconds() * 1000)),
                ("grpc.keepalive_timeout_ms", KEEPALIVE_TIMEOUT_MS),
                ("grpc.http2.max_pings_without_data", 0),
            ]
        return options


_BatchKey = tuple[AttemptRef | None, ...]


def _batch_key(refs: Sequence[pb.AttemptRef]) -> _BatchKey:
    return tuple(AttemptRef.from_proto_or_none(ref) for ref in refs)
