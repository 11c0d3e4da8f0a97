"""The pipeline benchmark's records and numbers: the handler's start records, the senders' records, the runs
in the database, and the figures and tables made of them (`benchmarks/pipeline.py` defines each figure)."""

from __future__ import annotations

import argparse
import math
import os
from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from sqlalchemy import create_engine, text

from benchmarks.load import HELD_BACK
from benchmarks.results_file import machine
from benchmarks.statements import MARK, Statements

LATE = 2.0  # seconds: the headline promise
FAILED = frozenset({"FAILED", "TIMED_OUT", "DEAD_LETTERED", "CANCELLED"})


# ---------------------------------------------------------------- start records


class Starts:
    """The handler's start records, read as the executors flush them: (run, attempt) -> start instants."""

    def __init__(self, paths: Sequence[Path]) -> None:
        self._paths = list(paths)
        self._offsets = [0] * len(paths)
        self._partial = [""] * len(paths)
        self.by_attempt: dict[tuple[str, int], list[int]] = {}
        self.per_executor = [0] * len(paths)

    def read(self) -> None:
        for index, path in enumerate(self._paths):
            if not path.exists():
                continue
            with path.open("r", encoding="utf-8") as source:
                source.seek(self._offsets[index])
                chunk = source.read()
                self._offsets[index] = source.tell()
            lines = (self._partial[index] + chunk).split("\n")
            self._partial[index] = lines.pop()
            for line in lines:
                run, attempt, started = line.split()
                self.by_attempt.setdefault((run, int(attempt)), []).append(int(started))
                self.per_executor[index] += 1

    def first_starts(self) -> dict[str, int]:
        """run -> the first start of its first attempt that started."""
        first: dict[str, tuple[int, int]] = {}
        for (run, attempt), instants in self.by_attempt.items():
            candidate = (attempt, min(instants))
            if run not in first or candidate < first[run]:
                first[run] = candidate
        return {run: started for run, (_, started) in first.items()}


# ---------------------------------------------------------------- figures


@dataclass(frozen=True, slots=True)
class Job:
    n: int
    scheduled: bool
    offered_ns: int
    submit_ns: int
    answer_ns: int
    status: int
    run: str
    schedule_ns: int


@dataclass
class Measured:
    jobs: list[Job]
    runs: dict[str, StoredRun]
    warm: set[str]
    t0: float
    end: float
    cpu_seconds: dict[str, float]
    machine_busy_pct: float  # every process on the machine, ours or not
    attempt_errors: dict[str, int]  # error types of the ended attempts that did not succeed
    statements: Statements | str  # what PostgreSQL ran meanwhile, or why it was not counted


def read_jobs(paths: Sequence[Path]) -> list[Job]:
    jobs = []
    for path in paths:
        for line in path.read_text().splitlines():
            n, kind, offered, submit, answer, status, run, schedule = line.split()
            jobs.append(
                Job(
                    int(n),
                    kind == "s",
                    int(offered),
                    int(submit),
                    int(answer),
                    int(status),
                    run,
                    int(schedule),
                )
            )
    return sorted(jobs, key=lambda job: job.n)


def percentile(values: Sequence[float], fraction: float) -> float:
    """Nearest-rank percentile of sorted values."""
    if not values:
        return math.nan
    return values[min(len(values) - 1, max(0, math.ceil(fraction * len(values)) - 1))]


def spread(seconds: list[float]) -> dict[str, float]:
    ordered = sorted(seconds)
    return {
        "count": len(ordered),
        "p50": percentile(ordered, 0.50),
        "p99": percentile(ordered, 0.99),
        "max": ordered[-1] if ordered else math.nan,
    }


@dataclass(frozen=True, slots=True)
class StoredRun:
    state: str
    schedule_ns: int
    create_ns: int
    dispatch_ns: int | None  # the last dispatch (the server's bypass, or the watcher's release)
    end_ns: int | None


RESOURCE_EXHAUSTED = 8  # the gRPC status code


def _ns(epoch: object) -> int | None:
    return round(float(str(epoch)) * 1e9) if epoch is not None else None


def _rows(url: str, query: str, queue: str) -> list[Any]:
    """The rows of one query about a queue's runs, on a connection of its own."""
    engine = create_engine(url)
    try:
        with engine.connect() as connection:
            return list(connection.execute(text(f"{MARK} {query}"), {"queue": queue}).all())
    finally:
        engine.dispose()


