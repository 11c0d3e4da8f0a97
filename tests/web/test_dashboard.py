"""The dashboard in a real browser (Debian's Chromium, headless, through Playwright) against `jobmesh dev`
behind its Envoy: every call goes from the page over gRPC-Web through Envoy to the server. Each view is
saved as a screenshot (tests/web/conftest.py says where)."""

from __future__ import annotations

import dataclasses
import math
import re
import shutil
import tempfile
import time
import uuid
from collections.abc import Callable
from datetime import UTC, datetime, timedelta
from pathlib import Path
from urllib.parse import urlencode

import pytest
from google.protobuf import duration_pb2, field_mask_pb2, timestamp_pb2
from playwright.sync_api import Browser, Page, expect

from jobmesh.v1 import job_pb2, job_service_pb2, run_pb2, search_service_pb2
from tests.web.conftest import Dashboard, open_page, screenshot

pytestmark = pytest.mark.browser


def unique(prefix: str) -> str:
    return f"{prefix}-{uuid.uuid4().hex[:8]}"


def command(*argv: str) -> job_pb2.Target:
    return job_pb2.Target(command=job_pb2.Target.Command(argv=list(argv)))


def create_now(dashboard: Dashboard, job_id: str, target: job_pb2.Target, **fields: object) -> run_pb2.Run:
    job = job_pb2.Job(target=target, **fields)  # type: ignore[arg-type]
    job.schedule.immediate.SetInParent()
    response = dashboard.jobs.CreateJob(job_service_pb2.CreateJobRequest(job=job, job_id=job_id))
    run: run_pb2.Run = response.run
    return run


def wait_for(check: Callable[[], bool], what: str, timeout: float = 30.0) -> None:
    deadline = time.monotonic() + timeout
    while not check():
        assert time.monotonic() < deadline, f"timed out waiting for {what}"
        time.sleep(0.2)


def run_state(dashboard: Dashboard, name: str) -> int:
    state: int = dashboard.search.GetRun(search_service_pb2.GetRunRequest(name=name)).run.state
    return state


def test_a_cron_job_made_in_the_form_has_its_runs_appear_live_on_the_board(
    browser: Browser, dashboard: Dashboard, page: Page
) -> None:
    board, errors = open_page(browser, dashboard)
    board.goto("/")
    expect(board.get_by_role("status").filter(has_text="live")).to_be_visible()
    job_id = unique("every-two")
    page.goto("/#/new")
    page.locator('input[name="jobId"]').fill(job_id)
    page.locator('input[name="displayName"]').fill("Every two seconds")
    page.get_by_label("On a cron schedule").check()
    page.locator('input[name="cron"]').fill("*/2 * * * * *")
    page.locator('input[name="timeZone"]').fill("Europe/Paris")
    page.locator('input[name="command"]').fill("sh -c 'echo tick'")
    expect(page.locator(".preview")).to_contain_text("Every 2 seconds")
    screenshot(page, "create-job")
    page.get_by_role("button", name="Create job").click()
    expect(page).to_have_url(re.compile(f"#/jobs/{job_id}$"))
    expect(page.locator(".schedule-words")).to_have_text("Every 2 seconds, Europe/Paris time")
    fire_times = page.get_by_role("list", name="Next fire times").locator("li")
    expect(fire_times).to_have_count(5)
    expect(fire_times.first).to_contain_text("CET")  # shown in the job's zone
    screenshot(page, "job")
    # The board, open since before the job existed and never reloaded, shows its runs finishing.
    finished = board.locator(f'[data-run^="jobs/{job_id}/runs/"][data-state="SUCCEEDED"]')
    expect(finished.first).to_be_visible(timeout=30_000)
    three_or_more = re.compile(r"^([3-9]|\d{2,}|\d{1,3}(,\d{3})+)$")
    expect(board.locator('[data-count="SUCCEEDED"]')).to_have_text(three_or_more, timeout=30_000)
    expect(board.locator('[data-figure="starts"]')).not_to_have_text("0")  # lateness of the last minute
    screenshot(board, "board")
    board.context.close()
    assert errors == []


def test_a_run_page_streams_its_log_lines_as_they_are_written(dashboard: Dashboard, page: Page) -> None:
    # The last line waits for a file the test makes once the page has shown the others: the page must stream
    # them while the command runs, however late it connects on a busy machine (the job user reads the file,
    # so it lies in a folder anyone may enter). The command stops by itself after 60 s.
    gate = Path(tempfile.mkdtemp(prefix="jobmesh-gate-")) / "go"
    gate.parent.chmod(0o755)
    script = (
        "for i in $(seq 1 7); do echo line $i; sleep 0.2; done;"
        f" for n in $(seq 600); do [ -e {gate} ] && break; sleep 0.1; done; echo line 8"
    )
    run = create_now(dashboard, unique("lines"), command("sh", "-c", script))
    page.goto(f"/#/{run.name}")
    log = page.get_by_role("log", name="Run log")
    expect(log).to_contain_text("line 7", timeout=30_000)
    expect(page.get_by_test_id("run-state")).to_have_text("RUNNING")
    assert "line 8" not in log.inner_text()
    gate.touch()
    expect(log).to_contain_text("line 8", timeout=30_000)  # on the page already open: streamed, not reloaded
    expect(page.get_by_test_id("run-state")).to_have_text("SUCCEEDED")
    expect(page.locator('[data-figure="lateness"]')).not_to_have_text("—")
    screenshot(page, "run")
    shutil.rmtree(gate.parent)


