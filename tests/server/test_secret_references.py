"""Secret references in a job's `env`: the server checks their syntax, stores and returns the reference
itself (it never sees a value), and the run it queues carries the reference only; on every store."""

from __future__ import annotations

import uuid
from functools import partial

import grpc

from jobmesh.adapters.queue.codec import decode, encode
from jobmesh.control.v1 import dispatch_pb2
from jobmesh.v1 import job_pb2, job_service_pb2, search_service_pb2
from tests.server.conftest import Api
from tests.server.errors import call_error, field_violations

ENV = {"TOKEN": "secret://TOKEN", "PLAIN": "visible"}


def job_with(env: dict[str, str]) -> job_pb2.Job:
    job = job_pb2.Job(
        target=job_pb2.Target(command=job_pb2.Target.Command(argv=["env"], env=env)),
        labels={"kind": "secret"},
    )
    job.schedule.immediate.SetInParent()
    return job


def test_get_and_list_return_the_reference_never_a_value(api: Api) -> None:
    job_id = f"secret-{uuid.uuid4().hex[:8]}"
    created = api.jobs.CreateJob(job_service_pb2.CreateJobRequest(job_id=job_id, job=job_with(ENV)))
    assert dict(created.job.target.command.env) == ENV
    got = api.jobs.GetJob(job_service_pb2.GetJobRequest(name=created.job.name))
    assert dict(got.job.target.command.env) == ENV
    listed = api.search.ListJobs(search_service_pb2.ListJobsRequest(filter='labels.kind = "secret"'))
    mine = [job for job in listed.jobs if job.name == created.job.name]
    assert [dict(job.target.command.env) for job in mine] == [ENV]


def test_the_queued_message_carries_the_reference(api: Api) -> None:
    """What the queue's codec writes (Kafka's message value) is the job's target as stored."""
    created = api.jobs.CreateJob(
        job_service_pb2.CreateJobRequest(job_id=f"secret-{uuid.uuid4().hex[:8]}", job=job_with(ENV))
    )
    message = dispatch_pb2.DispatchedRun(target=created.job.target, queue="default")
    message.attempt.run, message.attempt.attempt = created.run.name, 1
    value = encode(message)
    assert b"secret://TOKEN" in value
    assert dict(decode(value, None).target.command.env) == ENV


def test_a_malformed_reference_is_a_field_violation(api: Api) -> None:
    for bad in ("secret://", "secret://has-dash", "secret://9starts_with_digit", "secret://a b"):
        request = job_service_pb2.CreateJobRequest(
            job_id=f"bad-{uuid.uuid4().hex[:8]}", job=job_with({"TOKEN": bad})
        )
        error = call_error(partial(api.jobs.CreateJob, request), grpc.StatusCode.INVALID_ARGUMENT)
        violations = field_violations(error)
        assert "job.target.command.env['TOKEN']" in violations, violations
        assert "secret://NAME" in violations["job.target.command.env['TOKEN']"]


def test_a_job_may_reference_only_its_own_namespaces_secrets(api: Api) -> None:
    """The attack: an operator of namespace A names namespace B's secret. Refused at create, wherever the
    reference stands; A's own secrets, plain or qualified, are accepted."""
    http = job_pb2.Target.Http(
        url="https://hooks.example.com/x",
        headers={"Authorization": "Bearer secret://b/B_ONLY"},
        body=b'{"key": "secret://b/B_ONLY"}',
    )
    for target, fields in (
        (job_with({"X": "secret://b/B_ONLY"}).target, ["job.target.command.env['X']"]),
        (job_pb2.Target(http=http), ["job.target.http.headers['Authorization']", "job.target.http.body"]),
    ):
        job = job_pb2.Job(target=target, namespace="a")
        job.schedule.immediate.SetInParent()
        request = job_service_pb2.CreateJobRequest(job_id=f"steal-{uuid.uuid4().hex[:8]}", job=job)
        error = call_error(partial(api.jobs.CreateJob, request), grpc.StatusCode.INVALID_ARGUMENT)
        violations = field_violations(error)
        for field in fields:
            assert "may reference only its own namespace's secrets" in violations[field], violations
            assert "namespace 'b'" in violations[field]
    own = job_with({"X": "secret://a/MINE", "Y": "secret://MINE"})
    own.namespace = "a"
    created = api.jobs.CreateJob(
        job_service_pb2.CreateJobRequest(job_id=f"own-{uuid.uuid4().hex[:8]}", job=own)
    )
    assert dict(created.job.target.command.env) == {"X": "secret://a/MINE", "Y": "secret://MINE"}
