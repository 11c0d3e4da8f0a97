"""The command runner against real subprocesses: exit codes, environment, working directory, output lines,
signals, timeouts and cancels that kill the whole process group, and programs that cannot start."""

from __future__ import annotations

import asyncio
import re
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from jobmesh.core.states import StopReason
from jobmesh.executor.handlers import HandlerRegistry
from jobmesh.executor.outcomes import Stop, TargetOutcome
from jobmesh.executor.policy import ExecutionPolicy
from jobmesh.executor.runners import RunnerSettings, run_target
from jobmesh.v1 import job_pb2, run_pb2
from tests.executor.support import RecordingIO, command, dispatched, gone, gone_soon, pids_of
from tests.support import AT_ONCE

STDOUT, STDERR = run_pb2.LOG_STREAM_STDOUT, run_pb2.LOG_STREAM_STDERR


def run(
    target: job_pb2.Target,
    *,
    timeout: float | None = None,
    stop_after: float | None = None,
    grace: float = 1.0,
) -> tuple[TargetOutcome, RecordingIO, float]:
    """Runs the target to its outcome; `stop_after` cancels it that many seconds in. Also the time taken."""

    async def scenario() -> tuple[TargetOutcome, RecordingIO, float]:
        io, stop = RecordingIO(), Stop()
        loop = asyncio.get_running_loop()
        if stop_after is not None:
            loop.call_later(stop_after, stop.request, StopReason.CANCEL, grace, "test cancel")
        began = time.monotonic()
        settings = RunnerSettings(
            HandlerRegistry(), cancel_grace=grace, policy=ExecutionPolicy.unrestricted()
        )
        outcome = await run_target(dispatched(target, timeout=timeout), io, stop, settings)
        return outcome, io, time.monotonic() - began

    return asyncio.run(scenario())


def test_exit_zero_succeeds_with_both_streams_line_by_line() -> None:
    outcome, io, _ = run(command("sh", "-c", "echo one; echo two >&2; printf 'three\\nfour'"))
    assert outcome == TargetOutcome(run_pb2.RUN_STATE_SUCCEEDED, exit_code=0)
    assert io.texts(STDOUT) == ["one", "three", "four"]
    assert io.texts(STDERR) == ["two"]


def test_non_zero_exit_fails_with_its_code() -> None:
    outcome, _, _ = run(command("sh", "-c", "exit 3"))
    assert outcome.state == run_pb2.RUN_STATE_FAILED
    assert (outcome.error_type, outcome.exit_code) == ("ExitCode", 3)


def test_a_command_gets_a_minimal_environment_and_its_jobs_env(monkeypatch: pytest.MonkeyPatch) -> None:
    """Nothing of the executor's environment but PATH (a safe default), HOME and LANG: not its tokens."""
    monkeypatch.setenv("JM_EXECUTOR_TOKEN", "from-executor")
    monkeypatch.setenv("LANG", "C.UTF-8")
    monkeypatch.setenv("HOME", "/home/jm")
    outcome, io, _ = run(command("env", env={"JM_OWN": "from-target"}))
    assert outcome.state == run_pb2.RUN_STATE_SUCCEEDED
    variables = dict(line.split("=", 1) for line in io.texts(STDOUT))
    assert variables.pop("JOBMESH_ATTEMPT") == "1"
    assert re.fullmatch(r"jobs/j\d+/runs/r\d+", variables.pop("JOBMESH_RUN"))
    assert variables == {
        "PATH": "/usr/local/bin:/usr/bin:/bin",
        "HOME": "/home/jm",
        "LANG": "C.UTF-8",
        "JM_OWN": "from-target",
    }


def test_working_directory(tmp_path: Path) -> None:
    (tmp_path / "marker.txt").write_text("here\n")
    outcome, io, _ = run(command("cat", "marker.txt", cwd=str(tmp_path)))
    assert outcome.state == run_pb2.RUN_STATE_SUCCEEDED
    assert io.texts(STDOUT) == ["here"]


def test_long_lines_are_split_and_bad_utf8_replaced() -> None:
    script = "import sys; sys.stdout.write('x' * 40000 + '\\n'); sys.stdout.buffer.write(b'caf\\xe9\\n')"
    outcome, io, _ = run(command(sys.executable, "-c", script))
    assert outcome.state == run_pb2.RUN_STATE_SUCCEEDED
    lines = io.texts(STDOUT)
    assert [len(line) for line in lines[:-1]] == [16384, 16384, 40000 - 2 * 16384]
    assert lines[-1] == "caf\ufffd"


def test_killed_by_a_signal_fails_as_signal() -> None:
    outcome, _, _ = run(command("sh", "-c", "kill -KILL $$"))
    assert outcome.state == run_pb2.RUN_STATE_FAILED
    assert outcome.error_type == "Signal"
    assert "SIGKILL" in outcome.error_message


@pytest.mark.timing
def test_timeout_kills_the_whole_process_group() -> None:
    outcome, io, took = run(command("sh", "-c", "sleep 60 & echo $!; wait"), timeout=0.5)
    assert outcome.state == run_pb2.RUN_STATE_TIMED_OUT
    assert outcome.error_type == "Timeout"
    assert "0.5s" in outcome.error_message
    assert took < 0.5 + AT_ONCE  # the timeout's stop, not the end of `sleep 60`
    [grandchild] = pids_of(io.texts(STDOUT))
    assert gone_soon(grandchild)


