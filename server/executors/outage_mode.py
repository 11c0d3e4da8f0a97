"""What the server does with its executors' reports while its database is away, and once it is back.

- A claim the store cannot take is fenced on the signal bus instead: one owner per attempt
  (`SignalBus.fence_attempts`, a SET NX that outlives any outage this is meant for). Granted, it is journaled
  and answered, and the run starts on time. An attempt fenced by another executor is a duplicate.
- Results, log lines and progress are journaled (`server/executors/outage_journal.py`) and answered as
recorded.
- Heartbeats are answered as kept alive: the sweeper judges no attempt until the database has been back for
  a heartbeat timeout (`watcher/sweeper.py`), and by then the journal is applied.
- Once the database answers, the journal is applied in order, each report as of its time, and emptied.
- A claim through the database is refused while another executor holds the attempt's fence: an attempt
  granted during the outage, whose journal another server has not applied yet, is not granted twice.

docs/design.md, "Claims while the database is away", argues why an attempt cannot start twice, and says what
happens when the signal bus is away too (claims wait for one or the other).
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable, Sequence
from datetime import datetime, timedelta
from pathlib import Path

from jobmesh.control.v1 import executor_control_pb2 as pb
from jobmesh.core.attempts import AttemptRef
from jobmesh.core.errors import StoreUnavailable
from jobmesh.core.outage_log import OutageLog
from jobmesh.core.ports.signals import SignalBus, SignalsUnavailable
from jobmesh.server.executors.outage_journal import JournalEntry, OutageJournal

log = logging.getLogger(__name__)
# Longer than any database outage the journal is meant to carry a mesh through.
FENCE_TTL = timedelta(hours=6)
REPLAY_EVERY = 1.0  # seconds between tries to apply the journal while it holds anything
JOURNAL_SUFFIX = ".journal"


class OutageMode:
    def __init__(self, journal: OutageJournal, signals: SignalBus) -> None:
        self._journal = journal
        self._signals = signals
        self._fence_checks = OutageLog(log, "checking claims against outage fences")
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None

    def fence(self, executor: str, refs: Sequence[AttemptRef], at: datetime) -> set[AttemptRef]:
        """The attempts granted to `executor` while the database is away: fenced, then journaled. Raises
        StoreUnavailable when the signal bus is away too (the claims wait)."""
        try:
            granted = self._signals.fence_attempts(refs, executor, FENCE_TTL)
        except SignalsUnavailable as error:
            raise StoreUnavailable(f"and the signal bus too, so no claim can be fenced: {error}") from error
        if granted:
            ordered = [ref.to_proto() for ref in refs if ref in granted]
            self.journal(executor, pb.ConnectRequest(claims=pb.ClaimBatch(attempts=ordered)), at)
            log.debug(  # a line a batch: the outage itself is logged once (core/outage_log.py)
                "%d claims of executor %s granted on their fences, the database away", len(granted), executor
            )
        return granted

    def journal(self, executor: str, request: pb.ConnectRequest, at: datetime) -> None:
        self._journal.append(executor, request, at)

    def fenced(self, refs: Sequence[AttemptRef]) -> set[AttemptRef]:
        """Those of `refs` whose fence any executor holds: granted while the database was away, their claim
        perhaps not recorded yet (none when the signal bus cannot tell)."""
        return set(self._fence_owners(refs))

    def fenced_by_others(self, refs: Sequence[AttemptRef], executor: str) -> set[AttemptRef]:
        """Those of `refs` whose fence another executor holds. With the signal bus away it cannot be told,
        and none is (logged once an outage)."""
        return {ref for ref, owner in self._fence_owners(refs).items() if owner != executor}

    def fenced_by(self, refs: Sequence[AttemptRef], executor: str) -> set[AttemptRef]:
        """Those of `refs` whose fence `executor` holds (none when the signal bus cannot tell)."""
        return {ref for ref, owner in self._fence_owners(refs).items() if owner == executor}

    def _fence_owners(self, refs: Sequence[AttemptRef]) -> dict[AttemptRef, str]:
        if not refs:
            return {}
        try:
            owners = self._signals.fence_owners(refs)
        except SignalsUnavailable as error:
            self._fence_checks.failed(error)
            return {}
        self._fence_checks.succeeded()
        return owners

    def start(self, apply: Callable[[JournalEntry], None]) -> None:
        """Applies the journal whenever it holds anything and the database takes it."""
        self._thread = threading.Thread(target=self._run, args=(apply,), name="jobmesh-journal", daemon=True)
        self._thread.start()

    def close(self) -> None:
        self._stop.set()
        if self._thread is not None:
            self._thread.join(timeout=10)
        empty = len(self._journal) == 0
        self._journal.close()  # what it still holds is applied by the next server of this database
        if empty:
            self._journal.path.unlink(missing_ok=True)

    def _run(self, apply: Callable[[JournalEntry], None]) -> None:
        while not self._stop.wait(REPLAY_EVERY):
            try:
                if len(self._journal):
                    apply_journal(self._journal, apply)
                apply_orphans(self._journal.path.parent, apply)
            except StoreUnavailable:
                continue  # still away
            except Exception:  # the thread must live on: the journal is kept for the next try
                log.exception("applying the journal failed")


def apply_journal(journal: OutageJournal, apply: Callable[[JournalEntry], None]) -> int:
    """Applies every entry in order and empties the journal; returns how many. Stops at the first that the
    database cannot take (StoreUnavailable, raised), keeping that one and those after it."""
    done = 0
    try:
        for entry in list(journal.entries()):
            apply(entry)
            done += 1
    finally:
        if done:
            journal.drop_first(done)
            log.info("applied %d reports journaled while the database was away (%s)", done, journal.path.name)
    return done


def journal_path(folder: Path, server_id: str) -> Path:
    return folder / f"{server_id}{JOURNAL_SUFFIX}"


def apply_orphans(folder: Path, apply: Callable[[JournalEntry], None]) -> int:
    """Applies the journals in `folder` that no live process holds (a server that died with reports in its
    journal), and removes each once empty; returns how many entries."""
    applied = 0
    for path in sorted(folder.glob(f"*{JOURNAL_SUFFIX}")):
        orphan = OutageJournal(path)
        try:
            orphan.open()
        except BlockingIOError:
            continue  # a live server's own
        try:
            if len(orphan):
                applied += apply_journal(orphan, apply)
            if len(orphan) == 0:
                path.unlink(missing_ok=True)
        finally:
            orphan.close()
    return applied
