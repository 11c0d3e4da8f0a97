"""The SDK against a live `jobmesh dev`: a job created, its run seen to succeed and its log read; pages;
the typed errors with their details; schedules at a time and on cron; the asyncio client the same way."""

from __future__ import annotations

import asyncio
import itertools
import uuid
from datetime import UTC, datetime, timedelta
from zoneinfo import ZoneInfo

import pytest

from jobmesh.client import (
    AlreadyExists,
    AsyncClient,
    Client,
    Conflict,
    FailedPrecondition,
    FieldViolation,
    InvalidArgument,
    JobState,
    LogStream,
    NotFound,
    RunState,
    RunTrigger,
    at,
    command,
    cron,
    immediately,
)

WAIT = timedelta(seconds=30)


def unique(prefix: str) -> str:
    return f"{prefix}-{uuid.uuid4().hex[:8]}"


def test_a_job_runs_to_success_and_its_log_is_read(client: Client) -> None:
    created = client.create_job(immediately(), command(["sh", "-c", "echo one; echo two >&2"]))
    assert created.run is not None
    states: list[int] = []
    run = client.wait_for_run(created.run.name, WAIT, on_update=lambda r: states.append(r.state))
    assert run.state == RunState.SUCCEEDED
    assert run.exit_code == 0
    assert states[-1] == RunState.SUCCEEDED
    lines = list(client.tail_run_logs(run.name))
    assert [(line.stream, line.text) for line in lines] == [
        (LogStream.STDOUT, "one"),
        (LogStream.STDERR, "two"),
    ]
    assert [line.text for line in client.tail_run_logs(run.name, after_sequence=lines[0].sequence)] == ["two"]
    assert client.get_run(run.name) == run


def test_following_a_log_ends_with_the_run(client: Client) -> None:
    created = client.create_job(immediately(), command(["sh", "-c", "echo a; sleep 0.5; echo b"]))
    assert created.run is not None
    texts = [line.text for line in client.tail_run_logs(created.run.name, follow=True, timeout=WAIT)]
    assert texts == ["a", "b"]


def test_a_failed_run_is_terminal_and_replayable(client: Client) -> None:
    created = client.create_job(immediately(), command(["sh", "-c", "exit 3"]))
    assert created.run is not None
    failed = client.wait_for_run(created.run.name, WAIT)
    assert (failed.state, failed.exit_code) == (RunState.FAILED, 3)
    replay = client.replay_run(failed.name)
    assert replay.replay_of == failed.name
    assert client.wait_for_run(replay.name, WAIT).state == RunState.FAILED


def test_waiting_gives_up_after_its_timeout(client: Client) -> None:
    later = client.create_job(at(datetime.now(UTC) + timedelta(hours=1)), command(["true"]))
    assert list(client.list_runs(later.job.name)) == []  # upcoming: listed only when asked for
    [run] = client.list_runs(later.job.name, show_upcoming=True)
    with pytest.raises(TimeoutError, match="did not end within"):
        client.wait_for_run(run.name, timedelta(milliseconds=300))
    assert client.cancel_run(run.name, reason="not needed").state == RunState.CANCELLED


def test_lists_are_read_a_page_at_a_time(client: Client) -> None:
    label = unique("page")
    names = {
        client.create_job(
            at(datetime.now(UTC) + timedelta(days=1)), command(["true"]), labels={"suite": label}
        ).job.name
        for _ in range(3)
    }
    listed = client.list_jobs(filter=f'labels.suite = "{label}"', page_size=1)
    assert {job.name for job in listed} == names
    assert len(list(itertools.islice(client.list_jobs(page_size=1), 2))) == 2


