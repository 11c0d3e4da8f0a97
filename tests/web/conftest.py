"""Fixtures of the dashboard's tests: `jobmesh dev` with its Envoy on free ports, and Debian's Chromium driven
headless by Playwright (never a browser of Playwright's own: `tools/services/services.sh browser` installs
Chromium from apt). Without Chromium the browser tests fail under CI and are skipped elsewhere."""

from __future__ import annotations

import os
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import grpc
import pytest
from playwright.sync_api import Browser, Page, expect, sync_playwright

from jobmesh.v1 import job_service_pb2_grpc, search_service_pb2_grpc
from tests.acceptance.processes import REPO, free_port, jobmesh_process
from tests.support import missing
from tests.web.browser import CHROMIUM, CHROMIUM_FLAGS, VIEWPORT, wait_http

WEB_BUILD = REPO / "clients" / "web" / "dist" / "index.html"
SCREENSHOTS = Path(os.environ.get("JOBMESH_SCREENSHOTS", REPO / ".jobmesh" / "screenshots"))


@dataclass
class Dashboard:
    url: str
    grpc_address: str
    jobs: job_service_pb2_grpc.JobServiceStub
    search: search_service_pb2_grpc.SearchServiceStub


# Assertions wait for their condition as long as actions do (`open_page`): on a loaded machine the live
# stream took longer than Playwright's 5 s default to connect. A wait, not a bound: a page that never gets
# there still fails.
expect.set_options(timeout=20_000)


@pytest.fixture(scope="module")
def dashboard(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Dashboard]:
    if not WEB_BUILD.exists():
        pytest.fail(f"{WEB_BUILD.relative_to(REPO)} is missing: `make install` builds the dashboard")
    folder = tmp_path_factory.mktemp("dashboard")
    address, web = f"127.0.0.1:{free_port()}", f"127.0.0.1:{free_port()}"
    database = f"sqlite:///{folder / 'dev.db'}"
    args = ["dev", "--listen", address, "--dashboard-listen", web, "--database-url", database]
    with jobmesh_process(args, address, folder / "jobmesh.log"), grpc.insecure_channel(address) as channel:
        wait_http(f"http://{web}/")
        yield Dashboard(
            f"http://{web}",
            address,
            job_service_pb2_grpc.JobServiceStub(channel),
            search_service_pb2_grpc.SearchServiceStub(channel),
        )


@pytest.fixture(scope="module")
def browser() -> Iterator[Browser]:
    if not CHROMIUM.exists():
        missing(f"{CHROMIUM} is missing: `bash tools/services/services.sh browser` installs it")
    with sync_playwright() as playwright:
        chromium = playwright.chromium.launch(executable_path=str(CHROMIUM), args=CHROMIUM_FLAGS)
        yield chromium
        chromium.close()


def open_page(browser: Browser, dashboard: Dashboard, *, dark: bool = False) -> tuple[Page, list[str]]:
    """A tab, and the problems it met: script errors, and any request that left the dashboard's origin
    (nothing is fetched from outside at run time)."""
    context = browser.new_context(
        viewport=VIEWPORT,
        base_url=dashboard.url,
        color_scheme="dark" if dark else "light",
        timezone_id="UTC",  # the browser's own zone, whatever the machine's
    )
    page = context.new_page()
    page.set_default_timeout(20_000)
    problems: list[str] = []
    page.on("pageerror", lambda error: problems.append(str(error)))
    origin = f"{dashboard.url}/"
    page.on("request", lambda r: None if r.url.startswith((origin, "data:")) else problems.append(r.url))
    return page, problems


@pytest.fixture
def page(browser: Browser, dashboard: Dashboard) -> Iterator[Page]:
    """A tab at 1280 by 800; a script error, or a request off the origin, fails the test."""
    tab, errors = open_page(browser, dashboard)
    yield tab
    tab.context.close()
    assert errors == []


def screenshot(page: Page, name: str) -> None:
    SCREENSHOTS.mkdir(parents=True, exist_ok=True)
    page.screenshot(path=str(SCREENSHOTS / f"{name}.png"))
