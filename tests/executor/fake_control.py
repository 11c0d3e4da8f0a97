"""A small, scriptable ExecutorControl server for the executor's tests (grpc.aio on 127.0.0.1).

It grants claims once per attempt (a second claim is a DUPLICATE, as the real server answers), records
everything the executor sends, answers heartbeats, acknowledges results, and can push cancels, fences and
drain notices. `stop()`
cuts every stream; `start()` again serves on the same port, so the executor reconnects to it.
"""

from __future__ import annotations

import asyncio
import contextlib
import time
from collections.abc import AsyncIterator, Callable, Iterable
from dataclasses import dataclass, field
from typing import Any

import grpc
from google.protobuf import duration_pb2, timestamp_pb2

from jobmesh.control.v1 import executor_control_pb2 as pb
from jobmesh.control.v1 import executor_control_pb2_grpc
from jobmesh.core.attempts import AttemptRef
from jobmesh.v1 import run_pb2
from tests.support import arrives


@dataclass
class _Stream:
    executor_id: str
    outgoing: asyncio.Queue[pb.ConnectResponse] = field(default_factory=asyncio.Queue)


class FakeControl(executor_control_pb2_grpc.ExecutorControlServicer):
    def __init__(self, heartbeat_interval: float = 0.2) -> None:
        self.heartbeat_interval = heartbeat_interval
        self.port = 0
        self.hellos: list[pb.ExecutorHello] = []
        self.heartbeats: list[tuple[float, list[AttemptRef]]] = []  # (monotonic time, attempts)
        self.cancels_received: list[AttemptRef] = []  # acknowledged in heartbeat batches, in order
        self.claims: list[AttemptRef] = []
        self.claim_batch_sizes: list[int] = []
        self.logs: dict[AttemptRef, list[run_pb2.LogLine]] = {}
        self.progress: list[pb.ProgressUpdate] = []
        self.results: list[pb.AttemptResult] = []
        self.start_times: dict[AttemptRef, int] = {}  # ns; unset: now
        self.refuse: dict[AttemptRef, pb.ClaimOutcome.ValueType] = {}
        self.fenced: set[AttemptRef] = set()
        self.ack_results = True
        self.answer_heartbeats = True  # as the real server does; off: a server that cannot record them
        self.refuse_with: grpc.StatusCode | None = None  # set: every hello is answered with this code
        # set: every stream is welcomed, then ended at once with this code (a server whose store fails)
        self.end_after_welcome: grpc.StatusCode | None = None
        self.queue_kind: pb.QueueKind.ValueType = pb.QUEUE_KIND_UNSPECIFIED  # what the welcome says
        # Claim answers held back until this many batches wait, then sent newest first (the real server
        # handles a stream's claims at once, and answers them in any order); 0: each at once.
        self.hold_claims = 0
        self.held_claims: list[pb.ConnectResponse] = []
        self._claimed: set[AttemptRef] = set()
        self._streams: list[_Stream] = []
        self._server: grpc.aio.Server | None = None

    @property
    def address(self) -> str:
        return f"127.0.0.1:{self.port}"

    @property
    def connections(self) -> int:
        return len(self._streams)

    async def start(self) -> None:
        server = grpc.aio.server()
        executor_control_pb2_grpc.add_ExecutorControlServicer_to_server(self, server)
        self.port = server.add_insecure_port(self.address)
        await server.start()
        self._server = server

    async def stop(self) -> None:
        """Cuts every stream at once, as a killed server would."""
        if self._server is not None:
            server, self._server = self._server, None
            await server.stop(grace=0)

    # Pushes to every connected executor.
    def cancel(self, keys: Iterable[AttemptRef], reason: str = "cancelled by a test") -> None:
        refs = [key.to_proto() for key in keys]
        self._push(pb.ConnectResponse(cancels=pb.CancelBatch(attempts=refs, reason=reason)))

    def fence(self, keys: Iterable[AttemptRef], *, push: bool = False) -> None:
        """Marks attempts fenced: the next heartbeat naming them is answered so (or at once with `push`)."""
        keys = list(keys)
        self.fenced.update(keys)
        if push:
            self._push(pb.ConnectResponse(acks=pb.AckBatch(fenced=[key.to_proto() for key in keys])))

    def drain(self, within: float = 5.0) -> None:
        deadline = timestamp_pb2.Timestamp()
        deadline.FromNanoseconds(time.time_ns() + int(within * 1e9))
        self._push(pb.ConnectResponse(drain=pb.DrainNotice(deadline=deadline)))

    # What the executor sent.
    def results_for(self, key: AttemptRef) -> list[pb.AttemptResult]:
        return [result for result in self.results if AttemptRef.from_proto(result.attempt) == key]

    def log_texts(self, key: AttemptRef, stream: int | None = None) -> list[str]:
        return [line.text for line in self.logs.get(key, []) if stream is None or line.stream == stream]

    async def wait_until(self, condition: Callable[[], object], timeout: float = 5.0) -> None:
        await arrives(condition, timeout, str(condition))

    def _push(self, response: pb.ConnectResponse) -> None:
        for stream in self._streams:
            stream.outgoing.put_nowait(response)

    async def Connect(
        self, request_iterator: AsyncIterator[pb.ConnectRequest], context: grpc.aio.ServicerContext[Any, Any]
    ) -> AsyncIterator[pb.ConnectResponse]:
        first = await anext(request_iterator, None)
        if first is None or not first.HasField("hello"):
            await context.abort(grpc.StatusCode.FAILED_PRECONDITION, "hello first")
            return
        self.hellos.append(first.hello)
        if self.refuse_with is not None:
            await context.abort(self.refuse_with, "refused by the test")
            return
        stream = _Stream(first.hello.executor_id)
        interval = duration_pb2.Duration()
        interval.FromNanoseconds(int(self.heartbeat_interval * 1e9))
        welcome = pb.ExecutorWelcome(
            heartbeat_interval=interval, server_id="fake", queue_kind=self.queue_kind
        )
        yield pb.ConnectResponse(welcome=welcome)
        if self.end_after_welcome is not None:
            await context.abort(self.end_after_welcome, "ended after its welcome by the test")
            return
        self._streams.append(stream)
        reader = asyncio.create_task(self._read(request_iterator, stream))
        taking: asyncio.Task[pb.ConnectResponse] | None = None
        try:
            while not reader.done():
                taking = asyncio.create_task(stream.outgoing.get())
                await asyncio.wait({reader, taking}, return_when=asyncio.FIRST_COMPLETED)
                taking.cancel()
                if taking.done() and not taking.cancelled():
                    yield taking.result()
        finally:  # also when the server stops: the RPC is cancelled while waiting
            self._streams.remove(stream)
            for task in (reader, taking):
                if task is not None:
                    task.cancel()
            with contextlib.suppress(asyncio.CancelledError, grpc.RpcError):
                await reader

    async def _read(self, requests: AsyncIterator[pb.ConnectRequest], stream: _Stream) -> None:
        async for request in requests:
            kind = request.WhichOneof("message")
            if kind == "claims":
                self.claim_batch_sizes.append(len(request.claims.attempts))
                results = [self._claim(ref) for ref in request.claims.attempts]
                response = pb.ConnectResponse(claim_results=pb.ClaimResultBatch(results=results))
                self._answer_claims(response, stream)
            elif kind == "heartbeats":
                keys = [AttemptRef.from_proto(ref) for ref in request.heartbeats.attempts]
                self.heartbeats.append((time.monotonic(), keys))
                self.cancels_received += map(AttemptRef.from_proto, request.heartbeats.cancels_received)
                if keys and self.answer_heartbeats:
                    kept = [key.to_proto() for key in keys if key not in self.fenced]
                    answer = pb.HeartbeatAnswer(kept_alive=kept)
                    stream.outgoing.put_nowait(pb.ConnectResponse(heartbeat_answer=answer))
                if fenced := [key.to_proto() for key in keys if key in self.fenced]:
                    stream.outgoing.put_nowait(pb.ConnectResponse(acks=pb.AckBatch(fenced=fenced)))
            elif kind == "logs":
                for chunk in request.logs.chunks:
                    self.logs.setdefault(AttemptRef.from_proto(chunk.attempt), []).extend(chunk.lines)
            elif kind == "progress":
                self.progress.extend(request.progress.updates)
            elif kind == "results":
                self._results(request.results.results, stream)

    def _answer_claims(self, response: pb.ConnectResponse, stream: _Stream) -> None:
        if not self.hold_claims:
            stream.outgoing.put_nowait(response)
            return
        self.held_claims.append(response)
        if len(self.held_claims) >= self.hold_claims:
            for held in reversed(self.held_claims):
                stream.outgoing.put_nowait(held)
            self.held_claims.clear()

    def _claim(self, ref: pb.AttemptRef) -> pb.ClaimResult:
        key = AttemptRef.from_proto(ref)
        self.claims.append(key)
        outcome = self.refuse.get(key, pb.CLAIM_OUTCOME_GRANTED)
        if outcome == pb.CLAIM_OUTCOME_GRANTED and key in self._claimed:
            outcome = pb.CLAIM_OUTCOME_DUPLICATE
        start = timestamp_pb2.Timestamp()
        start.FromNanoseconds(self.start_times.get(key, time.time_ns()))
        if outcome == pb.CLAIM_OUTCOME_GRANTED:
            self._claimed.add(key)
        return pb.ClaimResult(attempt=ref, outcome=outcome, start_time=start)

    def _results(self, results: Iterable[pb.AttemptResult], stream: _Stream) -> None:
        recorded, fenced = [], []
        for result in results:
            if AttemptRef.from_proto(result.attempt) in self.fenced:
                fenced.append(result.attempt)
            else:
                self.results.append(result)
                recorded.append(result.attempt)
        if self.ack_results:
            stream.outgoing.put_nowait(pb.ConnectResponse(acks=pb.AckBatch(recorded=recorded, fenced=fenced)))
