"""Commands kept apart from their executor (executor/sandbox.py), against real subprocesses: in `bwrap` mode
a command runs as the job user, sees no process outside its sandbox, cannot read its executor's credential
files or another user's files, has no_new_privs, and meets its limits; in `user` mode it keeps the user,
no_new_privs and the limits. `auto` falls back loudly where bubblewrap cannot run, and `bwrap` then refuses
to start."""

from __future__ import annotations

import asyncio
import logging
import os
import stat
import subprocess
import uuid
from pathlib import Path

import pytest

from jobmesh.core.errors import InvalidConfig
from jobmesh.core.states import StopReason
from jobmesh.executor import sandbox as sandboxes
from jobmesh.executor.handlers import HandlerRegistry
from jobmesh.executor.outcomes import Stop, TargetOutcome
from jobmesh.executor.policy import ExecutionPolicy
from jobmesh.executor.runners import RunnerSettings, run_target
from jobmesh.executor.sandbox import JobLimits, Sandbox, open_sandbox
from jobmesh.v1 import job_pb2, run_pb2
from tests.executor.support import RecordingIO, command, dispatched

STDOUT, STDERR = run_pb2.LOG_STREAM_STDOUT, run_pb2.LOG_STREAM_STDERR
MODES = ("bwrap", "user")
as_root = pytest.mark.skipif(os.geteuid() != 0, reason="only an executor running as root switches users")


def run(
    target: job_pb2.Target, sandbox: Sandbox, *, stop_after: float | None = None
) -> tuple[TargetOutcome, RecordingIO]:
    async def scenario() -> tuple[TargetOutcome, RecordingIO]:
        io, stop = RecordingIO(), Stop()
        if stop_after is not None:
            asyncio.get_running_loop().call_later(stop_after, stop.request, StopReason.CANCEL, 30.0, "cancel")
        settings = RunnerSettings(HandlerRegistry(), policy=ExecutionPolicy.unrestricted(), sandbox=sandbox)
        return await run_target(dispatched(target), io, stop, settings), io

    return asyncio.run(scenario())


def sh(script: str, **env: str) -> job_pb2.Target:
    return command("sh", "-c", script, env=env)


