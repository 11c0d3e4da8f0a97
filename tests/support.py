"""Helpers shared by the test suites."""

from __future__ import annotations

import asyncio
import contextlib
import os
import re
import subprocess
import time
import uuid
from collections.abc import Callable, Iterator
from datetime import timedelta
from pathlib import Path
from typing import Any, NoReturn, TypeVar

import pytest
import sqlalchemy

from jobmesh.core.ports.queue import RunQueue

T = TypeVar("T")


# The loop lag past which a server refuses creates (`--max-loop-lag`, 1 s by default), for every server the
# suite starts: a machine running the suite on parallel workers lags longer than that now and then, and only
# tests/server/test_overload.py is about the refusal (with limits of its own).
SUITE_LOOP_LAG = timedelta(seconds=30)
# Their commands run as the suite's own user, without a PID namespace: the suite's jobs write into its
# temporary folders and report their pids, which a sandbox would renumber. tests/acceptance/
# test_job_isolation.py runs `jobmesh dev` with the defaults, and tests/executor/test_sandbox.py each mode.
SUITE_ISOLATION = {"JOBMESH_ISOLATION": "user", "JOBMESH_JOB_USER": str(os.geteuid())}
SUITE_SETTINGS = {"JOBMESH_MAX_LOOP_LAG": f"{int(SUITE_LOOP_LAG.total_seconds())}s", **SUITE_ISOLATION}


def environment_without_services() -> dict[str, str]:
    """This process's environment for a `jobmesh dev` on its embedded default: none of the suite's
    `JOBMESH_*` variables (the services `make test` started), but its `SUITE_SETTINGS`."""
    inherited = {key: value for key, value in os.environ.items() if not key.startswith("JOBMESH_")}
    return {**inherited, **SUITE_SETTINGS}


def require_service_url(variable: str) -> str:
    """Return the URL of a real service from the environment.

    Integration tests must not pass by accident: when the service is missing they
    fail under CI (``CI=true``) and are skipped only on a developer's machine.
    """
    value = os.environ.get(variable, "").strip()
    if value:
        return value
    missing(f"{variable} is not set: start the services with `make services-up` or run `make test`")


def missing(message: str) -> NoReturn:
    """A dependency of the test is not there: a failure under CI (``CI=true``), a skip elsewhere."""
    if os.environ.get("CI", "").lower() in {"1", "true", "yes"}:
        pytest.fail(message)
    pytest.skip(message)


@contextlib.contextmanager
def fresh_postgres_database(base_url: str) -> Iterator[str]:
    """A new, empty database on the server of `base_url`, dropped afterwards; yields its URL."""
    name = f"jobmesh_test_{uuid.uuid4().hex[:12]}"
    admin = sqlalchemy.create_engine(
        base_url, isolation_level="AUTOCOMMIT", poolclass=sqlalchemy.pool.NullPool
    )
    try:
        with admin.connect() as connection:
            connection.execute(sqlalchemy.text(f'CREATE DATABASE "{name}"'))
        yield sqlalchemy.engine.make_url(base_url).set(database=name).render_as_string(hide_password=False)
        with admin.connect() as connection:
            connection.execute(sqlalchemy.text(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)'))
    finally:
        admin.dispose()


async def arrives(check: Callable[[], object], timeout: float, what: str, interval: float = 0.005) -> None:
    """`eventually` on an event loop: awaits until `check()` is truthy; AssertionError past `timeout`."""
    deadline = time.monotonic() + timeout
    while not check():
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out after {timeout}s waiting for {what}")
        await asyncio.sleep(interval)


def eventually(check: Callable[[], T | None], timeout: float, what: str, interval: float = 0.1) -> T:
    """`check()` once it is truthy, polled every `interval`; AssertionError naming `what` past `timeout`."""
    deadline = time.monotonic() + timeout
    while True:
        value = check()
        if value:
            return value
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out after {timeout}s waiting for {what}")
        time.sleep(interval)


# Where time is the behaviour under test ("at once", "fast"), the upper bound a test may set: what takes
# milliseconds on an idle machine, with a margin that holds on a loaded 2-core machine running the suite in
# parallel. What the test tells it apart from (a grace, a timeout, a poll) must be far longer.
AT_ONCE = 3.0


def silence_when_stopped(text: str) -> float:
    """How long an executor had not kept an attempt alive when it stopped it for lost contact, as `text` (its
    log, or the attempt's error) says: measured by the executor's own clock when it decided, so without the
    test's scheduling in it."""
    said = re.search(r"no heartbeat was known to reach the server for (\d+\.\d) s", text)
    assert said, text[-2000:]
    return float(said[1])


class BrokerQueue:
    """An in-process queue that presents itself as a broker's (as Kafka's), which any process may reach: a
    server on it says so to executors, and welcomes them wherever they run."""

    in_process_id = ""

    def __init__(self, queue: RunQueue) -> None:
        self._queue = queue

    def __getattr__(self, name: str) -> Any:
        return getattr(self._queue, name)


def prometheus_tools() -> Path:
    """The folder of Debian's `prometheus` and `promtool` (pinned; unpacked once into the cache by
    `tools/services/services.sh prometheus`): a failure under CI when they cannot be had, a skip elsewhere."""
    script = Path(__file__).resolve().parents[1] / "tools" / "services" / "services.sh"
    try:
        found = subprocess.run(
            ["bash", str(script), "prometheus"], capture_output=True, text=True, check=True, timeout=300
        )
    except (subprocess.CalledProcessError, subprocess.TimeoutExpired) as error:
        missing(f"Debian's Prometheus could not be had (services.sh prometheus): {error}")
    folder = Path(found.stdout.strip().splitlines()[-1])
    if not (folder / "prometheus").exists() or not (folder / "promtool").exists():
        missing(f"services.sh prometheus printed {folder}, which holds no prometheus and promtool")
    return folder
