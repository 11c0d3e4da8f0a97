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

class OverlapPolicy(int, metaclass=_enum_type_wrapper.EnumTypeWrapper):
    __slots__ = ()
    OVERLAP_POLICY_UNSPECIFIED: _ClassVar[OverlapPolicy]
    OVERLAP_POLICY_SKIP: _ClassVar[OverlapPolicy]
    OVERLAP_POLICY_BUFFER_ONE: _ClassVar[OverlapPolicy]
    OVERLAP_POLICY_BUFFER_ALL: _ClassVar[OverlapPolicy]
    OVERLAP_POLICY_CANCEL_OTHER: _ClassVar[OverlapPolicy]
    OVERLAP_POLICY_ALLOW_ALL: _ClassVar[OverlapPolicy]

class Priority(int, metaclass=_enum_type_wrapper.EnumTypeWrapper):
    __slots__ = ()
    PRIORITY_UNSPECIFIED: _ClassVar[Priority]
    PRIORITY_HIGH: _ClassVar[Priority]
    PRIORITY_NORMAL: _ClassVar[Priority]
    PRIORITY_LOW: _ClassVar[Priority]

class JobState(int, metaclass=_enum_type_wrapper.EnumTypeWrapper):
    __slots__ = ()
    JOB_STATE_UNSPECIFIED: _ClassVar[JobState]
    JOB_STATE_ACTIVE: _ClassVar[JobState]
    JOB_STATE_PAUSED: _ClassVar[JobState]
    JOB_STATE_COMPLETED: _ClassVar[JobState]
    JOB_STATE_DELETED: _ClassVar[JobState]
OVERLAP_POLICY_UNSPECIFIED: OverlapPolicy
OVERLAP_POLICY_SKIP: OverlapPolicy
OVERLAP_POLICY_BUFFER_ONE: OverlapPolicy
OVERLAP_POLICY_BUFFER_ALL: OverlapPolicy
OVERLAP_POLICY_CANCEL_OTHER: OverlapPolicy
OVERLAP_POLICY_ALLOW_ALL: OverlapPolicy
PRIORITY_UNSPECIFIED: Priority
PRIORITY_HIGH: Priority
PRIORITY_NORMAL: Priority
PRIORITY_LOW: Priority
JOB_STATE_UNSPECIFIED: JobState
JOB_STATE_ACTIVE: JobState
JOB_STATE_PAUSED: JobState
JOB_STATE_COMPLETED: JobState
JOB_STATE_DELETED: JobState

class Job(_message.Message):
    __slots__ = ("name", "display_name", "labels", "schedule", "target", "retry_policy", "execution_timeout", "heartbeat_timeout", "priority", "queue", "state", "next_run_time", "create_time", "update_time", "etag")
    class LabelsEntry(_message.Message):
        __slots__ = ("key", "value")
        KEY_FIELD_NUMBER: _ClassVar[int]
        VALUE_FIELD_NUMBER: _ClassVar[int]
        key: str
        value: str
        def __init__(self, key: _Optional[str] = ..., value: _Optional[str] = ...) -> None: ...
    NAME_FIELD_NUMBER: _ClassVar[int]
    DISPLAY_NAME_FIELD_NUMBER: _ClassVar[int]
    LABELS_FIELD_NUMBER: _ClassVar[int]
    SCHEDULE_FIELD_NUMBER: _ClassVar[int]
    TARGET_FIELD_NUMBER: _ClassVar[int]
    RETRY_POLICY_FIELD_NUMBER: _ClassVar[int]
    EXECUTION_TIMEOUT_FIELD_NUMBER: _ClassVar[int]
    HEARTBEAT_TIMEOUT_FIELD_NUMBER: _ClassVar[int]
    PRIORITY_FIELD_NUMBER: _ClassVar[int]
    QUEUE_FIELD_NUMBER: _ClassVar[int]
    STATE_FIELD_NUMBER: _ClassVar[int]
    NEXT_RUN_TIME_FIELD_NUMBER: _ClassVar[int]
    CREATE_TIME_FIELD_NUMBER: _ClassVar[int]
    UPDATE_TIME_FIELD_NUMBER: _ClassVar[int]
    ETAG_FIELD_NUMBER: _ClassVar[int]
    name: str
    display_name: str
    labels: _containers.ScalarMap[str, str]
    schedule: Schedule
    target: Target
    retry_policy: RetryPolicy
    execution_timeout: _duration_pb2.Duration
    heartbeat_timeout: _duration_pb2.Duration
    priority: Priority
    queue: str
    state: JobState
    next_run_time: _timestamp_pb2.Timestamp
    create_time: _timestamp_pb2.Timestamp
    update_time: _timestamp_pb2.Timestamp
    etag: str
    def __init__(self, name: _Optional[str] = ..., display_name: _Optional[str] = ..., labels: _Optional[_Mapping[str, str]] = ..., schedule: _Optional[_Union[Schedule, _Mapping]] = ..., target: _Optional[_Union[Target, _Mapping]] = ..., retry_policy: _Optional[_Union[RetryPolicy, _Mapping]] = ..., execution_timeout: _Optional[_Union[datetime.timedelta, _duration_pb2.Duration, _Mapping]] = ..., heartbeat_timeout: _Optional[_Union[datetime.timedelta, _duration_pb2.Duration, _Mapping]] = ..., priority: _Optional[_Union[Priority, str]] = ..., queue: _Optional[str] = ..., state: _Optional[_Union[JobState, str]] = ..., next_run_time: _Optional[_Union[datetime.datetime, _timestamp_pb2.Timestamp, _Mapping]] = ..., create_time: _Optional[_Union[datetime.datetime, _timestamp_pb2.Timestamp, _Mapping]] = ..., update_time: _Optional[_Union[datetime.datetime, _timestamp_pb2.Timestamp, _Mapping]] = ..., etag: _Optional[str] = ...) -> None: ...