@pytest.fixture
def credential(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A file anyone could read (its folder open too): only the sandbox keeps it from a command."""
    folder = tmp_path_factory.mktemp("open")
    folder.chmod(0o755)
    for parent in folder.parents:
        if parent != Path("/") and not parent.stat().st_mode & stat.S_IXOTH:
            parent.chmod(parent.stat().st_mode | stat.S_IXOTH)
    path = folder / "executor.token"
    path.write_text("executor-token-value\n")
    path.chmod(0o644)
    return path


def test_a_sandboxed_command_sees_no_process_outside_it_nor_its_executors_files(credential: Path) -> None:
    sandbox = open_sandbox("bwrap", "", JobLimits(), [str(credential)])
    os.environ["JM_EXECUTOR_ONLY"] = "executor-environment-value"
    try:
        script = (
            "ls /proc | grep -E '^[0-9]+$' | wc -l; grep NoNewPrivs /proc/self/status;"
            f" for f in /proc/$PPID/environ /proc/1/environ /proc/{os.getpid()}/environ {credential}; do"
            ' if cat "$f" >/dev/null 2>&1; then echo "READ $f"; else echo "REFUSED $f"; fi; done'
        )
        outcome, io = run(sh(script, OWN="own-value"), sandbox)
    finally:
        del os.environ["JM_EXECUTOR_ONLY"]
    assert outcome.state == run_pb2.RUN_STATE_SUCCEEDED, io.lines
    processes, no_new_privs, *reads = io.texts(STDOUT)
    assert int(processes) < 8  # the sandbox's init, the shell and its pipeline: nothing of the machine's
    assert no_new_privs.split() == ["NoNewPrivs:", "1"]
    assert reads == [
        "REFUSED /proc/1/environ",  # $PPID: the sandbox's init
        "REFUSED /proc/1/environ",
        f"REFUSED /proc/{os.getpid()}/environ",  # this process's pid names none, or another, in there
        f"REFUSED {credential}",
    ]
    assert credential.read_text() == "executor-token-value\n"  # readable outside: the sandbox hid it


@as_root
def test_a_sandboxed_command_of_a_root_executor_runs_as_nobody_without_root_files() -> None:
    sandbox = open_sandbox("bwrap", "", JobLimits(), [])
    outcome, io = run(sh("id -un; id -u; echo $HOME; cat /etc/shadow"), sandbox)
    assert outcome.error_type == "ExitCode"  # cat was refused
    assert io.texts(STDOUT) == ["nobody", "65534", "/nonexistent"]
    assert io.texts(STDERR) == ["cat: /etc/shadow: Permission denied"]


@as_root
@pytest.mark.parametrize("mode", MODES)
def test_the_job_user_is_configurable(mode: str) -> None:
    sandbox = open_sandbox(mode, "daemon", JobLimits(), [])
    outcome, io = run(sh("id -un"), sandbox)
    assert outcome.state == run_pb2.RUN_STATE_SUCCEEDED
    assert io.texts(STDOUT) == ["daemon"]


@pytest.mark.parametrize("mode", MODES)
def test_commands_keep_their_exit_codes_signals_environment_and_cancels(mode: str) -> None:
    sandbox = open_sandbox(mode, "", JobLimits(), [])
    outcome, _ = run(sh("exit 3"), sandbox)
    assert (outcome.error_type, outcome.exit_code) == ("ExitCode", 3)
    outcome, _ = run(sh("kill -KILL $$"), sandbox)
    assert (outcome.error_type, outcome.error_message) == ("Signal", "killed by signal SIGKILL")
    outcome, io = run(command("env", env={"OWN": "own-value"}), sandbox)
    variables = dict(line.split("=", 1) for line in io.texts(STDOUT))
    assert variables["OWN"] == "own-value"
    assert set(variables) <= {
        "PATH",
        "HOME",
        "LANG",
        "LC_ALL",
        "PWD",
        "OWN",
        "JOBMESH_RUN",
        "JOBMESH_ATTEMPT",
    }
    outcome, _ = run(command("sleep", "60"), sandbox, stop_after=0.2)
    assert outcome.state == run_pb2.RUN_STATE_CANCELLED


@pytest.mark.parametrize("mode", MODES)
def test_the_run_identity_reaches_the_command_and_its_own_env_cannot_forge_it(mode: str) -> None:
    sandbox = open_sandbox(mode, "", JobLimits(), [])
    forged = {"JOBMESH_RUN": "jobs/other/runs/forged", "JOBMESH_ATTEMPT": "99"}
    target = command("sh", "-c", 'echo "$JOBMESH_RUN"; echo "$JOBMESH_ATTEMPT"', env=forged)
    run = dispatched(target)
    run.attempt.attempt = 3

    async def scenario() -> tuple[TargetOutcome, RecordingIO]:
        io = RecordingIO()
        settings = RunnerSettings(HandlerRegistry(), policy=ExecutionPolicy.unrestricted(), sandbox=sandbox)
        return await run_target(run, io, Stop(), settings), io

    outcome, io = asyncio.run(scenario())
    assert outcome.state == run_pb2.RUN_STATE_SUCCEEDED, io.lines
    assert io.texts(STDOUT) == [run.attempt.run, "3"]


@pytest.mark.parametrize("mode", MODES)
def test_a_command_meets_its_memory_cpu_and_file_limits(mode: str) -> None:
    limits = JobLimits(memory=256 * 2**20, cpu_seconds=1, file_size=2**20)
    sandbox = open_sandbox(mode, "", limits, [])
    outcome, io = run(command("python3", "-c", "bytearray(512 * 2**20)"), sandbox)
    assert outcome.error_type == "ExitCode"
    assert "MemoryError" in io.texts(STDERR)
    outcome, _ = run(command("python3", "-c", "while True: pass"), sandbox)
    assert (outcome.error_type, outcome.error_message) == ("Signal", "killed by signal SIGXCPU")
    written = Path(f"/tmp/jobmesh-file-limit-{uuid.uuid4().hex}")
    try:
        outcome, _ = run(sh(f"exec head -c 2000000 /dev/zero > {written}"), sandbox)
        assert (outcome.error_type, outcome.error_message) == ("Signal", "killed by signal SIGXFSZ")
        assert written.stat().st_size == 2**20
    finally:
        written.unlink(missing_ok=True)


FORKS = """
import os, time
started = 0
try:
    for _ in range(40):
        if os.fork() == 0:
            time.sleep(5)
            os._exit(0)
        started += 1
except OSError:
    print("refused after", started, "forks")
else:
    print("all", started, "forks started")
"""


@as_root
@pytest.mark.parametrize("mode", MODES)
def test_a_command_meets_its_process_limit(mode: str) -> None:
    """RLIMIT_NPROC counts the job user's processes (root is exempt from it: hence as root, as nobody)."""
    sandbox = open_sandbox(mode, "", JobLimits(processes=20), [])
    outcome, io = run(command("python3", "-c", FORKS), sandbox)
    assert outcome.state == run_pb2.RUN_STATE_SUCCEEDED, io.lines
    [said] = io.texts(STDOUT)
    assert said.startswith("refused after "), said
    assert int(said.split()[2]) < 20


def test_auto_falls_back_loudly_where_bubblewrap_cannot_run(
    monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    monkeypatch.setenv("PATH", "/nonexistent")
    sandboxes._bwrap_works.cache_clear()
    try:
        with caplog.at_level(logging.WARNING):
            fallback = open_sandbox("auto", "", JobLimits(), [])
        assert fallback.mode == "user"
        assert "COMMANDS ARE NOT ISOLATED" in caplog.text
        assert "bubblewrap (bwrap) is not installed" in caplog.text
        with pytest.raises(InvalidConfig, match="bubblewrap cannot isolate commands here"):
            open_sandbox("bwrap", "", JobLimits(), [])
    finally:
        sandboxes._bwrap_works.cache_clear()
    _, io = run(sh("grep NoNewPrivs /proc/self/status"), fallback)
    assert io.texts(STDOUT) == ["NoNewPrivs:\t1"]


def test_a_probe_whose_child_fails_before_exec_falls_back_loudly_instead_of_failing_the_executor(
    monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    def failed_fork(*args: object, **kwargs: object) -> None:
        # What subprocess raises when the forked child fails before exec (seen beside gRPC's threads).
        raise subprocess.SubprocessError("Bad exception data from child: b'OSError:'")

    monkeypatch.setattr(subprocess, "run", failed_fork)
    sandboxes._bwrap_works.cache_clear()
    try:
        with caplog.at_level(logging.WARNING):
            assert open_sandbox("auto", "", JobLimits(), []).mode == "user"
        assert "COMMANDS ARE NOT ISOLATED" in caplog.text
        assert "Bad exception data from child" in caplog.text
        with pytest.raises(InvalidConfig, match="bubblewrap cannot isolate commands here"):
            open_sandbox("bwrap", "", JobLimits(), [])
    finally:
        sandboxes._bwrap_works.cache_clear()


def test_bubblewrap_tried_ahead_is_the_answer_open_sandbox_finds(monkeypatch: pytest.MonkeyPatch) -> None:
    sandboxes._bwrap_works.cache_clear()
    try:
        sandboxes.try_bubblewrap("auto", "")
        tried = sandboxes._bwrap_works.cache_info()
        assert (tried.misses, tried.hits) == (1, 0)
        open_sandbox("auto", "", JobLimits(), [])
        assert sandboxes._bwrap_works.cache_info().hits == 1  # not tried again
        sandboxes.try_bubblewrap("user", "")  # nothing to try in user mode
        assert sandboxes._bwrap_works.cache_info().misses == 1
    finally:
        sandboxes._bwrap_works.cache_clear()


def test_an_unknown_user_or_mode_is_refused() -> None:
    with pytest.raises(InvalidConfig, match="no user 'no-such-user-here'"):
        open_sandbox("auto", "no-such-user-here", JobLimits(), [])
    with pytest.raises(InvalidConfig, match="expected one of auto, bwrap, user"):
        open_sandbox("chroot", "", JobLimits(), [])