def database_runs(url: str, queue: str) -> dict[str, StoredRun]:
    """The runs of this queue, by name."""
    rows = _rows(
        url,
        "SELECT job_id, run_id, state, extract(epoch from schedule_time), extract(epoch from create_time), "
        "extract(epoch from dispatch_time), extract(epoch from end_time) FROM job_runs WHERE queue = :queue",
        queue,
    )
    return {
        f"jobs/{job}/runs/{run}": StoredRun(
            state, _ns(scheduled) or 0, _ns(created) or 0, _ns(dispatched), _ns(ended)
        )
        for job, run, state, scheduled, created, dispatched, ended in rows
    }


def attempt_errors(url: str, queue: str) -> dict[str, int]:
    """How many attempts of this queue's runs ended with each error type (HeartbeatLost, ContactLost, ...)."""
    rows = _rows(
        url,
        "SELECT a.error_type, count(*) FROM run_attempts a JOIN job_runs r "
        "ON r.job_id = a.job_id AND r.run_id = a.run_id "
        "WHERE r.queue = :queue AND a.error_type IS NOT NULL GROUP BY a.error_type",
        queue,
    )
    return {str(error): int(count) for error, count in sorted(rows)}


def progress(url: str, queue: str) -> tuple[int, int]:
    """(runs SUCCEEDED, all runs) of this queue."""
    [(succeeded, total)] = _rows(
        url,
        "SELECT count(*) FILTER (WHERE state = 'SUCCEEDED'), count(*) FROM job_runs WHERE queue = :queue",
        queue,
    )
    return int(succeeded), int(total)


def figures(args: argparse.Namespace, measured: Measured, starts: Starts) -> dict[str, Any]:
    """The numbers, from the start records, the senders' records and the database (the truth on what was
    created: a create whose answer timed out may still have made its run)."""
    runs = {name: run for name, run in measured.runs.items() if name not in measured.warm}
    records = {job.run: job for job in measured.jobs if job.status == 0 and job.run != "-"}
    refused = [job for job in measured.jobs if job.status == RESOURCE_EXHAUSTED and job.run != HELD_BACK]
    held_back = sum(1 for job in measured.jobs if job.run == HELD_BACK)
    first = starts.first_starts()
    immediate, scheduled, lateness, to_dispatch, dispatch_to_start = [], [], [], [], []
    early = 0
    for name, run in runs.items():
        started = first.get(name)
        if started is None:
            continue
        early += started < run.schedule_ns
        job = records.get(name)
        if job is None:  # its create call was not answered in time: no submit instant
            continue
        if job.scheduled:
            scheduled.append((started - run.schedule_ns) / 1e9)
        else:
            immediate.append((started - job.submit_ns) / 1e9)
            if run.dispatch_ns is not None:  # where the time goes: create → handed to Kafka → started
                to_dispatch.append((run.dispatch_ns - job.submit_ns) / 1e9)
                dispatch_to_start.append((started - run.dispatch_ns) / 1e9)
        lateness.append((scheduled if job.scheduled else immediate)[-1])
    mine = {key: instants for key, instants in starts.by_attempt.items() if key[0] in runs}
    started_runs = sum(1 for name in runs if name in first)
    ends = sorted(run.end_ns for run in runs.values() if run.state == "SUCCEEDED" and run.end_ns is not None)
    t0_ns = int(measured.t0 * 1e9)
    steady_from = t0_ns + round(min(args.ahead, args.duration / 2) * 1e9)
    steady_to = t0_ns + round(args.duration * 1e9)
    in_steady = sum(1 for end_ns in ends if steady_from <= end_ns <= steady_to)
    completed = len(ends)
    window = measured.end - measured.t0
    cpu_seconds = measured.cpu_seconds
    total_cpu = sum(cpu_seconds.values())

    def per_thousand(seconds: float) -> float:
        return seconds / completed * 1000 if completed else math.nan

    def pct(count: int, of: int) -> float:
        return 100.0 * count / of if of else math.nan

    def per_run(count: int) -> float:
        return count / len(runs) if runs else math.nan

    counted = measured.statements

    return {
        "date": datetime.now(UTC).strftime("%Y-%m-%d"),
        "machine": machine(),
        "rate": args.rate,
        "duration": args.duration,
        "executors": args.executors,
        "server_workers": args.server_workers,
        "secure": bool(getattr(args, "secure", False)),  # TLS and tokens on (pipeline --secure)
        "concurrency": args.concurrency,
        # BatchCreateJobs of at most this many jobs; 1: a CreateJob a job, from `callers` callers a sender
        "jobs_per_call": getattr(args, "jobs_per_call", 1000),
        "callers": getattr(args, "callers", 0) if getattr(args, "jobs_per_call", 1000) == 1 else 0,
        "scheduled_share": args.scheduled_share,
        "ahead": args.ahead,
        "drain": args.drain,
        "offered": len(measured.jobs),
        "answered": len(records),
        "created": len(runs),
        "not_created": len(measured.jobs) - len(runs),
        "refused": len(refused),  # RESOURCE_EXHAUSTED from the server
        "held_back": held_back,  # not sent: the server had asked for a pause (its RetryInfo)
        "refused_answer_s": spread([(job.answer_ns - job.submit_ns) / 1e9 for job in refused]),
        "started": started_runs,
        "completed": completed,
        # from the first offer to the last completion, less the `ahead` the last scheduled runs wait by
        # design: the offered rate when the mesh keeps up, what it managed when it does not
        "completed_per_s": completed / max(args.duration, (ends[-1] - t0_ns) / 1e9 - args.ahead)
        if ends
        else 0.0,
        "completed_per_s_steady": in_steady / ((steady_to - steady_from) / 1e9),
        "states": dict(sorted(Counter(run.state for run in runs.values()).items())),
        "last_end_after_window_s": (ends[-1] - steady_to) / 1e9 if ends else math.nan,
        "submit_to_start_s": spread(immediate),
        "scheduled_to_start_s": spread(scheduled),
        "late_pct": pct(sum(1 for late in lateness if late > LATE), len(lateness)),
        "early_pct": pct(early, started_runs),
        "early": early,
        "lost": len(runs) - started_runs,
        "failed": sum(1 for run in runs.values() if run.state in FAILED),
        "duplicates": sum(len(instants) - 1 for instants in mine.values()),
        "retried": sum(1 for (_, attempt) in mine if attempt > 1),
        "attempt_errors": measured.attempt_errors,
        "client_lag_s": spread([(job.submit_ns - job.offered_ns) / 1e9 for job in measured.jobs]),
        "create_call_s": spread([(job.answer_ns - job.submit_ns) / 1e9 for job in records.values()]),
        "submit_to_dispatch_s": spread(to_dispatch),
        "dispatch_to_start_s": spread(dispatch_to_start),
        "starts_per_executor": starts.per_executor,
        "window_s": window,
        "cpu_s": cpu_seconds,
        "cpu_s_total": total_cpu,
        "cpu_s_per_1000": {name: per_thousand(seconds) for name, seconds in cpu_seconds.items()},
        "cpu_s_per_1000_total": per_thousand(total_cpu),
        "cpu_s_per_1000_created_total": total_cpu / len(runs) * 1000 if runs else math.nan,
        "machine_busy_pct": 100.0 * total_cpu / (window * (os.cpu_count() or 1)) if window > 0 else math.nan,
        "machine_busy_all_pct": measured.machine_busy_pct,
        # PostgreSQL's work per run made (the warm-up's runs are outside the window)
        "statements_per_run": per_run(counted.calls) if isinstance(counted, Statements) else math.nan,
        "commits_per_run": per_run(counted.commits) if isinstance(counted, Statements) else math.nan,
        "top_statements": [[query, per_run(calls)] for query, calls in counted.top]
        if isinstance(counted, Statements)
        else counted,
    }


