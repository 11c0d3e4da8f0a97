"""A benchmark's raw results, kept: one JSON file per run, under `benchmarks/results/` unless `--json FILE`
names another. Beside every number the script measured, the file holds what a reader needs to trust it or
run it again: the command as typed, the commit it ran, the machine, and the machine's load average (as
`uptime` shows it) when the run began and ended, since others' processes on a shared machine skew the
figures. docs/performance.md names the file each of its figures comes from."""

from __future__ import annotations

import argparse
import json
import os
import platform
import shlex
import subprocess
import sys
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parents[1]
RESULTS = REPO / "benchmarks" / "results"


def machine() -> str:
    return f"{os.cpu_count()} cores, {platform.machine()}, Linux {platform.release()}"


def add_option(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--json",
        type=Path,
        help="where the raw results go (default: a new file under benchmarks/results/)",
    )


def _load() -> list[float]:
    return [round(value, 2) for value in os.getloadavg()]


def _commit() -> str:
    """HEAD, marked `-dirty` when tracked files other than the documentation differ from it; `unknown`
    outside a git checkout."""

    def git(*words: str) -> str:
        done = subprocess.run(["git", *words], cwd=REPO, capture_output=True, text=True, check=False)
        return done.stdout.strip() if done.returncode == 0 else ""

    head = git("rev-parse", "HEAD")
    if not head:
        return "unknown"
    changed = git("status", "--porcelain", "--untracked-files=no", "--", ".", ":!*.md", ":!docs", ":!LICENSE")
    return head + ("-dirty" if changed else "")


def _interpreter() -> str:
    path = Path(sys.executable)
    return str(path.relative_to(REPO)) if path.is_relative_to(REPO) else str(path)


@dataclass
class Recording:
    """One run of one benchmark, from its start: `save` writes its results with where they came from."""

    module: str  # as run with `python -m`, e.g. `benchmarks.pipeline`
    argv: list[str]
    started: datetime = field(default_factory=lambda: datetime.now(UTC))
    load_at_start: list[float] = field(default_factory=_load)
    commit: str = field(default_factory=_commit)  # at the start: the code that runs is the code read then

    @property
    def command(self) -> str:
        return shlex.join([_interpreter(), "-m", self.module, *self.argv])

    def default_path(self) -> Path:
        name = self.module.rsplit(".", 1)[-1]
        return RESULTS / f"{name}-{self.started:%Y%m%dT%H%M%SZ}.json"

    def save(self, result: Mapping[str, Any], path: Path | None = None) -> Path:
        target = path or self.default_path()
        target.parent.mkdir(parents=True, exist_ok=True)
        record = {
            "benchmark": self.module,
            "command": self.command,
            "commit": self.commit,
            "machine": machine(),
            "started": self.started.isoformat(timespec="seconds"),
            "finished": datetime.now(UTC).isoformat(timespec="seconds"),
            "load_average": {"start": self.load_at_start, "end": _load()},  # 1, 5 and 15 minutes
            "result": result,
        }
        target.write_text(json.dumps(record, indent=2, default=str) + "\n")
        print(f"\nraw results: {_shown(target)}", flush=True)
        return target


def _shown(path: Path) -> str:
    absolute = path.resolve()
    return str(absolute.relative_to(REPO)) if absolute.is_relative_to(REPO) else str(path)


def start(module: str, argv: Sequence[str] | None) -> Recording:
    """A recording of the benchmark `module` run with `argv` (the process's own arguments when None)."""
    return Recording(module, list(sys.argv[1:] if argv is None else argv))
