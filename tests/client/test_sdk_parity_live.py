"""The SDK's parity with the API against a live `jobmesh dev`: batch creates, schedule previews and audit
events in both clients, with their bad inputs; enums that print their names and are still taken as ints;
watches that end cleanly when their timeout passes while other errors still raise."""

from __future__ import annotations

import asyncio
import time
import uuid
from datetime import UTC, datetime, timedelta
from zoneinfo import ZoneInfo

import pytest

from jobmesh.client import (
    AsyncClient,
    AuditAction,
    AuditEvent,
    BatchCreateJobsView,
    Client,
    InvalidArgument,
    JobState,
    NotFound,
    OverlapPolicy,
    Priority,
    RunCount,
    RunState,
    RunTrigger,
    at,
    command,
    create_job_request,
    cron,
    immediately,
)
from jobmesh.v1 import job_pb2
from tests.support import eventually

WAIT = timedelta(seconds=30)
TOMORROW = datetime.now(UTC) + timedelta(days=1)


def unique(prefix: str) -> str:
    return f"{prefix}-{uuid.uuid4().hex[:8]}"


def violated_fields(error: InvalidArgument) -> set[str]:
    return {violation.field for violation in error.field_violations}


# Batch create ------------------------------------------------------------------------------------------


def test_a_batch_creates_each_job_in_order_and_its_immediate_run_runs(client: Client) -> None:
    ids = [unique("batch") for _ in range(3)]
    results = client.batch_create_jobs(
        [
            create_job_request(immediately(), command(["echo", "batched"]), job_id=ids[0]),
            create_job_request(at(TOMORROW), command(["true"]), job_id=ids[1]),
            create_job_request(cron("0 3 * * *"), command(["true"]), job_id=ids[2]),
        ]
    )
    assert [result.ok for result in results] == [True, True, True]
    assert [result.job.name if result.job else None for result in results] == [f"jobs/{i}" for i in ids]
    now_run, later_run, _ = (result.run for result in results)
    assert later_run is not None  # a one-shot job's run is made with it
    assert later_run.schedule_time.ToDatetime(tzinfo=UTC) == TOMORROW
    assert now_run is not None
    assert now_run.state in (RunState.SCHEDULED, RunState.QUEUED, RunState.RUNNING, RunState.SUCCEEDED)
    assert client.wait_for_run(now_run.name, WAIT).state is RunState.SUCCEEDED
    assert [line.text for line in client.tail_run_logs(now_run.name)] == ["batched"]
    assert client.get_job(ids[2]).state is JobState.ACTIVE


def test_a_full_view_batch_returns_whole_jobs_and_a_basic_one_only_names(client: Client) -> None:
    def batch(view: BatchCreateJobsView) -> job_pb2.Job:
        request = create_job_request(cron("0 3 * * *"), command(["true"]), display_name="viewed")
        [result] = client.batch_create_jobs([request], view=view)
        assert result.job is not None
        return result.job.proto

    full, basic = batch(BatchCreateJobsView.FULL), batch(BatchCreateJobsView.BASIC)
    assert (full.display_name, list(full.target.command.argv)) == ("viewed", ["true"])
    assert (bool(basic.name), basic.HasField("next_run_time")) == (True, True)
    assert (basic.display_name, basic.HasField("target")) == ("", False)


def test_one_invalid_job_in_a_batch_fails_alone_with_its_typed_error(client: Client) -> None:
    good, bad = unique("good"), unique("bad")
    results = client.batch_create_jobs(
        [
            create_job_request(at(TOMORROW), command(["true"]), job_id=good),
            create_job_request(cron("61 * * * *"), command(["true"]), job_id=bad),
        ]
    )
    assert [result.ok for result in results] == [True, False]
    assert [result.job.name for result in results if result.job] == [f"jobs/{good}"]
    refused = results[1]
    assert (refused.job, refused.run) == (None, None)
    assert isinstance(refused.error, InvalidArgument)
    assert any(field.endswith("schedule.cron.expression") for field in violated_fields(refused.error))
    assert refused.error.reason == "INVALID_ARGUMENT"
    assert [job.name for job in client.list_jobs(filter=f'name = "jobs/{bad}"')] == []


def test_an_empty_batch_is_refused_with_a_field_violation(client: Client) -> None:
    with pytest.raises(InvalidArgument) as refused:
        client.batch_create_jobs([])
    assert violated_fields(refused.value) == {"requests"}


def test_a_batch_retried_with_its_request_ids_makes_each_job_once(client: Client) -> None:
    label = unique("retried")
    labels = {"suite": label}
    requests = [create_job_request(at(TOMORROW), command(["true"]), labels=labels) for _ in range(2)]
    first = client.batch_create_jobs(requests)
    again = client.batch_create_jobs(requests)
    assert [r.job.name for r in again if r.job] == [r.job.name for r in first if r.job]
    assert len(list(client.list_jobs(filter=f'labels.suite = "{label}"'))) == 2


