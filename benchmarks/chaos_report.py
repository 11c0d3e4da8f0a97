"""The chaos run's ending: waiting for the runs to end, reading the database and the start records, the
counts (`benchmarks/chaos_counts.py`), and the table printed."""

from __future__ import annotations

import argparse
import math
import time
from collections import Counter, defaultdict
from collections.abc import Sequence
from datetime import UTC, datetime
from decimal import Decimal
from pathlib import Path
from typing import Any

from sqlalchemy import create_engine, text
from sqlalchemy.exc import SQLAlchemyError

from benchmarks import chaos_counts as counts
from benchmarks.chaos_counts import LATE, Start, StoredRun, Window
from benchmarks.chaos_load import Creator
from benchmarks.results_file import machine

TERMINAL = ("SUCCEEDED", "FAILED", "CANCELLED", "TIMED_OUT", "DEAD_LETTERED")
READY = {"ready", "SERVING"}
EXAMPLES = 10  # run names kept in the results for each count


def _rows(url: str, query: str, queue: str) -> list[Any]:
    engine = create_engine(url)
    try:
        with engine.connect() as connection:
            return list(connection.execute(text(query), {"queue": queue}).all())
    finally:
        engine.dispose()


def settle(url: str, queue: str, timeout: float) -> dict[str, Any]:
    """Waits (bounded) until every run of the queue has ended; says how long it took and what was left."""
    began = time.monotonic()
    left: int | None = None
    while time.monotonic() - began < timeout:
        try:
            [(left,)] = _rows(
                url,
                "SELECT count(*) FROM job_runs WHERE queue = :queue AND state NOT IN "
                f"({', '.join(repr(state) for state in TERMINAL)})",
                queue,
            )
        except SQLAlchemyError:
            left = None
        if left == 0:
            break
        time.sleep(2.0)
    return {"waited_s": round(time.monotonic() - began, 1), "runs_not_ended": left}


def _ns(epoch: Decimal | float | None) -> int:
    return int(Decimal(str(epoch)) * 10**9) if epoch is not None else 0


def stored(url: str, queue: str) -> tuple[dict[str, StoredRun], set[str], Counter[str]]:
    """The queue's runs by name, its jobs' names, and the error types its ended attempts recorded."""
    runs = _rows(
        url,
        "SELECT job_id, run_id, state, extract(epoch from schedule_time), attempt, error_type, "
        "extract(epoch from dispatch_time), extract(epoch from start_time) "
        "FROM job_runs WHERE queue = :queue",
        queue,
    )
    history = _rows(
        url,
        "SELECT a.job_id, a.run_id, a.attempt, a.state, a.error_type FROM run_attempts a JOIN job_runs r "
        "ON r.job_id = a.job_id AND r.run_id = a.run_id WHERE r.queue = :queue",
        queue,
    )
    jobs = {f"jobs/{job}" for (job,) in _rows(url, "SELECT job_id FROM jobs WHERE queue = :queue", queue)}
    succeeded: dict[str, list[int]] = defaultdict(list)
    errors: Counter[str] = Counter()
    for job, run, attempt, state, error in history:
        if state == "SUCCEEDED":
            succeeded[f"jobs/{job}/runs/{run}"].append(int(attempt))
        if error:
            errors[str(error)] += 1
    found = {}
    for job, run, state, schedule, attempt, error, dispatched, claimed in runs:
        name = f"jobs/{job}/runs/{run}"
        if state == "SUCCEEDED":
            succeeded[name].append(int(attempt))
        if error:
            errors[str(error)] += 1
        found[name] = StoredRun(
            f"jobs/{job}",
            str(state),
            _ns(schedule),
            int(attempt),
            tuple(succeeded[name]),
            _ns(dispatched),
            _ns(claimed),
        )
    return found, jobs, errors


def start_records(start_files: Sequence[Path], records: Path, tag_runs: dict[str, str]) -> list[Start]:
    starts: list[Start] = []
    for path in start_files:
        if path.exists():
            starts += counts.parse_handler_records(path.read_text(errors="replace").splitlines())
    for tag, run in tag_runs.items():
        path = records / tag
        if path.exists():
            starts += counts.parse_command_records(run, path.read_text(errors="replace").splitlines())
    return starts


