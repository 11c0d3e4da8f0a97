"""The peers benchmark's records and figures: the workers' start records, the senders' submit records, and
the numbers and tables made of them (each figure is defined in `benchmarks/peers/bench.py`)."""

from __future__ import annotations

import math
from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from benchmarks.figures import machine, spread


class Starts:
    """`n pid start_ns` lines of every `starts-PID.txt` in one folder, read as the workers append them."""

    def __init__(self, folder: Path) -> None:
        self.folder = folder
        self._offsets: dict[Path, int] = {}
        self._partial: dict[Path, str] = {}
        self.by_job: dict[int, list[int]] = {}  # n -> its start instants (warm-up jobs are negative)
        self.per_process: Counter[int] = Counter()  # pid -> measured jobs started
        self.warm_processes: set[int] = set()

    def read(self) -> None:
        for path in sorted(self.folder.glob("starts-*.txt")):
            with path.open("r", encoding="utf-8") as source:
                source.seek(self._offsets.get(path, 0))
                chunk = source.read()
                self._offsets[path] = source.tell()
            lines = (self._partial.get(path, "") + chunk).split("\n")
            self._partial[path] = lines.pop()
            for line in lines:
                self._add(*(int(word) for word in line.split()))

    def _add(self, n: int, pid: int, started: int) -> None:
        self.by_job.setdefault(n, []).append(started)
        if n < 0:
            self.warm_processes.add(pid)
        else:
            self.per_process[pid] += 1

    def started(self, jobs: range) -> int:
        return sum(1 for n in jobs if n in self.by_job)

    def warm_started(self) -> int:
        return sum(1 for n in self.by_job if n < 0)


@dataclass(frozen=True, slots=True)
class Submitted:
    n: int
    offered_ns: int
    submit_ns: int
    ok: bool  # the enqueue call returned


def read_submitted(paths: Sequence[Path]) -> list[Submitted]:
    jobs = []
    for path in paths:
        for line in path.read_text().splitlines():
            n, offered, submit, ok = (int(word) for word in line.split())
            jobs.append(Submitted(n, offered, submit, ok == 1))
    return sorted(jobs, key=lambda job: job.n)


@dataclass
class Measured:
    peer: str
    version: str
    rate: float
    duration: float
    t0: float
    end: float
    jobs: list[Submitted]
    starts: Starts
    cpu_seconds: dict[str, float]
    machine_busy_pct: float  # every process on the machine, ours or not
    config: dict[str, Any] = field(default_factory=dict)


def figures(measured: Measured) -> dict[str, Any]:
    starts, t0_ns = measured.starts, round(measured.t0 * 1e9)
    first = {n: min(instants) for n, instants in starts.by_job.items() if n >= 0}
    lateness = [(first[job.n] - job.submit_ns) / 1e9 for job in measured.jobs if job.n in first]
    last_start = max(first.values(), default=t0_ns)
    started = len(lateness)
    window = measured.end - measured.t0

    def per_thousand(seconds: float) -> float:
        return seconds / started * 1000 if started else math.nan

    return {
        "peer": measured.peer,
        "version": measured.version,
        "date": datetime.now(UTC).strftime("%Y-%m-%d"),
        "machine": machine(),
        "rate": measured.rate,
        "duration": measured.duration,
        **measured.config,
        "offered": len(measured.jobs),
        "sent": sum(1 for job in measured.jobs if job.ok),
        "send_errors": sum(1 for job in measured.jobs if not job.ok),
        "started": started,
        "not_started": len(measured.jobs) - started,
        "duplicates": sum(len(instants) - 1 for n, instants in starts.by_job.items() if n >= 0),
        # a no-op ends as it starts: started per second from the first offer to the last start
        "completed_per_s": started / max(measured.duration, (last_start - t0_ns) / 1e9) if started else 0.0,
        "last_start_after_window_s": (last_start - t0_ns) / 1e9 - measured.duration if started else math.nan,
        "submit_to_start_s": spread(lateness),
        "sender_lag_s": spread([(job.submit_ns - job.offered_ns) / 1e9 for job in measured.jobs]),
        "starts_per_process": sorted(starts.per_process.values(), reverse=True),
        "window_s": window,
        "cpu_s": measured.cpu_seconds,
        "cpu_s_per_1000": {name: per_thousand(seconds) for name, seconds in measured.cpu_seconds.items()},
        "machine_busy_pct": measured.machine_busy_pct,
    }


# ---------------------------------------------------------------- output


def ms(seconds: float) -> str:
    if math.isnan(seconds):
        return "-"
    value = seconds * 1000
    return f"{value:.1f}" if value < 10 else f"{value:,.0f}"


def lateness_cell(values: dict[str, float]) -> str:
    return f"{ms(values['p50'])} / {ms(values['p99'])} / {ms(values['max'])}"


def cpu_cell(result: dict[str, Any], name: str) -> str:
    value = result["cpu_s_per_1000"].get(name)
    return "n/a" if value is None or math.isnan(value) else f"{value:.2f}"


def report(result: dict[str, Any]) -> str:
    cpu_parts = ", ".join(
        f"{name} {seconds:.1f} ({cpu_cell(result, name)})" for name, seconds in result["cpu_s"].items()
    )
    return "\n".join(
        [
            f"{result['peer']} {result['version']}: {result['rate']:,.0f} jobs/s "
            f"for {result['duration']:g} s",
            f"  offered {result['offered']:,}, sent {result['sent']:,} (enqueue errors "
            f"{result['send_errors']:,}), started {result['started']:,}, not started "
            f"{result['not_started']:,}, duplicates {result['duplicates']:,}",
            f"  completed/s {result['completed_per_s']:,.0f}; the last start "
            f"{result['last_start_after_window_s']:.2f} s after the window",
            f"  submit → start ms p50 / p99 / max   {lateness_cell(result['submit_to_start_s'])}",
            f"  sender lag (offered → sent) ms      {lateness_cell(result['sender_lag_s'])}",
            f"  starts per worker process: {', '.join(f'{n:,}' for n in result['starts_per_process'])}",
            f"  CPU s over {result['window_s']:.1f} s (per 1,000 jobs): {cpu_parts}; the machine was "
            f"{result['machine_busy_pct']:.0f}% busy",
        ]
    )


MARKDOWN_HEADER = (
    "| peer | offered jobs/s | completed jobs/s | submit→start ms p50 / p99 / max | not started | dup. "
    "| CPU s / 1k jobs: workers (broker, load) |\n"
    "|---|---:|---:|---|---:|---:|---|"
)


def markdown_row(result: dict[str, Any]) -> str:
    cpu = f"{cpu_cell(result, 'workers')} ({cpu_cell(result, 'broker')}, {cpu_cell(result, 'load')})"
    return (
        f"| {result['peer']} {result['version']} | {result['rate']:,.0f} | {result['completed_per_s']:,.0f} "
        f"| {lateness_cell(result['submit_to_start_s'])} | {result['not_started']:,} "
        f"| {result['duplicates']:,} | {cpu} |"
    )


def markdown(results: Sequence[dict[str, Any]]) -> str:
    return "\n".join([MARKDOWN_HEADER, *(markdown_row(result) for result in results)])