def test_an_unknown_view_or_priority_number_fails_before_the_call(client: Client) -> None:
    with pytest.raises(ValueError, match="is not a valid BatchCreateJobsView"):
        client.batch_create_jobs([create_job_request(immediately(), command(["true"]))], view=7)
    with pytest.raises(ValueError, match="is not a valid Priority"):
        create_job_request(immediately(), command(["true"]), priority=42)
    with pytest.raises(ValueError, match="is not a valid OverlapPolicy"):
        cron("0 3 * * *", overlap=9)


# Schedule preview --------------------------------------------------------------------------------------


def test_a_cron_preview_gives_its_fire_times_in_its_zone(client: Client) -> None:
    paris = ZoneInfo("Europe/Paris")
    after = datetime(2030, 3, 29, 12, tzinfo=UTC)  # the night of 30 to 31 March moves Paris to summer time
    preview = client.preview_schedule(cron("0 3 * * *", time_zone="Europe/Paris"), count=3, after=after)
    assert preview.time_zone == "Europe/Paris"
    assert preview.fire_times == (
        datetime(2030, 3, 30, 3, tzinfo=paris),
        datetime(2030, 3, 31, 3, tzinfo=paris),
        datetime(2030, 4, 1, 3, tzinfo=paris),
    )
    assert [moment.utcoffset() for moment in preview.fire_times] == [
        timedelta(hours=1),
        timedelta(hours=2),
        timedelta(hours=2),
    ]
    assert len(client.preview_schedule(cron("*/5 * * * *")).fire_times) == 5  # the default count


def test_one_shot_and_immediate_previews(client: Client) -> None:
    assert client.preview_schedule(at(TOMORROW)).fire_times == (TOMORROW,)
    assert client.preview_schedule(immediately()).fire_times == ()


def test_a_bad_preview_names_its_fields(client: Client) -> None:
    with pytest.raises(InvalidArgument) as bad_cron:
        client.preview_schedule(cron("61 * * * *"))
    [violation] = bad_cron.value.field_violations
    assert violation.field.endswith("cron.expression")
    assert "61" in violation.description or "minute" in violation.description
    with pytest.raises(InvalidArgument) as too_many:
        client.preview_schedule(cron("@hourly"), count=101)
    assert violated_fields(too_many.value) == {"count"}
    with pytest.raises(ValueError, match="no time zone"):
        client.preview_schedule(cron("@hourly"), after=datetime(2030, 1, 1))


# Audit events ------------------------------------------------------------------------------------------


def test_audit_events_say_who_did_what_a_page_at_a_time(client: Client) -> None:
    request_id = uuid.uuid4().hex
    job = client.create_job(cron("0 3 * * *"), command(["true"]), request_id=request_id).job
    client.pause_job(job.name)
    client.resume_job(job.name)
    events = list(client.list_audit_events(filter=f'job = "{job.name}"', order_by="time", page_size=1))
    assert [event.action for event in events] == [AuditAction.CREATE, AuditAction.PAUSE, AuditAction.RESUME]
    assert [str(event.action) for event in events] == ["CREATE", "PAUSE", "RESUME"]
    assert all(isinstance(event, AuditEvent) and event.resource == job.name for event in events)
    assert (events[0].request_id, events[0].actor) == (request_id, "unauthenticated")
    paused = list(client.list_audit_events(filter=f'job = "{job.name}" AND action = PAUSE'))
    assert [event.name for event in paused] == [events[1].name]


def test_a_bad_audit_filter_is_refused(client: Client) -> None:
    with pytest.raises(InvalidArgument):
        next(client.list_audit_events(filter="colour = blue"))


# Enums -------------------------------------------------------------------------------------------------


def test_enums_print_their_names_and_ints_are_still_taken(client: Client) -> None:
    job = client.create_job(
        cron("0 3 * * *", overlap=OverlapPolicy.BUFFER_ONE), command(["true"]), priority=Priority.HIGH
    ).job
    assert (job.priority, job.state) == (Priority.HIGH, JobState.ACTIVE)
    assert OverlapPolicy(job.schedule.cron.overlap_policy) is OverlapPolicy.BUFFER_ONE
    run = client.run_job_now(job.name)
    assert run.trigger is RunTrigger.RUN_NOW
    assert (str(run.trigger), f"{run.state}", repr(run.trigger)) == (
        "RUN_NOW",
        run.state.name,
        "<RunTrigger.RUN_NOW: 2>",
    )
    assert RunState.Name(RunState.SUCCEEDED) == "RUN_STATE_SUCCEEDED"
    assert RunState.Value("RUN_STATE_FAILED") is RunState.FAILED
    assert [int(state) for state in (RunState.FAILED, Priority.LOW)] == [6, 3]
    lower = client.update_job(job.name, priority=job_pb2.PRIORITY_LOW)  # a protobuf int, as before
    assert lower.priority is Priority.LOW
    plain = client.create_job(cron("0 4 * * *", overlap=job_pb2.OVERLAP_POLICY_SKIP), command(["true"])).job
    assert OverlapPolicy(plain.schedule.cron.overlap_policy) is OverlapPolicy.SKIP
    assert all(isinstance(listed.state, RunState) for listed in client.list_runs(job.name))
    client.delete_job(job.name)
    client.delete_job(plain.name)


