"""The SDK's enums and resources stay in step with the contract: each enum has the members of its
`jobmesh.v1` enum (names without their prefix, the same numbers), and each resource every field of its
message, so a field or value added to the protos is not silently missing from the SDK."""

from __future__ import annotations

import dataclasses
import enum
import re

import pytest
from google.protobuf.descriptor import Descriptor

import jobmesh.client
from jobmesh.client import (
    AuditAction,
    AuditEvent,
    BatchCreateJobsView,
    Job,
    JobState,
    LogLine,
    LogStream,
    OverlapPolicy,
    Priority,
    Run,
    RunAttempt,
    RunState,
    RunTrigger,
)
from jobmesh.client._enums import proto_enum
from jobmesh.v1 import audit_pb2, job_pb2, run_pb2

ENUMS = [AuditAction, BatchCreateJobsView, JobState, LogStream, OverlapPolicy, Priority, RunState, RunTrigger]


def prefix_of(name: str) -> str:
    """`RUN_STATE_` of `RunState`."""
    return re.sub(r"(?<!^)(?=[A-Z])", "_", name).upper() + "_"


@pytest.mark.parametrize("python_enum", ENUMS, ids=lambda e: e.__name__)
def test_each_enum_has_the_members_of_its_proto_enum(python_enum: type[enum.IntEnum]) -> None:
    described = proto_enum(python_enum)
    prefix = prefix_of(python_enum.__name__)
    expected = {value.name.removeprefix(prefix): value.number for value in described.values}
    assert {member.name: member.value for member in python_enum} == expected
    assert issubclass(python_enum, enum.IntEnum)
    assert python_enum.__name__ in jobmesh.client.__all__


def test_a_member_prints_its_short_name_and_compares_as_its_number() -> None:
    assert (str(RunTrigger.REPLAY), f"{RunState.TIMED_OUT}", int(Priority.LOW)) == ("REPLAY", "TIMED_OUT", 3)
    assert RunState.SUCCEEDED == run_pb2.RUN_STATE_SUCCEEDED  # type: ignore[comparison-overlap]
    assert RunState(run_pb2.RUN_STATE_CANCELLED) is RunState.CANCELLED


def test_name_and_value_answer_as_the_protobuf_wrappers_did() -> None:
    assert RunState.Name(run_pb2.RUN_STATE_DEAD_LETTERED) == run_pb2.RunState.Name(
        run_pb2.RUN_STATE_DEAD_LETTERED
    )
    assert JobState.Value("JOB_STATE_PAUSED") is JobState.PAUSED
    with pytest.raises(ValueError, match="is not a valid RunTrigger"):
        RunTrigger.Name(17)
    with pytest.raises(KeyError):
        RunState.Value("SUCCEEDED")  # the full protobuf name, as the wrapper wanted


@pytest.mark.parametrize(
    ("resource", "message"),
    [
        (Job, job_pb2.Job.DESCRIPTOR),
        (Run, run_pb2.Run.DESCRIPTOR),
        (RunAttempt, run_pb2.RunAttempt.DESCRIPTOR),
        (LogLine, run_pb2.LogLine.DESCRIPTOR),
        (AuditEvent, audit_pb2.AuditEvent.DESCRIPTOR),
    ],
    ids=lambda value: getattr(value, "__name__", ""),
)
def test_each_resource_has_every_field_of_its_message(resource: type, message: Descriptor) -> None:
    fields = {field.name for field in dataclasses.fields(resource)} - {"proto"}
    assert fields == {field.name for field in message.fields}


def test_a_run_converts_its_enums_and_optional_fields() -> None:
    message = run_pb2.Run(
        name="jobs/a/runs/1",
        state=run_pb2.RUN_STATE_FAILED,
        trigger=run_pb2.RUN_TRIGGER_REPLAY,
        previous_attempts=[run_pb2.RunAttempt(attempt=1, state=run_pb2.RUN_STATE_FAILED, exit_code=0)],
    )
    run = Run.of(message)
    assert (run.state, run.trigger, run.exit_code, run.lateness) == (
        RunState.FAILED,
        RunTrigger.REPLAY,
        None,
        None,
    )
    [attempt] = run.previous_attempts
    assert (attempt.state, attempt.exit_code) == (RunState.FAILED, 0)
    assert run.proto is message
    assert Run.of(run_pb2.Run(name="jobs/a/runs/1", exit_code=2)).exit_code == 2