@pytest.mark.timing
def test_cancel_stops_at_once_and_sigkill_follows_the_grace() -> None:
    outcome, io, took = run(command("sleep", "60"), stop_after=0.2, grace=30)
    assert outcome.state == run_pb2.RUN_STATE_CANCELLED
    assert took < 0.2 + AT_ONCE
    assert not any("SIGKILL" in text for text in io.texts(run_pb2.LOG_STREAM_SYSTEM))  # SIGTERM did it
    # SIGTERM ignored (the disposition survives exec): SIGKILL after the grace.
    outcome, io, took = run(command("sh", "-c", "trap '' TERM; echo $$; sleep 60"), stop_after=0.2, grace=0.5)
    assert outcome.state == run_pb2.RUN_STATE_CANCELLED
    assert 0.6 < took < 0.7 + AT_ONCE
    assert gone_soon(pids_of(io.texts(STDOUT))[0])
    assert any("SIGKILL" in text for text in io.texts(run_pb2.LOG_STREAM_SYSTEM))


@pytest.mark.timing
def test_leftover_background_processes_are_killed_when_the_command_exits() -> None:
    outcome, io, took = run(command("sh", "-c", "sleep 60 & echo $!"))
    assert outcome.state == run_pb2.RUN_STATE_SUCCEEDED
    assert took < AT_ONCE  # not held until the leftover `sleep 60` ends
    assert gone_soon(pids_of(io.texts(STDOUT))[0])


@pytest.mark.parametrize(
    ("argv", "cwd"),
    [(["/nonexistent/program"], ""), (["true"], "/nonexistent/folder"), ([], ""), (["."], "")],
)
def test_a_program_that_cannot_start_is_a_spawn_error(argv: list[str], cwd: str) -> None:
    outcome, _, _ = run(command(*argv, cwd=cwd))
    assert outcome.state == run_pb2.RUN_STATE_FAILED
    assert outcome.error_type == "SpawnError"


# A command whose children escape its process group (`setsid`), one in the background of the other: the
# escapees' pids are printed, then it waits.
ESCAPING = "setsid sleep 60 & echo $!; setsid sh -c 'sleep 60 & echo $!; wait' & sleep 0.2; echo ready; wait"


@pytest.mark.timing
def test_a_cancel_kills_processes_that_left_the_group() -> None:
    outcome, io, took = run(command("sh", "-c", ESCAPING), stop_after=0.5, grace=30)
    assert outcome.state == run_pb2.RUN_STATE_CANCELLED
    assert took < 0.5 + AT_ONCE  # SIGTERM reached the escapees too: no SIGKILL, 30 s later, was needed
    escapees = pids_of(io.texts(STDOUT))
    assert len(escapees) == 2
    assert all(gone_soon(pid) for pid in escapees)


@pytest.mark.timing
def test_processes_that_left_the_group_die_when_the_command_exits() -> None:
    outcome, io, took = run(command("sh", "-c", ESCAPING.removesuffix("; wait")))
    assert outcome.state == run_pb2.RUN_STATE_SUCCEEDED
    assert took < AT_ONCE  # not held until the escapees' `sleep 60` ends
    assert all(gone_soon(pid) for pid in pids_of(io.texts(STDOUT)))


EXECUTOR_THAT_DIES = """
import asyncio, sys
from jobmesh.core.attempts import AttemptRef
from jobmesh.executor.command import run_command
from jobmesh.executor.outcomes import Stop
from jobmesh.executor.policy import ExecutionPolicy
from jobmesh.executor.secrets import open_secret_source
from jobmesh.v1 import job_pb2

class Print:
    def log(self, stream, text):
        print(text, flush=True)
    def progress(self, fraction, message):
        pass
    def full(self):
        return False
    def spent(self):
        return False
    async def room(self):
        pass

target = job_pb2.Target.Command(argv=["sh", "-c", sys.argv[1]])
secrets = open_secret_source("env:JOBMESH_SECRET_", {})
identity = AttemptRef("job", "run", 1)
asyncio.run(run_command(target, Print(), Stop(), ExecutionPolicy.unrestricted(), secrets, identity=identity))
"""


@pytest.mark.parametrize("signum", [signal.SIGKILL, signal.SIGTERM, signal.SIGSEGV])
def test_no_process_of_a_command_outlives_its_executor(tmp_path: Path, signum: int) -> None:
    """However the executor dies, the command, its children and the escapees from its group die within 2 s."""
    script = tmp_path / "executor.py"
    script.write_text(EXECUTOR_THAT_DIES)
    with subprocess.Popen(
        [sys.executable, str(script), "echo $$; " + ESCAPING], stdout=subprocess.PIPE, text=True
    ) as executor:
        assert executor.stdout is not None
        pids = []
        for line in executor.stdout:
            if line.strip() == "ready":
                break
            pids.append(int(line))
        assert len(pids) == 3
        assert all(not gone(pid) for pid in pids)
        executor.send_signal(signum)
        executor.wait(timeout=10)
    assert all(gone_soon(pid) for pid in pids), [pid for pid in pids if not gone(pid)]
