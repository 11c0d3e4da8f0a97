"""Secrets per namespace through the whole mesh (`jobmesh dev` with a secrets file): namespace A's job that
names B's secret, or A's own secret granted to another queue, is refused at create with a clear error; A's
webhook with A's own secret in a header sends the resolved value, and what a viewer reads (the job, the
run, its log) never holds it."""

from __future__ import annotations

import threading
from collections.abc import Iterator
from functools import partial
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

import grpc
import pytest

from jobmesh.executor.redaction import MASK
from jobmesh.v1 import job_pb2, job_service_pb2, run_pb2, search_service_pb2
from tests.acceptance.mesh import log_texts, wait_for_run
from tests.acceptance.processes import free_port
from tests.acceptance.test_dev import dev
from tests.server.errors import call_error, field_violations

pytestmark = pytest.mark.processes

A_SECRET, B_SECRET = "team-a-hook-token-51c0", "team-b-only-token-a93f"


@pytest.fixture
def hook() -> Iterator[tuple[str, list[str]]]:
    """A webhook receiver that records the Authorization it got and repeats it in its answer."""
    received: list[str] = []

    class Handler(BaseHTTPRequestHandler):
        def do_POST(self) -> None:
            self.rfile.read(int(self.headers.get("Content-Length") or 0))
            received.append(self.headers.get("Authorization", ""))
            payload = f"you sent {received[-1]}\n".encode()
            self.send_response(200)
            self.send_header("Content-Length", str(len(payload)))
            self.end_headers()
            self.wfile.write(payload)

        def log_message(self, format: str, *args: object) -> None:
            """Quiet."""

    server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    thread = threading.Thread(target=server.serve_forever, args=(0.05,), daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{server.server_address[1]}/hook", received
    finally:
        server.shutdown()
        server.server_close()
        thread.join(5)


def webhook(url: str, authorization: str) -> job_pb2.Job:
    http = job_pb2.Target.Http(url=url, headers={"Authorization": authorization})
    job = job_pb2.Job(target=job_pb2.Target(http=http), namespace="team-a")
    job.schedule.immediate.SetInParent()
    return job


def test_namespace_a_cannot_use_bs_secret_and_its_own_reaches_the_hook_unseen(
    tmp_path: Path, hook: tuple[str, list[str]]
) -> None:
    url, received = hook
    secrets = tmp_path / "secrets"
    secrets.write_text(f"team-a/HOOK_TOKEN={A_SECRET}\nteam-b/B_ONLY={B_SECRET}\nteam-a/MAIL_ONLY=m\n")
    secrets.chmod(0o600)
    flags = ("--secrets", f"file:{secrets}", "--secret-queues", "team-a/MAIL_ONLY=mail")
    with dev(tmp_path, f"127.0.0.1:{free_port()}", *flags) as (_, (jobs, search)):
        for reference, refusal in (
            ("secret://team-b/B_ONLY", "may reference only its own namespace's secrets"),
            ("secret://MAIL_ONLY", "granted to the queues mail only: a job on queue 'default' may not"),
        ):
            steal = job_service_pb2.CreateJobRequest(job=webhook(url, f"Bearer {reference}"))
            error = call_error(partial(jobs.CreateJob, steal), grpc.StatusCode.INVALID_ARGUMENT)
            assert refusal in field_violations(error)["job.target.http.headers['Authorization']"]
        created = jobs.CreateJob(
            job_service_pb2.CreateJobRequest(job=webhook(url, "Bearer secret://HOOK_TOKEN"))
        )
        run = wait_for_run(
            search,
            created.run.name,
            lambda r: r.state in (run_pb2.RUN_STATE_SUCCEEDED, run_pb2.RUN_STATE_FAILED),
            60,
            "the hook",
        )
        assert run.state == run_pb2.RUN_STATE_SUCCEEDED, run.error
        assert received == [f"Bearer {A_SECRET}"]
        seen = [
            str(jobs.GetJob(job_service_pb2.GetJobRequest(name=created.job.name))),
            str(search.GetRun(search_service_pb2.GetRunRequest(name=created.run.name))),
            *log_texts(search, created.run.name),
        ]
    assert f"you sent Bearer {MASK}" in seen
    assert not [text for text in seen if A_SECRET in text or B_SECRET in text]
