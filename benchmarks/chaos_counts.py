"""The chaos run's counts, from the executors' own start records and the database: pure functions, no I/O.

Start records come in two forms. The `chaos.stamp` handler (`benchmarks/chaos_handlers.py`) writes
`S RUN ATTEMPT NS` as it begins and `E RUN ATTEMPT NS` as it ends, one file per executor. A long command
cannot know its run or its attempt (a command's environment holds neither), so it is given a tag of its own
in its argv and writes `START start`, `START alive NS` every second and `START end NS` to the tag's file,
START being its own start instant: a copy of it that outlived its executor shows as alive after a retry began.
"""

from __future__ import annotations

import itertools
import math
from collections import defaultdict
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass

LATE = 2.0  # seconds: the promise, and the bound
NEVER = math.inf  # the lateness of a run that never started


@dataclass(frozen=True, slots=True)
class Start:
    """One real start of an attempt: `attempt` 0 when the starter could not know it (a command); `end_ns`
    its last sign of life (its end, or its last `alive` stamp), None when it left none."""

    run: str
    attempt: int
    start_ns: int
    end_ns: int | None = None

    @property
    def last_ns(self) -> int:
        return self.start_ns if self.end_ns is None else max(self.end_ns, self.start_ns)


@dataclass(frozen=True, slots=True)
class StoredRun:
    """A run as the database has it after the run: its current attempt, and every attempt that it says
    succeeded (its history's and the current one's)."""

    job: str
    state: str
    schedule_ns: int
    attempt: int
    succeeded: tuple[int, ...] = ()
    dispatch_ns: int = 0  # the current attempt's dispatch (0: never dispatched)
    claim_ns: int = 0  # the current attempt's start as the server recorded it, at its claim (0: none)


@dataclass(frozen=True, slots=True)
class Window:
    """A fault, from the instant it began to the instant it was lifted (the process or service back)."""

    name: str
    start_ns: int
    end_ns: int


# ---------------------------------------------------------------- records


def parse_handler_records(lines: Iterable[str]) -> list[Start]:
    """One executor's `S`/`E` lines as starts: an `E` ends the latest open start of its attempt (a start the
    executor's death cut short keeps no end)."""
    open_starts: dict[tuple[str, int], list[int]] = defaultdict(list)
    ended: list[Start] = []
    for line in lines:
        words = line.split()
        if len(words) != 4 or words[0] not in {"S", "E"}:
            continue  # a line cut by a kill
        kind, run, attempt, instant = words[0], words[1], int(words[2]), int(words[3])
        if kind == "S":
            open_starts[(run, attempt)].append(instant)
        elif open_starts[(run, attempt)]:
            ended.append(Start(run, attempt, open_starts[(run, attempt)].pop(), instant))
    cut = [Start(run, attempt, start) for (run, attempt), starts in open_starts.items() for start in starts]
    return sorted([*ended, *cut], key=lambda start: start.start_ns)


def parse_command_records(run: str, lines: Iterable[str]) -> list[Start]:
    """A long command's stamps (every copy of it that started, under one tag) as starts of `run`."""
    last: dict[int, int | None] = {}
    for line in lines:
        words = line.split()
        if not words or not words[0].isdigit():
            continue
        started = int(words[0])
        if len(words) == 2 and words[1] == "start":
            last.setdefault(started, None)
        elif len(words) == 3 and words[1] in {"alive", "end"} and words[2].isdigit():
            seen = last.get(started)
            last[started] = int(words[2]) if seen is None else max(seen, int(words[2]))
    return [Start(run, 0, started, end) for started, end in sorted(last.items())]


# ---------------------------------------------------------------- counts


def starts_by_run(starts: Iterable[Start]) -> dict[str, list[Start]]:
    runs: dict[str, list[Start]] = defaultdict(list)
    for start in starts:
        runs[start.run].append(start)
    return dict(runs)


def first_starts(starts: Iterable[Start]) -> dict[str, int]:
    """run -> its first real start, whatever the attempt."""
    first: dict[str, int] = {}
    for start in starts:
        first[start.run] = min(first.get(start.run, start.start_ns), start.start_ns)
    return first


