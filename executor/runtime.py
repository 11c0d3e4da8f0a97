"""`Executor`: the loop that ties the queue, the stream, the attempts, liveness and the drain together.

The claim cycle: wait for a free slot and a ready stream, poll up to the free capacity, send a claim batch
(a few are in flight at once), start the granted attempts at max(now, start time), then commit the
deliveries, batch after batch in order. Committing only after the answers means a crash before them leaves
the deliveries to the group; a delivery whose claim got no answer (the stream broke) is claimed again after
the reconnect, and the server refuses it if it was granted before. A claim deferred by flow control (a
concurrency key at its limit, a queue at its rate) is asked again at the retry time the server gave, and its
batch is committed only once every claim of it is answered otherwise.
"""

from __future__ import annotations

import asyncio
import contextlib
import functools
import logging
import os
import time
from collections import deque
from collections.abc import Awaitable, Callable, Mapping, Sequence
from concurrent.futures import ThreadPoolExecutor
from datetime import timedelta
from typing import TypeVar

from jobmesh.adapters.queue.factory import open_queue
from jobmesh.adapters.signals.factory import open_signals
from jobmesh.control.v1 import executor_control_pb2 as pb
from jobmesh.core.attempts import AttemptRef
from jobmesh.core.errors import InvalidConfig
from jobmesh.core.hooks import NO_HOOKS, RunHooks
from jobmesh.core.metrics import DISPATCH_TO_CLAIM, EXECUTOR_SLOTS
from jobmesh.core.ports.queue import Delivery, QueueUnavailable, RunConsumer, RunQueue
from jobmesh.core.ports.signals import SignalBus
from jobmesh.core.readiness import Readiness
from jobmesh.executor.attempts import Attempts
from jobmesh.executor.clock import ns_of_timestamp, within
from jobmesh.executor.config import ExecutorConfig
from jobmesh.executor.handlers import Handler, HandlerRegistry
from jobmesh.executor.liveness import (
    Fallback,
    HeartbeatLedger,
    heartbeat_over_stream,
    stop_attempts_out_of_contact,
)
from jobmesh.executor.outbox import Outbox
from jobmesh.executor.outcomes import StopReason
from jobmesh.executor.runners import RunnerSettings
from jobmesh.executor.sandbox import open_sandbox
from jobmesh.executor.secrets import SecretSource, open_secret_source
from jobmesh.executor.stream import ControlStream, StreamDown

log = logging.getLogger(__name__)

T = TypeVar("T")
STREAM = "stream"  # the readiness of an executor: its stream to the server is up
STREAM_SETTLED = 1.0  # seconds a welcomed stream holds before it counts as up
BACKLOG_LIMIT = 64  # requests waiting for the stream's writer; the outbox waits beyond this
LOG_BACKLOG_LIMIT = 2  # ... and its log batches (a MiB each) beyond this
QUEUE_RETRY = 1.0  # after the queue failed a poll
CLAIMS_IN_FLIGHT = 3  # claim batches awaiting their answers at once
# At most this many runs to a claim batch. A run polled now waits for the batches in flight before its own: a
# backlog taken a couple of thousand at a time (Kafka back after an outage, with many free slots) keeps the
# runs due after it waiting seconds at the server's claims; batches of this size keep that wait short, and
# cost a claim round trip per this many runs.
CLAIM_BATCH_LIMIT = 256
# Seconds a claim deferred by flow control waits before it is asked again, whatever its retry time says.
MIN_DEFERRAL_WAIT = 0.02
MAX_DEFERRAL_WAIT = 5.0
STEP_ASIDE_AFTER = 0.5  # seconds with every slot busy before the executor steps aside from its queue
# ... and seconds without a stream to the server (longer: a reconnection should not move the partitions)
STEP_ASIDE_OUT_OF_CONTACT = 5.0


def _deferral_wait(retry_ns: int) -> float:
    """Seconds until a deferred claim's retry time (the server's clock), within bounds that a clock apart
    from the server's cannot turn into a busy loop or a long stall."""
    return min(max((retry_ns - time.time_ns()) / 1e9, MIN_DEFERRAL_WAIT), MAX_DEFERRAL_WAIT)


