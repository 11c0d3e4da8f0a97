"""The mesh's count of runs per namespace, queue and state, as the store keeps it (`Store.count_runs`), and
what a caller may see of it.

`SCHEDULED` counts what `ListRuns` lists: runs due, or waiting out a retry's backoff. The upcoming ones, made
ahead of their time (`core.filters.is_upcoming`), are counted apart, as `ListRuns` lists them only with
`show_upcoming`.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterable
from dataclasses import dataclass
from datetime import datetime

from jobmesh.core.records import RunState


@dataclass(frozen=True, slots=True, order=True)
class RunCount:
    """Runs of one namespace and queue in one state (`upcoming`: those of `SCHEDULED` not yet due)."""

    namespace: str
    queue: str
    state: RunState
    runs: int
    upcoming: int = 0


@dataclass(frozen=True, slots=True)
class RunCounts:
    """The counts read at `read_time`, one entry per namespace, queue and state with runs, sorted."""

    counts: tuple[RunCount, ...]
    read_time: datetime

    def visible_to(self, namespaces: frozenset[str] | None) -> RunCounts:
        """The entries of `namespaces` (None: all of them)."""
        if namespaces is None:
            return self
        return RunCounts(tuple(c for c in self.counts if c.namespace in namespaces), self.read_time)

    def by_state(self) -> dict[RunState, int]:
        """Runs per state, over every namespace and queue (upcoming runs left out)."""
        totals: Counter[RunState] = Counter()
        for count in self.counts:
            totals[count.state] += count.runs
        return dict(totals)

    @property
    def upcoming(self) -> int:
        return sum(count.upcoming for count in self.counts)

    def same_counts(self, other: RunCounts | None) -> bool:
        """Whether `other` holds the same numbers, whenever it was read."""
        return other is not None and self.counts == other.counts


def run_counts(
    rows: Iterable[tuple[str, str, str, int]], upcoming: Iterable[tuple[str, str, int]], read_time: datetime
) -> RunCounts:
    """Counts from the store's rows: (namespace, queue, state, runs), several rows of one key adding up, and
    the upcoming runs per (namespace, queue), which the `SCHEDULED` rows include and the counts hold apart.
    Keys whose runs add up to none are left out."""
    totals: Counter[tuple[str, str, RunState]] = Counter()
    for namespace, queue, state, runs in rows:
        totals[(namespace, queue, RunState(state))] += int(runs)
    ahead: Counter[tuple[str, str, RunState]] = Counter()
    for namespace, queue, runs in upcoming:
        ahead[(namespace, queue, RunState.SCHEDULED)] += int(runs)
    counts = [
        RunCount(namespace, queue, state, totals[key] - ahead[key], ahead[key])
        for key in totals.keys() | ahead.keys()
        for namespace, queue, state in [key]
        if totals[key] != 0 or ahead[key] != 0
    ]
    return RunCounts(tuple(sorted(counts)), read_time)
