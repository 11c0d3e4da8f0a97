"""The demo job of `make run`: on a store that has never held a job, `jobmesh dev --demo on` creates one that
runs every 10 seconds, so the dashboard has runs moving the first time it is opened. It is made through the
public API, as any client would make it, and it is an ordinary job: pause or delete it from the dashboard.
"""

from __future__ import annotations

import logging

import grpc

from jobmesh.core.call_token import CallToken
from jobmesh.v1 import (
    job_pb2,
    job_service_pb2,
    job_service_pb2_grpc,
    search_service_pb2,
    search_service_pb2_grpc,
)

log = logging.getLogger(__name__)
DEMO_JOB_ID = "demo"
DEMO_SCRIPT = 'echo "hello from the demo job"; sleep 2; echo "it runs every 10 seconds: delete it when done"'


def demo_job() -> job_pb2.Job:
    job = job_pb2.Job(
        display_name="Demo: every 10 seconds",
        labels={"demo": "true"},
        target=job_pb2.Target(command=job_pb2.Target.Command(argv=["sh", "-c", DEMO_SCRIPT])),
    )
    job.schedule.cron.expression = "*/10 * * * * *"
    return job


async def create_demo_job(address: str, token: CallToken | None = None) -> bool:
    """Creates the demo job when the store holds no job at all, deleted ones included; True if it did. A
    refusal is logged: the mesh runs on without its demo. `token` is presented when authentication is on."""
    try:
        return await _create_if_empty(address, (token or CallToken()).metadata())
    except grpc.aio.AioRpcError as error:
        log.warning("no demo job: %s %s", error.code().name, error.details())
        return False
    except OSError as error:
        log.warning("no demo job: the token file cannot be read: %s", error)
        return False


async def _create_if_empty(address: str, metadata: tuple[tuple[str, str], ...]) -> bool:
    async with grpc.aio.insecure_channel(address) as channel:
        search = search_service_pb2_grpc.SearchServiceStub(channel)
        existing = await search.ListJobs(
            search_service_pb2.ListJobsRequest(page_size=1, show_deleted=True), metadata=metadata
        )
        if existing.jobs:
            return False
        jobs = job_service_pb2_grpc.JobServiceStub(channel)
        request = job_service_pb2.CreateJobRequest(
            job=demo_job(), job_id=DEMO_JOB_ID, request_id="jobmesh-demo"
        )
        await jobs.CreateJob(request, metadata=metadata)
        return True