def test_an_invalid_create_carries_its_field_violations(client: Client) -> None:
    with pytest.raises(InvalidArgument) as raised:
        client.create_job(cron("every day", time_zone="Europe/Paris"), command(["true"]), job_id="Bad_Id")
    error = raised.value
    fields = {violation.field for violation in error.field_violations}
    assert {"job_id", "job.schedule.cron.expression"} <= fields
    assert all(isinstance(v, FieldViolation) and v.description for v in error.field_violations)
    assert error.reason == "INVALID_ARGUMENT"
    assert error.domain == "jobmesh.dev"


def test_missing_taken_and_stale_are_typed(client: Client) -> None:
    with pytest.raises(NotFound) as missing:
        client.get_job("no-such-job")
    assert missing.value.metadata == {"resource": "jobs/no-such-job"}
    job_id = unique("taken")
    job = client.create_job(at(datetime.now(UTC) + timedelta(days=1)), command(["true"]), job_id=job_id).job
    with pytest.raises(AlreadyExists):
        client.create_job(immediately(), command(["true"]), job_id=job_id)
    updated = client.update_job(job.name, etag=job.etag, display_name="renamed")
    assert (updated.display_name, updated.etag != job.etag) == ("renamed", True)
    with pytest.raises(Conflict) as stale:
        client.update_job(job_id, etag=job.etag, display_name="again")
    assert not isinstance(stale.value, AlreadyExists)
    client.delete_job(job_id)
    with pytest.raises(FailedPrecondition):
        client.pause_job(client.create_job(immediately(), command(["true"])).job.name)  # already completed


def test_a_retried_create_with_its_request_id_makes_one_job(client: Client) -> None:
    request_id = uuid.uuid4().hex
    tomorrow = at(datetime.now(UTC) + timedelta(days=1))
    first = client.create_job(tomorrow, command(["true"]), request_id=request_id)
    again = client.create_job(tomorrow, command(["true"]), request_id=request_id)
    assert again.job.name == first.job.name
    with pytest.raises(AlreadyExists, match="different request"):
        client.create_job(tomorrow, command(["false"]), request_id=request_id)


def test_schedules_at_a_time_and_on_cron_in_a_zone(client: Client) -> None:
    moment = datetime(2030, 6, 1, 9, 30, tzinfo=ZoneInfo("Europe/Paris"))
    one_shot = client.create_job(at(moment), command(["true"])).job
    assert one_shot.schedule.run_at.ToDatetime(tzinfo=UTC) == moment
    nightly = client.create_job(cron("0 3 * * *", time_zone="Europe/Paris"), command(["true"])).job
    assert (nightly.schedule.cron.time_zone, nightly.state) == ("Europe/Paris", JobState.ACTIVE)
    next_run = nightly.next_run_time.ToDatetime(tzinfo=UTC).astimezone(ZoneInfo("Europe/Paris"))
    assert (next_run.hour, next_run.minute) == (3, 0)
    assert client.pause_job(nightly.name).state == JobState.PAUSED
    assert client.resume_job(nightly.name).state == JobState.ACTIVE
    run = client.run_job_now(nightly.name)
    assert run.trigger == RunTrigger.RUN_NOW
    client.delete_job(nightly.name)


def test_the_asyncio_client_creates_waits_tails_and_watches(server: str) -> None:
    async def scenario() -> None:
        async with AsyncClient(server) as client:
            created = await client.create_job(immediately(), command(["echo", "async"]))
            assert created.run is not None
            watched = client.watch_runs(created.job.name, timeout=WAIT)
            run = await client.wait_for_run(created.run.name, WAIT)
            assert run.state == RunState.SUCCEEDED
            assert [line.text async for line in client.tail_run_logs(run.name)] == ["async"]
            async for changes in watched:
                if any(r.state == RunState.SUCCEEDED for r in changes.runs):
                    break
            assert [job.name async for job in client.list_jobs(filter=f'name = "{created.job.name}"')] == [
                created.job.name
            ]
            assert [r.name async for r in client.list_runs(created.job.name)] == [run.name]
            with pytest.raises(NotFound):
                await client.get_run(f"{created.job.name}/runs/missing")

    asyncio.run(scenario())
