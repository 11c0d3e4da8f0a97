"""Keeping this server's executor streams alive in the database: one small write for all of them.

Every `interval`, and soon after heartbeats come, one statement renews the session of every executor whose
stream this process holds (`PipelineStore.renew_sessions`); the sweeper keeps alive the attempts of a
session renewed within their heartbeat timeout. A heartbeat batch is answered (`HeartbeatAnswer`) only
after a renewal that began after it arrived has committed: the executor counts an attempt alive from when
it sent the batch, never longer than the database knows (docs/design.md, "At least once"). So heartbeats
cost no write per attempt, and their answers wait for nothing but this thread's statement (at most ten a
second).

A session is also an executor name's hold across server processes: a connection takes it (`take`), and a
renewal keeps it, unless another server's stream renewed it within the quiet limit; a stream that ends
releases it (`release`), and the parent of a server worker that dies releases all of the worker's
(`processes/server_workers.py`). Only streams heard from
within that limit are renewed, so the name of one that dropped unnoticed is free for another server a quiet
limit later; a live stream whose name another server holds (taken meanwhile, say while the database was
unreachable) is ended at the next renewal.
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable
from dataclasses import dataclass
from datetime import datetime, timedelta

from jobmesh.control.v1 import executor_control_pb2 as pb
from jobmesh.core.errors import JobmeshError
from jobmesh.core.outage_log import OutageLog
from jobmesh.core.ports.pipeline_store import PipelineStore
from jobmesh.server.executors.sessions import SessionQueue, Sessions

log = logging.getLogger(__name__)
LINGER = 0.1  # seconds a renewal waits for more heartbeat batches after the first


@dataclass(frozen=True, slots=True)
class _Waiting:
    executor_id: str
    queue: SessionQueue
    answer: pb.ConnectResponse


class SessionRenewals:
    def __init__(
        self,
        store: PipelineStore,
        sessions: Sessions,
        clock: Callable[[], datetime],
        *,
        server_id: str,
        interval: timedelta,
        stale_after: timedelta,
        answers_while_away: bool = False,
    ) -> None:
        """`answers_while_away`: with the database away, heartbeat answers go out without a renewal (the
        server journals its executors' reports then, `server/executors/outage_mode.py`, and the sweeper judges
        no attempt until the database has been back for a heartbeat timeout); else they wait for one, and an
        attempt kept alive by nothing is stopped by its own executor."""
        self._answers_while_away = answers_while_away
        self._store = store
        self._stale_after = stale_after
        self._sessions = sessions
        self._clock = clock
        self._server_id = server_id
        self._interval = interval.total_seconds()
        self._lock = threading.Lock()
        # A renewal reads the live streams, then writes: a stream that ends in between is released before
        # the renewal's write, which then took the name back, held by no stream until it went stale. So a
        # renewal and a release never interleave.
        self._writing = threading.Lock()
        self._waiting: list[_Waiting] = []
        self._stop = threading.Event()
        self._arrived = threading.Event()
        self._renewing = OutageLog(log, "renewing executor sessions (heartbeats wait for their answers)")
        self._taking = OutageLog(log, "taking executor names")
        self._releasing = OutageLog(log, "releasing executor names")
        self._thread = threading.Thread(target=self._run, name="jobmesh-sessions", daemon=True)

    def start(self) -> None:
        self._thread.start()

    def close(self) -> None:
        self._stop.set()
        self._arrived.set()
        if self._thread.is_alive():
            self._thread.join(timeout=5)

    def answer_after_renewal(self, executor_id: str, queue: SessionQueue, answer: pb.ConnectResponse) -> None:
        """Sends a heartbeat batch's answer once the next renewal has committed; from any thread."""
        with self._lock:
            self._waiting.append(_Waiting(executor_id, queue, answer))
        self._arrived.set()

    def renew(self) -> bool:
        """One renewal, then the answers of the batches that came before it. False when it failed (those
        batches wait for the next)."""
        with self._lock:
            waiting, self._waiting = self._waiting, []
        try:
            with self._writing:
                # A batch of a stream that ended is not renewed, nor is a stream whose take came after this.
                streams = self._sessions.held_streams()
                live = {*self._sessions.live_executor_ids(), *(i.executor_id for i in waiting)}
                executors = live & streams.keys()
                held = self._store.renew_sessions(
                    sorted(executors), self._server_id, self._clock(), stale_after=self._stale_after
                )
        except JobmeshError as error:
            self._renewing.failed(error)
            if self._answers_while_away:
                held_now = self._sessions.held_streams()
                for item in waiting:
                    if item.executor_id in held_now:
                        item.queue.put(item.answer)
                return False
            with self._lock:
                self._waiting[:0] = waiting
            return False
        if executors:  # no executor: the store was not asked, and says nothing of the database
            self._renewing.succeeded()
        if lost := executors - held:
            log.warning(
                "executors %s are connected to another server too: their streams here end",
                sorted(lost),
                extra={"executors": sorted(lost)},
            )
            self._sessions.end(streams[executor_id] for executor_id in lost)
        for item in waiting:
            if item.executor_id in held:
                item.queue.put(item.answer)
        return True

    def take(self, executor_id: str) -> bool:
        """Takes the session of a new stream of `executor_id`: False while another server's live stream
        holds it. With the database unreachable the stream is let in (scheduling goes on degraded), and the
        next renewal that succeeds settles who holds the name."""
        try:
            held = self._store.renew_sessions(
                [executor_id], self._server_id, self._clock(), stale_after=self._stale_after
            )
        except JobmeshError as error:
            self._taking.failed(f"executor {executor_id} let in unchecked by other servers: {error}")
            return True
        self._taking.succeeded()
        return executor_id in held

    def release(self, executor_id: str) -> None:
        """This server's stream of `executor_id` ended: its name is free for any server at once (else it
        would be a quiet limit later)."""
        try:
            with self._writing:
                self._store.release_session(executor_id, self._server_id)
        except JobmeshError as error:
            self._releasing.failed(
                f"session of executor {executor_id} not released (free a quiet limit later): {error}"
            )
            return
        self._releasing.succeeded()

    def _run(self) -> None:
        while not self._stop.is_set():
            # Every interval, and soon after a heartbeat batch comes (its answer waits for a renewal): the
            # batches that come within LINGER of each other share one.
            if self._arrived.wait(self._interval):
                self._stop.wait(LINGER)
            self._arrived.clear()
            if self._stop.is_set():
                return
            try:
                self.renew()
            except Exception:  # the thread must live on: a missed renewal is the sweeper's to judge
                log.exception("renewing executor sessions failed")