# ---------------------------------------------------------------- output


def ms(value: float) -> str:
    return "-" if math.isnan(value) else f"{value * 1000:,.0f}"


def lateness_cell(values: dict[str, float]) -> str:
    return f"{ms(values['p50'])} / {ms(values['p99'])} / {ms(values['max'])}"


def args_ahead(result: dict[str, Any]) -> str:
    return f"{min(result['ahead'], result['duration'] / 2):g}"


def _calls(result: dict[str, Any]) -> str:
    if result.get("jobs_per_call", 1000) == 1:
        return f"one job a CreateJob call, at most {result['callers']} calls in flight a sender"
    return f"BatchCreateJobs calls of at most {result.get('jobs_per_call', 1000):,} jobs"


def report(result: dict[str, Any]) -> str:
    lines = [
        "",
        f"jobmesh pipeline benchmark, {result['date']} ({result['machine']})",
        f"  offered {result['rate']:,.0f} jobs/s for {result['duration']:g} s: {result['offered']:,} jobs "
        f"({result['scheduled_share']:.0%} run_at +{result['ahead']:g} s), {result['executors']} executors "
        f"(concurrency {result['concurrency']}), {result['server_workers']} server worker(s)",
        f"  {_calls(result)}",
        f"  created {result['created']:,} (not created {result['not_created']:,}; "
        f"answered in time {result['answered']:,}), started {result['started']:,}, "
        f"completed {result['completed']:,}",
        f"  refused RESOURCE_EXHAUSTED {result['refused']:,}, answered in ms p50 / p99 / max "
        f"{lateness_cell(result['refused_answer_s'])}; held back by the senders (RetryInfo) "
        f"{result['held_back']:,}",
        f"  completed/s {result['completed_per_s']:,.0f} (ended in the offered window, from "
        f"{args_ahead(result)} s in: {result['completed_per_s_steady']:,.0f}/s); the last run ended "
        f"{result['last_end_after_window_s']:.1f} s after the window",
        f"  runs by state: {', '.join(f'{state} {count:,}' for state, count in result['states'].items())}",
        "  lateness, ms                     p50 / p99 / max",
        f"    submit → start (immediate)     {lateness_cell(result['submit_to_start_s'])}",
        f"    scheduled → start (run_at)     {lateness_cell(result['scheduled_to_start_s'])}",
        f"    client lag (offered → sent)    {lateness_cell(result['client_lag_s'])}",
        f"    create call (sent → answered)  {lateness_cell(result['create_call_s'])}",
        f"    immediate: submit → to Kafka   {lateness_cell(result['submit_to_dispatch_s'])}",
        f"    immediate: to Kafka → start    {lateness_cell(result['dispatch_to_start_s'])}",
        f"  later than {LATE:g} s {result['late_pct']:.2f}%   early {result['early_pct']:.2f}%   "
        f"lost {result['lost']:,}   failed {result['failed']:,}   duplicates {result['duplicates']:,}   "
        f"retried {result['retried']:,}",
        "  attempts ended by an error: "
        + (", ".join(f"{kind} {count:,}" for kind, count in result["attempt_errors"].items()) or "none"),
        f"  starts per executor: {', '.join(f'{count:,}' for count in result['starts_per_executor'])}",
        f"  CPU over {result['window_s']:.1f} s: these processes kept the machine "
        f"{result['machine_busy_pct']:.0f}% busy (all processes: {result['machine_busy_all_pct']:.0f}%)",
        f"    {'process':<16}{'CPU s':>9}{'s / 1k jobs':>14}",
    ]
    for name, seconds in result["cpu_s"].items():
        lines.append(f"    {name:<16}{seconds:>9.1f}{result['cpu_s_per_1000'][name]:>14.2f}")
    lines.append(f"    {'total':<16}{result['cpu_s_total']:>9.1f}{result['cpu_s_per_1000_total']:>14.2f}")
    lines.append(
        f"  (per 1,000 runs completed; per 1,000 created: {result['cpu_s_per_1000_created_total']:.2f} s)"
    )
    lines.append(
        f"  PostgreSQL per run made: {result['statements_per_run']:.2f} statements, "
        f"{result['commits_per_run']:.2f} commits; the most run (per run):"
    )
    top = result["top_statements"]
    lines += (
        [f"    {calls:>6.2f}  {query}" for query, calls in top] if isinstance(top, list) else [f"    {top}"]
    )
    lines += ["", "markdown:", MARKDOWN_HEADER, markdown_row(result)]
    return "\n".join(lines)


