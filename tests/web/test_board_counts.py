"""The board's counts are the mesh's (a real browser against `jobmesh dev` behind its Envoy): with more runs
than the board's stream first sends (1,000), each tile shows what `CountRuns` and `ListRuns` say, follows
changes without a reload, and the dead-letter tile equals the dead-letters page."""

from __future__ import annotations

import uuid
from datetime import UTC, datetime, timedelta

import pytest
from playwright.sync_api import Browser, Page, expect

from jobmesh.v1 import job_pb2, job_service_pb2, run_pb2, search_service_pb2
from tests.support import eventually
from tests.web.conftest import Dashboard, open_page, screenshot

pytestmark = pytest.mark.browser

ALL = "jobs/-"
CANCELLED = 1200  # more than the board's first page of runs


def unique(prefix: str) -> str:
    return f"{prefix}-{uuid.uuid4().hex[:8]}"


def later_jobs(count: int, label: str) -> list[job_service_pb2.BatchCreateJobsRequest]:
    job = job_pb2.Job(
        labels={"batch": label}, target=job_pb2.Target(command=job_pb2.Target.Command(argv=["true"]))
    )
    job.schedule.run_at.FromDatetime(datetime.now(UTC) + timedelta(hours=1))
    requests = [job_service_pb2.CreateJobRequest(job=job) for _ in range(count)]
    return [
        job_service_pb2.BatchCreateJobsRequest(requests=requests[start : start + 1000])
        for start in range(0, count, 1000)
    ]


def cancelled_batch(dashboard: Dashboard, count: int) -> None:
    """`count` runs (at most the 1,000 one bulk cancel may change) made for an hour from now, then
    cancelled together."""
    label = unique("batch")
    for request in later_jobs(count, label):
        dashboard.jobs.BatchCreateJobs(request)
    cancelled = dashboard.jobs.BulkCancelRuns(
        job_service_pb2.BulkCancelRunsRequest(parent=ALL, filter=f'labels.batch = "{label}"')
    )
    assert cancelled.changed_count == count


def server_counts(dashboard: Dashboard) -> dict[int, int]:
    answer = dashboard.search.CountRuns(search_service_pb2.CountRunsRequest(parent=ALL))
    totals: dict[int, int] = {}
    for count in answer.run_counts.counts:
        totals[count.state] = totals.get(count.state, 0) + count.run_count
    return totals


def listed(dashboard: Dashboard, state: str) -> int:
    total, token = 0, ""
    while True:
        page = dashboard.search.ListRuns(
            search_service_pb2.ListRunsRequest(
                parent=ALL, filter=f"state = {state}", page_size=1000, page_token=token
            )
        )
        total += len(page.runs)
        token = page.next_page_token
        if not token:
            return total


def dead_letter(dashboard: Dashboard) -> None:
    """A job that fails both its attempts: dead-lettered."""
    job = job_pb2.Job(
        target=job_pb2.Target(command=job_pb2.Target.Command(argv=["false"])),
        retry_policy=job_pb2.RetryPolicy(max_attempts=2),
    )
    job.retry_policy.initial_backoff.FromTimedelta(timedelta(milliseconds=100))
    job.schedule.immediate.SetInParent()
    dashboard.jobs.CreateJob(job_service_pb2.CreateJobRequest(job=job, job_id=unique("dead")))


def tile(state: str) -> str:
    """The board's tile of a state, by the name it shows."""
    return f'[data-count="{state}"]'


def test_the_board_shows_the_servers_counts_not_the_runs_it_saw(
    browser: Browser, dashboard: Dashboard, page: Page
) -> None:
    for _ in range(CANCELLED // 600):
        cancelled_batch(dashboard, 600)
    for _ in range(2):
        dead_letter(dashboard)
    wanted_dead = 2

    eventually(
        lambda: server_counts(dashboard).get(run_pb2.RUN_STATE_DEAD_LETTERED, 0) == wanted_dead,
        60,
        "the failing jobs to be dead-lettered",
    )

    page.goto("/")
    expect(page.get_by_role("status").filter(has_text="live")).to_be_visible()
    counts = server_counts(dashboard)
    assert counts[run_pb2.RUN_STATE_CANCELLED] == listed(dashboard, "CANCELLED") > 1000
    expect(page.locator(tile("CANCELLED"))).to_have_attribute(
        "data-value", str(counts[run_pb2.RUN_STATE_CANCELLED])
    )
    expect(page.locator(tile("CANCELLED"))).to_have_text(f"{counts[run_pb2.RUN_STATE_CANCELLED]:,}")
    expect(page.locator(tile("DEAD LETTERED"))).to_have_attribute("data-value", str(wanted_dead))
    expect(page.locator(tile("FAILED"))).to_have_attribute(
        "data-value", str(counts.get(run_pb2.RUN_STATE_FAILED, 0))
    )
    screenshot(page, "board-counts")

    # The counts follow the mesh while the board stays open: 300 more, cancelled in one go.
    cancelled_batch(dashboard, 300)
    expect(page.locator(tile("CANCELLED"))).to_have_attribute(
        "data-value", str(listed(dashboard, "CANCELLED"))
    )

    # The dead-letters page counts the same, and lists that many.
    letters, errors = open_page(browser, dashboard)
    letters.goto("/#/dead-letters")
    expect(letters.locator('[data-figure="dead-letters"]')).to_have_attribute("data-value", str(wanted_dead))
    expect(letters.get_by_role("table", name="Dead letters").locator("tbody tr")).to_have_count(wanted_dead)
    letters.context.close()
    assert errors == []