def test_a_running_run_shows_its_lateness_and_keeps_it_once_ended(
    browser: Browser, dashboard: Dashboard, page: Page
) -> None:
    board, errors = open_page(browser, dashboard)
    board.goto("/")
    expect(board.get_by_role("status").filter(has_text="live")).to_be_visible()
    gate = Path(tempfile.mkdtemp(prefix="jobmesh-gate-")) / "go"
    gate.parent.chmod(0o755)
    script = f"for n in $(seq 600); do [ -e {gate} ] && break; sleep 0.1; done"
    run = create_now(dashboard, unique("late"), command("sh", "-c", script))
    page.goto(f"/#/{run.name}")
    expect(page.get_by_test_id("run-state")).to_have_text("RUNNING", timeout=30_000)
    running = dashboard.search.GetRun(search_service_pb2.GetRunRequest(name=run.name)).run
    assert running.HasField("lateness")
    assert running.HasField("start_time")
    figure = page.locator('[data-figure="lateness"]')
    expect(figure).not_to_have_text("—")
    shown_running = figure.inner_text()
    row = board.locator(f'[data-run="{run.name}"]')
    expect(row).to_have_attribute("data-state", "RUNNING", timeout=30_000)
    cell = row.get_by_role("cell").nth(4)  # state, run, scheduled, started, lateness
    expect(cell).not_to_have_text("—")
    board_running = cell.inner_text()
    gate.touch()
    expect(page.get_by_test_id("run-state")).to_have_text("SUCCEEDED", timeout=30_000)
    ended = dashboard.search.GetRun(search_service_pb2.GetRunRequest(name=run.name)).run
    assert (ended.start_time, ended.lateness) == (running.start_time, running.lateness)  # written once
    expect(figure).to_have_text(shown_running)
    expect(row).to_have_attribute("data-state", "SUCCEEDED", timeout=30_000)
    expect(cell).to_have_text(board_running)
    board.context.close()
    shutil.rmtree(gate.parent)
    assert errors == []


def test_each_log_line_shows_the_time_it_was_written(dashboard: Dashboard, page: Page) -> None:
    run = create_now(dashboard, unique("timed"), command("sh", "-c", "echo first; sleep 0.3; echo second"))
    wait_for(lambda: run_state(dashboard, run.name) == run_pb2.RUN_STATE_SUCCEEDED, "the run to succeed")
    tail = dashboard.search.TailRunLogs(search_service_pb2.TailRunLogsRequest(name=run.name))
    written = {line.text: line.time for response in tail for line in response.lines}
    page.goto(f"/#/{run.name}")
    for text in ("first", "second"):
        line = page.locator(".logline").filter(has_text=text)
        shown = line.locator("time.logtime")
        # As protobuf-es rounds (JavaScript's Math.round: a half up), not Python's round (a half to even).
        millis = written[text].seconds * 1000 + math.floor(written[text].nanos / 1e6 + 0.5)
        iso = f"{datetime.fromtimestamp(millis // 1000, UTC):%Y-%m-%dT%H:%M:%S}.{millis % 1000:03d}Z"
        expect(shown).to_have_attribute("datetime", iso)
        expect(shown).to_have_text(re.compile(r"^\d\d:\d\d:\d\d\.\d{3}$"))
        local = page.evaluate("iso => new Date(iso).toTimeString().slice(0, 8)", iso)
        expect(shown).to_contain_text(local)  # the time of day in the browser's zone
    times = page.locator(".logline time.logtime").all_inner_texts()
    assert times == sorted(times), times
    assert len(set(times)) == len(times), times  # 300 ms apart: told apart


def test_cancelling_a_running_sleep_ends_it_cancelled(dashboard: Dashboard, page: Page) -> None:
    run = create_now(dashboard, unique("sleeper"), command("sleep", "60"))
    page.goto(f"/#/{run.name}")
    expect(page.get_by_test_id("run-state")).to_have_text("RUNNING", timeout=30_000)
    page.get_by_role("button", name="Cancel run").click()
    expect(page.get_by_test_id("run-state")).to_have_text("CANCELLED", timeout=30_000)
    assert run_state(dashboard, run.name) == run_pb2.RUN_STATE_CANCELLED


def test_an_invalid_cron_shows_the_servers_error_next_to_its_field(page: Page) -> None:
    page.goto("/#/new")
    page.get_by_label("On a cron schedule").check()
    page.locator('input[name="cron"]').fill("61 * * * *")
    page.locator('input[name="timeZone"]').fill("Mars/Olympus")
    page.locator('input[name="command"]').fill("true")
    page.get_by_role("button", name="Create job").click()
    expression = page.locator('[data-field="job.schedule.cron.expression"]')
    expect(expression.locator(".field-error")).to_have_text("minute field: 61 is out of range 0-59")
    expect(expression.locator("input")).to_have_attribute("aria-invalid", "true")
    expect(page.locator('[data-field="job.schedule.cron.time_zone"] .field-error')).to_contain_text("IANA")
    expect(page.locator('[data-field="job.target.command"] .field-error')).to_have_count(0)
    expect(page).to_have_url(re.compile("#/new$"))  # nothing was created
    screenshot(page, "create-job-invalid")


