"""The attacks of a caller who may create jobs, repeated through the server and a real executor on its
production defaults (a short command allowlist, public HTTP destinations only, secrets from a file), on
every store: each is refused, ends its run at once without retries, and leaks nothing into the run's log."""

from __future__ import annotations

import asyncio
import json
import shutil
import threading
import time
import uuid
from collections.abc import Callable, Iterator
from datetime import timedelta
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import pytest

from jobmesh.adapters.queue.factory import open_queue
from jobmesh.adapters.signals.factory import open_signals
from jobmesh.core.ports.pipeline_store import SchedulerStore
from jobmesh.executor.config import ExecutorConfig
from jobmesh.executor.policy import SAFE_PATH, ExecutionPolicy
from jobmesh.executor.redaction import MASK
from jobmesh.executor.runtime import Executor
from jobmesh.server.app import Services, build_services
from jobmesh.server.config import ServerConfig
from jobmesh.v1 import job_pb2, job_service_pb2, run_pb2, search_service_pb2
from tests.server.conftest import Api
from tests.support import SUITE_LOOP_LAG

VALUE = "tok-3f9a-never-shown"
ALLOWED = tuple(str(shutil.which(name, path=SAFE_PATH)) for name in ("env", "printenv"))
FINAL = {run_pb2.RUN_STATE_FAILED, run_pb2.RUN_STATE_DEAD_LETTERED, run_pb2.RUN_STATE_SUCCEEDED}


@pytest.fixture(scope="module")
def names() -> str:
    return f"memory://policy-{uuid.uuid4().hex[:8]}"


@pytest.fixture(scope="module")
def grpc_servicer(store: SchedulerStore, names: str) -> Iterator[Services]:
    queue, signals = open_queue(names), open_signals(names)
    services = build_services(
        ServerConfig(listen="127.0.0.1:0", max_loop_lag=SUITE_LOOP_LAG), store, queue, signals
    )
    yield services
    services.close()
    signals.close()


