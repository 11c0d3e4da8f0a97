"""The attempts that one executor's stream holds, as far as this server knows: those it claimed over the
stream, and those the store says it holds (asked once per attempt, for what an executor held before it
reconnected). A report (log lines, progress, a result) about an attempt it does not hold is refused and
logged: an executor may write only into the runs it runs."""

from __future__ import annotations

import logging
import threading
from collections.abc import Iterable, Sequence

from jobmesh.control.v1 import executor_control_pb2 as pb
from jobmesh.core.attempts import AttemptRef
from jobmesh.core.errors import StoreUnavailable
from jobmesh.core.ports.pipeline_store import PipelineStore
from jobmesh.core.records import RunState

__all__ = ["HeldAttempts"]

log = logging.getLogger(__name__)
_HOLDING = (RunState.RUNNING, RunState.CANCELLING)


class HeldAttempts:
    def __init__(self, executor: str, store: PipelineStore, *, trusted_while_away: bool = False) -> None:
        """`trusted_while_away`: with the database away nothing is refused (the journal checks each report
        again when it is applied, `AttemptReports.apply_journaled`)."""
        self._executor = executor
        self._store = store
        self._trusted_while_away = trusted_while_away
        self._lock = threading.Lock()
        self._held: set[AttemptRef] = set()

    def refused(self, refs: Iterable[AttemptRef], kind: str) -> frozenset[AttemptRef]:
        """Those of `refs` that the executor does not hold (logged); the store is asked about the ones
        this stream has not seen it hold."""
        with self._lock:
            unknown = sorted(set(refs) - self._held)
        if not unknown:
            return frozenset()
        try:
            current = self._store.attempts(unknown)
        except StoreUnavailable:
            if not self._trusted_while_away:
                raise
            return frozenset()
        held = {
            ref
            for ref in unknown
            if ref in current
            and current[ref].run.state in _HOLDING
            and current[ref].run.executor == self._executor
        }
        with self._lock:
            self._held |= held
        refused = frozenset(unknown) - held
        if refused:
            log.warning(
                "executor %s reported %s for %d attempts it does not hold (refused): %s",
                self._executor,
                kind,
                len(refused),
                ", ".join(map(str, sorted(refused)[:5])),
                extra={"executor": self._executor, "report": kind, "refused": len(refused)},
            )
        return refused

    def track(self, responses: Sequence[pb.ConnectResponse]) -> None:
        """What the server's answers say the executor now holds (claims granted, attempts kept alive) and no
        longer holds (results recorded, attempts fenced)."""
        gained: set[AttemptRef] = set()
        lost: set[AttemptRef] = set()
        for response in responses:
            kind = response.WhichOneof("message")
            if kind == "claim_results":
                granted = (
                    r.attempt for r in response.claim_results.results if r.outcome == pb.CLAIM_OUTCOME_GRANTED
                )
                gained |= set(_refs(granted))
            elif kind == "heartbeat_answer":
                gained |= set(_refs(response.heartbeat_answer.kept_alive))
            elif kind == "acks":
                lost |= set(_refs([*response.acks.recorded, *response.acks.fenced]))
        with self._lock:
            self._held = (self._held | gained) - lost


def _refs(wire: Iterable[pb.AttemptRef]) -> list[AttemptRef]:
    return [ref for ref in map(AttemptRef.from_proto_or_none, wire) if ref is not None]
