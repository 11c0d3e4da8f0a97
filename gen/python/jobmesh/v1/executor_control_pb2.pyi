import datetime

from google.protobuf import duration_pb2 as _duration_pb2
from google.protobuf import timestamp_pb2 as _timestamp_pb2
from jobmesh.v1 import run_pb2 as _run_pb2
from google.protobuf.internal import containers as _containers
from google.protobuf.internal import enum_type_wrapper as _enum_type_wrapper
from google.protobuf import descriptor as _descriptor
from google.protobuf import message as _message
from collections.abc import Iterable as _Iterable, Mapping as _Mapping
from typing import ClassVar as _ClassVar, Optional as _Optional, Union as _Union

DESCRIPTOR: _descriptor.FileDescriptor

class ClaimOutcome(int, metaclass=_enum_type_wrapper.EnumTypeWrapper):
    __slots__ = ()
    CLAIM_OUTCOME_UNSPECIFIED: _ClassVar[ClaimOutcome]
    CLAIM_OUTCOME_GRANTED: _ClassVar[ClaimOutcome]
    CLAIM_OUTCOME_DUPLICATE: _ClassVar[ClaimOutcome]
    CLAIM_OUTCOME_CANCELLED: _ClassVar[ClaimOutcome]
    CLAIM_OUTCOME_STALE: _ClassVar[ClaimOutcome]
    CLAIM_OUTCOME_NOT_FOUND: _ClassVar[ClaimOutcome]
CLAIM_OUTCOME_UNSPECIFIED: ClaimOutcome
CLAIM_OUTCOME_GRANTED: ClaimOutcome
CLAIM_OUTCOME_DUPLICATE: ClaimOutcome
CLAIM_OUTCOME_CANCELLED: ClaimOutcome
CLAIM_OUTCOME_STALE: ClaimOutcome
CLAIM_OUTCOME_NOT_FOUND: ClaimOutcome

class ConnectRequest(_message.Message):
    __slots__ = ("hello", "heartbeats", "claims", "progress", "logs", "results")
    HELLO_FIELD_NUMBER: _ClassVar[int]
    HEARTBEATS_FIELD_NUMBER: _ClassVar[int]
    CLAIMS_FIELD_NUMBER: _ClassVar[int]
    PROGRESS_FIELD_NUMBER: _ClassVar[int]
    LOGS_FIELD_NUMBER: _ClassVar[int]
    RESULTS_FIELD_NUMBER: _ClassVar[int]
    hello: ExecutorHello
    heartbeats: HeartbeatBatch
    claims: ClaimBatch
    progress: ProgressBatch
    logs: LogBatch
    results: ResultBatch
    def __init__(self, hello: _Optional[_Union[ExecutorHello, _Mapping]] = ..., heartbeats: _Optional[_Union[HeartbeatBatch, _Mapping]] = ..., claims: _Optional[_Union[ClaimBatch, _Mapping]] = ..., progress: _Optional[_Union[ProgressBatch, _Mapping]] = ..., logs: _Optional[_Union[LogBatch, _Mapping]] = ..., results: _Optional[_Union[ResultBatch, _Mapping]] = ...) -> None: ...

class ConnectResponse(_message.Message):
    __slots__ = ("welcome", "claim_results", "acks", "cancels", "drain")
    WELCOME_FIELD_NUMBER: _ClassVar[int]
    CLAIM_RESULTS_FIELD_NUMBER: _ClassVar[int]
    ACKS_FIELD_NUMBER: _ClassVar[int]
    CANCELS_FIELD_NUMBER: _ClassVar[int]
    DRAIN_FIELD_NUMBER: _ClassVar[int]
    welcome: ExecutorWelcome
    claim_results: ClaimResultBatch
    acks: AckBatch
    cancels: CancelBatch
    drain: DrainNotice
    def __init__(self, welcome: _Optional[_Union[ExecutorWelcome, _Mapping]] = ..., claim_results: _Optional[_Union[ClaimResultBatch, _Mapping]] = ..., acks: _Optional[_Union[AckBatch, _Mapping]] = ..., cancels: _Optional[_Union[CancelBatch, _Mapping]] = ..., drain: _Optional[_Union[DrainNotice, _Mapping]] = ...) -> None: ...

