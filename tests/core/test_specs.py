"""A job's stored definition (`core.definitions`): the writable part of a definition, stored as it is and
read back equal; the queue's message is made from the job a run carries."""

from __future__ import annotations

from datetime import UTC, datetime

import pytest
from google.protobuf import duration_pb2
from google.protobuf.message import DecodeError

from jobmesh.core.attempts import AttemptRef, Dispatchable
from jobmesh.core.definitions import (
    OUTPUT_ONLY_JOB_FIELDS,
    SchedulingPolicy,
    build_job,
    decode_spec,
    spec_of,
    writable_part,
)
from jobmesh.core.dispatch import message_of
from jobmesh.v1 import job_pb2

NOW = datetime(2026, 1, 1, 12, tzinfo=UTC)


def definition() -> job_pb2.Job:
    job = job_pb2.Job(
        name="jobs/x",
        etag="4",
        display_name="nightly",
        labels={"team": "core"},
        target=job_pb2.Target(command=job_pb2.Target.Command(argv=["true"])),
        execution_timeout=duration_pb2.Duration(seconds=30),
        state=job_pb2.JOB_STATE_PAUSED,
    )
    job.schedule.immediate.SetInParent()
    job.create_time.FromDatetime(NOW)
    return job


def test_the_writable_part_is_a_copy_without_output_only_fields() -> None:
    given = definition()
    part = writable_part(given)
    assert part == job_pb2.Job(
        **{f.name: v for f, v in given.ListFields() if f.name not in OUTPUT_ONLY_JOB_FIELDS}
    )
    assert (part.name, part.etag, part.state, part.HasField("create_time")) == ("", "", 0, False)
    assert (part.display_name, part.target, part.execution_timeout) == (
        given.display_name,
        given.target,
        given.execution_timeout,
    )
    assert given.name == "jobs/x"  # the caller's message is left as it was


def test_a_built_job_stores_its_definition_as_given_and_reads_it_back_equal() -> None:
    part = writable_part(definition())
    record, first_run = build_job("x", part, NOW, SchedulingPolicy())
    assert record.spec == spec_of(part) == spec_of(writable_part(definition()))  # deterministic
    assert decode_spec(record.spec) == part
    assert first_run is not None


def test_a_spec_that_is_not_a_job_is_refused() -> None:
    with pytest.raises(DecodeError):
        decode_spec(b"\x0a\x00not a job")


def test_the_queues_message_is_made_from_the_carried_job() -> None:
    part = writable_part(definition())
    _, first_run = build_job("x", part, NOW, SchedulingPolicy())
    assert first_run is not None
    message = message_of(Dispatchable(first_run, part), NOW)
    assert (message.target, message.execution_timeout) == (part.target, part.execution_timeout)
    assert AttemptRef.from_proto(message.attempt) == AttemptRef.of(first_run)