def health_by_window(
    samples: Sequence[tuple[float, dict[str, str]]], windows: Sequence[Window], after_s: float
) -> dict[str, Any]:
    """For each window, what each process said (seconds of each answer) and how long after the fault's
    start it first said something other than ready; outside every window (and its `after_s`), how many
    seconds each one was not ready."""
    summary: dict[str, Any] = {}
    for window in windows:
        said: dict[str, Counter[str]] = defaultdict(Counter)
        first: dict[str, float] = {}
        for instant, answers in samples:
            instant_ns = instant * 1e9
            if not window.start_ns <= instant_ns <= window.end_ns:
                continue
            for name, answer in answers.items():
                said[name][answer] += 1
                if answer not in READY and name not in first:
                    first[name] = round((instant_ns - window.start_ns) / 1e9, 1)
        summary[window.name] = {
            name: {"said_s": dict(answers.most_common()), "first_not_ready_s": first.get(name)}
            for name, answers in sorted(said.items())
        }
    quiet: dict[str, int] = Counter()
    for instant, answers in samples:
        if counts.segment(round(instant * 1e9), windows, after_s)[-1] != "quiet":
            continue
        for name, answer in answers.items():
            quiet[name] += answer not in READY
    summary["outside"] = {"not_ready_s": dict(sorted(quiet.items()))}
    return summary


def transitions(samples: Sequence[tuple[float, dict[str, str]]], t0: float) -> dict[str, list[list[Any]]]:
    """name -> [seconds from t0, what it said] at each change."""
    changes: dict[str, list[list[Any]]] = defaultdict(list)
    for instant, answers in samples:
        for name, answer in answers.items():
            if not changes[name] or changes[name][-1][1] != answer:
                changes[name].append([round(instant - t0, 1), answer])
    return dict(changes)


def measure(
    args: argparse.Namespace,
    *,
    database: str,
    queue: str,
    creator: Creator,
    warm: set[str],
    start_files: Sequence[Path],
    records: Path,
    faults: list[dict[str, Any]],
    samples: list[tuple[float, dict[str, str]]],
    span: tuple[float, float],
) -> dict[str, Any]:
    t0, load_end = span
    runs, jobs, errors = stored(database, queue)
    runs = {name: run for name, run in runs.items() if name not in warm}
    created = creator.created
    tag_runs = {c.tag: c.run for c in created if c.kind == "long"}
    starts = [s for s in start_records(start_files, records, tag_runs) if s.run not in warm]
    first = counts.first_starts(starts)
    schedule = {name: run.schedule_ns for name, run in runs.items()}
    windows = [Window(f["name"], f["start_ns"], f["end_ns"]) for f in faults]

    lost = [c.run or c.job for c in created if (c.run not in runs if c.run else c.job not in jobs)]
    never = counts.never_started(schedule, first)
    twice = counts.attempts_started_twice(starts, {name: run.attempt for name, run in runs.items()})
    overlapping = counts.overlapping_runs(starts)
    early = counts.early_starts(starts, schedule)
    again = counts.succeeded_run_again(runs, starts)
    cron = [c for c in created if c.kind == "cron"]
    cron_jobs = {c.job for c in cron}
    by_job: dict[str, list[int]] = defaultdict(list)
    for run in runs.values():
        if run.job in cron_jobs:
            by_job[run.job].append(run.schedule_ns)
    expected, missing, duplicated = counts.missing_cron_occurrences(
        {c.job: c.period_s for c in cron}, {c.job: (c.schedule_ns, c.end_ns) for c in cron}, by_job
    )
    lateness = counts.lateness_by_segment(schedule, first, windows, args.after)
    kinds = {c.run: c.kind for c in created if c.run} | {
        name: "cron" for name, run in runs.items() if run.job in cron_jobs
    }
    dispatched = {name: run.dispatch_ns for name, run in runs.items() if run.dispatch_ns}
    claimed = {name: run.claim_ns for name, run in runs.items() if run.claim_ns}
    late = counts.late_runs(
        schedule,
        first,
        dispatched=dispatched,
        claimed=claimed,
        kinds=kinds,
        windows=windows,
        after_s=args.after,
        keep=EXAMPLES,
    )
    longs = {
        c.tag: {
            "run": c.run,
            "attempts": runs[c.run].attempt if c.run in runs else None,
            "state": runs[c.run].state if c.run in runs else None,
            "starts": [
                [round((s.start_ns / 1e9) - t0, 2), round((s.last_ns / 1e9) - t0, 2)]
                for s in starts
                if s.run == c.run
            ],
        }
        for c in created
        if c.kind == "long"
    }
    return {
        "date": datetime.now(UTC).strftime("%Y-%m-%d"),
        "machine": machine(),
        "rate": args.rate,
        "duration": args.duration,
        "load_s": round(load_end - t0, 1),
        "faults_asked": args.faults,
        "lengths": args.lengths,
        "gap": args.gap,
        "after": args.after,
        "server_workers": args.server_workers,
        "t0": t0,
        "offered": creator.offered,
        "created": dict(Counter(c.kind for c in created)),
        "not_acknowledged": dict(creator.failed),
        "windows": [
            {
                **f,
                "from_s": round(f["start_ns"] / 1e9 - t0, 1),
                "length_s": round((f["end_ns"] - f["start_ns"]) / 1e9, 1),
            }
            for f in faults
        ],
        "counts": {
            "acknowledged_creates": len(created),
            "runs_in_database": len(runs),
            "runs_started": len(first),
            "lost": len(lost),
            "never_started": len(never),
            "started_twice": sum(twice.values()),
            "overlapping_runs": len(overlapping),
            "early_starts": len(early),
            "succeeded_run_again": len(again),
            "cron_expected": expected,
            "cron_missing": missing,
            "cron_duplicated": duplicated,
        },
        "examples": {
            "lost": lost[:EXAMPLES],
            "never_started": never[:EXAMPLES],
            "started_twice": sorted(twice)[:EXAMPLES],
            "overlapping_runs": sorted(overlapping)[:EXAMPLES],
            "early_starts": [
                [s.run, s.attempt, (schedule[s.run] - s.start_ns) / 1e9] for s in early[:EXAMPLES]
            ],
            "succeeded_run_again": sorted(again)[:EXAMPLES],
        },
        "states": dict(sorted(Counter(run.state for run in runs.values()).items())),
        "attempt_errors": dict(errors.most_common()),
        "lateness_s": {label: counts.summary(values) for label, values in sorted(lateness.items())},
        "late_runs": late,
        "long_commands": longs,
        "health": health_by_window(samples, windows, args.after),
        "health_changes": transitions(samples, t0),
    }