def _secret_source(spec: str) -> SecretSource:
    try:
        return open_secret_source(spec, os.environ)
    except ValueError as exc:
        raise InvalidConfig("secrets", str(exc)) from None


class Executor:
    """One executor process's work. `await run()` until `drain()` (loop thread only) has run its course."""

    def __init__(
        self,
        config: ExecutorConfig,
        handlers: Mapping[str, Handler] | HandlerRegistry | None = None,
        *,
        queue: RunQueue | None = None,
        signals: SignalBus | None = None,
        readiness: Readiness | None = None,
        hooks: RunHooks = NO_HOOKS,
    ) -> None:
        """`readiness`: the process's, which this executor's stream is reported to (one of its own when
        None). `hooks` observe the runs it takes, claims, starts and reports."""
        self._hooks = hooks
        self.config = config
        self.readiness = readiness or Readiness("executor")
        self.readiness.expect(STREAM)
        self.handlers = handlers if isinstance(handlers, HandlerRegistry) else HandlerRegistry(handlers)
        self._queue = queue
        self._signals = signals
        self._draining = asyncio.Event()
        self._hurry = asyncio.Event()
        self._drain_grace = config.drain_grace.total_seconds()
        hidden = [str(path) for path in config.credential_files]
        self.sandbox = open_sandbox(config.isolation, config.job_user, config.job_limits, hidden)
        settings = RunnerSettings(
            self.handlers,
            config.cancel_grace.total_seconds(),
            config.http_timeout.total_seconds(),
            config.policy,
            _secret_source(config.secrets),
            self.sandbox,
            config.secret_queues,
        )
        self.outbox = Outbox(
            flush_lines=config.flush_lines,
            max_log_bytes=config.max_buffered_log_bytes,
            attempt_log_bytes=config.attempt_log_bytes,
            attempt_log_lines=config.attempt_log_lines,
            max_results=config.max_buffered_results,
        )
        self.attempts = Attempts(
            settings=settings, outbox=self.outbox, capacity=config.concurrency, hooks=hooks
        )
        self.heartbeats = HeartbeatLedger()
        self.stream = ControlStream(config, _StreamEvents(self))

    @property
    def executor_id(self) -> str:
        return self.config.executor_id

    def drain(self, grace: timedelta | None = None) -> None:
        """Stop taking work; running work may finish within the drain grace (or `grace`, when shorter), what
        remains ends FAILED `Drained`. A second call may only shorten the grace."""
        if grace is not None and grace.total_seconds() < self._drain_grace:
            self._drain_grace = grace.total_seconds()
            self._hurry.set()
        self._draining.set()

    async def run(self) -> None:
        """Takes and runs work until `drain()` has run its course. Raises QueueUnreachable at the first
        connection when the server says that the mesh queues its runs where this executor's queue cannot
        take them (it logs why first)."""
        queue = self._queue
        if queue is None:  # a Kafka producer connects when it is made: not on the loop
            queue = await asyncio.to_thread(open_queue, self.config.queue_url)
        self.stream.in_process_queue = queue.in_process_id
        signals = self._signals if self._signals is not None else open_signals(self.config.signals_url)
        # One thread for the consumer: adapters are not thread-safe, and a poll blocks.
        consumer_thread = ThreadPoolExecutor(max_workers=1, thread_name_prefix="jobmesh-consumer")
        tasks: list[asyncio.Task[None]] = []
        EXECUTOR_SLOTS.inc(self.config.concurrency)
        try:
            claims = asyncio.create_task(self._take_runs(queue, consumer_thread), name="jobmesh-claims")
            tasks = [
                asyncio.create_task(self.stream.run(), name="jobmesh-stream"),  # first: shut down last
                claims,
                asyncio.create_task(
                    heartbeat_over_stream(self.stream, self.attempts, self.outbox, self.heartbeats),
                    name="jobmesh-heartbeats",
                ),
                asyncio.create_task(self._flush_loop(), name="jobmesh-flush"),
                asyncio.create_task(
                    Fallback(self.config, signals, self.stream, self.attempts, self.outbox).run()
                ),
                asyncio.create_task(stop_attempts_out_of_contact(self.attempts), name="jobmesh-contact"),
            ]
            await self._until_drain(tasks)
            # The claim loop ends its cycle (granted attempts start, deliveries are committed, the group is
            # left); a server that never answers a claim must not hold the drain up.
            if not await within(asyncio.shield(claims), self.config.connect_timeout.total_seconds()):
                claims.cancel()
                await asyncio.gather(claims, return_exceptions=True)
            await self._finish_attempts()
            await self._deliver_results()
        finally:
            EXECUTOR_SLOTS.dec(self.config.concurrency)
            await self._shutdown(tasks, consumer_thread)
            if self._signals is None:
                signals.close()
            if self._queue is None:
                queue.close()

    async def _take_runs(self, queue: RunQueue, thread: ThreadPoolExecutor) -> None:
        """Joins the queue's group once the server has welcomed this executor's stream, claims what it
        delivers until the drain, then leaves (what it did not commit goes back to the group). An executor
        that the server refuses, or cannot reach, never joins: it would hold partitions whose runs it cannot
        claim."""
        if not await self._until(self.stream.wait_ready()):
            return
        consumer = await self._in(
            thread,
            functools.partial(queue.consumer, member=self.executor_id),
            self.config.group,
            self.config.queues,
        )
        log.info("executor %s taking runs from %s", self.executor_id, ", ".join(self.config.queues))
        try:
            await self._claim_loop(consumer, thread)
        finally:
            with contextlib.suppress(Exception):
                await asyncio.shield(self._in(thread, consumer.close))

    async def _until_drain(self, tasks: Sequence[asyncio.Task[None]]) -> None:
        drained = asyncio.create_task(self._draining.wait())
        try:
            done, _ = await asyncio.wait([drained, *tasks], return_when=asyncio.FIRST_COMPLETED)
        finally:
            drained.cancel()
        for task in done:
            if task is drained:
                continue
            task.result()  # a loop that failed: leave rather than limp on
            if self.stream.unreachable is not None:  # the stream closed itself: the runs would never come
                raise self.stream.unreachable
            if not self._draining.is_set():  # the claim loop ends by itself on a drain, and only then
                raise RuntimeError(f"{task.get_name()} ended unexpectedly")
        log.info("draining: no new work; running work may finish within %gs", self._drain_grace)

    async def _finish_attempts(self) -> None:
        deadline = time.monotonic() + self._drain_grace
        while len(self.attempts) and (remaining := deadline - time.monotonic()) > 0:
            self._hurry.clear()
            hurry = asyncio.create_task(self._hurry.wait())
            empty = asyncio.create_task(self.attempts.wait_empty(remaining))
            try:
                await asyncio.wait({hurry, empty}, return_when=asyncio.FIRST_COMPLETED)
            finally:
                hurry.cancel()
                empty.cancel()
            deadline = min(deadline, time.monotonic() + self._drain_grace)
        if len(self.attempts):
            log.warning("drain grace over: stopping %d attempts (reported `Drained`)", len(self.attempts))
            self.attempts.stop_all(StopReason.DRAIN, "the executor shut down before the attempt ended")
            if not await self.attempts.wait_empty(self.config.cancel_grace.total_seconds() + 2.0):
                await self.attempts.abort()

    async def _deliver_results(self) -> None:
        """The last results go out before the stream closes, waiting a little for a reconnect if need be."""
        self.outbox.due.set()
        if self.outbox.unacknowledged and not await self.outbox.wait_acknowledged(
            self.config.report_timeout.total_seconds()
        ):
            log.warning(
                "%d results unacknowledged at exit: the server's sweeper retries them",
                self.outbox.unacknowledged,
            )

    async def _shutdown(
        self, tasks: Sequence[asyncio.Task[None]], consumer_thread: ThreadPoolExecutor
    ) -> None:
        self.stream.close()
        await self.attempts.abort()
        for task in tasks[1:]:
            task.cancel()
        if tasks:  # the stream's task ends by itself once closed (its channel closed cleanly)
            await within(asyncio.shield(tasks[0]), self.config.connect_timeout.total_seconds() + 1.0)
            tasks[0].cancel()
        await asyncio.gather(*tasks, return_exceptions=True)
        consumer_thread.shutdown(wait=True)  # the consumer's close, if the claim loop was cut short

    async def _claim_loop(self, consumer: RunConsumer, thread: ThreadPoolExecutor) -> None:
        """Polls while earlier claims wait for their answers (a few batches at once: a claim's round trip
        does not cap the rate), and commits the deliveries of each batch in order once it is answered."""
        claims = _ClaimsInFlight()
        try:
            while not self._draining.is_set():
                await self._commit_claimed(consumer, thread, claims, wait=claims.full())
                if not await self._until(self._wait_free(consumer, thread, claims)) or not await self._until(
                    self._wait_contact(consumer, thread, claims)
                ):
                    break
                room = min(self.attempts.free() - claims.deliveries(), CLAIM_BATCH_LIMIT)
                if room <= 0:  # the free slots are promised to the claims in flight
                    await self._commit_claimed(consumer, thread, claims, wait=True)
                    continue
                try:
                    deliveries = await self._in(
                        thread, consumer.poll, room, self.config.poll_timeout.total_seconds()
                    )
                except QueueUnavailable as exc:
                    log.warning("queue unavailable: %s", exc)
                    await self._until(asyncio.sleep(QUEUE_RETRY))
                    continue
                if deliveries:
                    self._hooks.consume(deliveries)
                    claims.add(deliveries, asyncio.create_task(self._claim(deliveries)))
            while claims:
                await self._commit_claimed(consumer, thread, claims, wait=True)
        finally:
            claims.cancel()

    async def _wait_free(
        self, consumer: RunConsumer, thread: ThreadPoolExecutor, claims: _ClaimsInFlight
    ) -> None:
        """Until a slot is free. Busy for a while, the executor steps aside from its queue's group until one
        frees: runs waiting in its share of the queue then go to executors that can start them."""
        if await within(self.attempts.wait_free(), STEP_ASIDE_AFTER):
            return
        while claims:  # what it claimed is committed first: nothing it took is handed to another
            await self._commit_claimed(consumer, thread, claims, wait=True)
        if not await self._queue_call(thread, consumer.step_aside, "step aside"):
            await self.attempts.wait_free()
            return
        log.info("all %d slots busy: stepped aside from the queue until one frees", len(self.attempts))
        await self.attempts.wait_free()
        await self._queue_call(thread, consumer.rejoin, "rejoin")

    async def _wait_contact(
        self, consumer: RunConsumer, thread: ThreadPoolExecutor, claims: _ClaimsInFlight
    ) -> None:
        """Until the stream is up. Out of contact for a while (the server unreachable, or refusing this
        executor), the executor steps aside from its queue's group until the stream is back: it can claim
        nothing meanwhile, and its share of the queue would wait for it. Claims in flight are answered after
        the reconnection (they wait for it), so with some the executor stays in the group."""
        if await within(self.stream.wait_ready(), STEP_ASIDE_OUT_OF_CONTACT) or claims:
            await self.stream.wait_ready()
            return
        if not await self._queue_call(thread, consumer.step_aside, "step aside"):
            await self.stream.wait_ready()
            return
        log.warning("out of contact with the server: stepped aside from the queue until the stream is back")
        await self.stream.wait_ready()
        await self._queue_call(thread, consumer.rejoin, "rejoin")
        log.info("in contact again: rejoined the queue")

    async def _queue_call(self, thread: ThreadPoolExecutor, call: Callable[[], None], what: str) -> bool:
        try:
            await self._in(thread, call)
        except QueueUnavailable as exc:
            log.warning("could not %s: %s", what, exc)
            return False
        return True

    async def _commit_claimed(
        self, consumer: RunConsumer, thread: ThreadPoolExecutor, claims: _ClaimsInFlight, *, wait: bool
    ) -> None:
        """Commits the answered batches at the head, in order, in one commit (each is a round trip to the
        broker and a write there); with `wait`, waits for the oldest first."""
        answered: list[Delivery] = []
        while (head := claims.head(wait)) is not None:
            deliveries, claim = head
            if await claim:
                answered += deliveries
                wait = False
        if not answered:
            return
        try:
            await self._in(thread, consumer.commit, answered)
        except Exception as exc:  # the runs come back, and the server refuses them as duplicates
            log.warning("could not commit %d deliveries: %s", len(answered), exc)

    async def _claim(self, deliveries: list[Delivery]) -> bool:
        """Claims and starts the granted attempts; False when draining before every answer came. Claims
        deferred by flow control are asked again at their retry time, the batch uncommitted meanwhile: a
        crash leaves them to the group."""
        waiting = deliveries
        while waiting:
            answered = await self._claim_once(waiting)
            if answered is None:
                return False  # not committed: the group gets them again
            waiting, retry_ns = answered
            if waiting and not await self._until(asyncio.sleep(_deferral_wait(retry_ns))):
                return False
        return True

    async def _claim_once(self, deliveries: list[Delivery]) -> tuple[list[Delivery], int] | None:
        """One claim of the deliveries: starts the granted attempts; the deferred deliveries and the
        earliest retry time they were given (ns). None when draining before the answer came."""
        refs = [delivery.run.attempt for delivery in deliveries]
        while True:
            try:
                claimed_at = time.monotonic()  # a grant keeps the attempt alive from no earlier than this
                results = await self.stream.claim(refs)
                break
            except StreamDown:
                if not await self._until(self.stream.wait_ready()):
                    return None
        if len(results) != len(refs):
            log.warning("%d answers to %d claims: the unanswered ones are skipped", len(results), len(refs))
        granted_ns = time.time_ns()
        granted = {
            AttemptRef.from_proto_or_none(r.attempt): r
            for r in results
            if r.outcome == pb.CLAIM_OUTCOME_GRANTED
        }
        deferred = {
            AttemptRef.from_proto_or_none(r.attempt): ns_of_timestamp(r.retry_time)
            for r in results
            if r.outcome == pb.CLAIM_OUTCOME_DEFERRED
        }
        self._hooks.claim([delivery.run for delivery in deliveries], {ref for ref in granted if ref})
        waiting = []
        for delivery in deliveries:
            key = AttemptRef.from_proto(delivery.run.attempt)  # the queue's codec refuses a malformed one
            if key in deferred:
                waiting.append(delivery)
                continue
            answer = granted.pop(key, None)
            if answer is None:
                log.debug("claim of %s refused: skipped", key)
                continue
            # Never before the server's start time, nor before the run's own due time.
            start_ns = max(ns_of_timestamp(answer.start_time), ns_of_timestamp(delivery.run.due_time))
            if delivery.run.HasField("dispatch_time"):
                DISPATCH_TO_CLAIM(delivery.run.queue).observe(
                    max(granted_ns - ns_of_timestamp(delivery.run.dispatch_time), 0) / 1e9
                )
            self.attempts.start(delivery.run, start_ns, claimed_at)
        return waiting, min(deferred.values(), default=granted_ns)

    async def _flush_loop(self) -> None:
        while True:
            await within(self.outbox.due.wait(), self.config.flush_interval.total_seconds())
            if not self.stream.connected:
                await self.stream.wait_connected()
                continue
            if self.stream.backlog() > BACKLOG_LIMIT:
                await asyncio.sleep(
                    self.config.flush_interval.total_seconds()
                )  # the writer is behind: let it catch up
                continue
            # Log lines wait in the outbox's bounded buffer, not in the stream's queue, while it is behind.
            if self.outbox.logs and self.stream.backlog() >= LOG_BACKLOG_LIMIT:
                await self.stream.wait_backlog_below(LOG_BACKLOG_LIMIT)
            requests = self.outbox.take(log_batches=max(LOG_BACKLOG_LIMIT - self.stream.backlog(), 0))
            for index, request in enumerate(requests):
                try:
                    self.stream.send(request)
                except StreamDown:
                    self.outbox.put_back(requests[index:])
                    break

    async def _until(self, awaitable: Awaitable[object]) -> bool:
        """Awaits `awaitable` unless a drain comes first: True when it completed."""
        work = asyncio.ensure_future(awaitable)
        drained = asyncio.create_task(self._draining.wait())
        try:
            await asyncio.wait({work, drained}, return_when=asyncio.FIRST_COMPLETED)
        finally:
            drained.cancel()
            work.cancel()
            await asyncio.gather(work, drained, return_exceptions=True)
        return work.done() and not work.cancelled() and not self._draining.is_set()

    @staticmethod
    async def _in(thread: ThreadPoolExecutor, function: Callable[..., T], *args: object) -> T:
        return await asyncio.get_running_loop().run_in_executor(thread, function, *args)


