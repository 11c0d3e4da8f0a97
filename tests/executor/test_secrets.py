"""Secret references in a job's `env`, resolved by the executor from a file or its own environment, against
real subprocesses; the values are redacted from the output, whole and split across chunks and lines."""

from __future__ import annotations

import asyncio
import json
from pathlib import Path

import pytest

from jobmesh.core.error_types import ErrorType
from jobmesh.core.limits import MAX_LOG_LINE_CHARS
from jobmesh.core.secret_refs import parse_secret_queues
from jobmesh.executor.handlers import HandlerRegistry
from jobmesh.executor.outcomes import Stop, TargetOutcome
from jobmesh.executor.policy import ExecutionPolicy
from jobmesh.executor.redaction import MASK, Redactor
from jobmesh.executor.runners import RunnerSettings, run_target
from jobmesh.executor.secrets import SecretSource, open_secret_source
from jobmesh.v1 import job_pb2, run_pb2
from tests.executor.support import RecordingIO, command, dispatched

STDOUT, STDERR = run_pb2.LOG_STREAM_STDOUT, run_pb2.LOG_STREAM_STDERR
VALUE = "s3cr3t-Value-42"
# Prints "matches" when the command's TOKEN is the value, without printing it.
CHECK = f'test "$TOKEN" = "{VALUE}" && echo matches'


def run(
    script: str, secrets: SecretSource, env: dict[str, str] | None = None
) -> tuple[TargetOutcome, RecordingIO]:
    async def scenario() -> tuple[TargetOutcome, RecordingIO]:
        io = RecordingIO()
        settings = RunnerSettings(HandlerRegistry(), policy=ExecutionPolicy.unrestricted(), secrets=secrets)
        target = command("sh", "-c", script, env=env if env is not None else {"TOKEN": "secret://TOKEN"})
        return await run_target(dispatched(target), io, Stop(), settings), io

    return asyncio.run(scenario())


def secrets_file(tmp_path: Path, text: str, mode: int = 0o600) -> str:
    path = tmp_path / "secrets"
    path.write_text(text)
    path.chmod(mode)
    return f"file:{path}"


def everything(io: RecordingIO) -> str:
    return "\n".join(text for _, text in io.lines)


def test_a_secret_from_a_json_file(tmp_path: Path) -> None:
    source = open_secret_source(secrets_file(tmp_path, json.dumps({"TOKEN": VALUE})), {})
    outcome, io = run(CHECK, source)
    assert outcome.state == run_pb2.RUN_STATE_SUCCEEDED
    assert io.texts(STDOUT) == ["matches"]


def test_a_secret_from_a_name_value_file_is_read_again_when_it_changes(tmp_path: Path) -> None:
    spec = secrets_file(tmp_path, f"# the executor's secrets\nOTHER=x\nTOKEN={VALUE}\n")
    source = open_secret_source(spec, {})
    assert run(CHECK, source)[1].texts(STDOUT) == ["matches"]
    Path(spec.removeprefix("file:")).write_text("TOKEN=rotated\n")
    assert run('echo "${#TOKEN}"', source)[1].texts(STDOUT) == ["7"]


def test_a_secret_from_the_executors_environment_prefix() -> None:
    source = open_secret_source("env:JOBMESH_SECRET_", {"JOBMESH_SECRET_TOKEN": VALUE})
    outcome, io = run(CHECK + "; env | grep -c JOBMESH_SECRET_ || true", source)
    assert outcome.state == run_pb2.RUN_STATE_SUCCEEDED
    assert io.texts(STDOUT) == ["matches", "0"]  # the executor's variable itself is not passed on


@pytest.mark.parametrize("mode", [0o644, 0o604])
def test_a_world_readable_secrets_file_is_refused(tmp_path: Path, mode: int) -> None:
    with pytest.raises(ValueError, match="readable by anyone"):
        open_secret_source(secrets_file(tmp_path, f"TOKEN={VALUE}\n", mode), {})


def test_bad_sources_are_refused(tmp_path: Path) -> None:
    for spec in ("vault:x", "env:", f"file:{tmp_path / 'missing'}", secrets_file(tmp_path, "[1]")):
        with pytest.raises(ValueError, match=r"expected|cannot read|NAME=VALUE"):
            open_secret_source(spec, {})


