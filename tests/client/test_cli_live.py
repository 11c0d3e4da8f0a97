"""`jobmesh jobs …` and `jobmesh runs …` against a live `jobmesh dev`, through the `jobmesh` command itself:
every command's answer (JSON parsed, tables read), and its exit code on a missing job or run and on an
invalid argument."""

from __future__ import annotations

import contextlib
import json
import os
import pty
import signal
import subprocess
from typing import Any

import pytest
from click.testing import CliRunner, Result

from jobmesh.processes.command import jobmesh
from tests.acceptance.processes import BIN, REPO
from tests.support import eventually

pytestmark = pytest.mark.processes

EXIT_INVALID, EXIT_NOT_FOUND, EXIT_CONFLICT, EXIT_UNAVAILABLE, EXIT_FAILED_RUN = 2, 3, 4, 6, 7


def cli(server: str, *args: str, env: dict[str, str] | None = None) -> Result:
    """`jobmesh ARGS --server SERVER`: the options after the command's own arguments, as users type them."""
    words = list(args)
    at = words.index("--") if "--" in words else len(words)
    words[at:at] = ["--server", server]
    return CliRunner().invoke(jobmesh, words, env=env, catch_exceptions=False)


def ok_json(server: str, *args: str) -> Any:
    result = cli(server, *args, "-o", "json") if "--" not in args else cli(server, "-o", "json", *args)
    assert result.exit_code == 0, result.output
    return json.loads(result.stdout)


def create(server: str, *args: str) -> dict[str, Any]:
    words = ["jobs", "create", *args]
    at = words.index("--") if "--" in words else len(words)
    words[at:at] = ["-o", "json"]
    result = cli(server, *words)
    assert result.exit_code == 0, result.output
    job: dict[str, Any] = json.loads(result.stdout)
    return job


def first_run(server: str, job: str) -> dict[str, Any]:
    [run] = ok_json(server, "runs", "list", "--job", job, "--upcoming")
    assert isinstance(run, dict)
    return run


def test_create_then_wait_then_logs(server: str) -> None:
    job = create(
        server, "--display-name", "cli", "--label", "suite=cli", "--", "sh", "-c", "echo hi; echo err >&2"
    )
    assert job["target"]["command"]["argv"] == ["sh", "-c", "echo hi; echo err >&2"]
    assert job["labels"] == {"suite": "cli"}
    run = first_run(server, job["name"])
    waited = cli(server, "runs", "get", run["name"], "--wait", "--timeout", "30s", "-o", "json")
    assert waited.exit_code == 0, waited.output
    assert json.loads(waited.stdout)["state"] == "RUN_STATE_SUCCEEDED"
    assert waited.stderr == ""  # no status line when stderr is not a terminal
    logs = cli(server, "runs", "logs", run["name"])
    assert (logs.exit_code, logs.stdout) == (0, "hi\n[stderr] err\n")
    lines = [
        json.loads(line)
        for line in cli(server, "runs", "logs", run["name"], "-o", "json").stdout.splitlines()
    ]
    assert [(line["stream"], line["text"]) for line in lines] == [
        ("LOG_STREAM_STDOUT", "hi"),
        ("LOG_STREAM_STDERR", "err"),
    ]
    table = cli(server, "runs", "get", run["name"]).stdout.splitlines()
    assert table[0].split()[:3] == ["NAME", "STATE", "ATTEMPT"]
    assert table[1].split()[:2] == [run["name"], "SUCCEEDED"]


def test_logs_follow_until_the_run_ends(server: str) -> None:
    job = create(server, "--", "sh", "-c", "echo start; sleep 0.5; echo end")
    followed = cli(server, "runs", "logs", first_run(server, job["name"])["name"], "--follow")
    assert (followed.exit_code, followed.stdout) == (0, "start\nend\n")


def test_a_failed_run_exits_7_when_waited_for_and_is_replayed(server: str) -> None:
    job = create(server, "--", "sh", "-c", "exit 4")
    run = first_run(server, job["name"])
    waited = cli(server, "runs", "get", run["name"], "--wait", "-o", "json")
    assert waited.exit_code == EXIT_FAILED_RUN
    assert json.loads(waited.stdout)["exit_code"] == 4
    replay = ok_json(server, "runs", "replay", run["name"])
    assert replay["replay_of"] == run["name"]
    assert replay["trigger"] == "RUN_TRIGGER_REPLAY"