# ---------------------------------------------------------------- output


def ms(seconds: float) -> str:
    if math.isnan(seconds):
        return "-"
    return "never" if seconds == counts.NEVER else f"{seconds * 1000:,.0f}"


def _row(label: str, values: dict[str, float]) -> str:
    within = "-" if math.isnan(values["within_2s_pct"]) else f"{values['within_2s_pct']:.1f}%"
    return (
        f"| {label} | {values['due']:,.0f} | {values['started']:,.0f} | {within} "
        f"| {ms(values['p50'])} | {ms(values['p99'])} | {ms(values['max'])} |"
    )


def _goal(met: bool) -> str:
    return "met" if met else "MISSED"


def _health_line(name: str, answers: dict[str, Any]) -> str:
    said = ", ".join(f"{answer} {seconds} s" for answer, seconds in answers["said_s"].items())
    first = answers["first_not_ready_s"]
    return f"      {name}: {said}" + (f" (first not ready {first:g} s in)" if first is not None else "")


def report(result: dict[str, Any]) -> str:
    c = result["counts"]
    created = ", ".join(f"{kind} {count:,}" for kind, count in sorted(result["created"].items()))
    refused = ", ".join(f"{code} {n:,}" for code, n in result["not_acknowledged"].items()) or "none"
    restarted = ", ".join(f"{name} {times}" for name, times in result["restarts"].items() if times)
    lines = [
        "",
        f"jobmesh chaos run, {result['date']} ({result['machine']})",
        f"  {result['rate']:g} jobs/s (immediate and run_at +2..5 s) for {result['load_s']:g} s, cron jobs, "
        f"long commands; {result['server_workers']} server workers, 2 watchers, 2 executors",
        f"  offered {result['offered']:,}; acknowledged: {created}; not acknowledged: {refused}",
        "",
        f"| runs due (lateness: first start - schedule time) | runs | started | ≤ {LATE:g} s "
        "| p50 ms | p99 ms | max ms |",
        "|---|---:|---:|---:|---:|---:|---:|",
    ]
    late = result["lateness_s"]
    for window in result["windows"]:
        name = window["name"]
        label = f"in {name} (t+{window['from_s']:g} s, {window['length_s']:g} s)"
        lines.append(_row(label, late.get(f"in:{name}", counts.summary([]))))
        lines.append(
            _row(f"  {result['after']:g} s after {name}", late.get(f"after:{name}", counts.summary([])))
        )
    lines.append(_row("outside every window", late.get("outside", counts.summary([]))))
    lines.append(_row(f"  and not ≤ {result['after']:g} s after one", late.get("quiet", counts.summary([]))))
    lines += [
        "",
        f"  acknowledged creates {c['acknowledged_creates']:,}: lost {c['lost']:,}; runs in the database "
        f"{c['runs_in_database']:,}, started {c['runs_started']:,}, never started {c['never_started']:,}",
        f"  attempts started twice {c['started_twice']:,}; runs with overlapping attempts "
        f"{c['overlapping_runs']:,}; early starts {c['early_starts']:,}; succeeded attempts run again "
        f"{c['succeeded_run_again']:,}",
        f"  cron occurrences expected {c['cron_expected']:,}, missing {c['cron_missing']:,}, made twice "
        f"{c['cron_duplicated']:,}",
        f"  runs by state: {', '.join(f'{s} {n:,}' for s, n in result['states'].items())}; settled: "
        f"{result['settled']}",
        "  attempts ended by an error: "
        + (", ".join(f"{kind} {n:,}" for kind, n in result["attempt_errors"].items()) or "none"),
        f"  processes started again: {restarted or 'none'}; exited by themselves: "
        f"{', '.join(result.get('exited', [])) or 'none'}",
        "",
        "  the issue's goals:",
        f"    0 acknowledged creates lost: {_goal(c['lost'] == 0)}; 0 attempts started twice: "
        f"{_goal(c['started_twice'] == 0)}; 0 overlapping runs: {_goal(c['overlapping_runs'] == 0)}",
        f"    0 early starts: {_goal(c['early_starts'] == 0)}; 0 succeeded attempts run again: "
        f"{_goal(c['succeeded_run_again'] == 0)}",
    ]
    if "in:postgres" in late:
        pct = late["in:postgres"]["within_2s_pct"]
        lines.append(
            f"    ≥ 99% of the runs due in the PostgreSQL outage ≤ 2 s late: {_goal(pct >= 99)} ({pct:.1f}%)"
        )
    outside = late.get("outside", counts.summary([]))["p99"]
    quiet = late.get("quiet", counts.summary([]))["p99"]
    lines.append(
        f"    p99 lateness outside the windows ≤ 2 s: {_goal(outside <= LATE)} ({ms(outside)} ms; "
        f"{ms(quiet)} ms leaving out the {result['after']:g} s after each window)"
    )
    lines += [
        "",
        "  runs more than 2 s late, by kind and by the second of their due time from the window's edge:",
    ]
    for label, found in result.get("late_runs", {}).items():
        kinds = ", ".join(f"{kind} {n:,}" for kind, n in found["by_kind"].items())
        seconds = ", ".join(f"{int(second):+d} s: {n:,}" for second, n in found["by_due_second"].items())
        sent_late = ", ".join(f"{kind} {n:,}" for kind, n in found["dispatched_late_by_kind"].items())
        claimed_late = ", ".join(f"{kind} {n:,}" for kind, n in found["claimed_late_by_kind"].items())
        lines.append(
            f"    {label}: {kinds}; {seconds}; handed to the queue > 2 s late: {sent_late or 'none'}; "
            f"claimed > 2 s late: {claimed_late or 'none'}"
        )
    lines += ["", "  what health said, by window (seconds of each answer):"]
    for window in result["windows"]:
        lines.append(f"    {window['name']}: {'; '.join(window['notes'])}")
        lines += [_health_line(name, answers) for name, answers in result["health"][window["name"]].items()]
    outside_health = result["health"]["outside"]["not_ready_s"]
    lines.append(
        "    outside every window (and its after): not ready "
        + ", ".join(f"{name} {seconds} s" for name, seconds in outside_health.items())
    )
    return "\n".join(lines)
