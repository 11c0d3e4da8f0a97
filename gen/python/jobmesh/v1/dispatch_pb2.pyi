import datetime

from google.protobuf import duration_pb2 as _duration_pb2
from google.protobuf import timestamp_pb2 as _timestamp_pb2
from jobmesh.v1 import executor_control_pb2 as _executor_control_pb2
from jobmesh.v1 import job_pb2 as _job_pb2
from google.protobuf import descriptor as _descriptor
from google.protobuf import message as _message
from collections.abc import Mapping as _Mapping
from typing import ClassVar as _ClassVar, Optional as _Optional, Union as _Union

DESCRIPTOR: _descriptor.FileDescriptor

class DispatchedRun(_message.Message):
    __slots__ = ("attempt", "target", "due_time", "execution_timeout", "heartbeat_timeout", "priority", "queue", "dispatch_time")
    ATTEMPT_FIELD_NUMBER: _ClassVar[int]
    TARGET_FIELD_NUMBER: _ClassVar[int]
    DUE_TIME_FIELD_NUMBER: _ClassVar[int]
    EXECUTION_TIMEOUT_FIELD_NUMBER: _ClassVar[int]
    HEARTBEAT_TIMEOUT_FIELD_NUMBER: _ClassVar[int]
    PRIORITY_FIELD_NUMBER: _ClassVar[int]
    QUEUE_FIELD_NUMBER: _ClassVar[int]
    DISPATCH_TIME_FIELD_NUMBER: _ClassVar[int]
    attempt: _executor_control_pb2.AttemptRef
    target: _job_pb2.Target
    due_time: _timestamp_pb2.Timestamp
    execution_timeout: _duration_pb2.Duration
    heartbeat_timeout: _duration_pb2.Duration
    priority: _job_pb2.Priority
    queue: str
    dispatch_time: _timestamp_pb2.Timestamp
    def __init__(self, attempt: _Optional[_Union[_executor_control_pb2.AttemptRef, _Mapping]] = ..., target: _Optional[_Union[_job_pb2.Target, _Mapping]] = ..., due_time: _Optional[_Union[datetime.datetime, _timestamp_pb2.Timestamp, _Mapping]] = ..., execution_timeout: _Optional[_Union[datetime.timedelta, _duration_pb2.Duration, _Mapping]] = ..., heartbeat_timeout: _Optional[_Union[datetime.timedelta, _duration_pb2.Duration, _Mapping]] = ..., priority: _Optional[_Union[_job_pb2.Priority, str]] = ..., queue: _Optional[str] = ..., dispatch_time: _Optional[_Union[datetime.datetime, _timestamp_pb2.Timestamp, _Mapping]] = ...) -> None: ...
