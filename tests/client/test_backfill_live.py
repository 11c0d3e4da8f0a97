"""Backfill through the SDK (sync and asyncio) and the `jobmesh jobs backfill` command, against a live
`jobmesh dev` that runs the runs: their trigger as the SDK, the table and the JSON show it, and the typed
errors and exit codes of bad input."""

from __future__ import annotations

import asyncio
from datetime import UTC, datetime, timedelta

import pytest

from jobmesh.client import (
    AsyncClient,
    Backfill,
    Client,
    FailedPrecondition,
    InvalidArgument,
    RunState,
    RunTrigger,
    command,
    cron,
)
from tests.client.test_cli_live import EXIT_INVALID, EXIT_NOT_FOUND, cli, create, ok_json
from tests.support import eventually

pytestmark = pytest.mark.processes

EXIT_PRECONDITION = 4  # FAILED_PRECONDITION, as ALREADY_EXISTS and ABORTED


def hours_ago(hours: int) -> datetime:
    return (datetime.now(UTC) - timedelta(hours=hours)).replace(minute=0, second=0, microsecond=0)


def test_the_sdk_backfills_and_its_runs_run_marked(client: Client) -> None:
    job = client.create_job(cron("0 * * * *"), command(["true"])).job
    start = hours_ago(5)
    made = client.backfill_job(
        job.name, start, start + timedelta(hours=3), pace=timedelta(milliseconds=50), request_id="sdk-day"
    )
    assert isinstance(made, Backfill)
    assert (made.run_count, made.first_schedule_time, made.last_schedule_time) == (
        3,
        start,
        start + timedelta(hours=2),
    )
    again = client.backfill_job(
        job.name, start, start + timedelta(hours=3), pace=timedelta(milliseconds=50), request_id="sdk-day"
    )
    assert again.run_count == 3

    def succeeded() -> list[object] | None:
        runs = list(client.list_runs(job.name, filter="trigger = BACKFILL AND state = SUCCEEDED"))
        return runs if len(runs) == 3 else None  # type: ignore[return-value]

    eventually(succeeded, 30, "the three backfill runs to succeed")
    runs = list(client.list_runs(job.name, filter="trigger = BACKFILL"))
    assert {(run.trigger, run.state) for run in runs} == {(RunTrigger.BACKFILL, RunState.SUCCEEDED)}
    assert str(runs[0].trigger) == "BACKFILL"


def test_the_async_sdk_backfills_and_refuses_bad_input(server: str, client: Client) -> None:
    hourly = client.create_job(cron("0 * * * *"), command(["true"])).job
    once = client.create_job(cron("0 0 1 1 *"), command(["true"])).job
    client.pause_job(once.name)

    async def scenario() -> None:
        async with AsyncClient(server) as aio:
            start = hours_ago(3)
            made = await aio.backfill_job(hourly.name, start, start + timedelta(hours=2))
            assert made.run_count == 2
            with pytest.raises(InvalidArgument) as refused:
                await aio.backfill_job(hourly.name, start, start - timedelta(hours=1))
            assert [v.field for v in refused.value.field_violations] == ["end_time"]
            with pytest.raises(FailedPrecondition):
                await aio.backfill_job(once.name, start, start + timedelta(hours=1))
            empty = await aio.backfill_job(
                hourly.name, start + timedelta(minutes=1), start + timedelta(minutes=2)
            )
            assert (empty.run_count, empty.first_schedule_time, empty.last_due_time) == (0, None, None)

    asyncio.run(scenario())
    with pytest.raises(ValueError, match="no time zone"):
        client.backfill_job(hourly.name, datetime(2026, 1, 1), datetime(2026, 1, 2))


def test_the_cli_backfills_and_shows_the_trigger(server: str) -> None:
    job = create(server, "--cron", "0 * * * *", "--", "true")
    start = hours_ago(4)
    frm, to = start.isoformat(), (start + timedelta(hours=2)).isoformat()
    told = cli(server, "jobs", "backfill", job["name"], "--from", frm, "--to", to, "--pace", "100ms")
    assert told.exit_code == 0, told.output
    assert told.stdout.startswith(f"2 backfill runs of {start.isoformat()} to ")
    answer = ok_json(
        server, "jobs", "backfill", job["name"], "--from", frm, "--to", to, "--request-id", "cli"
    )
    assert answer["run_count"] == 2
    runs = ok_json(
        server, "runs", "list", "--job", job["name"], "--filter", "trigger = BACKFILL", "--limit", "0"
    )
    assert len(runs) == 4
    assert {run["trigger"] for run in runs} == {"RUN_TRIGGER_BACKFILL"}
    table = cli(server, "runs", "list", "--job", job["name"], "--filter", "trigger = BACKFILL").stdout
    header, first = table.splitlines()[:2]
    assert header.split()[:4] == ["NAME", "STATE", "ATTEMPT", "TRIGGER"]
    assert first.split()[3] == "BACKFILL"


@pytest.mark.parametrize(
    ("args", "code", "said"),
    [
        (("--to", "{end}"), EXIT_INVALID, "--from"),
        (("--from", "{start}", "--to", "yesterday"), EXIT_INVALID, "--to"),
        (("--from", "{start}", "--to", "{end}", "--pace", "fast"), EXIT_INVALID, "--pace"),
        (("--from", "{end}", "--to", "{start}"), EXIT_INVALID, "end_time"),
        (("--from", "{start}", "--to", "{future}"), EXIT_INVALID, "must not be in the future"),
        (("--from", "{start}", "--to", "{end}", "--pace", "1ms"), EXIT_INVALID, "pace"),
    ],
)
def test_bad_input_exits_2_and_names_the_problem(
    server: str, args: tuple[str, ...], code: int, said: str
) -> None:
    job = create(server, "--cron", "0 * * * *", "--", "true")
    start = hours_ago(4)
    moments = {
        "start": start.isoformat(),
        "end": (start + timedelta(hours=1)).isoformat(),
        "future": (datetime.now(UTC) + timedelta(hours=1)).isoformat(),
    }
    words = [arg.format(**moments) for arg in args]
    result = cli(server, "jobs", "backfill", job["name"], *words)
    assert result.exit_code == code, result.output
    assert said in result.stderr


def test_a_missing_job_exits_3_and_a_job_without_cron_4(server: str) -> None:
    start = hours_ago(4)
    frm, to = start.isoformat(), (start + timedelta(hours=1)).isoformat()
    missing = cli(server, "jobs", "backfill", "no-such-job", "--from", frm, "--to", to)
    assert missing.exit_code == EXIT_NOT_FOUND, missing.output
    once = create(server, "--", "true")
    refused = cli(server, "jobs", "backfill", once["name"], "--from", frm, "--to", to)
    assert refused.exit_code == EXIT_PRECONDITION, refused.output
    assert "no cron schedule" in refused.stderr
