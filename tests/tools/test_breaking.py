"""`tools/check_breaking.sh` guards both packages against `main`, run on a copy of the contract in a
repository of its own: a breaking change to `jobmesh.v1` or to `jobmesh.executor.v1` fails it. Against a
`main` from before the executor protocol had its own package, the move and the first language options pass,
and nothing else does."""

from __future__ import annotations

import re
import shutil
import subprocess
from pathlib import Path

import pytest

from tests.acceptance.processes import REPO

GIT = [
    "git",
    "-c",
    "user.name=test",
    "-c",
    "user.email=test@example.invalid",
    "-c",
    "init.defaultBranch=main",
]


def _git(root: Path, *args: str) -> None:
    subprocess.run([*GIT, *args], cwd=root, check=True, capture_output=True, timeout=60)


def _contract(target: Path) -> Path:
    shutil.copytree(REPO / "protos", target / "protos")
    (target / "tools").mkdir()
    shutil.copy(REPO / "tools/check_breaking.sh", target / "tools/check_breaking.sh")
    for name in ("buf.yaml", "package.json"):
        shutil.copy(REPO / name, target / name)
    for tooling in (".venv", "node_modules"):
        (target / tooling).symlink_to(REPO / tooling)
    (target / ".gitignore").write_text(".venv\nnode_modules\n")
    _git(target, "init", "-q")
    return target


def _commit_as_main(root: Path) -> None:
    _git(root, "add", "-A")
    _git(root, "commit", "-q", "-m", "main")


def _check(root: Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        ["bash", "tools/check_breaking.sh"],
        cwd=root,
        capture_output=True,
        text=True,
        timeout=300,
        check=False,
    )


def _edit(path: Path, old: str, new: str) -> None:
    text = path.read_text()
    assert old in text, f"{old!r} not in {path}"
    path.write_text(text.replace(old, new))


@pytest.fixture
def repo(tmp_path: Path) -> Path:
    root = _contract(tmp_path / "repo")
    _commit_as_main(root)
    return root


def test_the_contract_as_it_is_passes(repo: Path) -> None:
    done = _check(repo)
    assert done.returncode == 0, done.stdout + done.stderr
    assert "jobmesh.v1 has no breaking change" in done.stdout
    assert "jobmesh.executor.v1 has no breaking change" in done.stdout
    assert "not checked" not in done.stdout  # nothing is let through once main has the split


@pytest.mark.parametrize(
    ("proto", "old", "new"),
    [
        ("jobmesh/v1/job.proto", "string display_name = 2;", "string title = 2;"),
        (
            "jobmesh/v1/job.proto",
            'option go_package = "github.com/jobmesh/jobmesh/gen/go/jobmesh/v1;jobmeshv1";',
            'option go_package = "github.com/jobmesh/jobmesh/gen/go/jobmesh/v1;v1";',
        ),
        ("jobmesh/executor/v1/executor_control.proto", "int32 attempt = 2;", "int64 attempt = 2;"),
        ("jobmesh/executor/v1/dispatch.proto", "string queue = 7;", "string queue = 9;"),
    ],
)
def test_a_breaking_change_to_either_package_fails(repo: Path, proto: str, old: str, new: str) -> None:
    _edit(repo / "protos" / proto, old, new)
    done = _check(repo)
    assert done.returncode != 0, done.stdout
    assert proto in done.stdout + done.stderr


def _before_the_split(root: Path) -> None:
    """The protos as main had them before issue 11: the executor protocol in `jobmesh.v1`, no language
    options."""
    old, new = root / "protos/jobmesh/v1", root / "protos/jobmesh/executor"
    for name in ("executor_control.proto", "dispatch.proto"):
        text = (new / "v1" / name).read_text()
        text = text.replace("package jobmesh.executor.v1;", "package jobmesh.v1;")
        text = text.replace("jobmesh/executor/v1/executor_control.proto", "jobmesh/v1/executor_control.proto")
        (old / name).write_text(text)
    shutil.rmtree(new)
    for path in old.glob("*.proto"):
        path.write_text(
            re.sub(r"^option (go_package|java_\w+|csharp_namespace) = .*\n", "", path.read_text(), flags=re.M)
        )


def test_against_a_main_from_before_the_split_only_the_split_passes(tmp_path: Path) -> None:
    root = _contract(tmp_path / "repo")
    _before_the_split(root)
    _commit_as_main(root)
    shutil.rmtree(root / "protos")
    shutil.copytree(REPO / "protos", root / "protos")
    done = _check(root)
    assert done.returncode == 0, done.stdout + done.stderr
    assert "jobmesh/v1/executor_control.proto moved to jobmesh.executor.v1" in done.stdout
    assert "jobmesh.executor.v1 is new" in done.stdout
    _edit(root / "protos/jobmesh/v1/run.proto", "string type = 1;", "string kind = 1;")
    broken = _check(root)
    assert broken.returncode != 0
    assert "run.proto" in broken.stdout + broken.stderr