def test_a_missing_secret_fails_final_with_its_name_and_nothing_runs(tmp_path: Path) -> None:
    marker = tmp_path / "ran"
    source = open_secret_source("env:JOBMESH_SECRET_", {"JOBMESH_SECRET_OTHER": VALUE})
    outcome, _ = run(f"touch {marker}", source)
    assert (outcome.state, outcome.error_type) == (run_pb2.RUN_STATE_FAILED, ErrorType.SECRET_NOT_FOUND)
    assert "'TOKEN'" in outcome.error_message
    assert VALUE not in outcome.error_message
    assert not marker.exists()


def test_a_printed_secret_is_redacted_from_stdout_and_stderr() -> None:
    source = open_secret_source("env:P_", {"P_TOKEN": VALUE})
    outcome, io = run('echo "token is $TOKEN."; echo "$TOKEN" >&2; echo "x${TOKEN}y${TOKEN}"', source)
    assert outcome.state == run_pb2.RUN_STATE_SUCCEEDED
    assert io.texts(STDOUT) == [f"token is {MASK}.", f"x{MASK}y{MASK}"]
    assert io.texts(STDERR) == [MASK]
    assert VALUE not in everything(io)


def test_a_secret_split_across_output_chunks_is_redacted() -> None:
    """The command writes the value in two writes with a pause between: the pipe delivers two chunks."""
    half = len(VALUE) // 2
    script = f'printf "%s" "$(echo "$TOKEN" | cut -c1-{half})"; sleep 0.3; echo "$TOKEN" | cut -c{half + 1}-'
    outcome, io = run(script, open_secret_source("env:P_", {"P_TOKEN": VALUE}))
    assert outcome.state == run_pb2.RUN_STATE_SUCCEEDED
    assert io.texts(STDOUT) == [MASK]


def test_a_secret_across_the_long_line_split_is_redacted() -> None:
    """A line longer than a log line is cut; a value straddling the cut is caught before it."""
    pad = "x" * (MAX_LOG_LINE_CHARS - 4)
    outcome, io = run(f'echo "{pad}$TOKEN"', open_secret_source("env:P_", {"P_TOKEN": VALUE}))
    assert outcome.state == run_pb2.RUN_STATE_SUCCEEDED
    assert "".join(io.texts(STDOUT)) == pad + MASK
    assert VALUE[:4] not in "".join(io.texts(STDOUT)).replace(pad, "")


def test_a_multi_line_secret_is_redacted_whole() -> None:
    value = "-----BEGIN KEY-----\nabc123\n-----END KEY-----"
    _, io = run('printf "%s\\n" "$TOKEN"', open_secret_source("env:P_", {"P_TOKEN": value}))
    assert io.texts(STDOUT) == [MASK]


def test_output_redaction_at_every_split_point() -> None:
    text = f"before {VALUE} middle {VALUE[:5]} after {VALUE}".encode()
    for cut in range(len(text) + 1):
        stream = Redactor([VALUE, "other"]).output()
        out = stream.feed(text[:cut]) + stream.feed(text[cut:]) + stream.flush()
        assert out == f"before {MASK} middle {VALUE[:5]} after {MASK}".encode(), cut


def test_error_text_is_redacted() -> None:
    assert Redactor([VALUE]).text(f"cannot start {VALUE}") == f"cannot start {MASK}"
    assert Redactor([]).text("nothing to hide") == "nothing to hide"


def in_namespace(script: str, secrets: SecretSource, namespace: str, env: dict[str, str]) -> TargetOutcome:
    async def scenario() -> TargetOutcome:
        settings = RunnerSettings(HandlerRegistry(), policy=ExecutionPolicy.unrestricted(), secrets=secrets)
        run = dispatched(command("sh", "-c", script, env=env))
        run.namespace = namespace
        return await run_target(run, RecordingIO(), Stop(), settings)

    return asyncio.run(scenario())


