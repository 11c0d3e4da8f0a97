"""How long the `jobmesh` command takes to answer, from the shell's fork to its exit: `jobmesh --help`, and
`jobmesh jobs get` of a job on a live `jobmesh dev` at rest; the interpreter alone (`python -c pass`) for
scale.

    .venv/bin/python -m benchmarks.cli_startup [--repeat 30] [--warmup 3] [--json FILE]

Starts `jobmesh dev` on free ports (a throwaway SQLite store, no dashboard, an executor with nothing to run),
creates one job due tomorrow, then runs each command `--repeat` times in turn, after `--warmup` runs of each
that are not counted (they fill the page cache). Prints the median, p90 and max of each command's wall time
(from the fork to the exit) and CPU time, and whether its p90 wall time meets its goal (`jobmesh --help`
150 ms, `jobmesh jobs get` 300 ms); writes the run's results file (`benchmarks/results_file.py`): every
sample, each command's argv, and the machine's load while measuring, since other work on the machine
lengthens the wall times (the CPU times much less).
"""

from __future__ import annotations

import argparse
import os
import resource
import subprocess
import sys
import tempfile
import time
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

from benchmarks import cpu, results_file
from benchmarks.figures import percentile, print_figures
from tests.acceptance.processes import BIN, free_port, jobmesh_process

JOB = "jobs/cli-startup"


@dataclass(frozen=True)
class Timed:
    """A command to time, and how long it should take at most (None: no goal, a reference)."""

    name: str
    argv: list[str]
    goal_ms: float | None


def parse(argv: Sequence[str] | None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(prog="benchmarks.cli_startup", description=__doc__.split("\n\n")[0])
    parser.add_argument("--repeat", type=int, default=30, help="counted runs of each command (30)")
    parser.add_argument("--warmup", type=int, default=3, help="runs of each command not counted (3)")
    results_file.add_option(parser)
    return parser.parse_args(argv)


def commands(address: str) -> list[Timed]:
    jobmesh = str(BIN / "jobmesh")
    return [
        Timed("python -c pass", [sys.executable, "-c", "pass"], None),
        Timed("jobmesh --help", [jobmesh, "--help"], 150.0),
        Timed("jobmesh jobs get", [jobmesh, "jobs", "get", JOB, "--server", address], 300.0),
    ]


@dataclass(frozen=True)
class Sample:
    wall_ms: float  # from the fork to the exit
    cpu_ms: float  # the command's own CPU time (user and system): what other work on the machine adds less to


def run(argv: list[str]) -> Sample:
    """One run of a command; a failed run stops the benchmark."""
    cpu_before = _children_cpu()
    began = time.perf_counter()
    done = subprocess.run(argv, capture_output=True, timeout=60, check=False)
    wall = time.perf_counter() - began
    if done.returncode != 0:
        raise SystemExit(f"{argv} exited {done.returncode}:\n{done.stderr.decode(errors='replace')}")
    return Sample(round(wall * 1000, 2), round((_children_cpu() - cpu_before) * 1000, 2))


def _children_cpu() -> float:
    """CPU seconds of the children run and waited for so far (a running `jobmesh dev` is not counted)."""
    usage = resource.getrusage(resource.RUSAGE_CHILDREN)
    return usage.ru_utime + usage.ru_stime


def measure(timed: list[Timed], repeat: int, warmup: int) -> dict[str, Any]:
    """Each command in turn, `warmup` rounds then `repeat` counted ones: the samples, and the machine's load
    meanwhile."""
    for _ in range(warmup):
        for each in timed:
            run(each.argv)
    samples: dict[str, list[Sample]] = {each.name: [] for each in timed}
    busy_before, all_before = cpu.machine_jiffies()
    load_before = os.getloadavg()
    for _ in range(repeat):
        for each in timed:
            samples[each.name].append(run(each.argv))
    busy_after, all_after = cpu.machine_jiffies()
    return {
        "load_average_1m": [load_before[0], os.getloadavg()[0]],  # before and after
        "machine_busy_pct": round(100.0 * (busy_after - busy_before) / max(all_after - all_before, 1), 1),
        "commands": [
            {
                "name": each.name,
                "argv": [Path(each.argv[0]).name, *each.argv[1:]],  # the program by its name, not its path
                "goal_ms": each.goal_ms,
                "wall_ms": [sample.wall_ms for sample in samples[each.name]],
                "cpu_ms": [sample.cpu_ms for sample in samples[each.name]],
            }
            for each in timed
        ],
    }


def _spread(values: list[float]) -> str:
    ordered = sorted(values)
    return f"{percentile(ordered, 0.5):.0f} / {percentile(ordered, 0.9):.0f} / {ordered[-1]:.0f} ms"


def summary(result: dict[str, Any]) -> dict[str, str]:
    """One line a command: the median, p90 and max of its wall and CPU times, and whether its p90 wall time
    meets its goal."""
    lines = {}
    for each in result["commands"]:
        line = f"wall {_spread(each['wall_ms'])}, CPU {_spread(each['cpu_ms'])}"
        if each["goal_ms"] is not None:
            met = percentile(sorted(each["wall_ms"]), 0.9) <= each["goal_ms"]
            line += f" (goal {each['goal_ms']:.0f} ms: {'met' if met else 'MISSED'})"
        lines[each["name"]] = line
    load = result["load_average_1m"]
    lines["machine load"] = f"{result['machine_busy_pct']}% busy, load average {load[0]:.1f} → {load[1]:.1f}"
    return lines


def main(argv: Sequence[str] | None = None) -> int:
    args = parse(argv)
    recording = results_file.start("benchmarks.cli_startup", argv)
    address = f"127.0.0.1:{free_port()}"
    with tempfile.TemporaryDirectory(prefix="jobmesh-cli-startup-") as folder:
        dev = ["dev", "--listen", address, "--dashboard", "off", "--demo", "off"]
        dev += ["--database-url", f"sqlite:///{folder}/dev.sqlite3"]
        with jobmesh_process(dev, address, Path(folder) / "dev.log"):
            tomorrow = (datetime.now(UTC) + timedelta(days=1)).isoformat()
            job_id = JOB.removeprefix("jobs/")
            run(
                [
                    str(BIN / "jobmesh"),
                    "jobs",
                    "create",
                    "--id",
                    job_id,
                    "--at",
                    tomorrow,
                    "--server",
                    address,
                    "--",
                    "true",
                ]
            )
            result = {
                "python": sys.version.split()[0],
                "repeat": args.repeat,
                "warmup": args.warmup,
                **measure(commands(address), args.repeat, args.warmup),
            }
    print_figures("jobmesh CLI start-up", summary(result))
    recording.save(result, args.json)
    return 0


if __name__ == "__main__":
    sys.exit(main())
