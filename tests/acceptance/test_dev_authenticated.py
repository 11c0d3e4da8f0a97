"""`jobmesh dev` with authentication on, as an operator would run it: a token made by `jobmesh token new`,
presented by its embedded executor and its demo job's client from a token file. A call without it is
refused; with it, jobs are made and run."""

from __future__ import annotations

import subprocess
from pathlib import Path

import grpc
import pytest

from jobmesh.v1 import job_pb2, job_service_pb2, run_pb2, search_service_pb2
from tests.acceptance.processes import BIN, REPO, free_port
from tests.acceptance.test_dev import command, dev
from tests.support import eventually

pytestmark = pytest.mark.processes


def new_token(path: Path, *args: str) -> str:
    made = subprocess.run(
        [str(BIN / "jobmesh"), "token", "new", *args, "--append", str(path)],
        check=True,
        capture_output=True,
        text=True,
        cwd=REPO,
        timeout=60,
    )
    return made.stdout.strip()


def test_dev_with_authentication_on_refuses_calls_without_a_token_and_runs_jobs_with_one(
    tmp_path: Path,
) -> None:
    hashes = tmp_path / "tokens.yaml"
    token = new_token(hashes, "--subject", "dev", "--role", "*=admin", "--executor", "dev-executor")
    token_file = tmp_path / "dev.token"
    token_file.write_text(token)
    address = f"127.0.0.1:{free_port()}"
    flags = ["--authentication", "on", "--token-hashes", str(hashes), "--token-file", str(token_file)]
    with dev(tmp_path, address, *flags, "--executor-id", "dev-executor", "--demo", "on") as (
        _,
        (jobs, search),
    ):
        with pytest.raises(grpc.RpcError) as refused:
            search.ListJobs(search_service_pb2.ListJobsRequest(), timeout=10)
        assert refused.value.code() == grpc.StatusCode.UNAUTHENTICATED

        metadata = (("authorization", f"Bearer {token}"),)

        def listed() -> list[str]:
            answer = search.ListJobs(search_service_pb2.ListJobsRequest(), metadata=metadata, timeout=10)
            return [job.name for job in answer.jobs]

        # The demo's client presented the token (it creates the job just after the server starts serving).
        assert eventually(listed, 60, "the demo job") == ["jobs/demo"]

        job: job_pb2.Job = command("echo authenticated")
        created = jobs.CreateJob(job_service_pb2.CreateJobRequest(job=job), metadata=metadata, timeout=10)

        def succeeded() -> run_pb2.Run | None:
            request = search_service_pb2.GetRunRequest(name=created.run.name)
            run = search.GetRun(request, metadata=metadata, timeout=10).run
            return run if run.state == run_pb2.RUN_STATE_SUCCEEDED else None

        run = eventually(succeeded, 60, "the job to run on the embedded executor, connected with its token")
        assert run.executor == "dev-executor"
