"""What the code's comments cite is in the repository: every "invariant N" is one of docs/design.md's."""

from __future__ import annotations

import re
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
FOLDERS = ("core", "adapters", "server", "watcher", "executor", "processes", "tests", "benchmarks", "tools")
CITATION = re.compile(r"\binvariants? ((?:\d+(?:, | and |-))*\d+)", re.IGNORECASE)


def _sources() -> list[Path]:
    return [p for folder in FOLDERS for p in (REPO / folder).rglob("*") if p.suffix in (".py", ".md", ".sh")]


def test_every_cited_invariant_is_numbered_in_the_design() -> None:
    numbered = {int(n) for n in re.findall(r"^(\d+)\. \*\*", (REPO / "docs/design.md").read_text(), re.M)}
    assert numbered == set(range(1, 9))
    cited = {
        (str(path.relative_to(REPO)), int(number))
        for path in _sources()
        for match in CITATION.finditer(path.read_text())
        for number in re.findall(r"\d+", match.group(1))
    }
    assert cited, "the sources cite invariants; the pattern has gone stale"
    assert {entry for entry in cited if entry[1] not in numbered} == set()


def test_no_source_cites_a_text_outside_the_repository() -> None:
    outside = re.compile(r"\bthe (brief|seed)\b|\bseed's\b|\bDESIGN\b")
    assert [str(p.relative_to(REPO)) for p in _sources() if outside.search(p.read_text())] == []