class _StreamEvents:
    """What the stream reports, routed to the outbox and the attempts."""

    def __init__(self, executor: Executor) -> None:
        self._executor = executor
        self._sessions = 0  # welcomes so far: a report of readiness names the session it was for

    def hello(self) -> pb.ExecutorHello:
        config = self._executor.config
        return pb.ExecutorHello(
            executor_id=config.executor_id,
            hostname=config.hostname,
            queues=config.queues,
            concurrency=config.concurrency,
            handlers=self._executor.handlers.names(),
            # What it holds: its attempts, and those whose results wait for an acknowledgement (the server
            # ends any other attempt recorded under this name, `AttemptReports.connected`).
            running=[key.to_proto() for key in self._held()],
        )

    def _held(self) -> list[AttemptRef]:
        executor = self._executor
        return sorted({*executor.attempts, *executor.outbox.awaiting_ack()})

    def connected(self, welcome: pb.ExecutorWelcome) -> None:
        self._executor.heartbeats.forget()
        self._executor.outbox.unsend_all()
        self._sessions += 1
        session, executor = self._sessions, self._executor

        def established() -> None:
            # Ready once the stream has held for a moment: one that its server ends right after the
            # welcome (its database away) is not up, and its readiness does not flap.
            if self._sessions == session and executor.stream.connected:
                executor.readiness.report(STREAM, True, f"server {welcome.server_id or '?'}")

        asyncio.get_running_loop().call_later(STREAM_SETTLED, established)

    def disconnected(self, unsent: list[pb.ConnectRequest]) -> None:
        self._executor.heartbeats.forget()  # their answers will never come
        self._executor.outbox.put_back(unsent)
        self._executor.readiness.report(STREAM, False, f"no stream to {self._executor.config.server}")

    def heartbeat_answer(self, answer: pb.HeartbeatAnswer) -> None:
        sent_at = self._executor.heartbeats.answered()
        if sent_at is not None:
            kept = filter(None, map(AttemptRef.from_proto_or_none, answer.kept_alive))
            self._executor.attempts.kept_alive(kept, sent_at)

    def acks(self, acks: pb.AckBatch) -> None:
        self._executor.outbox.acknowledge(acks.recorded)
        for ref in filter(None, map(AttemptRef.from_proto_or_none, acks.fenced)):
            self._executor.attempts.fence(ref)

    def cancels(self, cancels: pb.CancelBatch) -> None:
        for ref in filter(None, map(AttemptRef.from_proto_or_none, cancels.attempts)):
            self._executor.attempts.cancel(ref, cancels.reason or "cancelled")


class _ClaimsInFlight:
    """Claim batches sent and not yet committed, oldest first: a Kafka commit is a position, so a batch is
    committed only after every batch before it."""

    def __init__(self) -> None:
        self._batches: deque[tuple[list[Delivery], asyncio.Task[bool]]] = deque()

    def __bool__(self) -> bool:
        return bool(self._batches)

    def add(self, deliveries: list[Delivery], claim: asyncio.Task[bool]) -> None:
        self._batches.append((deliveries, claim))

    def full(self) -> bool:
        return len(self._batches) >= CLAIMS_IN_FLIGHT

    def deliveries(self) -> int:
        return sum(len(deliveries) for deliveries, _ in self._batches)

    def head(self, wait: bool) -> tuple[list[Delivery], asyncio.Task[bool]] | None:
        """Takes the oldest batch and its claim (True once granted and started); None when there is none,
        or when its claim is not answered yet and `wait` is false."""
        if not self._batches or not (wait or self._batches[0][1].done()):
            return None
        return self._batches.popleft()

    def cancel(self) -> None:
        for _, claim in self._batches:
            claim.cancel()
