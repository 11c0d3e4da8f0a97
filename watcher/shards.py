"""The shards this watcher holds, each under a lease of its own, shared fairly among the live watchers.

Every watcher renews a membership lease and its shards' leases in one statement, often (`shard_lease_renew`)
and short-lived (`shard_lease_ttl`), so a watcher that dies loses its shards within the TTL. Each round it
reads every shard and member lease and:
- takes every shard whose lease expired (its holder died: a gap is worse than an imbalance);
- takes free shards (released, or never leased) while it holds fewer than its fair share, the shard count
  over the live watchers, rounded up;
- gives one shard back (a released lease is free at once) while it holds more than its fair share and
  another live watcher holds fewer, which takes it within its next round: shards move to a watcher that
  joins one at a time, each uncovered for less than a renewal interval, never the whole job space at once.
A watcher also wakes at the instant another's shard lease expires, so a dead watcher's shards are taken
within the TTL (and a round's statement), not a renewal interval later.

After the database was away (for longer than the TTL every lease expired, the live watchers' too), a watcher
renews what it holds but takes no expired shard for a TTL: the others renew theirs meanwhile, so the first
watcher back does not take every shard, only to hand most of them back one at a time.
"""

from __future__ import annotations

import math
import threading
from collections import Counter
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass
from datetime import datetime, timedelta

from jobmesh.core.errors import StoreUnavailable
from jobmesh.core.ports.pipeline_store import Lease, SchedulerStore
from jobmesh.core.shards import SHARDS, shard_of

LEASES = "watcher-"  # the prefix of both kinds below (the singleton lease is "watcher", not under it)
MEMBER = "watcher-member/"
SHARD = "watcher-shard/"
# A dead watcher's membership lease is deleted this long after it expired (it would only take room).
FORGET_MEMBERS_AFTER = timedelta(minutes=1)


def shard_lease(shard: int) -> str:
    return f"{SHARD}{shard:02d}"


@dataclass(frozen=True, slots=True)
class ShardMoves:
    taken: frozenset[int]
    lost: frozenset[int]  # given back, or taken by another watcher while this one was away
    wake_at: datetime | None = None  # when another watcher's shard lease expires next


NO_MOVES = ShardMoves(frozenset(), frozenset())


class ShardLeases:
    """Thread-safe; `held` may be read anywhere. Once `release_all` ran, rounds take nothing any more (a round
    under way in a worker thread when the watcher stops must not take back what the stop let go)."""

    def __init__(
        self, store: SchedulerStore, holder: str, ttl: timedelta, clock: Callable[[], datetime]
    ) -> None:
        self._store = store
        self._holder = holder
        self._member = f"{MEMBER}{holder}"
        self._ttl = ttl
        self._clock = clock
        self._held: frozenset[int] = frozenset()
        self._offset = shard_of(holder)  # where this watcher starts looking for free shards
        self._lock = threading.Lock()
        self._stopped = False
        self._away = False  # the last round failed: the database was away
        self._patient_until: datetime | None = None

    @property
    def held(self) -> frozenset[int]:
        return self._held

    def renew(self) -> ShardMoves:
        """One round: renews, takes and gives back shards; returns what changed."""
        with self._lock:
            if self._stopped:
                return NO_MOVES
            try:
                return self._round()
            except StoreUnavailable:
                self._away = True
                raise

    def _round(self) -> ShardMoves:
        now = self._clock()
        leases = self._store.leases(LEASES)
        if self._away:  # back: let the other live watchers renew theirs before taking expired shards
            self._away, self._patient_until = False, now + self._ttl
        wanted, giving = self._wanted(leases, now)
        names = [self._member, *(shard_lease(shard) for shard in wanted)]
        got = self._store.try_leases(names, self._holder, self._ttl, now)
        held = frozenset(shard for shard in wanted if shard_lease(shard) in got)
        before, self._held = self._held, held
        if giving is not None:
            self._store.release_lease(shard_lease(giving), self._holder)
        self._forget_dead_members(leases, now)
        return ShardMoves(held - before, before - held, _next_expiry(leases, self._holder, now))

    def release_all(self) -> None:
        """A clean stop: every shard (and the membership) is free for the others at once."""
        with self._lock:
            self._stopped = True
            held, self._held = self._held, frozenset()
        for name in [*(shard_lease(shard) for shard in sorted(held)), self._member]:
            self._store.release_lease(name, self._holder)

    def _wanted(self, leases: Mapping[str, Lease], now: datetime) -> tuple[set[int], int | None]:
        """The shards to renew or take, and the one to give back (if any)."""
        members = {lease.holder for name, lease in leases.items() if _live(name, lease, now, MEMBER)}
        members.add(self._holder)
        fair = math.ceil(SHARDS / len(members))
        counts = Counter(lease.holder for name, lease in leases.items() if _live(name, lease, now, SHARD))
        wanted = set(self._held)
        patient = self._patient_until is not None and now < self._patient_until
        for shard in range(SHARDS):
            lease = leases.get(shard_lease(shard))
            expired = lease is not None and lease.holder != self._holder and lease.expires_at <= now
            if expired and not patient:
                wanted.add(shard)  # its holder died
        free = [shard for shard in self._in_my_order(range(SHARDS)) if shard_lease(shard) not in leases]
        wanted.update(free[: max(fair - len(wanted), 0)])
        others_short = any(counts[member] < fair for member in members - {self._holder})
        if len(self._held) > fair and others_short:
            giving = max(self._held, key=lambda shard: (shard - self._offset) % SHARDS)
            wanted.discard(giving)
            return wanted, giving
        return wanted, None

    def _in_my_order(self, shards: Iterable[int]) -> list[int]:
        """Watchers start looking at different shards, so two taking at once seldom want the same ones."""
        return sorted(shards, key=lambda shard: (shard - self._offset) % SHARDS)

    def _forget_dead_members(self, leases: Mapping[str, Lease], now: datetime) -> None:
        for name, lease in leases.items():
            if name.startswith(MEMBER) and lease.expires_at < now - FORGET_MEMBERS_AFTER:
                self._store.release_lease(name, lease.holder)


def _live(name: str, lease: Lease, now: datetime, prefix: str) -> bool:
    return name.startswith(prefix) and lease.expires_at > now


def _next_expiry(leases: Mapping[str, Lease], holder: str, now: datetime) -> datetime | None:
    expiries = [
        lease.expires_at
        for name, lease in leases.items()
        if name.startswith(SHARD) and lease.holder != holder and lease.expires_at > now
    ]
    return min(expiries, default=None)
