import datetime

from google.api import field_behavior_pb2 as _field_behavior_pb2
from google.protobuf import duration_pb2 as _duration_pb2
from google.protobuf import timestamp_pb2 as _timestamp_pb2
from google.protobuf.internal import containers as _containers
from google.protobuf.internal import enum_type_wrapper as _enum_type_wrapper
from google.protobuf import descriptor as _descriptor
from google.protobuf import message as _message
from collections.abc import Iterable as _Iterable, Mapping as _Mapping
from typing import ClassVar as _ClassVar, Optional as _Optional, Union as _Union

DESCRIPTOR: _descriptor.FileDescriptor

class RunState(int, metaclass=_enum_type_wrapper.EnumTypeWrapper):
    __slots__ = ()
    RUN_STATE_UNSPECIFIED: _ClassVar[RunState]
    RUN_STATE_SCHEDULED: _ClassVar[RunState]
    RUN_STATE_QUEUED: _ClassVar[RunState]
    RUN_STATE_RUNNING: _ClassVar[RunState]
    RUN_STATE_CANCELLING: _ClassVar[RunState]
    RUN_STATE_SUCCEEDED: _ClassVar[RunState]
    RUN_STATE_FAILED: _ClassVar[RunState]
    RUN_STATE_CANCELLED: _ClassVar[RunState]
    RUN_STATE_TIMED_OUT: _ClassVar[RunState]
    RUN_STATE_DEAD_LETTERED: _ClassVar[RunState]

class RunTrigger(int, metaclass=_enum_type_wrapper.EnumTypeWrapper):
    __slots__ = ()
    RUN_TRIGGER_UNSPECIFIED: _ClassVar[RunTrigger]
    RUN_TRIGGER_SCHEDULE: _ClassVar[RunTrigger]
    RUN_TRIGGER_RUN_NOW: _ClassVar[RunTrigger]
    RUN_TRIGGER_REPLAY: _ClassVar[RunTrigger]

class LogStream(int, metaclass=_enum_type_wrapper.EnumTypeWrapper):
    __slots__ = ()
    LOG_STREAM_UNSPECIFIED: _ClassVar[LogStream]
    LOG_STREAM_STDOUT: _ClassVar[LogStream]
    LOG_STREAM_STDERR: _ClassVar[LogStream]
    LOG_STREAM_SYSTEM: _ClassVar[LogStream]
RUN_STATE_UNSPECIFIED: RunState
RUN_STATE_SCHEDULED: RunState
RUN_STATE_QUEUED: RunState
RUN_STATE_RUNNING: RunState
RUN_STATE_CANCELLING: RunState
RUN_STATE_SUCCEEDED: RunState
RUN_STATE_FAILED: RunState
RUN_STATE_CANCELLED: RunState
RUN_STATE_TIMED_OUT: RunState
RUN_STATE_DEAD_LETTERED: RunState
RUN_TRIGGER_UNSPECIFIED: RunTrigger
RUN_TRIGGER_SCHEDULE: RunTrigger
RUN_TRIGGER_RUN_NOW: RunTrigger
RUN_TRIGGER_REPLAY: RunTrigger
LOG_STREAM_UNSPECIFIED: LogStream
LOG_STREAM_STDOUT: LogStream
LOG_STREAM_STDERR: LogStream
LOG_STREAM_SYSTEM: LogStream

