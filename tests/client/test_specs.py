"""The SDK's builders, without a server: schedules refuse naive datetimes and unknown zones, targets and
updates say what is wrong with bad input, and names are read as the API writes them."""

from __future__ import annotations

import subprocess
import sys
from datetime import UTC, datetime, timedelta, timezone

import pytest

import jobmesh.client
from jobmesh.client import ClientConfig, at, command, cron, handler, http, retry_policy
from jobmesh.client._requests import create_job_request, job_name, parent_of_run, update_job_request
from jobmesh.v1 import job_pb2


def test_a_naive_datetime_is_refused_with_a_hint() -> None:
    with pytest.raises(ValueError, match="no time zone: give an aware datetime"):
        at(datetime(2030, 1, 1, 12, 0))
    with pytest.raises(ValueError, match=r"start .* no time zone"):
        cron("@daily", start=datetime(2030, 1, 1))


def test_an_aware_datetime_is_the_same_instant_in_any_zone() -> None:
    plus_two = datetime(2030, 1, 1, 14, 0, tzinfo=timezone(timedelta(hours=2)))
    assert at(plus_two).run_at.ToDatetime(tzinfo=UTC) == datetime(2030, 1, 1, 12, 0, tzinfo=UTC)


def test_cron_keeps_its_zone_and_refuses_an_unknown_one() -> None:
    schedule = cron("0 3 * * *", time_zone="Europe/Paris", jitter=timedelta(seconds=30))
    assert (schedule.cron.time_zone, schedule.cron.jitter.seconds) == ("Europe/Paris", 30)
    with pytest.raises(ValueError, match="unknown time zone 'Mars/Olympus'"):
        cron("0 3 * * *", time_zone="Mars/Olympus")


def test_targets() -> None:
    assert command(["sh", "-c", "echo"]).command.argv == ["sh", "-c", "echo"]
    with pytest.raises(ValueError, match="non-empty list"):
        command("echo hi")  # a str is a Sequence[str], but not an argv
    with pytest.raises(ValueError, match="non-empty list"):
        command([])
    assert http("https://example.com/hook").http.method == "POST"
    assert handler("reports.build", b"x").handler.payload == b"x"


def test_a_create_carries_a_fresh_request_id_and_its_fields() -> None:
    first = create_job_request(
        at(datetime(2030, 1, 1, tzinfo=UTC)),
        command(["true"]),
        display_name="nightly",
        labels={"team": "ops"},
        execution_timeout=timedelta(minutes=5),
        retry_policy=retry_policy(3, initial_backoff=timedelta(seconds=2)),
        priority=job_pb2.PRIORITY_HIGH,
    )
    second = create_job_request(at(datetime(2030, 1, 1, tzinfo=UTC)), command(["true"]))
    assert first.request_id
    assert first.request_id != second.request_id
    assert first.job.execution_timeout.seconds == 300
    assert (first.job.retry_policy.max_attempts, first.job.retry_policy.initial_backoff.seconds) == (3, 2)
    assert dict(first.job.labels) == {"team": "ops"}


def test_an_update_masks_exactly_the_fields_given() -> None:
    request = update_job_request("nightly", etag="4", display_name="x", labels={}, queue="reports")
    assert request.job.name == "jobs/nightly"
    assert request.job.etag == "4"
    assert list(request.update_mask.paths) == ["display_name", "labels", "queue"]
    with pytest.raises(ValueError, match="nothing to update"):
        update_job_request("nightly")


def test_an_update_clears_the_fields_named_and_refuses_what_it_cannot_clear() -> None:
    request = update_job_request("nightly", etag="4", clear=["execution_timeout", "retry_policy"], queue="q")
    assert list(request.update_mask.paths) == ["queue", "execution_timeout", "retry_policy"]
    assert not request.job.HasField("execution_timeout")
    assert not request.job.HasField("retry_policy")
    with pytest.raises(ValueError, match="cannot clear schedule: only"):
        update_job_request("nightly", clear=["schedule"])
    with pytest.raises(ValueError, match="queue: set or cleared, not both"):
        update_job_request("nightly", clear=["queue"], queue="q")


def test_names() -> None:
    assert job_name("nightly") == job_name("jobs/nightly") == "jobs/nightly"
    assert parent_of_run("jobs/nightly/runs/01abc") == "jobs/nightly"
    for bad in ("jobs/nightly", "nightly/runs/x", "jobs/nightly/runs/"):
        with pytest.raises(ValueError, match="not a run name"):
            parent_of_run(bad)


def test_a_token_goes_out_as_a_bearer_and_bad_config_is_refused() -> None:
    assert ClientConfig(token=" secret ").metadata() == (("authorization", "Bearer secret"),)
    assert ClientConfig().metadata() == ()
    assert "secret" not in repr(ClientConfig(token="secret"))
    with pytest.raises(ValueError, match="spans lines"):
        ClientConfig(token="two\nlines")
    with pytest.raises(ValueError, match="address is empty"):
        ClientConfig(target="")
    with pytest.raises(ValueError, match="deadline"):
        ClientConfig(deadline=timedelta(0))


def test_the_executor_is_the_mesh_own_and_loaded_on_demand() -> None:
    from jobmesh.executor import Executor, HandlerRegistry

    assert jobmesh.client.Executor is Executor
    assert jobmesh.client.HandlerRegistry is HandlerRegistry
    assert set(jobmesh.client.__all__) >= {"Executor", "HandlerContext", "HandlerRegistry", "ExecutorConfig"}
    with pytest.raises(AttributeError, match="no attribute 'Nothing'"):
        _ = jobmesh.client.Nothing


def test_a_program_that_only_calls_the_api_never_imports_the_executor() -> None:
    probe = "import sys, jobmesh.client; print('jobmesh.executor' in sys.modules)"
    done = subprocess.run(
        [sys.executable, "-c", probe], capture_output=True, text=True, timeout=60, check=True
    )
    assert done.stdout.strip() == "False"


def test_a_job_s_concurrency_key_and_limit_are_set_updated_and_read() -> None:
    created = create_job_request(
        at(datetime(2030, 1, 1, tzinfo=UTC)),
        command(["true"]),
        concurrency_key="customer-7",
        concurrency_limit=1,
    )
    assert (created.job.concurrency_key, created.job.concurrency_limit) == ("customer-7", 1)
    update = update_job_request("nightly", concurrency_key="customer-8", concurrency_limit=2)
    assert list(update.update_mask.paths) == ["concurrency_key", "concurrency_limit"]
    cleared = update_job_request("nightly", clear=["concurrency_key", "concurrency_limit"])
    assert list(cleared.update_mask.paths) == ["concurrency_key", "concurrency_limit"]
    read = jobmesh.client.Job.of(created.job)
    assert (read.concurrency_key, read.concurrency_limit) == ("customer-7", 1)