def test_an_edit_made_on_a_stale_version_shows_the_conflict(dashboard: Dashboard, page: Page) -> None:
    job_id = unique("edited")
    job = job_pb2.Job(target=command("true"), labels={"team": "ops"})
    job.schedule.cron.expression = "0 3 * * *"
    dashboard.jobs.CreateJob(job_service_pb2.CreateJobRequest(job=job, job_id=job_id))
    page.goto(f"/#/jobs/{job_id}/edit")
    labels = page.locator('textarea[name="labels"]')
    expect(labels).to_have_value("team=ops")
    # Someone else changes the job while the form is open.
    other = job_pb2.Job(name=f"jobs/{job_id}", display_name="changed elsewhere")
    mask = field_mask_pb2.FieldMask(paths=["display_name"])
    dashboard.jobs.UpdateJob(job_service_pb2.UpdateJobRequest(job=other, update_mask=mask))
    labels.fill("team=billing")
    page.get_by_role("button", name="Save changes").click()
    conflict = page.locator(".conflict")
    expect(conflict).to_contain_text("Someone else changed this job")
    expect(conflict).to_contain_text("you edited version 1; it is now at version 2")
    screenshot(page, "edit-conflict")
    current = dashboard.jobs.GetJob(job_service_pb2.GetJobRequest(name=f"jobs/{job_id}")).job
    assert dict(current.labels) == {"team": "ops"}  # the stale edit was not applied
    page.get_by_role("button", name="Reload the job").click()
    expect(page.locator(".conflict")).to_have_count(0)
    page.get_by_role("button", name="Save changes").click()  # on the fresh version, it goes through
    expect(page).to_have_url(re.compile(f"#/jobs/{job_id}$"))


def test_a_dead_letter_is_replayed_from_its_list(dashboard: Dashboard, page: Page) -> None:
    retry = job_pb2.RetryPolicy(max_attempts=2, initial_backoff=duration_pb2.Duration(nanos=100_000_000))
    run = create_now(dashboard, unique("doomed"), command("false"), retry_policy=retry)
    wait_for(lambda: run_state(dashboard, run.name) == run_pb2.RUN_STATE_DEAD_LETTERED, "the dead letter")
    page.goto("/#/dead-letters")
    row = page.locator(f'tr[data-run="{run.name}"]')
    expect(row).to_contain_text("ExitCode")
    screenshot(page, "dead-letters")
    row.get_by_role("button", name="Replay").click()
    replayed = row.get_by_role("link", name=re.compile("replayed as"))
    expect(replayed).to_be_visible()
    replays = dashboard.search.ListRuns(
        search_service_pb2.ListRunsRequest(parent=run.name.split("/runs/")[0], filter="trigger = REPLAY")
    ).runs
    assert [r.replay_of for r in replays] == [run.name]


def test_the_jobs_list_filters_and_pages(dashboard: Dashboard, page: Page) -> None:
    tag = uuid.uuid4().hex[:6]
    for i in range(3):
        job = job_pb2.Job(target=command("true"), display_name=f"Report {tag} {i}", labels={"batch": tag})
        job.schedule.cron.expression = "0 4 * * *"
        dashboard.jobs.CreateJob(job_service_pb2.CreateJobRequest(job=job, job_id=f"report-{tag}-{i}"))
    page.goto(f"/#/jobs?label=batch%3D{tag}&kind=CRON")
    expect(page.locator("tr[data-job]")).to_have_count(3)
    page.locator('input[name="text"]').fill(f"{tag} 1")
    page.locator('select[name="in"]').select_option("display_name")
    page.get_by_role("button", name="Apply").click()
    expect(page.locator("tr[data-job]")).to_have_count(1)
    expect(page.locator("tr[data-job]")).to_contain_text(f"Report {tag} 1")
    page.goto(f"/#/jobs?text=report-{tag}")
    expect(page.locator("tr[data-job]")).to_have_count(3)
    screenshot(page, "jobs")


def test_the_labels_column_lines_up_with_its_heading(dashboard: Dashboard, page: Page) -> None:
    tag = uuid.uuid4().hex[:6]
    for i, labels in enumerate(
        [{"row": tag}, {"row": tag, "team": "billing", "tier": "gold"}, {"row": tag, "x": "y"}]
    ):
        job = job_pb2.Job(target=command("true"), labels=labels)
        job.schedule.cron.expression = "0 5 * * *"
        dashboard.jobs.CreateJob(job_service_pb2.CreateJobRequest(job=job, job_id=f"aligned-{tag}-{i}"))
    page.goto(f"/#/jobs?label=row%3D{tag}")
    rows = page.locator("tr[data-job]")
    expect(rows).to_have_count(3)
    heading = page.get_by_role("columnheader", name="Labels").bounding_box()
    assert heading is not None
    for row in rows.all():
        cell = row.locator("td").nth(4)
        expect(cell.locator(".label").first).to_be_visible()
        assert cell.evaluate("td => getComputedStyle(td).display") == "table-cell"
        box, row_box = cell.bounding_box(), row.bounding_box()
        assert box is not None
        assert row_box is not None
        assert abs(box["x"] - heading["x"]) < 1, (box, heading)
        assert abs(box["width"] - heading["width"]) < 1, (box, heading)
        assert abs(box["height"] - row_box["height"]) < 1  # the whole row's height, as its other cells
        for label in cell.locator(".label").all():  # the labels themselves lie inside the column
            inner = label.bounding_box()
            assert inner is not None
            assert heading["x"] <= inner["x"] < heading["x"] + heading["width"]
    screenshot(page, "jobs-labels")


