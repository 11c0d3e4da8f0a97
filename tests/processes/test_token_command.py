"""`jobmesh token new`: a token printed once, and its entry (the token's hash, never the token) added to the
server's token file, which the server then accepts it by."""

from __future__ import annotations

from pathlib import Path

import pytest
import yaml

from jobmesh.processes.command import main
from jobmesh.server.auth.opaque_tokens import OpaqueTokens
from jobmesh.server.principals import Role


def test_a_new_token_appended_to_the_file_is_accepted_with_its_grant(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    path = tmp_path / "tokens.yaml"
    args = ["token", "new", "--subject", "exec-1", "--role", "team-a=operator", "--executor", "exec-1"]
    assert main([*args, "--queue", "default", "--append", str(path)]) == 0
    token = capsys.readouterr().out.strip()
    assert token not in path.read_text()
    principal = OpaqueTokens(path).principal_of({"authorization": f"Bearer {token}"}, {})
    assert principal is not None
    assert principal.subject == "exec-1"
    assert principal.role_in("team-a") is Role.OPERATOR
    assert principal.executor is not None
    assert principal.executor.name == "exec-1"
    assert principal.executor.queues == frozenset({"default"})

    assert main(["token", "new", "--subject", "ci", "--role", "*=viewer", "--append", str(path)]) == 0
    assert len(yaml.safe_load(path.read_text())["tokens"]) == 2


def test_without_a_file_the_entry_is_printed_apart_from_the_token(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["token", "new", "--subject", "ci", "--role", "*=admin"]) == 0
    printed = capsys.readouterr()
    [entry] = yaml.safe_load(printed.err)
    assert entry["subject"] == "ci"
    assert printed.out.strip().startswith("jm_")
    assert printed.out.strip() not in printed.err


@pytest.mark.parametrize(
    "bad",
    [["--role", "team-a"], ["--role", "team-a=owner"], ["--queue", "default"]],
)
def test_a_bad_grant_is_a_usage_error(bad: list[str], capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["token", "new", "--subject", "ci", *bad]) == 2
    assert "jm_" not in capsys.readouterr().out
