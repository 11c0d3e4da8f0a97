"""Routing a persisted cancel to the executor that holds the run.

The caller has persisted the cancel first (the run is `CANCELLING`). The cancel then goes over the executor's
stream when this process holds it; otherwise it is published on the signal bus, so that the server replica
holding that stream pushes it. Every server also sees the run turn `CANCELLING` in its change feed, and pushes
the cancel over the streams it holds: a second route between replicas, through the database, for when the bus
is down. The stream's server sends it once, whichever of these routes comes first, and heartbeat answers send
it again only while the executor has not acknowledged it (`server.executors.sessions.CancelsSent`), so a
cancel survives the loss of every channel but the database (invariant 6). In every case it is also left as a
cancel key with a TTL, which an executor whose stream is down polls.
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from datetime import timedelta

from jobmesh.core.attempts import AttemptRef
from jobmesh.core.ports.signals import CancelNotice, SignalBus, SignalsUnavailable
from jobmesh.core.records import RunRecord, RunState

log = logging.getLogger(__name__)

CANCEL_KEY_TTL = timedelta(minutes=10)
# Pushes a notice over a stream this process holds; False when it holds none of that executor's.
LocalPush = Callable[[CancelNotice], bool]


# The states of runs whose executor is sent a cancel.
CANCEL_NOTICE_STATES = frozenset({RunState.CANCELLING})


def cancel_notice_of(run: RunRecord, reason: str) -> CancelNotice | None:
    """The notice for the executor of a CANCELLING run; None for a run in another state or held by none."""
    if run.state in CANCEL_NOTICE_STATES and run.executor:
        return CancelNotice(run.executor, (AttemptRef.of(run),), reason)
    return None


class CancelRouter:
    def __init__(self, signals: SignalBus, push_local: LocalPush | None = None) -> None:
        self._signals = signals
        self._push_local = push_local

    def route_run(self, run: RunRecord, reason: str) -> None:
        """Tells the run's executor, when the store has just set it CANCELLING (a pending run has none)."""
        if (notice := cancel_notice_of(run, reason)) is not None:
            self.route(notice)

    def route(self, notice: CancelNotice) -> None:
        """Pushes the cancel by every channel there is; a signal bus that is down is logged, not raised."""
        if self._push_local is None or not self._push_local(notice):
            try:
                self._signals.publish_cancel(notice)
            except SignalsUnavailable as error:
                log.warning("cancel not published (heartbeat answers will carry it): %s", error)
        try:
            self._signals.set_cancel_keys(notice.attempts, CANCEL_KEY_TTL)
        except SignalsUnavailable as error:
            log.warning("cancel keys not set (the stream and heartbeats carry it): %s", error)