class AttemptRef(_message.Message):
    __slots__ = ("run", "attempt")
    RUN_FIELD_NUMBER: _ClassVar[int]
    ATTEMPT_FIELD_NUMBER: _ClassVar[int]
    run: str
    attempt: int
    def __init__(self, run: _Optional[str] = ..., attempt: _Optional[int] = ...) -> None: ...

class ExecutorHello(_message.Message):
    __slots__ = ("executor_id", "hostname", "queues", "concurrency", "handlers", "running")
    EXECUTOR_ID_FIELD_NUMBER: _ClassVar[int]
    HOSTNAME_FIELD_NUMBER: _ClassVar[int]
    QUEUES_FIELD_NUMBER: _ClassVar[int]
    CONCURRENCY_FIELD_NUMBER: _ClassVar[int]
    HANDLERS_FIELD_NUMBER: _ClassVar[int]
    RUNNING_FIELD_NUMBER: _ClassVar[int]
    executor_id: str
    hostname: str
    queues: _containers.RepeatedScalarFieldContainer[str]
    concurrency: int
    handlers: _containers.RepeatedScalarFieldContainer[str]
    running: _containers.RepeatedCompositeFieldContainer[AttemptRef]
    def __init__(self, executor_id: _Optional[str] = ..., hostname: _Optional[str] = ..., queues: _Optional[_Iterable[str]] = ..., concurrency: _Optional[int] = ..., handlers: _Optional[_Iterable[str]] = ..., running: _Optional[_Iterable[_Union[AttemptRef, _Mapping]]] = ...) -> None: ...

class ExecutorWelcome(_message.Message):
    __slots__ = ("heartbeat_interval", "server_id")
    HEARTBEAT_INTERVAL_FIELD_NUMBER: _ClassVar[int]
    SERVER_ID_FIELD_NUMBER: _ClassVar[int]
    heartbeat_interval: _duration_pb2.Duration
    server_id: str
    def __init__(self, heartbeat_interval: _Optional[_Union[datetime.timedelta, _duration_pb2.Duration, _Mapping]] = ..., server_id: _Optional[str] = ...) -> None: ...

class HeartbeatBatch(_message.Message):
    __slots__ = ("attempts",)
    ATTEMPTS_FIELD_NUMBER: _ClassVar[int]
    attempts: _containers.RepeatedCompositeFieldContainer[AttemptRef]
    def __init__(self, attempts: _Optional[_Iterable[_Union[AttemptRef, _Mapping]]] = ...) -> None: ...

class ClaimBatch(_message.Message):
    __slots__ = ("attempts",)
    ATTEMPTS_FIELD_NUMBER: _ClassVar[int]
    attempts: _containers.RepeatedCompositeFieldContainer[AttemptRef]
    def __init__(self, attempts: _Optional[_Iterable[_Union[AttemptRef, _Mapping]]] = ...) -> None: ...

class ClaimResult(_message.Message):
    __slots__ = ("attempt", "outcome", "start_time")
    ATTEMPT_FIELD_NUMBER: _ClassVar[int]
    OUTCOME_FIELD_NUMBER: _ClassVar[int]
    START_TIME_FIELD_NUMBER: _ClassVar[int]
    attempt: AttemptRef
    outcome: ClaimOutcome
    start_time: _timestamp_pb2.Timestamp
    def __init__(self, attempt: _Optional[_Union[AttemptRef, _Mapping]] = ..., outcome: _Optional[_Union[ClaimOutcome, str]] = ..., start_time: _Optional[_Union[datetime.datetime, _timestamp_pb2.Timestamp, _Mapping]] = ...) -> None: ...

class ClaimResultBatch(_message.Message):
    __slots__ = ("results",)
    RESULTS_FIELD_NUMBER: _ClassVar[int]
    results: _containers.RepeatedCompositeFieldContainer[ClaimResult]
    def __init__(self, results: _Optional[_Iterable[_Union[ClaimResult, _Mapping]]] = ...) -> None: ...

class ProgressUpdate(_message.Message):
    __slots__ = ("attempt", "progress", "message")
    ATTEMPT_FIELD_NUMBER: _ClassVar[int]
    PROGRESS_FIELD_NUMBER: _ClassVar[int]
    MESSAGE_FIELD_NUMBER: _ClassVar[int]
    attempt: AttemptRef
    progress: float
    message: str
    def __init__(self, attempt: _Optional[_Union[AttemptRef, _Mapping]] = ..., progress: _Optional[float] = ..., message: _Optional[str] = ...) -> None: ...

