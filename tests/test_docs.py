"""What the documents say holds: every "invariant N" the code cites is one of docs/design.md's; the README
can be found one's way in (contents whose links reach their headings, a quick start, troubleshooting); the
license, the changelog and docs/performance.md are there, and each of its tables names the command and the
results files its figures came from."""

from __future__ import annotations

import json
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


# ---------------------------------------------------------------- the README and the documents beside it

README = REPO / "README.md"
PERFORMANCE = REPO / "docs/performance.md"
FENCE = re.compile(r"^```.*?^```", re.M | re.S)
LINK = re.compile(r"\]\(#([^)]+)\)")


def _headings(markdown: str) -> list[str]:
    """The headings outside code blocks (a shell comment in a block is no heading)."""
    return re.findall(r"^#{1,6} (.+)$", FENCE.sub("", markdown), re.M)


def _anchor(heading: str) -> str:
    """GitHub's anchor for a heading: lower case, punctuation dropped, spaces to hyphens."""
    return re.sub(r"[^\w\- ]", "", heading.strip().lower()).replace(" ", "-")


def _section(markdown: str, heading: str) -> str:
    """The text under `## heading`, to the next heading of its level or above."""
    after = markdown.split(f"\n## {heading}\n", 1)[1]
    return re.split(r"^## ", after, maxsplit=1, flags=re.M)[0]


def test_the_readme_has_a_table_of_contents_whose_links_reach_its_headings() -> None:
    text = README.read_text()
    anchors = {_anchor(heading) for heading in _headings(text)}
    contents = _section(text, "Contents")
    linked = LINK.findall(contents)
    assert len(linked) >= 10
    assert [link for link in linked if link not in anchors] == []
    sections = {_anchor(h) for h in re.findall(r"^###? (.+)$", FENCE.sub("", text), re.M)}
    assert sections - {"contents"} <= set(linked), "every section and subsection is in the contents"
    assert [link for link in LINK.findall(text) if link not in anchors] == [], "in-page links elsewhere too"


def test_the_readme_starts_quickly_and_has_troubleshooting() -> None:
    text = README.read_text()
    headings = re.findall(r"^## (.+)$", FENCE.sub("", text), re.M)
    assert headings[:3] == ["Contents", "Quick start", "Concepts"]
    assert headings.index("Reference") < headings.index("Troubleshooting")
    quick_start = _section(text, "Quick start")
    assert "make run" in quick_start
    assert "make test" in quick_start
    troubles = re.findall(r"^\*\*.+?\*\*", _section(text, "Troubleshooting"), re.M)
    assert len(troubles) >= 10, "each trouble is a paragraph that starts with it in bold"


def test_every_test_file_the_readme_names_exists() -> None:
    """The security section names the tests that hold each attack: a file renamed or gone leaves a claim
    unbacked."""
    named = set(re.findall(r"`(tests/[\w/]+\.py)`", README.read_text()))
    assert len(named) >= 20, "the README names its tests; the pattern has gone stale"
    assert sorted(name for name in named if not (REPO / name).is_file()) == []


def test_the_license_changelog_and_performance_documents_exist() -> None:
    license_text = (REPO / "LICENSE").read_text()
    assert license_text.split()[:4] == ["Apache", "License", "Version", "2.0,"]
    assert "END OF TERMS AND CONDITIONS" in license_text
    assert 'license = "Apache-2.0"' in (REPO / "pyproject.toml").read_text()
    changelog = (REPO / "CHANGELOG.md").read_text()
    assert "## [Unreleased]" in changelog
    assert "docs/performance.md" in README.read_text()
    assert PERFORMANCE.exists()


def _tables(markdown: str) -> list[tuple[str, str]]:
    """Each markdown table with the text between it and the heading or table before it (code blocks
    included: a command is often shown in one)."""
    found: list[tuple[str, str]] = []
    before: list[str] = []
    rows: list[str] = []
    fenced = False
    for line in [*markdown.splitlines(), ""]:
        fenced ^= line.startswith("```")
        if line.startswith("|") and not fenced:
            rows.append(line)
            continue
        if rows:
            found.append(("\n".join(before), "\n".join(rows)))
            before, rows = [], []
        before = [] if line.startswith("#") and not fenced else [*before, line]
    return found


def _assert_traced(tables: list[tuple[str, str]]) -> None:
    """Each table names its results files, and the command that made each."""
    for before, table in tables:
        named = re.findall(r"benchmarks/results/[\w.\-]+\.json", before + table)
        assert named, f"a table names no results file:\n{table[:200]}"
        assert [name for name in named if not (REPO / name).is_file()] == []
        assert re.search(r"python -m benchmarks\.\w+", before + table), f"no command for:\n{table[:200]}"
        for name in named:
            record = json.loads((REPO / name).read_text())
            assert record["command"].split(" -m ", 1)[1] in before + table, name


def test_every_performance_table_names_its_command_and_results_files() -> None:
    tables = _tables(PERFORMANCE.read_text())
    assert len(tables) >= 4
    _assert_traced(tables)


def test_the_readme_keeps_no_measured_figure_of_its_own() -> None:
    """Figures live in docs/performance.md beside their results files; the README summarises and links. Its
    one table of figures, the faults under load, names its results files and command as those do."""
    text = README.read_text()
    summary = text.split("\n### Performance\n", 1)[1].split("\n## ", 1)[0]
    tables = _tables(summary)
    assert len(tables) <= 1
    _assert_traced(tables)
    prose = [line for line in summary.strip().splitlines() if line and not line.startswith("|")]
    assert len(prose) <= 10
    assert "docs/performance.md" in summary
    assert re.search(r"\bp(50|95|99) \d", text.replace(summary, "")) is None
