"""A benchmark's results file says how it was made: the command as typed, the commit, the machine and its
load, beside the numbers, in `benchmarks/results/` unless another file is named."""

from __future__ import annotations

import json
import sys
from pathlib import Path

from benchmarks import results_file


def test_the_file_holds_the_command_the_commit_the_load_and_the_numbers(tmp_path: Path) -> None:
    recording = results_file.start("benchmarks.watch_streams", ["--streams", "5", "--idle", "1 s"])
    written = recording.save({"figures": {"GetJob p50": "1.2 ms"}}, tmp_path / "out.json")
    assert written == tmp_path / "out.json"
    record = json.loads(written.read_text())
    assert record["benchmark"] == "benchmarks.watch_streams"
    assert record["command"].endswith(" -m benchmarks.watch_streams --streams 5 --idle '1 s'")
    assert record["result"] == {"figures": {"GetJob p50": "1.2 ms"}}
    assert len(record["commit"].removesuffix("-dirty")) == 40
    assert set(record["load_average"]) == {"start", "end"}
    assert all(len(loads) == 3 for loads in record["load_average"].values())
    assert record["started"] <= record["finished"]


def test_without_a_file_named_it_goes_under_benchmarks_results() -> None:
    recording = results_file.start("benchmarks.pipeline", None)
    assert recording.argv == sys.argv[1:]
    path = recording.default_path()
    assert path.parent == Path(results_file.__file__).parent / "results"
    assert path.name.startswith("pipeline-")
    assert path.suffix == ".json"
