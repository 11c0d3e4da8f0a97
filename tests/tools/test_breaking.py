"""`tools/check_breaking.sh` guards both packages against `main`, run on a copy of the contract in a
repository of its own: a breaking change to `jobmesh.v1` or to `jobmesh.control.v1` fails it."""

from __future__ import annotations

import shutil
import subprocess
from pathlib import Path

import pytest

from tests.acceptance.processes import REPO

pytestmark = pytest.mark.processes

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
    assert "jobmesh.control.v1 has no breaking change" in done.stdout


@pytest.mark.parametrize(
    ("proto", "old", "new"),
    [
        ("jobmesh/v1/job.proto", "string display_name = 2;", "string title = 2;"),
        (
            "jobmesh/v1/job.proto",
            'option go_package = "github.com/jobmesh/jobmesh/gen/go/jobmesh/v1;jobmeshv1";',
            'option go_package = "github.com/jobmesh/jobmesh/gen/go/jobmesh/v1;v1";',
        ),
        ("jobmesh/control/v1/executor_control.proto", "int32 attempt = 2;", "int64 attempt = 2;"),
        ("jobmesh/control/v1/dispatch.proto", "string queue = 7;", "string queue = 9;"),
    ],
)
def test_a_breaking_change_to_either_package_fails(repo: Path, proto: str, old: str, new: str) -> None:
    _edit(repo / "protos" / proto, old, new)
    done = _check(repo)
    assert done.returncode != 0, done.stdout
    assert proto in done.stdout + done.stderr