@pytest.fixture(scope="module")
def executor(
    api: Api, names: str, grpc_addr: str, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[None]:
    """A real executor on the defaults of `jobmesh executor`, but for two programs and a secrets file."""
    secrets = tmp_path_factory.mktemp("secrets") / "secrets.json"
    secrets.write_text(json.dumps({"TOKEN": VALUE}))
    secrets.chmod(0o600)
    config = ExecutorConfig(
        server=grpc_addr,
        queue_url=names,
        signals_url=names,
        executor_id=f"policy-test-{uuid.uuid4().hex[:6]}",
        reconnect_max=timedelta(milliseconds=200),
        drain_grace=timedelta(seconds=1),
        policy=ExecutionPolicy(allowed_commands=ALLOWED),
        secrets=f"file:{secrets}",
    )
    loop = asyncio.new_event_loop()
    worker = Executor(config)
    thread = threading.Thread(target=loop.run_until_complete, args=(worker.run(),), daemon=True)
    thread.start()
    yield
    loop.call_soon_threadsafe(worker.drain, timedelta(0))
    thread.join(timeout=20)
    loop.close()


def create(api: Api, target: job_pb2.Target, attempts: int = 3) -> str:
    job = job_pb2.Job(target=target, retry_policy=job_pb2.RetryPolicy(max_attempts=attempts))
    job.schedule.immediate.SetInParent()
    return str(api.jobs.CreateJob(job_service_pb2.CreateJobRequest(job=job)).run.name)


def settled(
    api: Api, name: str, done: Callable[[run_pb2.Run], bool] = lambda r: r.state in FINAL
) -> run_pb2.Run:
    deadline = time.monotonic() + 30
    while True:
        run: run_pb2.Run = api.search.GetRun(search_service_pb2.GetRunRequest(name=name)).run
        if done(run):
            return run
        assert time.monotonic() < deadline, f"{name} is still {run_pb2.RunState.Name(run.state)}"
        time.sleep(0.1)


def log_of(api: Api, name: str) -> list[str]:
    lines = api.search.TailRunLogs(search_service_pb2.TailRunLogsRequest(name=name))
    return [line.text for response in lines for line in response.lines]


def command(*argv: str, env: dict[str, str] | None = None) -> job_pb2.Target:
    return job_pb2.Target(command=job_pb2.Target.Command(argv=argv, env=env or {}))


@pytest.mark.usefixtures("executor")
def test_sh_c_id_off_the_allowlist_dead_letters_at_once(api: Api) -> None:
    name = create(api, command("sh", "-c", "id"))
    run = settled(api, name)
    assert (run.state, run.attempt, run.error.type) == (
        run_pb2.RUN_STATE_DEAD_LETTERED,
        1,
        "TargetNotAllowed",
    )
    assert "allowed_commands" in run.error.message
    assert not any("uid=" in text for text in log_of(api, name))


@pytest.mark.usefixtures("executor")
def test_ssrf_to_a_loopback_server_is_refused(api: Api) -> None:
    fetched: list[str] = []

    class Internal(BaseHTTPRequestHandler):
        def do_GET(self) -> None:
            fetched.append(self.path)
            self.send_response(200)
            self.end_headers()
            self.wfile.write(b"loopback only\n")

        def log_message(self, format: str, *args: object) -> None:
            """Quiet."""

    with ThreadingHTTPServer(("127.0.0.1", 0), Internal) as server:
        threading.Thread(target=server.serve_forever, args=(0.05,), daemon=True).start()  # shut down at once
        url = f"http://localhost:{server.server_address[1]}/admin"
        name = create(api, job_pb2.Target(http=job_pb2.Target.Http(method="GET", url=url)), attempts=1)
        run = settled(api, name)
        server.shutdown()
    assert (run.state, run.error.type) == (run_pb2.RUN_STATE_FAILED, "TargetNotAllowed")
    assert "loopback" in run.error.message
    assert fetched == []
    assert not any("loopback only" in text for text in log_of(api, name))


@pytest.mark.usefixtures("executor")
def test_a_printed_secret_is_redacted_and_only_its_reference_is_stored(api: Api) -> None:
    name = create(api, command("printenv", "TOKEN", env={"TOKEN": "secret://TOKEN"}))
    run = settled(api, name)
    assert run.state == run_pb2.RUN_STATE_SUCCEEDED
    assert log_of(api, name) == [MASK]
    job = api.jobs.GetJob(job_service_pb2.GetJobRequest(name=name.rsplit("/runs/", 1)[0])).job
    assert dict(job.target.command.env) == {"TOKEN": "secret://TOKEN"}


@pytest.mark.usefixtures("executor")
def test_a_missing_secret_fails_at_once_naming_it(api: Api) -> None:
    run = settled(api, create(api, command("printenv", "X", env={"X": "secret://NOT_THERE"})))
    assert (run.state, run.attempt, run.error.type) == (run_pb2.RUN_STATE_DEAD_LETTERED, 1, "SecretNotFound")
    assert "NOT_THERE" in run.error.message


@pytest.mark.usefixtures("executor")
def test_a_command_sees_none_of_the_executors_environment(api: Api, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("JOBMESH_TEST_EXECUTOR_TOKEN", "executor-credential")
    name = create(api, command("env", env={"OWN": "mine"}))
    assert settled(api, name).state == run_pb2.RUN_STATE_SUCCEEDED
    names = sorted(line.split("=", 1)[0] for line in log_of(api, name))
    # PWD: the working directory, which bubblewrap sets in its sandbox (executor/sandbox.py); JOBMESH_RUN and
    # JOBMESH_ATTEMPT: the run identity (core/run_identity.py)
    assert set(names) <= {"PATH", "HOME", "LANG", "LC_ALL", "PWD", "OWN", "JOBMESH_RUN", "JOBMESH_ATTEMPT"}
    assert "JOBMESH_TEST_EXECUTOR_TOKEN" not in names
    assert "OWN" in names