def test_a_wait_that_times_out_exits_6_and_a_pending_run_is_cancelled(server: str) -> None:
    job = create(server, "--at", "2030-01-01T00:00:00+01:00", "--", "true")
    assert job["schedule"]["run_at"] == "2029-12-31T23:00:00Z"
    run = first_run(server, job["name"])
    waited = cli(server, "runs", "get", run["name"], "--wait", "--timeout", "200ms")
    assert waited.exit_code == EXIT_UNAVAILABLE
    assert "did not end within" in waited.stderr
    cancelled = ok_json(server, "runs", "cancel", run["name"], "--reason", "not needed")
    assert cancelled["state"] == "RUN_STATE_CANCELLED"


def test_get_list_update_pause_resume_run_now_delete(server: str) -> None:
    job = create(
        server,
        "--id",
        "cli-nightly",
        "--cron",
        "0 3 * * *",
        "--time-zone",
        "Europe/Paris",
        "--http",
        "https://example.com/hook",
    )
    assert job["schedule"]["cron"] == {"expression": "0 3 * * *", "time_zone": "Europe/Paris"}
    assert ok_json(server, "jobs", "get", "cli-nightly")["etag"] == job["etag"]
    listed = ok_json(
        server, "jobs", "list", "--filter", 'schedule = CRON AND display_name = "*"', "--limit", "0"
    )
    assert "jobs/cli-nightly" in [found["name"] for found in listed]
    assert len(ok_json(server, "jobs", "list", "--limit", "1")) == 1
    updated = ok_json(
        server, "jobs", "update", "jobs/cli-nightly", "--display-name", "Nightly", "--etag", job["etag"]
    )
    assert (updated["display_name"], updated["etag"]) == ("Nightly", str(int(job["etag"]) + 1))
    stale = cli(server, "jobs", "update", "cli-nightly", "--display-name", "x", "--etag", job["etag"])
    assert stale.exit_code == EXIT_CONFLICT
    assert "ABORTED" in stale.stderr
    assert ok_json(server, "jobs", "pause", "cli-nightly")["state"] == "JOB_STATE_PAUSED"
    assert ok_json(server, "jobs", "resume", "cli-nightly")["state"] == "JOB_STATE_ACTIVE"
    assert ok_json(server, "jobs", "run-now", "cli-nightly")["trigger"] == "RUN_TRIGGER_RUN_NOW"
    assert ok_json(server, "jobs", "delete", "cli-nightly")["state"] == "JOB_STATE_DELETED"
    taken = cli(server, "jobs", "create", "--id", "cli-nightly", "--", "true")
    assert taken.exit_code == EXIT_CONFLICT
    header = cli(server, "jobs", "list").stdout.splitlines()[0]
    assert header.split()[:3] == ["NAME", "STATE", "SCHEDULE"]


def test_watch_prints_the_runs_and_stops_at_its_timeout(server: str) -> None:
    job = create(server, "--", "true")
    watched = cli(server, "runs", "watch", "--job", job["name"], "--timeout", "1s", "-o", "json")
    assert watched.exit_code == 0, watched.output
    runs = [json.loads(line) for line in watched.stdout.splitlines()]
    assert runs
    assert {run["name"].rsplit("/runs/", 1)[0] for run in runs} == {job["name"]}
    lines = cli(server, "runs", "watch", "--job", job["name"], "--timeout", "0.5").stdout.splitlines()
    assert lines
    assert job["name"] in lines[0]


MISSING = [
    ("jobs", "get", "missing-job"),
    ("jobs", "update", "missing-job", "--display-name", "x"),
    ("jobs", "pause", "missing-job"),
    ("jobs", "resume", "missing-job"),
    ("jobs", "delete", "missing-job"),
    ("jobs", "run-now", "missing-job"),
    ("runs", "list", "--job", "missing-job"),
    ("runs", "watch", "--job", "missing-job", "--timeout", "5s"),
    ("runs", "get", "jobs/missing-job/runs/r1"),
    ("runs", "get", "jobs/missing-job/runs/r1", "--wait"),
    ("runs", "cancel", "jobs/missing-job/runs/r1"),
    ("runs", "replay", "jobs/missing-job/runs/r1"),
    ("runs", "logs", "jobs/missing-job/runs/r1"),
    ("runs", "logs", "jobs/missing-job/runs/r1", "--follow"),
]


