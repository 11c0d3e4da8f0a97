"""The CLI against a live `jobmesh dev`: a job's next run is its next fire time (as `PreviewSchedule` gives
it), runs made ahead of their time are listed and watched only with `--upcoming`, and a `--at` already passed
is warned about before it is sent."""

from __future__ import annotations

import json
from datetime import UTC, datetime, timedelta
from typing import Any

import pytest

from jobmesh.client import Client
from tests.client.test_cli_live import EXIT_INVALID, cli, create, ok_json

pytestmark = pytest.mark.processes

EVERY_MINUTE = "0 * * * * *"  # its first occurrence is made into a run at create; the cursor moves past it


def parsed(text: str) -> datetime:
    return datetime.fromisoformat(text.replace("Z", "+00:00"))


def first_fire_time(client: Client, job: dict[str, Any]) -> datetime:
    created = client.get_job(job["name"])
    return client.preview_schedule(created.schedule, count=1).fire_times[0].astimezone(UTC)


def test_jobs_get_and_list_show_the_first_fire_time(server: str, client: Client) -> None:
    job = create(server, "--cron", EVERY_MINUTE, "--", "true")
    for _ in range(5):  # read again if an occurrence passed between the reads
        got = parsed(ok_json(server, "jobs", "get", job["name"])["next_run_time"])
        preview = first_fire_time(client, job)
        (listed,) = ok_json(server, "jobs", "list", "--filter", f'name = "{job["name"]}"')
        if parsed(listed["next_run_time"]) == got:
            break
    assert got == preview
    assert parsed(listed["next_run_time"]) == preview
    table = cli(server, "jobs", "get", job["name"]).stdout
    assert preview.isoformat(timespec="seconds").replace("+00:00", "Z") in table


def test_a_paused_job_shows_no_next_run(server: str) -> None:
    job = create(server, "--cron", EVERY_MINUTE, "--", "true")
    paused = ok_json(server, "jobs", "pause", job["name"])
    assert "next_run_time" not in paused
    assert "next_run_time" not in ok_json(server, "jobs", "get", job["name"])


def run_names(server: str, *args: str) -> list[str]:
    return [run["name"] for run in ok_json(server, "runs", "list", *args)]


def watched_names(server: str, *args: str) -> list[str]:
    watched = cli(server, "runs", "watch", *args, "--timeout", "1s", "-o", "json")
    assert watched.exit_code == 0, watched.output
    return [json.loads(line)["name"] for line in watched.stdout.splitlines()]


def test_runs_list_and_watch_show_upcoming_runs_only_when_asked(server: str) -> None:
    job = create(server, "--at", (datetime.now(UTC) + timedelta(hours=1)).isoformat(), "--", "true")
    assert run_names(server, "--job", job["name"]) == []
    assert run_names(server, "--job", job["name"], "--filter", "state = SCHEDULED") == []
    (upcoming,) = run_names(server, "--job", job["name"], "--upcoming")
    assert upcoming.startswith(job["name"] + "/runs/")
    assert watched_names(server, "--job", job["name"]) == []
    assert watched_names(server, "--job", job["name"], "--upcoming") == [upcoming]


@pytest.mark.parametrize("command", ["list", "watch"])
def test_upcoming_is_a_flag_without_a_value(server: str, command: str) -> None:
    result = cli(server, "runs", command, "--upcoming=yes")
    assert result.exit_code == EXIT_INVALID
    assert "--upcoming" in result.stderr


def test_a_past_at_is_warned_about_then_runs_at_once_marked(server: str) -> None:
    past = (datetime.now(UTC) - timedelta(hours=1)).replace(microsecond=0)
    result = cli(server, "jobs", "create", "--at", past.isoformat(), "-o", "json", "--", "true")
    assert result.exit_code == 0, result.output
    assert "warning: --at" in result.stderr
    assert "in the past" in result.stderr
    job = json.loads(result.stdout)
    (run,) = ok_json(server, "runs", "list", "--job", job["name"])  # due: not upcoming
    assert run["created_after_schedule_time"] is True
    ahead = cli(server, "jobs", "create", "--at", (past + timedelta(hours=3)).isoformat(), "--", "true")
    assert ahead.exit_code == 0, ahead.output
    assert "warning" not in ahead.stderr


def test_an_update_to_a_past_at_is_warned_about(server: str) -> None:
    job = create(server, "--at", (datetime.now(UTC) + timedelta(hours=1)).isoformat(), "--", "true")
    past = (datetime.now(UTC) - timedelta(minutes=5)).isoformat()
    result = cli(server, "jobs", "update", job["name"], "--at", past)
    assert result.exit_code == 0, result.output
    assert "in the past" in result.stderr