def test_a_job_id_already_taken_is_said_at_the_job_id_field(dashboard: Dashboard, page: Page) -> None:
    job_id = unique("taken")
    create_now(dashboard, job_id, command("true"))
    page.set_viewport_size({"width": 1280, "height": 500})  # the field is out of view once Create is reached
    page.goto("/#/new")
    page.locator('input[name="jobId"]').fill(job_id)
    page.locator('input[name="command"]').fill("true")
    create = page.get_by_role("button", name="Create job")
    create.scroll_into_view_if_needed()
    create.click()
    field = page.locator('[data-field="job_id"]')
    expect(field.locator(".field-error")).to_contain_text(f'the id "{job_id}" already exists')
    expect(field.locator("input")).to_have_attribute("aria-invalid", "true")
    expect(field.locator("input")).to_be_focused()
    expect(field.locator(".field-error")).to_be_in_viewport()
    expect(page.locator(".problem")).to_have_count(0)  # no banner below the fold
    expect(page).to_have_url(re.compile("#/new$"))
    screenshot(page, "create-job-taken")
    page.locator('input[name="jobId"]').fill(unique("free"))  # another id goes through
    create.click()
    expect(page).to_have_url(re.compile(r"#/jobs/free-[0-9a-f]{8}$"))


def test_pause_resume_run_now_and_delete_with_a_confirmation(dashboard: Dashboard, page: Page) -> None:
    job_id = unique("controls")
    job = job_pb2.Job(target=command("true"))
    job.schedule.cron.expression = "0 5 * * *"
    dashboard.jobs.CreateJob(job_service_pb2.CreateJobRequest(job=job, job_id=job_id))
    page.goto(f"/#/jobs/{job_id}")
    page.get_by_role("button", name="Pause").click()
    expect(page.locator(".view-head .badge")).to_have_text("PAUSED")
    page.get_by_role("button", name="Resume").click()
    expect(page.locator(".view-head .badge")).to_have_text("ACTIVE")
    page.get_by_role("button", name="Run now").click()
    expect(page.get_by_role("status").filter(has_text="Started a run now")).to_be_visible()
    page.get_by_role("button", name="Delete…").click()
    dialog = page.get_by_role("dialog")
    expect(dialog).to_contain_text("This cannot be undone")
    page.keyboard.press("Escape")  # the dialog closes; nothing is deleted
    expect(dialog).to_be_hidden()
    page.get_by_role("button", name="Delete…").click()
    dialog.get_by_role("button", name="Delete the job").click()
    expect(page).to_have_url(re.compile("#/jobs$"))
    listed = dashboard.search.ListJobs(
        search_service_pb2.ListJobsRequest(filter=f'name = "jobs/{job_id}"', show_deleted=True)
    ).jobs
    assert [job.state for job in listed] == [job_pb2.JOB_STATE_DELETED]


def test_a_configured_token_goes_with_every_call(dashboard: Dashboard, page: Page) -> None:
    page.goto("/#/settings")
    page.get_by_label("API token").fill("dashboard-secret")
    page.get_by_role("button", name="Save").click()
    with page.expect_request(lambda request: "/jobmesh.v1.SearchService/" in request.url) as call:
        page.goto("/#/jobs")
    assert call.value.headers.get("authorization") == "Bearer dashboard-secret"
    page.goto("/#/settings")
    screenshot(page, "settings")


def test_the_board_in_dark_mode_at_1280_by_800(browser: Browser, dashboard: Dashboard) -> None:
    board, errors = open_page(browser, dashboard, dark=True)
    board.goto("/")
    expect(board.get_by_role("status").filter(has_text="live")).to_be_visible()
    background = board.evaluate("getComputedStyle(document.body).backgroundColor")
    assert background == "rgb(18, 22, 29)"  # the dark palette, chosen by the system's preference
    width = board.evaluate("document.documentElement.scrollWidth")
    assert width <= 1280  # nothing wider than the window
    screenshot(board, "board-dark")
    board.context.close()
    assert errors == []


def test_a_job_at_a_time_made_in_the_form(dashboard: Dashboard, page: Page) -> None:
    job_id = unique("later")
    page.goto("/#/new")
    page.locator('input[name="jobId"]').fill(job_id)
    page.get_by_label("At a time, once").check()
    page.locator('input[name="runAt"]').fill("2031-06-01T12:30")
    page.locator('input[name="command"]').fill("echo later")
    page.get_by_role("button", name="Create job").click()
    expect(page).to_have_url(re.compile(f"#/jobs/{job_id}$"))
    expect(page.locator(".schedule-words")).to_have_text(re.compile(r"^Once, at .*01 Jun 2031, 12:30:00 UTC"))
    expect(page.get_by_role("list", name="Next fire times").locator("li")).to_have_count(1)
    job = dashboard.jobs.GetJob(job_service_pb2.GetJobRequest(name=f"jobs/{job_id}")).job
    assert job.schedule.run_at.ToJsonString() == "2031-06-01T12:30:00Z"  # the page's zone is UTC


