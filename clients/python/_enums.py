"""The public API's enums as Python `IntEnum`s, with the short member names the CLI prints (`SUCCEEDED`,
not `RUN_STATE_SUCCEEDED`). Each member equals the wire number, so it goes wherever the API takes an int, and
an int still goes wherever the SDK takes one of these. `Name` and `Value` answer as the protobuf enum
wrappers (`jobmesh.v1`) did, with the full names, for code written against those."""

from __future__ import annotations

import enum
from typing import Self

from google.protobuf import descriptor_pool
from google.protobuf.descriptor import EnumDescriptor

from jobmesh.v1 import audit_pb2, job_pb2, job_service_pb2, run_pb2

_DESCRIBED = (audit_pb2, job_pb2, job_service_pb2, run_pb2)  # imported for their enums' descriptors

__all__ = [
    "AuditAction",
    "BatchCreateJobsView",
    "JobState",
    "LogStream",
    "OverlapPolicy",
    "Priority",
    "RunState",
    "RunTrigger",
    "proto_enum",
]


class _ApiEnum(enum.IntEnum):
    """A `jobmesh.v1` enum; prints its short name."""

    def __str__(self) -> str:
        return self.name

    @classmethod
    def Name(cls, number: int) -> str:
        """The full protobuf name of `number` (`RUN_STATE_SUCCEEDED`)."""
        return str(proto_enum(cls).values_by_number[cls(number)].name)

    @classmethod
    def Value(cls, name: str) -> Self:
        """The member of the full protobuf name `name` (`RUN_STATE_SUCCEEDED`)."""
        return cls(proto_enum(cls).values_by_name[name].number)


class JobState(_ApiEnum):
    UNSPECIFIED = 0
    ACTIVE = 1
    PAUSED = 2
    COMPLETED = 3
    DELETED = 4


class RunState(_ApiEnum):
    UNSPECIFIED = 0
    SCHEDULED = 1
    QUEUED = 2
    RUNNING = 3
    CANCELLING = 4
    SUCCEEDED = 5
    FAILED = 6
    CANCELLED = 7
    TIMED_OUT = 8
    DEAD_LETTERED = 9


class RunTrigger(_ApiEnum):
    UNSPECIFIED = 0
    SCHEDULE = 1
    RUN_NOW = 2
    REPLAY = 3
    BACKFILL = 4


class Priority(_ApiEnum):
    UNSPECIFIED = 0
    HIGH = 1
    NORMAL = 2
    LOW = 3


class OverlapPolicy(_ApiEnum):
    UNSPECIFIED = 0
    SKIP = 1
    BUFFER_ONE = 2
    BUFFER_ALL = 3
    CANCEL_OTHER = 4
    ALLOW_ALL = 5


class LogStream(_ApiEnum):
    UNSPECIFIED = 0
    STDOUT = 1
    STDERR = 2
    SYSTEM = 3


class AuditAction(_ApiEnum):
    UNSPECIFIED = 0
    CREATE = 1
    UPDATE = 2
    DELETE = 3
    PAUSE = 4
    RESUME = 5
    RUN_NOW = 6
    CANCEL = 7
    REPLAY = 8
    REFUSED = 9
    BACKFILL = 10


class BatchCreateJobsView(_ApiEnum):
    UNSPECIFIED = 0
    BASIC = 1
    FULL = 2


def proto_enum(python_enum: type[enum.IntEnum]) -> EnumDescriptor:
    """The `jobmesh.v1` enum that `python_enum` mirrors (the same name)."""
    return descriptor_pool.Default().FindEnumTypeByName(f"jobmesh.v1.{python_enum.__name__}")