class ProgressBatch(_message.Message):
    __slots__ = ("updates",)
    UPDATES_FIELD_NUMBER: _ClassVar[int]
    updates: _containers.RepeatedCompositeFieldContainer[ProgressUpdate]
    def __init__(self, updates: _Optional[_Iterable[_Union[ProgressUpdate, _Mapping]]] = ...) -> None: ...

class LogChunk(_message.Message):
    __slots__ = ("attempt", "lines")
    ATTEMPT_FIELD_NUMBER: _ClassVar[int]
    LINES_FIELD_NUMBER: _ClassVar[int]
    attempt: AttemptRef
    lines: _containers.RepeatedCompositeFieldContainer[_run_pb2.LogLine]
    def __init__(self, attempt: _Optional[_Union[AttemptRef, _Mapping]] = ..., lines: _Optional[_Iterable[_Union[_run_pb2.LogLine, _Mapping]]] = ...) -> None: ...

class LogBatch(_message.Message):
    __slots__ = ("chunks",)
    CHUNKS_FIELD_NUMBER: _ClassVar[int]
    chunks: _containers.RepeatedCompositeFieldContainer[LogChunk]
    def __init__(self, chunks: _Optional[_Iterable[_Union[LogChunk, _Mapping]]] = ...) -> None: ...

class AttemptResult(_message.Message):
    __slots__ = ("attempt", "state", "exit_code", "error", "start_time", "end_time")
    ATTEMPT_FIELD_NUMBER: _ClassVar[int]
    STATE_FIELD_NUMBER: _ClassVar[int]
    EXIT_CODE_FIELD_NUMBER: _ClassVar[int]
    ERROR_FIELD_NUMBER: _ClassVar[int]
    START_TIME_FIELD_NUMBER: _ClassVar[int]
    END_TIME_FIELD_NUMBER: _ClassVar[int]
    attempt: AttemptRef
    state: _run_pb2.RunState
    exit_code: int
    error: _run_pb2.RunError
    start_time: _timestamp_pb2.Timestamp
    end_time: _timestamp_pb2.Timestamp
    def __init__(self, attempt: _Optional[_Union[AttemptRef, _Mapping]] = ..., state: _Optional[_Union[_run_pb2.RunState, str]] = ..., exit_code: _Optional[int] = ..., error: _Optional[_Union[_run_pb2.RunError, _Mapping]] = ..., start_time: _Optional[_Union[datetime.datetime, _timestamp_pb2.Timestamp, _Mapping]] = ..., end_time: _Optional[_Union[datetime.datetime, _timestamp_pb2.Timestamp, _Mapping]] = ...) -> None: ...

class ResultBatch(_message.Message):
    __slots__ = ("results",)
    RESULTS_FIELD_NUMBER: _ClassVar[int]
    results: _containers.RepeatedCompositeFieldContainer[AttemptResult]
    def __init__(self, results: _Optional[_Iterable[_Union[AttemptResult, _Mapping]]] = ...) -> None: ...

class AckBatch(_message.Message):
    __slots__ = ("recorded", "fenced")
    RECORDED_FIELD_NUMBER: _ClassVar[int]
    FENCED_FIELD_NUMBER: _ClassVar[int]
    recorded: _containers.RepeatedCompositeFieldContainer[AttemptRef]
    fenced: _containers.RepeatedCompositeFieldContainer[AttemptRef]
    def __init__(self, recorded: _Optional[_Iterable[_Union[AttemptRef, _Mapping]]] = ..., fenced: _Optional[_Iterable[_Union[AttemptRef, _Mapping]]] = ...) -> None: ...

class CancelBatch(_message.Message):
    __slots__ = ("attempts", "reason")
    ATTEMPTS_FIELD_NUMBER: _ClassVar[int]
    REASON_FIELD_NUMBER: _ClassVar[int]
    attempts: _containers.RepeatedCompositeFieldContainer[AttemptRef]
    reason: str
    def __init__(self, attempts: _Optional[_Iterable[_Union[AttemptRef, _Mapping]]] = ..., reason: _Optional[str] = ...) -> None: ...

class DrainNotice(_message.Message):
    __slots__ = ("deadline",)
    DEADLINE_FIELD_NUMBER: _ClassVar[int]
    deadline: _timestamp_pb2.Timestamp
    def __init__(self, deadline: _Optional[_Union[datetime.datetime, _timestamp_pb2.Timestamp, _Mapping]] = ...) -> None: ...