def test_the_jobs_list_pages_by_the_apis_tokens(dashboard: Dashboard, page: Page) -> None:
    tag = uuid.uuid4().hex[:6]
    requests = []
    for i in range(30):
        job = job_pb2.Job(target=command("true"), labels={"pages": tag})
        job.schedule.cron.expression = "0 6 * * *"
        requests.append(job_service_pb2.CreateJobRequest(job=job, job_id=f"page-{tag}-{i:02d}"))
    dashboard.jobs.BatchCreateJobs(job_service_pb2.BatchCreateJobsRequest(requests=requests))
    page.goto(f"/#/jobs?label=pages%3D{tag}")
    rows = page.locator("tr[data-job]")
    expect(rows).to_have_count(25)
    first_page = rows.all_inner_texts()
    page.get_by_role("button", name="Next").click()
    expect(rows).to_have_count(5)
    expect(page.get_by_role("button", name="Next")).to_be_disabled()
    assert not set(rows.all_inner_texts()) & set(first_page)
    page.get_by_role("button", name="Previous").click()
    expect(rows).to_have_count(25)


def test_the_keyboard_reaches_the_content_first(page: Page) -> None:
    page.goto("/#/jobs")
    expect(page.get_by_role("heading", name="Jobs")).to_be_visible()
    page.keyboard.press("Tab")
    expect(page.get_by_role("link", name="Skip to content")).to_be_focused()
    page.keyboard.press("Enter")
    expect(page.locator("main")).to_be_focused()
    page.keyboard.press("Tab")  # the first control of the view
    expect(page.get_by_role("link", name="New job").last).to_be_focused()


def test_the_job_page_shows_its_audit_trail(dashboard: Dashboard, page: Page) -> None:
    job_id = unique("audited")
    job = job_pb2.Job(target=command("true"))
    job.schedule.cron.expression = "0 5 * * *"
    dashboard.jobs.CreateJob(
        job_service_pb2.CreateJobRequest(job=job, job_id=job_id, request_id=unique("req"))
    )
    page.goto(f"/#/jobs/{job_id}")
    trail = page.get_by_role("table", name="Audit trail")
    expect(trail.locator("tbody tr")).to_have_count(1)
    expect(trail.locator('tr[data-action="CREATE"]')).to_contain_text("unauthenticated")
    page.get_by_role("button", name="Pause").click()
    expect(page.locator(".view-head .badge")).to_have_text("PAUSED")
    page.get_by_role("button", name="Resume").click()
    expect(page.locator(".view-head .badge")).to_have_text("ACTIVE")
    page.get_by_role("button", name="Run now").click()
    expect(trail.locator("tbody tr")).to_have_count(4)
    # Newest first: the run made now links to its page.
    expect(trail.locator("tbody tr td:nth-child(3)")).to_have_text(["run now", "resume", "pause", "create"])
    expect(trail.locator('tr[data-action="RUN_NOW"] a')).to_have_attribute(
        "href", re.compile(f"#/jobs/{job_id}/runs/")
    )
    expect(page.get_by_text("default", exact=True)).to_be_visible()  # the job's namespace
    trail.scroll_into_view_if_needed()
    screenshot(page, "job-audit-trail")


def test_a_backfill_run_shows_its_trigger_and_the_job_its_audit_event(
    dashboard: Dashboard, page: Page
) -> None:
    job_id = unique("backfilled")
    job = job_pb2.Job(target=command("true"))
    job.schedule.cron.expression = "0 * * * *"
    dashboard.jobs.CreateJob(job_service_pb2.CreateJobRequest(job=job, job_id=job_id))
    end = datetime.now(UTC).replace(minute=0, second=0, microsecond=0)
    request = job_service_pb2.BackfillJobRequest(name=f"jobs/{job_id}")
    request.start_time.FromDatetime(end - timedelta(hours=2))
    request.end_time.FromDatetime(end)
    assert dashboard.jobs.BackfillJob(request).run_count == 2
    runs = dashboard.search.ListRuns(
        search_service_pb2.ListRunsRequest(parent=f"jobs/{job_id}", filter="trigger = BACKFILL")
    ).runs
    page.goto(f"/#/{runs[0].name}")
    expect(page.locator('[data-figure="trigger"]')).to_have_text("backfill")
    page.goto(f"/#/jobs/{job_id}")
    trail = page.get_by_role("table", name="Audit trail")
    expect(trail.locator('tr[data-action="BACKFILL"]')).to_contain_text("backfill")