def attempts_started_twice(starts: Iterable[Start], attempts: Mapping[str, int]) -> dict[str, int]:
    """run -> starts beyond one per attempt. An attempt known to its starter (a handler) counts when stamped
    twice; a run whose starters cannot tell their attempt (commands) counts its starts beyond the attempts the
    database gave it (`attempts`: run -> its last attempt)."""
    extra: dict[str, int] = defaultdict(int)
    known: dict[tuple[str, int], int] = defaultdict(int)
    unknown: dict[str, int] = defaultdict(int)
    for start in starts:
        if start.attempt > 0:
            known[(start.run, start.attempt)] += 1
        else:
            unknown[start.run] += 1
    for (run, _), count in known.items():
        if count > 1:
            extra[run] += count - 1
    for run, count in unknown.items():
        if count > attempts.get(run, 1):
            extra[run] += count - attempts.get(run, 1)
    return dict(extra)


def overlapping_runs(starts: Iterable[Start]) -> dict[str, int]:
    """run -> how many of its starts began while an earlier one of it was still alive (from its start to its
    last sign of life; a start with none counts as an instant)."""
    overlaps: dict[str, int] = {}
    for run, mine in starts_by_run(starts).items():
        alive_until = -1
        count = 0
        for start in sorted(mine, key=lambda each: each.start_ns):
            if start.start_ns < alive_until:
                count += 1
            alive_until = max(alive_until, start.last_ns)
        if count:
            overlaps[run] = count
    return overlaps


def early_starts(
    starts: Iterable[Start], schedule_ns: Mapping[str, int], precision_ns: int = 1_000
) -> list[Start]:
    """Starts before their run's schedule time (invariant 2), by more than the database keeps of a time
    (PostgreSQL: a microsecond)."""
    return [
        start
        for start in starts
        if start.run in schedule_ns and start.start_ns < schedule_ns[start.run] - precision_ns
    ]


def succeeded_run_again(runs: Mapping[str, StoredRun], starts: Iterable[Start]) -> dict[str, int]:
    """run -> the attempt the database says succeeded, for each run where something ran after it: a later
    attempt (in the database or in the start records), or the same attempt started again after it ended."""
    by_run = starts_by_run(starts)
    again: dict[str, int] = {}
    for name, run in runs.items():
        if not run.succeeded:
            continue
        first_success = min(run.succeeded)
        mine = by_run.get(name, [])
        later = run.attempt > first_success or any(start.attempt > first_success for start in mine)
        same = sorted((s for s in mine if s.attempt == first_success), key=lambda s: s.start_ns)
        restarted = any(
            earlier.end_ns is not None and later_start.start_ns >= earlier.end_ns
            for earlier, later_start in itertools.pairwise(same)
        )
        if later or restarted:
            again[name] = first_success
    return again


def never_started(due: Mapping[str, int], first: Mapping[str, int]) -> list[str]:
    return sorted(run for run in due if run not in first)


def missing_cron_occurrences(
    period_s: Mapping[str, int],
    span_ns: Mapping[str, tuple[int, int]],
    schedules: Mapping[str, Sequence[int]],
) -> tuple[int, int, int]:
    """(expected, missing, duplicated) occurrences of cron jobs running every `period_s[job]` seconds (on
    multiples of it, in epoch seconds) strictly inside `span_ns[job]`; `schedules`: job -> its runs'
    schedule times."""
    expected = missing = duplicated = 0
    for job, period in period_s.items():
        start, end = span_ns[job]
        first = math.floor(start / 1e9 / period) * period + period
        wanted = set(range(first * 10**9, end, period * 10**9))
        wanted = {instant for instant in wanted if start < instant < end}
        have = list(schedules.get(job, ()))
        expected += len(wanted)
        missing += len(wanted - set(have))
        duplicated += len(have) - len(set(have))
    return expected, missing, duplicated


# ---------------------------------------------------------------- lateness by window


def segment(due_ns: int, windows: Sequence[Window], after_s: float) -> list[str]:
    """The labels a run due at `due_ns` counts under: `in:NAME` for each window holding it, `after:NAME` for
    each one it follows by at most `after_s` (outside every window), and `outside` (due in no window) with,
    besides, `quiet` (nor just after one)."""
    labels = [f"in:{w.name}" for w in windows if w.start_ns <= due_ns <= w.end_ns]
    if labels:
        return labels
    after = [f"after:{w.name}" for w in windows if w.end_ns < due_ns <= w.end_ns + after_s * 1e9]
    return ["outside", *after] if after else ["outside", "quiet"]


