"""Secret references in a job's `env`: the server checks their syntax, stores and returns the reference
itself (it never sees a value), and the run it queues carries the reference only; a job may reference only
its own namespace's secrets, and of those granted to some queues only those of its queue; on every store."""

from __future__ import annotations

import uuid
from functools import partial

import grpc
import pytest
from google.protobuf import field_mask_pb2

from jobmesh.adapters.queue.codec import decode, encode
from jobmesh.control.v1 import dispatch_pb2
from jobmesh.core.secret_refs import parse_secret_queues
from jobmesh.server.config import ServerConfig
from jobmesh.v1 import job_pb2, job_service_pb2, search_service_pb2
from tests.server.conftest import Api
from tests.server.errors import call_error, field_violations
from tests.support import SUITE_LOOP_LAG

ENV = {"TOKEN": "secret://TOKEN", "PLAIN": "visible"}
# Namespace a's Q2_ONLY serves its queue q2 alone, and the default namespace's REPORTS its `reports` queue.
SECRET_QUEUES = "a/Q2_ONLY=q2,REPORTS=reports+archive"


@pytest.fixture(scope="module")
def server_config() -> ServerConfig:
    return ServerConfig(
        listen="127.0.0.1:0",
        max_loop_lag=SUITE_LOOP_LAG,
        secret_queues=parse_secret_queues(SECRET_QUEUES),
    )


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


def in_namespace_a(target: job_pb2.Target, queue: str) -> job_pb2.Job:
    job = job_pb2.Job(target=target, namespace="a", queue=queue)
    job.schedule.immediate.SetInParent()
    return job


def refused_create(api: Api, job: job_pb2.Job) -> dict[str, str]:
    request = job_service_pb2.CreateJobRequest(job_id=f"q-{uuid.uuid4().hex[:8]}", job=job)
    return field_violations(
        call_error(partial(api.jobs.CreateJob, request), grpc.StatusCode.INVALID_ARGUMENT)
    )


def test_a_secret_granted_to_other_queues_is_refused_at_create(api: Api) -> None:
    """The attack: namespace a's job on queue q1 names its own namespace's secret that only q2 may have,
    plainly or qualified, in its env, a header or the body. Refused; on q2 it is accepted."""
    http = job_pb2.Target.Http(
        url="https://hooks.example.com/x",
        headers={"Authorization": "Bearer secret://Q2_ONLY"},
        body=b'{"key": "secret://a/Q2_ONLY"}',
    )
    for target, fields in (
        (job_with({"X": "secret://Q2_ONLY"}).target, ["job.target.command.env['X']"]),
        (job_with({"X": "secret://a/Q2_ONLY"}).target, ["job.target.command.env['X']"]),
        (job_pb2.Target(http=http), ["job.target.http.headers['Authorization']", "job.target.http.body"]),
    ):
        for queue in ("q1", ""):  # no queue is the default one
            violations = refused_create(api, in_namespace_a(target, queue))
            assert sorted(violations) == sorted(fields)
            for field in fields:
                assert "of namespace 'a' is granted to the queues q2 only" in violations[field], violations
                assert f"a job on queue {queue or 'default'!r} may not reference it" in violations[field]
        created = api.jobs.CreateJob(
            job_service_pb2.CreateJobRequest(
                job_id=f"q2-{uuid.uuid4().hex[:8]}", job=in_namespace_a(target, "q2")
            )
        )
        assert created.job.queue == "q2"


def test_a_grant_names_one_namespaces_secret(api: Api) -> None:
    """`REPORTS=reports+archive` grants the default namespace's REPORTS: namespace a's own REPORTS, and its
    other secrets, serve every queue of a."""
    for queue in ("reports", "archive"):
        job = job_with({"X": "secret://REPORTS"})
        job.queue = queue
        api.jobs.CreateJob(job_service_pb2.CreateJobRequest(job_id=f"r-{uuid.uuid4().hex[:8]}", job=job))
    elsewhere = job_with({"X": "secret://REPORTS"})
    elsewhere.queue = "mail"
    violations = refused_create(api, elsewhere)
    assert "queues archive, reports only" in violations["job.target.command.env['X']"]
    api.jobs.CreateJob(
        job_service_pb2.CreateJobRequest(
            job_id=f"a-{uuid.uuid4().hex[:8]}",
            job=in_namespace_a(job_with({"X": "secret://REPORTS", "Y": "secret://OTHER"}).target, "mail"),
        )
    )


def test_an_update_cannot_move_a_secret_to_another_queue(api: Api) -> None:
    """Created on q2 with q2's secret, the job may not move to q1, nor take the secret on q1 by a new
    target; the refused updates change nothing."""
    target = job_with({"X": "secret://Q2_ONLY"}).target
    created = api.jobs.CreateJob(
        job_service_pb2.CreateJobRequest(job_id=f"m-{uuid.uuid4().hex[:8]}", job=in_namespace_a(target, "q2"))
    )
    moved = job_pb2.Job(name=created.job.name, queue="q1")
    mask = field_mask_pb2.FieldMask(paths=["queue"])
    error = call_error(
        partial(api.jobs.UpdateJob, job_service_pb2.UpdateJobRequest(job=moved, update_mask=mask)),
        grpc.StatusCode.INVALID_ARGUMENT,
    )
    assert "granted to the queues q2 only" in field_violations(error)["job.target.command.env['X']"]
    plain = api.jobs.CreateJob(
        job_service_pb2.CreateJobRequest(
            job_id=f"p-{uuid.uuid4().hex[:8]}", job=in_namespace_a(job_with({"X": "plain"}).target, "q1")
        )
    )
    retarget = job_pb2.Job(name=plain.job.name, target=target)
    mask = field_mask_pb2.FieldMask(paths=["target"])
    error = call_error(
        partial(api.jobs.UpdateJob, job_service_pb2.UpdateJobRequest(job=retarget, update_mask=mask)),
        grpc.StatusCode.INVALID_ARGUMENT,
    )
    assert (
        "a job on queue 'q1' may not reference it" in field_violations(error)["job.target.command.env['X']"]
    )
    for name, queue in ((created.job.name, "q2"), (plain.job.name, "q1")):
        job = api.jobs.GetJob(job_service_pb2.GetJobRequest(name=name)).job
        assert job.queue == queue
    assert dict(
        api.jobs.GetJob(job_service_pb2.GetJobRequest(name=plain.job.name)).job.target.command.env
    ) == {"X": "plain"}