@pytest.mark.parametrize("host", ["127.0.0.1", "localhost"])
def test_the_dashboard_works_by_either_loopback_name_under_its_security_policy(
    browser: Browser, dashboard: Dashboard, host: str
) -> None:
    """Envoy answers the loopback names (DNS rebinding: tests/web/test_envoy.py), and the content security
    policy leaves the app whole: no script, style or call of its own is blocked."""
    job_id = unique("by-name")
    create_now(dashboard, job_id, command("echo", "by name"))
    named = dataclasses.replace(dashboard, url=dashboard.url.replace("127.0.0.1", host))
    board, errors = open_page(browser, named)
    blocked: list[str] = []
    board.on("console", lambda m: blocked.append(m.text) if "Content Security Policy" in m.text else None)
    response = board.goto("/")
    assert response is not None
    assert response.headers["x-frame-options"] == "DENY"
    assert "frame-ancestors 'none'" in response.headers["content-security-policy"]
    expect(board.get_by_role("status").filter(has_text="live")).to_be_visible()
    board.goto("/#/jobs")
    expect(board.get_by_text(job_id)).to_be_visible()
    board.context.close()
    assert errors == []
    assert blocked == []


# Markup that would run a script and add elements if a view let it through. No single quote: an error
# message that quotes it (`cannot start '…'`) keeps it whole.
MARKUP = '<img src="/xss.png" onerror="document.title=`xss`"><b>bold</b>'
INJECTED = 'img[src="/xss.png"], [onerror], b:text-is("bold"), u:text-is("under")'
NEXT_YEAR = job_pb2.Schedule(run_at=timestamp_pb2.Timestamp(seconds=int(time.time()) + 365 * 86400))


def test_dead_letters_appear_live_and_are_replayed_in_bulk_after_a_dry_run_count(
    dashboard: Dashboard, page: Page
) -> None:
    """The dead letters' page, open before the runs fail, shows each as it is dead-lettered; "Replay all"
    narrowed by a label counts them (nothing replayed yet), then replays exactly those once confirmed."""
    label = unique("bulk")
    page.goto("/#/dead-letters")
    expect(page.get_by_role("status").filter(has_text="live")).to_be_visible()
    retry = job_pb2.RetryPolicy(max_attempts=2, initial_backoff=duration_pb2.Duration(nanos=100_000_000))
    runs = [
        create_now(dashboard, unique("doomed"), command("false"), retry_policy=retry, labels={"batch": label})
        for _ in range(3)
    ]
    for run in runs:  # never reloaded: the stream brings them
        expect(page.locator(f'tr[data-run="{run.name}"]')).to_contain_text("ExitCode", timeout=30_000)
    narrow = page.locator('input[name="narrow"]')
    narrow.fill("colour = red")
    page.get_by_role("button", name="Replay all…").click()
    expect(page.locator(".field-error")).to_contain_text("unknown field 'colour'")
    narrow.fill(f'labels.batch = "{label}"')
    page.get_by_role("button", name="Replay all…").click()
    confirm = page.get_by_role("dialog", name="Confirm the replay")
    expect(confirm).to_contain_text("Replay 3 dead-lettered runs")
    screenshot(page, "dead-letters-bulk-replay")

    def replays() -> list[run_pb2.Run]:
        request = search_service_pb2.ListRunsRequest(
            parent="jobs/-", filter=f'labels.batch = "{label}" AND trigger = REPLAY'
        )
        return list(dashboard.search.ListRuns(request).runs)

    assert replays() == []  # the count changed nothing
    confirm.get_by_role("button", name="Replay 3 runs").click()
    expect(page.get_by_role("status").filter(has_text="Replayed")).to_have_text("Replayed 3 of 3 runs.")
    assert sorted(run.replay_of for run in replays()) == sorted(run.name for run in runs)


@dataclasses.dataclass(frozen=True)
class MarkedUp:
    """Jobs and runs whose user-written text is markup, each where a view shows it."""

    fields: str  # display name, label, command, env value, request id; its run logged the markup
    fields_run: str
    failing: str  # its program is the markup: each attempt's error quotes it, and it is dead-lettered
    failing_run: str
    webhook: str  # its URL holds the markup (it never runs)
    handler: str  # its handler's name is the markup (it never runs)


@pytest.fixture(scope="module")
def marked_up(dashboard: Dashboard) -> MarkedUp:
    fields, failing = unique("markup"), unique("markup-fails")
    job = job_pb2.Job(
        target=job_pb2.Target(command=job_pb2.Target.Command(argv=["echo", MARKUP], env={"NOTE": MARKUP})),
        display_name=MARKUP,
        labels={"note": MARKUP},
    )
    job.schedule.immediate.SetInParent()
    request = job_service_pb2.CreateJobRequest(job=job, job_id=fields, request_id=MARKUP)
    fields_run = dashboard.jobs.CreateJob(request).run
    retry = job_pb2.RetryPolicy(max_attempts=2, initial_backoff=duration_pb2.Duration(nanos=100_000_000))
    failing_run = create_now(dashboard, failing, command(MARKUP), retry_policy=retry)
    webhook, handler = unique("markup-hook"), unique("markup-handler")
    for job_id, target in (
        (webhook, job_pb2.Target(http=job_pb2.Target.Http(url=f"https://hooks.example.com/{MARKUP}"))),
        (handler, job_pb2.Target(handler=job_pb2.Target.Handler(name=MARKUP))),
    ):
        later = job_pb2.Job(target=target, schedule=NEXT_YEAR)
        dashboard.jobs.CreateJob(job_service_pb2.CreateJobRequest(job=later, job_id=job_id))
    wait_for(
        lambda: run_state(dashboard, fields_run.name) == run_pb2.RUN_STATE_SUCCEEDED, "the run to succeed"
    )
    dead = run_pb2.RUN_STATE_DEAD_LETTERED
    wait_for(lambda: run_state(dashboard, failing_run.name) == dead, "the failing run's dead letter")
    return MarkedUp(fields, fields_run.name, failing, failing_run.name, webhook, handler)