@pytest.mark.parametrize("args", MISSING, ids=" ".join)
def test_a_missing_job_or_run_exits_3(server: str, args: tuple[str, ...]) -> None:
    result = cli(server, *args)
    assert result.exit_code == EXIT_NOT_FOUND, result.output
    assert "NOT_FOUND" in result.stderr


INVALID = [
    ("jobs", "create", "--cron", "every day", "--", "true"),
    ("jobs", "create", "--id", "Bad_Id", "--", "true"),
    ("jobs", "create", "--at", "2030-01-01T00:00:00", "--", "true"),  # no offset: refused before any call
    ("jobs", "create"),  # no target
    ("jobs", "get", "Bad Name!"),
    ("jobs", "list", "--filter", "colour = red"),
    ("jobs", "update", "jobs/x"),  # nothing to update
    ("jobs", "update", "{job}", "--cron", "bad"),
    ("jobs", "update", "{job}", "--execution-timeout", "-5s"),
    ("jobs", "pause", "Bad Name!"),
    ("jobs", "resume", "Bad Name!"),
    ("jobs", "delete", "Bad Name!"),
    ("jobs", "run-now", "Bad Name!"),
    ("runs", "list", "--filter", "colour = red"),
    ("runs", "get", "not-a-run"),
    ("runs", "get", "jobs/x/runs/r", "--wait", "--timeout", "soon"),
    ("runs", "cancel", "not-a-run"),
    ("runs", "replay", "not-a-run"),
    ("runs", "logs", "not-a-run"),
    ("runs", "watch", "--filter", "colour = red"),
]


@pytest.fixture(scope="module")
def existing(server: str) -> str:
    """A job that exists (the server looks a job up before it checks an update's fields)."""
    name: str = create(server, "--at", "2030-01-01T00:00:00Z", "--", "true")["name"]
    return name


@pytest.mark.parametrize("args", INVALID, ids=" ".join)
def test_an_invalid_argument_exits_2(server: str, existing: str, args: tuple[str, ...]) -> None:
    result = cli(server, *(arg.format(job=existing) for arg in args))
    assert result.exit_code == EXIT_INVALID, result.output
    assert result.stderr


def test_a_field_violation_is_told_by_its_field(server: str) -> None:
    result = cli(server, "jobs", "create", "--cron", "every day", "--", "true")
    assert "INVALID_ARGUMENT" in result.stderr
    assert "job.schedule.cron.expression" in result.stderr


def test_an_unreachable_server_exits_6() -> None:
    result = cli("127.0.0.1:1", "jobs", "get", "anything")
    assert result.exit_code == EXIT_UNAVAILABLE
    assert "UNAVAILABLE" in result.stderr


def test_the_environment_configures_the_connection_and_output(server: str) -> None:
    result = CliRunner().invoke(
        jobmesh, ["jobs", "list", "--limit", "1"], env={"JOBMESH_SERVER": server, "JOBMESH_OUTPUT": "json"}
    )
    assert result.exit_code == 0, result.output
    assert isinstance(json.loads(result.stdout), list)


def test_shell_completion_is_clicks_own() -> None:
    env = {"_JOBMESH_COMPLETE": "bash_complete", "COMP_WORDS": "jobmesh runs lo", "COMP_CWORD": "2"}
    completed = CliRunner().invoke(jobmesh, [], env=env, prog_name="jobmesh")
    assert completed.stdout.split() == ["plain,logs"]
    source = CliRunner().invoke(jobmesh, [], env={"_JOBMESH_COMPLETE": "bash_source"}, prog_name="jobmesh")
    assert "_jobmesh_completion" in source.stdout


def test_job_names_complete_from_the_server(server: str) -> None:
    create(server, "--id", "cli-complete-one", "--at", "2030-01-01T00:00:00Z", "--", "true")

    def completions(*words: str) -> list[str]:
        env = {
            "_JOBMESH_COMPLETE": "bash_complete",
            "COMP_WORDS": " ".join(words),
            "COMP_CWORD": str(len(words) - 1),
        }
        done = CliRunner().invoke(jobmesh, [], env=env, prog_name="jobmesh")
        return done.stdout.split()

    assert completions("jobmesh", "jobs", "get", "--server", server, "cli-complete") == [
        "plain,cli-complete-one"
    ]
    full = completions("jobmesh", "runs", "list", "--server", server, "--job", "jobs/cli-complete")
    assert full == ["plain,jobs/cli-complete-one"]
    assert completions("jobmesh", "jobs", "pause", "--server", "127.0.0.1:1", "cli-complete") == []