def test_a_job_resolves_only_its_own_namespaces_secrets(tmp_path: Path) -> None:
    """The attack: namespace A's job names namespace B's secret, plainly or qualified. It gets nothing of B's:
    a plain NAME is A's own, and a qualified one of B is refused (the server refuses it at create too)."""
    source = open_secret_source(
        secrets_file(tmp_path, f"TOKEN=default\nteam-a/TOKEN={VALUE}\nteam-b/B_ONLY=b-value\n"), {}
    )
    assert (
        in_namespace(CHECK, source, "team-a", {"TOKEN": "secret://TOKEN"}).state
        == run_pb2.RUN_STATE_SUCCEEDED
    )
    assert in_namespace(CHECK, source, "team-a", {"TOKEN": "secret://team-a/TOKEN"}).exit_code == 0
    for reference in ("secret://B_ONLY", "secret://team-b/B_ONLY"):
        outcome = in_namespace("true", source, "team-a", {"X": reference})
        assert (outcome.state, outcome.error_type) == (
            run_pb2.RUN_STATE_FAILED,
            ErrorType.SECRET_NOT_FOUND,
        ), reference
        assert "b-value" not in outcome.error_message
    default = in_namespace('test "$TOKEN" = default', source, "default", {"TOKEN": "secret://TOKEN"})
    assert default.state == run_pb2.RUN_STATE_SUCCEEDED


def test_an_env_source_holds_the_default_namespaces_secrets_only() -> None:
    source = open_secret_source("env:JOBMESH_SECRET_", {"JOBMESH_SECRET_TOKEN": VALUE})
    assert (
        in_namespace(CHECK, source, "default", {"TOKEN": "secret://TOKEN"}).state
        == run_pb2.RUN_STATE_SUCCEEDED
    )
    outcome = in_namespace(CHECK, source, "team-a", {"TOKEN": "secret://TOKEN"})
    assert outcome.error_type == ErrorType.SECRET_NOT_FOUND
    assert "namespace 'team-a'" in outcome.error_message


def on_queue(target: job_pb2.Target, source: SecretSource, queue: str, grants: str) -> TargetOutcome:
    async def scenario() -> TargetOutcome:
        settings = RunnerSettings(
            HandlerRegistry(),
            policy=ExecutionPolicy.unrestricted(),
            secrets=source,
            secret_queues=parse_secret_queues(grants),
        )
        run = dispatched(target)
        run.namespace, run.queue = "team-a", queue
        return await run_target(run, RecordingIO(), Stop(), settings)

    return asyncio.run(scenario())


def test_a_secret_granted_to_other_queues_is_not_resolved(tmp_path: Path) -> None:
    """Defence in depth: a run of queue q1 that names its namespace's secret granted to q2 alone (one the
    server would have refused at create) fails `SecretNotFound` before anything runs or is called, and the
    value is nowhere in what it reports; on q2 it resolves."""
    source = open_secret_source(secrets_file(tmp_path, f"team-a/TOKEN={VALUE}\n"), {})
    marker = tmp_path / "ran"
    webhook = job_pb2.Target.Http(url="http://127.0.0.1:9/never", headers={"X": "Bearer secret://TOKEN"})
    for target in (
        command("sh", "-c", f"touch {marker}", env={"TOKEN": "secret://TOKEN"}),
        command("sh", "-c", f"touch {marker}", env={"TOKEN": "secret://team-a/TOKEN"}),
        job_pb2.Target(http=webhook),
    ):
        for queue in ("q1", ""):
            outcome = on_queue(target, source, queue, "team-a/TOKEN=q2")
            assert (outcome.state, outcome.error_type) == (
                run_pb2.RUN_STATE_FAILED,
                ErrorType.SECRET_NOT_FOUND,
            )
            assert "granted to the queues q2 only" in outcome.error_message
            assert f"queue {queue or 'default'!r}" in outcome.error_message
            assert VALUE not in outcome.error_message
    assert not marker.exists()
    granted = on_queue(
        command("sh", "-c", CHECK, env={"TOKEN": "secret://TOKEN"}), source, "q2", "team-a/TOKEN=q2"
    )
    assert granted.state == run_pb2.RUN_STATE_SUCCEEDED
    another = on_queue(command("sh", "-c", CHECK, env={"TOKEN": "secret://TOKEN"}), source, "q1", "TOKEN=q2")
    assert another.state == run_pb2.RUN_STATE_SUCCEEDED  # the grant is the default namespace's TOKEN