def shown_as_text(page: Page, view: str, text: str = MARKUP) -> None:
    """The view shows `text` as the text it is, and no element or handler of it reached the page (the
    content security policy aside, which would block the handler even then)."""
    page.goto(view)
    expect(page.get_by_text(text).first).to_be_visible()
    assert page.locator(INJECTED).count() == 0, view
    assert page.title() != "xss", view


def test_markup_in_a_jobs_fields_and_its_log_is_shown_as_text(page: Page, marked_up: MarkedUp) -> None:
    """XSS: a job whose name, label, command, env value and request id, and its run's log line, hold markup:
    the jobs list, the list filtered by that text (from the URL), the job page (its details and audit trail)
    and the run page show it as text."""
    shown_as_text(page, "/#/jobs")
    shown_as_text(page, f"/#/jobs?{urlencode({'text': MARKUP, 'in': 'display_name'})}")
    expect(page.locator("p.hint", has_text="filter:")).to_contain_text("<b>bold</b>*")  # the URL's text
    expect(page.locator("tr[data-job]")).to_have_count(1)
    shown_as_text(page, f"/#/jobs/{marked_up.fields}")
    for shown in (f"command: echo '{MARKUP}'", f"NOTE={MARKUP}", f"note={MARKUP}"):
        expect(page.get_by_text(shown, exact=True)).to_be_visible()
    trail = page.get_by_role("table", name="Audit trail")
    expect(trail.locator('tr[data-action="CREATE"]')).to_contain_text(MARKUP)  # the request id
    shown_as_text(page, f"/#/{marked_up.fields_run}")
    expect(page.get_by_role("log", name="Run log")).to_contain_text(MARKUP)


def test_markup_in_an_error_is_shown_as_text_on_the_run_and_the_dead_letters(
    page: Page, marked_up: MarkedUp
) -> None:
    """A program named by markup fails to start: its attempts' errors quote it, on the run page and on
    the dead letters' list; the board, where its runs moved, takes nothing of it either."""
    shown_as_text(page, f"/#/{marked_up.failing_run}")
    attempts = page.get_by_role("table", name="Attempts")
    expect(attempts.get_by_text(f"cannot start '{MARKUP}'").first).to_be_visible()
    shown_as_text(page, "/#/dead-letters")
    expect(page.locator(f'tr[data-run="{marked_up.failing_run}"]')).to_contain_text(
        f"SpawnError: cannot start '{MARKUP}'"
    )
    page.goto("/")
    expect(page.locator(f'[data-run="{marked_up.failing_run}"]')).to_be_visible()
    assert page.locator(INJECTED).count() == 0
    assert page.title() != "xss"


def test_markup_in_a_webhook_url_and_a_handler_name_is_shown_as_text(page: Page, marked_up: MarkedUp) -> None:
    shown_as_text(page, f"/#/jobs/{marked_up.webhook}", f"webhook: POST https://hooks.example.com/{MARKUP}")
    shown_as_text(page, f"/#/jobs/{marked_up.handler}", f"handler: {MARKUP}")


def test_markup_in_the_edit_form_stays_in_its_fields(page: Page, marked_up: MarkedUp) -> None:
    """The edit form holds the job's markup as the values of its fields, not as elements."""
    page.goto(f"/#/jobs/{marked_up.fields}/edit")
    expect(page.locator('textarea[name="labels"]')).to_have_value(f"note={MARKUP}")
    assert page.locator(INJECTED).count() == 0
    assert page.title() != "xss"


def test_markup_the_server_quotes_back_in_an_error_is_shown_as_text(page: Page) -> None:
    """The create form sends a label key of markup; the server refuses it, quoting the key in its message,
    and the form shows that message as text."""
    key = "<b>bold</b><u>under</u>"
    page.goto("/#/new")
    page.locator('input[name="command"]').fill("true")
    page.locator('textarea[name="labels"]').fill(f"{key}=x")
    page.get_by_role("button", name="Create job").click()
    expect(page.get_by_text(f"job.labels['{key}']").first).to_be_visible()
    expect(page).to_have_url(re.compile("#/new$"))
    assert page.locator(INJECTED).count() == 0


EVERY_MINUTE = "0 * * * * *"  # its first occurrence is made into a run at create; the cursor moves past it


def iso_millis(stamp: timestamp_pb2.Timestamp) -> str:
    """A timestamp as a page's `<time dateTime>` holds it (JavaScript's `toISOString`)."""
    return stamp.ToDatetime(UTC).isoformat(timespec="milliseconds").replace("+00:00", "Z")


def first_fire_time(dashboard: Dashboard, job_name: str) -> str:
    job = dashboard.jobs.GetJob(job_service_pb2.GetJobRequest(name=job_name)).job
    request = search_service_pb2.PreviewScheduleRequest(schedule=job.schedule, count=1)
    return iso_millis(dashboard.search.PreviewSchedule(request).fire_times[0])