def test_help_documents_the_exit_codes_and_the_variables() -> None:
    for group in ("jobs", "runs"):
        text = CliRunner().invoke(jobmesh, [group, "--help"]).stdout
        assert "Exit codes:" in text
        assert "130" in text
    text = CliRunner().invoke(jobmesh, ["runs", "logs", "--help"]).stdout
    for variable in ("JOBMESH_SERVER", "JOBMESH_TOKEN_FILE", "JOBMESH_TLS_CA", "JOBMESH_TLS_CLIENT_CERT"):
        assert variable in text


def test_ctrl_c_ends_a_watch_with_130(server: str) -> None:
    job = create(server, "--", "true")
    env = {key: value for key, value in os.environ.items() if not key.startswith("JOBMESH_")}
    with subprocess.Popen(
        [str(BIN / "jobmesh"), "runs", "watch", "--job", job["name"], "--server", server],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        env=env,
        cwd=REPO,
    ) as watch:
        try:
            assert watch.stdout is not None
            assert job["name"] in watch.stdout.readline().decode()  # watching: the initial page came
            watch.send_signal(signal.SIGINT)
            _, errors = watch.communicate(timeout=30)
            assert watch.returncode == 130
            assert b"Traceback" not in errors
        finally:
            if watch.poll() is None:
                watch.kill()


def test_a_wait_shows_its_progress_on_a_terminal(server: str) -> None:
    job = create(server, "--", "sleep", "30")
    run = first_run(server, job["name"])
    env = {key: value for key, value in os.environ.items() if not key.startswith("JOBMESH_")}
    controller, terminal = pty.openpty()
    try:
        done = subprocess.run(
            [
                str(BIN / "jobmesh"),
                "runs",
                "get",
                run["name"],
                "--wait",
                "--timeout",
                "3s",
                "--server",
                server,
            ],
            stdout=subprocess.PIPE,
            stderr=terminal,
            env=env,
            cwd=REPO,
            timeout=60,
            check=False,
        )
        os.close(terminal)
        terminal = -1
        shown = b""
        with contextlib.suppress(OSError):  # EIO once the terminal's last writer is gone
            while chunk := os.read(controller, 4096):
                shown += chunk
    finally:
        os.close(controller)
        if terminal >= 0:
            os.close(terminal)
    cli(server, "runs", "cancel", run["name"])
    assert done.returncode == EXIT_UNAVAILABLE  # its --timeout passed
    assert f"waiting for {run['name']}: RUNNING (attempt 1)".encode() in shown
    assert b"\r\x1b[Kjobmesh: DEADLINE_EXCEEDED" in shown  # the status line erased before the error


def test_runs_count_prints_the_meshs_counts_as_list_runs_lists_them(server: str) -> None:
    """Compared once the runs of the tests before have settled (the counts and the lists are two reads)."""
    create(server, "--at", "2030-01-01T00:00:00Z", "--", "true")  # upcoming

    def agree() -> list[dict[str, Any]] | None:
        counts: list[dict[str, Any]] = ok_json(server, "runs", "count")
        totals: dict[str, int] = {}
        for count in counts:
            state = count["state"].removeprefix("RUN_STATE_")
            totals[state] = totals.get(state, 0) + int(count.get("run_count", "0"))
        for state, total in totals.items():
            if len(ok_json(server, "runs", "list", "--filter", f"state = {state}", "--limit", "0")) != total:
                return None
        return counts

    counts = eventually(agree, 30, "the counts to equal the lists")
    assert sum(int(count.get("upcoming_run_count", "0")) for count in counts) >= 1
    printed = cli(server, "runs", "count")
    assert printed.exit_code == 0, printed.output
    assert printed.stdout.split()[:5] == ["NAMESPACE", "QUEUE", "STATE", "RUNS", "UPCOMING"]


def test_runs_count_has_no_names_to_print(server: str) -> None:
    result = cli(server, "runs", "count", "-o", "name")
    assert result.exit_code == 2
    assert "no names" in result.output