class Schedule(_message.Message):
    __slots__ = ("immediate", "run_at", "cron")
    class Immediate(_message.Message):
        __slots__ = ()
        def __init__(self) -> None: ...
    class Cron(_message.Message):
        __slots__ = ("expression", "time_zone", "start_time", "end_time", "jitter", "overlap_policy", "catchup_window")
        EXPRESSION_FIELD_NUMBER: _ClassVar[int]
        TIME_ZONE_FIELD_NUMBER: _ClassVar[int]
        START_TIME_FIELD_NUMBER: _ClassVar[int]
        END_TIME_FIELD_NUMBER: _ClassVar[int]
        JITTER_FIELD_NUMBER: _ClassVar[int]
        OVERLAP_POLICY_FIELD_NUMBER: _ClassVar[int]
        CATCHUP_WINDOW_FIELD_NUMBER: _ClassVar[int]
        expression: str
        time_zone: str
        start_time: _timestamp_pb2.Timestamp
        end_time: _timestamp_pb2.Timestamp
        jitter: _duration_pb2.Duration
        overlap_policy: OverlapPolicy
        catchup_window: _duration_pb2.Duration
        def __init__(self, expression: _Optional[str] = ..., time_zone: _Optional[str] = ..., start_time: _Optional[_Union[datetime.datetime, _timestamp_pb2.Timestamp, _Mapping]] = ..., end_time: _Optional[_Union[datetime.datetime, _timestamp_pb2.Timestamp, _Mapping]] = ..., jitter: _Optional[_Union[datetime.timedelta, _duration_pb2.Duration, _Mapping]] = ..., overlap_policy: _Optional[_Union[OverlapPolicy, str]] = ..., catchup_window: _Optional[_Union[datetime.timedelta, _duration_pb2.Duration, _Mapping]] = ...) -> None: ...
    IMMEDIATE_FIELD_NUMBER: _ClassVar[int]
    RUN_AT_FIELD_NUMBER: _ClassVar[int]
    CRON_FIELD_NUMBER: _ClassVar[int]
    immediate: Schedule.Immediate
    run_at: _timestamp_pb2.Timestamp
    cron: Schedule.Cron
    def __init__(self, immediate: _Optional[_Union[Schedule.Immediate, _Mapping]] = ..., run_at: _Optional[_Union[datetime.datetime, _timestamp_pb2.Timestamp, _Mapping]] = ..., cron: _Optional[_Union[Schedule.Cron, _Mapping]] = ...) -> None: ...