MARKDOWN_HEADER = (
    "| offered jobs/s | completed jobs/s (in the window) | submit→start ms p50 / p99 / max "
    "| scheduled→start ms p50 / p99 / max | > 2 s | early | lost | failed | dup. | refused "
    "| statements (commits) / run "
    "| CPU s / 1k jobs: total (server, watcher, executors, PostgreSQL, Kafka, Redis, load) |\n"
    "|---:|---:|---|---|---:|---:|---:|---:|---:|---:|---:|---|"
)


def markdown_row(result: dict[str, Any]) -> str:
    per = result["cpu_s_per_1000"]
    executors = sum(value for name, value in per.items() if name.startswith("executor"))

    def part(name: str) -> str:
        value = per.get(name)
        return "n/a" if value is None or math.isnan(value) else f"{value:.2f}"

    cpu_cell = (
        f"{result['cpu_s_per_1000_total']:.2f} ({part('server')}, {part('watcher')}, {executors:.2f}, "
        f"{part('postgres')}, {part('kafka')}, {part('redis')}, {part('load')})"
    )
    completed = f"{result['completed_per_s']:,.0f} ({result['completed_per_s_steady']:,.0f})"
    return (
        f"| {result['rate']:,.0f} | {completed} "
        f"| {lateness_cell(result['submit_to_start_s'])} | {lateness_cell(result['scheduled_to_start_s'])} "
        f"| {result['late_pct']:.1f}% | {result['early_pct']:.1f}% | {result['lost']:,} "
        f"| {result['failed']:,} | {result['duplicates']:,} | {result['refused']:,} "
        f"| {result['statements_per_run']:.1f} ({result['commits_per_run']:.2f}) | {cpu_cell} |"
    )


def print_figures(title: str, figures: dict[str, str]) -> None:
    """A small benchmark's result: its title and date, then one aligned line per figure."""
    print(f"\n{title}, {datetime.now(UTC):%Y-%m-%d}")
    width = max(len(name) for name in figures)
    for name, value in figures.items():
        print(f"{name:<{width}}  {value}")