def shown_beside_preview(
    page: Page, dashboard: Dashboard, url: str, job_name: str, shown: str
) -> tuple[str, str]:
    """The time `shown` holds on the page at `url`, and PreviewSchedule's first fire time read around the
    page's load: loaded again when an occurrence passed meanwhile."""
    for _ in range(5):
        before = first_fire_time(dashboard, job_name)
        page.goto(url)
        page.reload()  # a hash change alone keeps the page's loaded state
        time_shown = page.locator(shown)
        expect(time_shown).to_have_attribute("datetime", re.compile("Z$"))
        value = time_shown.get_attribute("datetime") or ""
        if first_fire_time(dashboard, job_name) == before:
            return value, before
    raise AssertionError("the first fire time kept moving")


def test_the_next_run_is_the_first_fire_time_on_the_job_page_and_the_jobs_list(
    dashboard: Dashboard, page: Page
) -> None:
    job_id = unique("next")
    job = job_pb2.Job(target=command("true"))
    job.schedule.cron.expression = EVERY_MINUTE
    created = dashboard.jobs.CreateJob(job_service_pb2.CreateJobRequest(job=job, job_id=job_id))
    assert created.HasField("run")  # the first occurrence was made into a run at once
    name = f"jobs/{job_id}"
    next_run, preview = shown_beside_preview(
        page, dashboard, f"/#/jobs/{job_id}", name, '[data-figure="next-run"] time'
    )
    assert next_run == preview
    first_listed = page.get_by_role("list", name="Next fire times").locator("li time").first
    expect(first_listed).to_have_attribute("datetime", next_run)
    listed, preview = shown_beside_preview(
        page,
        dashboard,
        f"/#/jobs?text={job_id}",
        name,
        f'tr[data-job="{name}"] [data-column="next-run"] time',
    )
    assert listed == preview
    screenshot(page, "jobs-next-run")


def test_a_paused_job_page_shows_no_next_run(dashboard: Dashboard, page: Page) -> None:
    job_id = unique("paused")
    job = job_pb2.Job(target=command("true"))
    job.schedule.cron.expression = EVERY_MINUTE
    dashboard.jobs.CreateJob(job_service_pb2.CreateJobRequest(job=job, job_id=job_id))
    page.goto(f"/#/jobs/{job_id}")
    expect(page.locator('[data-figure="next-run"] time')).to_have_count(1)
    page.get_by_role("button", name="Pause").click()
    expect(page.locator(".view-head .badge")).to_have_text("PAUSED")
    expect(page.locator('[data-figure="next-run"]')).to_have_text("Next run: —")


def test_upcoming_runs_show_on_the_job_page_only_when_asked(dashboard: Dashboard, page: Page) -> None:
    job_id = unique("upcoming")
    job = job_pb2.Job(target=command("true"))
    job.schedule.run_at.FromDatetime(datetime.now(UTC) + timedelta(hours=1))
    run = dashboard.jobs.CreateJob(job_service_pb2.CreateJobRequest(job=job, job_id=job_id)).run
    page.goto(f"/#/jobs/{job_id}")
    runs = page.get_by_role("table", name="Runs of this job", exact=True)
    expect(runs.get_by_text("No runs yet.")).to_be_visible()
    expect(page.get_by_role("table", name="Upcoming runs of this job")).to_have_count(0)
    page.get_by_role("button", name="Show upcoming runs").click()
    upcoming = page.get_by_role("table", name="Upcoming runs of this job")
    expect(upcoming.locator("[data-run]")).to_have_count(1)
    expect(upcoming.locator(f'[data-run="{run.name}"]')).to_have_attribute("data-state", "SCHEDULED")
    expect(runs.locator("[data-run]")).to_have_count(0)
    screenshot(page, "job-upcoming-runs")


def test_the_form_warns_before_sending_a_time_already_passed_and_the_run_is_marked(
    dashboard: Dashboard, page: Page
) -> None:
    job_id = unique("late")
    page.goto("/#/new")
    page.locator('input[name="jobId"]').fill(job_id)
    page.get_by_label("At a time, once").check()
    warning = page.locator('[data-warning="run-at-passed"]')
    page.locator('input[name="runAt"]').fill("2031-06-01T12:30")
    expect(warning).to_have_count(0)
    # The page's zone is UTC.
    an_hour_ago = (datetime.now(UTC) - timedelta(hours=1)).strftime("%Y-%m-%dT%H:%M")
    page.locator('input[name="runAt"]').fill(an_hour_ago)
    expect(warning).to_be_visible()
    expect(warning).to_have_attribute("role", "alert")
    expect(warning).to_contain_text("already passed")
    page.locator('input[name="command"]').fill("true")
    page.get_by_role("button", name="Create job").click()
    expect(page).to_have_url(re.compile(f"#/jobs/{job_id}$"))
    runs = dashboard.search.ListRuns(search_service_pb2.ListRunsRequest(parent=f"jobs/{job_id}")).runs
    assert [run.created_after_schedule_time for run in runs] == [True]
    page.goto(f"/#/{runs[0].name}")
    expect(page.locator('[data-mark="created-after-schedule-time"]')).to_contain_text("already passed")
