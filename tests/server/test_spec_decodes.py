"""A request decodes its job's stored spec once at most, through `core.definitions.decode_spec`, and carries
the message on: a create decodes none (it holds the definition it stored), the immediate bypass none (it
gets the run with its decoded job), and an update, a resume, a backfill, RunJobNow or a read one each.
Against SQLite and PostgreSQL, through a real gRPC server."""

from __future__ import annotations

import dataclasses
import sys
import time
from collections.abc import Callable
from datetime import UTC, datetime, timedelta

import pytest
from google.protobuf import field_mask_pb2

from jobmesh.core import definitions
from jobmesh.core.definitions import new_run
from jobmesh.core.names import parse_job_name
from jobmesh.core.records import DEFAULT_HEARTBEAT_TIMEOUT, RunState, RunTrigger
from jobmesh.v1 import job_pb2, job_service_pb2
from tests.server.conftest import Api
from tests.server.test_backfill import backfill_request, day_before_yesterday
from tests.server.test_job_service import command_job, create, unique

EVERY_SECOND = "* * * * * *"
NEXT_YEAR = datetime.now(UTC) + timedelta(days=365)


@pytest.fixture
def decodes(monkeypatch: pytest.MonkeyPatch) -> list[bytes]:
    """The specs decoded while a test runs: `decode_spec` counted wherever the mesh imported it."""
    decoded: list[bytes] = []
    original = definitions.decode_spec

    def counted(spec: bytes) -> job_pb2.Job:
        decoded.append(spec)
        return original(spec)

    holders = [
        module
        for name, module in list(sys.modules.items())
        if name.startswith("jobmesh.") and getattr(module, "decode_spec", None) is original
    ]
    assert definitions in holders
    assert len(holders) > 1, "no module of the mesh decodes through core.definitions"
    for module in holders:
        monkeypatch.setattr(module, "decode_spec", counted)
    return decoded


def _queued(api: Api, run_name: str) -> None:
    """Waits for the immediate bypass to have handed the run to the queue."""
    job_id, run_id = parse_job_name(run_name.split("/runs/", maxsplit=1)[0]), run_name.rsplit("/", 1)[1]
    deadline = time.monotonic() + 15
    while api.store.get_run(job_id, run_id).state is RunState.SCHEDULED:
        assert time.monotonic() < deadline, "the bypass did not queue the run"
        time.sleep(0.02)


def test_an_immediate_create_and_its_bypass_decode_no_spec(api: Api, decodes: list[bytes]) -> None:
    job = command_job()
    job.name = "jobs/ignored"  # output only: not stored, not carried
    job.etag = "7"
    created = create(api, job)
    _queued(api, created.run.name)
    assert decodes == []
    assert created.job.name != "jobs/ignored"
    assert created.job.etag == "1"
    assert (created.job.display_name, list(created.job.target.command.argv)) == ("echo", ["echo", "hello"])
    stored = api.store.get_job(parse_job_name(created.job.name)).spec  # what the answer was rendered from
    assert definitions.decode_spec(stored) == definitions.writable_part(created.job)


def test_a_batch_create_decodes_no_spec_in_either_view(api: Api, decodes: list[bytes]) -> None:
    for view in (job_service_pb2.BATCH_CREATE_JOBS_VIEW_BASIC, job_service_pb2.BATCH_CREATE_JOBS_VIEW_FULL):
        request = job_service_pb2.BatchCreateJobsRequest(
            requests=[job_service_pb2.CreateJobRequest(job=command_job(expression=EVERY_SECOND))], view=view
        )
        [result] = api.jobs.BatchCreateJobs(request).results
        assert result.job.HasField("next_run_time")
        _queued(api, result.run.name)
    assert decodes == []


def test_a_replayed_create_answers_the_job_as_stored(api: Api, decodes: list[bytes]) -> None:
    job_id, request_id = unique(), unique("request")
    first = create(api, command_job(run_at=NEXT_YEAR), job_id, request_id)
    assert decodes == []
    replayed = create(api, command_job(run_at=NEXT_YEAR), job_id, request_id)
    assert replayed.job == first.job
    assert len(decodes) == 1  # the earlier call's job, read back


def test_an_update_decodes_once_and_hands_its_new_run_the_merged_spec(api: Api, decodes: list[bytes]) -> None:
    name = create(api, command_job(run_at=NEXT_YEAR)).job.name
    decodes.clear()
    changed = job_pb2.Job(name=name, display_name="renamed")
    changed.schedule.cron.expression = EVERY_SECOND
    mask = field_mask_pb2.FieldMask(paths=["display_name", "schedule"])
    updated = api.jobs.UpdateJob(job_service_pb2.UpdateJobRequest(job=changed, update_mask=mask)).job
    assert len(decodes) == 1
    assert (updated.display_name, updated.schedule.cron.expression) == ("renamed", EVERY_SECOND)
    assert list(updated.target.command.argv) == ["echo", "hello"]
    stored = api.store.get_job(parse_job_name(name)).spec
    assert definitions.decode_spec(stored) == definitions.writable_part(updated)


def test_pause_resume_run_now_and_backfill_decode_once_each(api: Api, decodes: list[bytes]) -> None:
    name = create(api, command_job(expression=EVERY_SECOND)).job.name
    calls: dict[str, Callable[[], object]] = {
        "pause": lambda: api.jobs.PauseJob(job_service_pb2.PauseJobRequest(name=name)),
        "resume": lambda: api.jobs.ResumeJob(job_service_pb2.ResumeJobRequest(name=name)),
        "run now": lambda: api.jobs.RunJobNow(job_service_pb2.RunJobNowRequest(name=name)),
        "backfill": lambda: api.jobs.BackfillJob(
            backfill_request(name, day_before_yesterday(), day_before_yesterday() + timedelta(seconds=3))
        ),
        "get": lambda: api.jobs.GetJob(job_service_pb2.GetJobRequest(name=name)),
    }
    counts: dict[str, int] = {}
    for call, make in calls.items():
        decodes.clear()
        make()
        counts[call] = len(decodes)
    assert counts == dict.fromkeys(calls, 1)


def test_a_bulk_replay_decodes_each_jobs_spec_once(api: Api, decodes: list[bytes]) -> None:
    name = create(api, command_job(run_at=NEXT_YEAR)).job.name  # makes its run now, far ahead
    record = api.store.get_job(parse_job_name(name))
    now = datetime.now(UTC)
    for _ in range(3):
        run = new_run(record, now, now, RunTrigger.SCHEDULE, heartbeat_timeout=DEFAULT_HEARTBEAT_TIMEOUT)
        api.store.create_run(dataclasses.replace(run, state=RunState.DEAD_LETTERED))
    decodes.clear()
    request = job_service_pb2.BulkReplayRunsRequest(parent=name, filter="state = DEAD_LETTERED")
    assert api.jobs.BulkReplayRuns(request).changed_count == 3
    assert len(decodes) == 1