class Run(_message.Message):
    __slots__ = ("name", "attempt", "schedule_time", "state", "executor", "dispatch_time", "start_time", "last_heartbeat_time", "end_time", "exit_code", "error", "progress", "progress_message", "lateness", "due_time", "trigger", "replay_of", "previous_attempts", "create_time", "update_time")
    NAME_FIELD_NUMBER: _ClassVar[int]
    ATTEMPT_FIELD_NUMBER: _ClassVar[int]
    SCHEDULE_TIME_FIELD_NUMBER: _ClassVar[int]
    STATE_FIELD_NUMBER: _ClassVar[int]
    EXECUTOR_FIELD_NUMBER: _ClassVar[int]
    DISPATCH_TIME_FIELD_NUMBER: _ClassVar[int]
    START_TIME_FIELD_NUMBER: _ClassVar[int]
    LAST_HEARTBEAT_TIME_FIELD_NUMBER: _ClassVar[int]
    END_TIME_FIELD_NUMBER: _ClassVar[int]
    EXIT_CODE_FIELD_NUMBER: _ClassVar[int]
    ERROR_FIELD_NUMBER: _ClassVar[int]
    PROGRESS_FIELD_NUMBER: _ClassVar[int]
    PROGRESS_MESSAGE_FIELD_NUMBER: _ClassVar[int]
    LATENESS_FIELD_NUMBER: _ClassVar[int]
    DUE_TIME_FIELD_NUMBER: _ClassVar[int]
    TRIGGER_FIELD_NUMBER: _ClassVar[int]
    REPLAY_OF_FIELD_NUMBER: _ClassVar[int]
    PREVIOUS_ATTEMPTS_FIELD_NUMBER: _ClassVar[int]
    CREATE_TIME_FIELD_NUMBER: _ClassVar[int]
    UPDATE_TIME_FIELD_NUMBER: _ClassVar[int]
    name: str
    attempt: int
    schedule_time: _timestamp_pb2.Timestamp
    state: RunState
    executor: str
    dispatch_time: _timestamp_pb2.Timestamp
    start_time: _timestamp_pb2.Timestamp
    last_heartbeat_time: _timestamp_pb2.Timestamp
    end_time: _timestamp_pb2.Timestamp
    exit_code: int
    error: RunError
    progress: float
    progress_message: str
    lateness: _duration_pb2.Duration
    due_time: _timestamp_pb2.Timestamp
    trigger: RunTrigger
    replay_of: str
    previous_attempts: _containers.RepeatedCompositeFieldContainer[RunAttempt]
    create_time: _timestamp_pb2.Timestamp
    update_time: _timestamp_pb2.Timestamp
    def __init__(self, name: _Optional[str] = ..., attempt: _Optional[int] = ..., schedule_time: _Optional[_Union[datetime.datetime, _timestamp_pb2.Timestamp, _Mapping]] = ..., state: _Optional[_Union[RunState, str]] = ..., executor: _Optional[str] = ..., dispatch_time: _Optional[_Union[datetime.datetime, _timestamp_pb2.Timestamp, _Mapping]] = ..., start_time: _Optional[_Union[datetime.datetime, _timestamp_pb2.Timestamp, _Mapping]] = ..., last_heartbeat_time: _Optional[_Union[datetime.datetime, _timestamp_pb2.Timestamp, _Mapping]] = ..., end_time: _Optional[_Union[datetime.datetime, _timestamp_pb2.Timestamp, _Mapping]] = ..., exit_code: _Optional[int] = ..., error: _Optional[_Union[RunError, _Mapping]] = ..., progress: _Optional[float] = ..., progress_message: _Optional[str] = ..., lateness: _Optional[_Union[datetime.timedelta, _duration_pb2.Duration, _Mapping]] = ..., due_time: _Optional[_Union[datetime.datetime, _timestamp_pb2.Timestamp, _Mapping]] = ..., trigger: _Optional[_Union[RunTrigger, str]] = ..., replay_of: _Optional[str] = ..., previous_attempts: _Optional[_Iterable[_Union[RunAttempt, _Mapping]]] = ..., create_time: _Optional[_Union[datetime.datetime, _timestamp_pb2.Timestamp, _Mapping]] = ..., update_time: _Optional[_Union[datetime.datetime, _timestamp_pb2.Timestamp, _Mapping]] = ...) -> None: ...

class RunError(_message.Message):
    __slots__ = ("type", "message")
    TYPE_FIELD_NUMBER: _ClassVar[int]
    MESSAGE_FIELD_NUMBER: _ClassVar[int]
    type: str
    message: str
    def __init__(self, type: _Optional[str] = ..., message: _Optional[str] = ...) -> None: ...

class RunAttempt(_message.Message):
    __slots__ = ("attempt", "state", "executor", "start_time", "end_time", "exit_code", "error")
    ATTEMPT_FIELD_NUMBER: _ClassVar[int]
    STATE_FIELD_NUMBER: _ClassVar[int]
    EXECUTOR_FIELD_NUMBER: _ClassVar[int]
    START_TIME_FIELD_NUMBER: _ClassVar[int]
    END_TIME_FIELD_NUMBER: _ClassVar[int]
    EXIT_CODE_FIELD_NUMBER: _ClassVar[int]
    ERROR_FIELD_NUMBER: _ClassVar[int]
    attempt: int
    state: RunState
    executor: str
    start_time: _timestamp_pb2.Timestamp
    end_time: _timestamp_pb2.Timestamp
    exit_code: int
    error: RunError
    def __init__(self, attempt: _Optional[int] = ..., state: _Optional[_Union[RunState, str]] = ..., executor: _Optional[str] = ..., start_time: _Optional[_Union[datetime.datetime, _timestamp_pb2.Timestamp, _Mapping]] = ..., end_time: _Optional[_Union[datetime.datetime, _timestamp_pb2.Timestamp, _Mapping]] = ..., exit_code: _Optional[int] = ..., error: _Optional[_Union[RunError, _Mapping]] = ...) -> None: ...

class LogLine(_message.Message):
    __slots__ = ("sequence", "attempt", "time", "stream", "text")
    SEQUENCE_FIELD_NUMBER: _ClassVar[int]
    ATTEMPT_FIELD_NUMBER: _ClassVar[int]
    TIME_FIELD_NUMBER: _ClassVar[int]
    STREAM_FIELD_NUMBER: _ClassVar[int]
    TEXT_FIELD_NUMBER: _ClassVar[int]
    sequence: int
    attempt: int
    time: _timestamp_pb2.Timestamp
    stream: LogStream
    text: str
    def __init__(self, sequence: _Optional[int] = ..., attempt: _Optional[int] = ..., time: _Optional[_Union[datetime.datetime, _timestamp_pb2.Timestamp, _Mapping]] = ..., stream: _Optional[_Union[LogStream, str]] = ..., text: _Optional[str] = ...) -> None: ...
