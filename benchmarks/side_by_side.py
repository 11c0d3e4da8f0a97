"""jobmesh and its peers under the same open-loop load, in one run on the same services.

    .venv/bin/python -m benchmarks.side_by_side [--rates 250,1000,2500] [--duration 30] [--peers celery,...]

One set of throwaway services (PostgreSQL, Kafka, Redis: `benchmarks/pipeline.py`'s), then, rate by rate,
jobmesh's pipeline benchmark (`--server-workers`, 2 executors, half the jobs `run_at`) followed by each peer's
(`benchmarks/peers/`, 2 worker processes, every job immediate), so that each rate's figures come from the
same minutes of the same machine. Each benchmark prints its own report as it ends; at the end, one table of
every run: completed/s, submit→start (the immediate jobs', for jobmesh), jobmesh's scheduled→start, what
never started, duplicates, and CPU seconds per 1,000 jobs of every process the run measured (the services
and the load included). Every run's numbers go to one results file (`benchmarks/results_file.py`).
"""

from __future__ import annotations

import argparse
import math
import os
import shutil
import sys
import tempfile
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from benchmarks import pipeline, results_file
from benchmarks.figures import report as pipeline_report
from benchmarks.peers import bench, results, venv
from benchmarks.peers.specs import PEERS

HEADER = (
    "| system | offered jobs/s | completed jobs/s | submit→start ms p50 / p99 / max "
    "| scheduled→start ms p99 | not started | dup. | CPU s / 1k jobs, all processes |\n"
    "|---|---:|---:|---|---:|---:|---:|---:|"
)


def parse(argv: Sequence[str] | None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(prog="benchmarks.side_by_side", description=__doc__.split("\n\n")[0])
    parser.add_argument("--rates", default="250,1000,2500", help="jobs offered per second, comma-separated")
    parser.add_argument("--duration", type=float, default=30.0, help="seconds of offered load per run (30)")
    parser.add_argument("--peers", default=",".join(PEERS), help=f"comma-separated, of {', '.join(PEERS)}")
    parser.add_argument("--server-workers", type=int, default=2, help="jobmesh server processes (2)")
    results_file.add_option(parser)
    args = parser.parse_args(argv)
    timing = ["--duration", f"{args.duration:g}"]
    # the peers' parser checks the rates and the peers' names; the pipeline's, one rate each
    args.peer_args = bench.parse(["--peers", args.peers, "--rates", args.rates, *timing])
    args.jobmesh_args = [
        pipeline.parse(["--rate", f"{rate:g}", "--server-workers", str(args.server_workers), *timing])
        for rate in args.peer_args.rates
    ]
    return args


def jobmesh_row(result: dict[str, Any]) -> str:
    late = results.ms(result["scheduled_to_start_s"]["p99"])
    return row(
        f"jobmesh ({result['server_workers']} server workers)", result, late, result["cpu_s_per_1000_total"]
    )


def peer_row(result: dict[str, Any]) -> str:
    total = sum(value for value in result["cpu_s_per_1000"].values() if not math.isnan(value))
    return row(f"{result['peer']} {result['version']}", result, "n/a", total)


def row(system: str, result: dict[str, Any], scheduled_p99: str, cpu_total: float) -> str:
    not_started = result["offered"] - result["started"]
    return (
        f"| {system} | {result['rate']:,.0f} | {result['completed_per_s']:,.0f} "
        f"| {results.lateness_cell(result['submit_to_start_s'])} | {scheduled_p99} | {not_started:,} "
        f"| {result['duplicates']:,} | {cpu_total:.2f} |"
    )


def run_all(args: argparse.Namespace, work: Path, raw: list[dict[str, Any]]) -> list[str]:
    """The table's rows; each run's numbers are appended to `raw` as it ends."""
    rows: list[str] = []
    with pipeline.services(work) as found:
        os.environ.update(found.env)  # the peers find the same PostgreSQL and Redis
        peer_args = args.peer_args
        peer_args.versions, peer_args.urls = venv.installed_versions(), dict(found.env)
        for jobmesh_args in args.jobmesh_args:
            folder = work / f"jobmesh-{jobmesh_args.rate:g}"
            folder.mkdir()
            result = pipeline.run(jobmesh_args, folder, found)
            print(pipeline_report(result), flush=True)
            rows.append(jobmesh_row(result))
            raw.append({"system": "jobmesh", **result})
            for peer in peer_args.peers:
                measured = results.figures(bench.run_one(peer_args, peer, jobmesh_args.rate, work))
                print(results.report(measured), flush=True)
                rows.append(peer_row(measured))
                raw.append({"system": peer.name, **measured})
    return rows


def main(argv: Sequence[str] | None = None) -> int:
    recording = results_file.start("benchmarks.side_by_side", argv)
    args = parse(argv)
    venv.ensure()
    work = Path(tempfile.mkdtemp(prefix="jobmesh-side-by-side-", dir="/tmp"))
    work.chmod(0o755)  # the postgres user writes the services' folder when this runs as root
    raw: list[dict[str, Any]] = []
    try:
        rows = run_all(args, work, raw)
    finally:
        shutil.rmtree(work, ignore_errors=True)
    print(f"\njobmesh and its peers, same run ({results_file.machine()}):")
    print("\n".join([HEADER, *rows]))
    recording.save({"runs": raw}, args.json)
    return 0


if __name__ == "__main__":
    sys.exit(main())
