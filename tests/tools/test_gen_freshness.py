"""`make test` fails when gen/ does not match protos/: the check is run on a copy of the contract."""

from __future__ import annotations

import shutil
import subprocess
from pathlib import Path

import pytest

from tests.acceptance.processes import REPO

pytestmark = pytest.mark.processes


def _copy_contract(target: Path) -> Path:
    for folder in ("protos", "gen", "tools"):
        shutil.copytree(REPO / folder, target / folder, symlinks=True)
    for name in ("buf.yaml", "buf.gen.yaml", "package.json"):
        shutil.copy(REPO / name, target / name)
    (target / ".jobmesh").mkdir()
    for tooling in (".venv", "node_modules", ".jobmesh/tools"):
        (target / tooling).symlink_to(REPO / tooling)
    return target


def _check(root: Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        ["bash", "tools/check_gen.sh"], cwd=root, capture_output=True, text=True, timeout=300, check=False
    )


def test_fresh_gen_passes_and_a_changed_proto_fails(tmp_path: Path) -> None:
    root = _copy_contract(tmp_path)
    fresh = _check(root)
    assert fresh.returncode == 0, fresh.stdout + fresh.stderr
    proto = root / "protos/jobmesh/v1/run.proto"
    proto.write_text(
        proto.read_text().replace("message RunError {", "message RunError {\n  // New.\n  string hint = 3;")
    )
    stale = _check(root)
    assert stale.returncode != 0
    assert "gen/ is stale" in stale.stderr
    assert "run_pb2" in stale.stderr


def test_hand_edited_gen_fails(tmp_path: Path) -> None:
    root = _copy_contract(tmp_path)
    stub = root / "gen/python/jobmesh/v1/job_pb2.py"
    stub.write_text(stub.read_text() + "\n# edited by hand\n")
    result = _check(root)
    assert result.returncode != 0
    assert "gen/ is stale" in result.stderr