# Watches that time out ---------------------------------------------------------------------------------


def test_a_watch_ends_cleanly_when_its_timeout_passes(client: Client) -> None:
    created = client.create_job(immediately(), command(["true"]))
    assert created.run is not None
    started = time.monotonic()
    messages = list(client.watch_runs(created.job.name, initial_page_size=10, timeout=timedelta(seconds=1)))
    assert 0.9 < time.monotonic() - started < 10
    assert {run.name for message in messages for run in message.runs} == {created.run.name}


def test_a_followed_log_ends_cleanly_when_its_timeout_passes(client: Client) -> None:
    created = client.create_job(immediately(), command(["sh", "-c", "echo started; sleep 60"]))
    assert created.run is not None
    started = time.monotonic()
    texts = [
        line.text
        for line in client.tail_run_logs(created.run.name, follow=True, timeout=timedelta(seconds=3))
    ]
    assert 2.9 < time.monotonic() - started < 20
    assert texts == ["started"]
    assert client.cancel_run(created.run.name).state in (RunState.CANCELLING, RunState.CANCELLED)


def test_a_log_tail_with_a_timeout_still_raises_other_errors(client: Client) -> None:
    with pytest.raises(NotFound):
        list(client.tail_run_logs("jobs/no-such-job/runs/none", follow=True, timeout=timedelta(seconds=5)))


def test_a_watch_with_a_timeout_still_raises_other_errors(client: Client) -> None:
    with pytest.raises(InvalidArgument):
        list(client.watch_runs(filter="colour = blue", timeout=timedelta(seconds=5)))


# The asyncio client ------------------------------------------------------------------------------------


# Run counts --------------------------------------------------------------------------------------------


def test_run_counts_are_what_list_runs_lists_per_state_in_both_clients(client: Client, server: str) -> None:
    """Compared once the runs of the tests before have settled (the counts and the lists are two reads)."""
    client.create_job(at(TOMORROW), command(["true"]))  # upcoming: counted apart

    async def read_async() -> list[RunCount]:
        async with AsyncClient(server) as async_client:
            return await async_client.count_runs()

    def agree() -> bool:
        counts = client.count_runs()
        by_state: dict[RunState, int] = {}
        for count in counts:
            by_state[count.state] = by_state.get(count.state, 0) + count.run_count
        listed = {
            state: len(list(client.list_runs(filter=f"state = {state.name}", page_size=1000)))
            for state in by_state
        }
        return listed == by_state and asyncio.run(read_async()) == counts

    eventually(agree, 30, "the counts to equal the lists, in both clients")
    counts = client.count_runs()
    assert sum(count.upcoming_run_count for count in counts) >= 1
    assert all(count.upcoming_run_count == 0 or count.state is RunState.SCHEDULED for count in counts)


def test_the_asyncio_client_has_the_same_calls(server: str) -> None:
    async def scenario() -> None:
        async with AsyncClient(server) as client:
            job_id = unique("async-batch")
            ok, refused = await client.batch_create_jobs(
                [
                    create_job_request(immediately(), command(["true"]), job_id=job_id),
                    create_job_request(cron("0 25 * * *"), command(["true"])),
                ]
            )
            assert ok.run is not None
            assert isinstance(refused.error, InvalidArgument)
            assert (await client.wait_for_run(ok.run.name, WAIT)).state is RunState.SUCCEEDED
            with pytest.raises(InvalidArgument):
                await client.batch_create_jobs([])
            preview = await client.preview_schedule(cron("0 12 * * *"), count=2, after=TOMORROW)
            assert [moment.hour for moment in preview.fire_times] == [12, 12]
            with pytest.raises(InvalidArgument):
                await client.preview_schedule(cron("0 25 * * *"))
            actions = [e.action async for e in client.list_audit_events(filter=f'job = "jobs/{job_id}"')]
            assert actions == [AuditAction.CREATE]
            watched = [m async for m in client.watch_runs(f"jobs/{job_id}", timeout=timedelta(seconds=0.5))]
            assert [run.state for run in watched[0].runs] == [RunState.SUCCEEDED]
            with pytest.raises(InvalidArgument):
                _ = [m async for m in client.watch_runs(filter="colour = blue", timeout=timedelta(seconds=5))]
            slow = await client.create_job(immediately(), command(["sh", "-c", "echo slow; sleep 60"]))
            assert slow.run is not None
            tail = client.tail_run_logs(slow.run.name, follow=True, timeout=timedelta(seconds=3))
            assert [line.text async for line in tail] == ["slow"]
            await client.cancel_run(slow.run.name)

    asyncio.run(scenario())