def lateness_by_segment(
    due: Mapping[str, int], first: Mapping[str, int], windows: Sequence[Window], after_s: float
) -> dict[str, list[float]]:
    """label -> the lateness in seconds (first start - schedule time; NEVER when not started) of each run
    due under it (see `segment`)."""
    lateness: dict[str, list[float]] = defaultdict(list)
    for run, due_ns in due.items():
        late = (first[run] - due_ns) / 1e9 if run in first else NEVER
        for label in segment(due_ns, windows, after_s):
            lateness[label].append(late)
    return dict(lateness)


def percentile(ordered: Sequence[float], fraction: float) -> float:
    """Nearest rank of sorted values (NaN when empty)."""
    if not ordered:
        return math.nan
    return ordered[min(len(ordered) - 1, max(0, math.ceil(fraction * len(ordered)) - 1))]


def summary(values: Sequence[float]) -> dict[str, float]:
    """Runs due, started, p50/p99/max lateness (a run never started is infinitely late) and the % that
    started within `LATE` seconds."""
    ordered = sorted(values)
    within = sum(1 for late in ordered if late <= LATE)
    return {
        "due": len(ordered),
        "started": sum(1 for late in ordered if late != NEVER),
        "p50": percentile(ordered, 0.50),
        "p99": percentile(ordered, 0.99),
        "max": ordered[-1] if ordered else math.nan,
        "within_2s_pct": 100.0 * within / len(ordered) if ordered else math.nan,
    }


def late_runs(
    due: Mapping[str, int],
    first: Mapping[str, int],
    *,
    dispatched: Mapping[str, int],
    claimed: Mapping[str, int],
    kinds: Mapping[str, str],
    windows: Sequence[Window],
    after_s: float,
    keep: int,
) -> dict[str, dict[str, object]]:
    """For each label of `segment` but `outside`/`quiet`, the runs that started more than `LATE` seconds
    late: how many of each kind, how many by the second of their due time from the window's start (`in:`)
    or end (`after:`), how many of each kind were handed to the queue more than `LATE` seconds after their
    due time (late before the queue, not in it), how many were claimed that late (late before the executor's
    start), and the `keep` latest as [run, kind, due s from that
    instant, late s, dispatched s after due or None]."""
    origin = {f"in:{w.name}": w.start_ns for w in windows} | {f"after:{w.name}": w.end_ns for w in windows}
    found: dict[str, list[tuple[float, str, float, float | None]]] = defaultdict(list)
    for run, due_ns in due.items():
        late = (first[run] - due_ns) / 1e9 if run in first else NEVER
        if late <= LATE:
            continue
        sent = (dispatched[run] - due_ns) / 1e9 if run in dispatched else None
        for label in segment(due_ns, windows, after_s):
            if label in origin:
                found[label].append((late, run, (due_ns - origin[label]) / 1e9, sent))
    profile: dict[str, dict[str, object]] = {}
    for label, runs in sorted(found.items()):
        runs.sort(reverse=True)
        by_second: dict[int, int] = defaultdict(int)
        by_kind: dict[str, int] = defaultdict(int)
        dispatched_late: dict[str, int] = defaultdict(int)
        claimed_late: dict[str, int] = defaultdict(int)
        for _, run, offset, sent in runs:
            kind = kinds.get(run, "?")
            by_second[math.floor(offset)] += 1
            by_kind[kind] += 1
            if sent is not None and sent > LATE:
                dispatched_late[kind] += 1
            if run in claimed and (claimed[run] - due[run]) / 1e9 > LATE:
                claimed_late[kind] += 1
        profile[label] = {
            "by_kind": dict(sorted(by_kind.items())),
            "by_due_second": dict(sorted(by_second.items())),
            "dispatched_late_by_kind": dict(sorted(dispatched_late.items())),
            "claimed_late_by_kind": dict(sorted(claimed_late.items())),
            "latest": [
                [
                    run,
                    kinds.get(run, "?"),
                    round(offset, 3),
                    round(late, 3),
                    None if sent is None else round(sent, 3),
                ]
                for late, run, offset, sent in runs[:keep]
            ],
        }
    return profile