class Target(_message.Message):
    __slots__ = ("command", "http", "handler")
    class Command(_message.Message):
        __slots__ = ("argv", "env", "working_dir")
        class EnvEntry(_message.Message):
            __slots__ = ("key", "value")
            KEY_FIELD_NUMBER: _ClassVar[int]
            VALUE_FIELD_NUMBER: _ClassVar[int]
            key: str
            value: str
            def __init__(self, key: _Optional[str] = ..., value: _Optional[str] = ...) -> None: ...
        ARGV_FIELD_NUMBER: _ClassVar[int]
        ENV_FIELD_NUMBER: _ClassVar[int]
        WORKING_DIR_FIELD_NUMBER: _ClassVar[int]
        argv: _containers.RepeatedScalarFieldContainer[str]
        env: _containers.ScalarMap[str, str]
        working_dir: str
        def __init__(self, argv: _Optional[_Iterable[str]] = ..., env: _Optional[_Mapping[str, str]] = ..., working_dir: _Optional[str] = ...) -> None: ...
    class Http(_message.Message):
        __slots__ = ("method", "url", "headers", "body")
        class HeadersEntry(_message.Message):
            __slots__ = ("key", "value")
            KEY_FIELD_NUMBER: _ClassVar[int]
            VALUE_FIELD_NUMBER: _ClassVar[int]
            key: str
            value: str
            def __init__(self, key: _Optional[str] = ..., value: _Optional[str] = ...) -> None: ...
        METHOD_FIELD_NUMBER: _ClassVar[int]
        URL_FIELD_NUMBER: _ClassVar[int]
        HEADERS_FIELD_NUMBER: _ClassVar[int]
        BODY_FIELD_NUMBER: _ClassVar[int]
        method: str
        url: str
        headers: _containers.ScalarMap[str, str]
        body: bytes
        def __init__(self, method: _Optional[str] = ..., url: _Optional[str] = ..., headers: _Optional[_Mapping[str, str]] = ..., body: _Optional[bytes] = ...) -> None: ...
    class Handler(_message.Message):
        __slots__ = ("name", "payload")
        NAME_FIELD_NUMBER: _ClassVar[int]
        PAYLOAD_FIELD_NUMBER: _ClassVar[int]
        name: str
        payload: bytes
        def __init__(self, name: _Optional[str] = ..., payload: _Optional[bytes] = ...) -> None: ...
    COMMAND_FIELD_NUMBER: _ClassVar[int]
    HTTP_FIELD_NUMBER: _ClassVar[int]
    HANDLER_FIELD_NUMBER: _ClassVar[int]
    command: Target.Command
    http: Target.Http
    handler: Target.Handler
    def __init__(self, command: _Optional[_Union[Target.Command, _Mapping]] = ..., http: _Optional[_Union[Target.Http, _Mapping]] = ..., handler: _Optional[_Union[Target.Handler, _Mapping]] = ...) -> None: ...

class RetryPolicy(_message.Message):
    __slots__ = ("max_attempts", "initial_backoff", "backoff_multiplier", "max_backoff", "non_retryable_error_types")
    MAX_ATTEMPTS_FIELD_NUMBER: _ClassVar[int]
    INITIAL_BACKOFF_FIELD_NUMBER: _ClassVar[int]
    BACKOFF_MULTIPLIER_FIELD_NUMBER: _ClassVar[int]
    MAX_BACKOFF_FIELD_NUMBER: _ClassVar[int]
    NON_RETRYABLE_ERROR_TYPES_FIELD_NUMBER: _ClassVar[int]
    max_attempts: int
    initial_backoff: _duration_pb2.Duration
    backoff_multiplier: float
    max_backoff: _duration_pb2.Duration
    non_retryable_error_types: _containers.RepeatedScalarFieldContainer[str]
    def __init__(self, max_attempts: _Optional[int] = ..., initial_backoff: _Optional[_Union[datetime.timedelta, _duration_pb2.Duration, _Mapping]] = ..., backoff_multiplier: _Optional[float] = ..., max_backoff: _Optional[_Union[datetime.timedelta, _duration_pb2.Duration, _Mapping]] = ..., non_retryable_error_types: _Optional[_Iterable[str]] = ...) -> None: ...
