"""The error types the mesh gives a failed, timed-out or cancelled attempt (`RunError.type`): the values a
job's `RetryPolicy.non_retryable_error_types` matches, besides the names a Python handler's own exceptions
report (`jobmesh_error_type`, or the exception's qualified name). The one list of them; protos/jobmesh/v1/
job.proto documents it."""

from __future__ import annotations

import enum

__all__ = ["FINAL_ERROR_TYPES", "ErrorType"]


class ErrorType(enum.StrEnum):
    # A command's end
    EXIT_CODE = "ExitCode"  # it exited with a code other than 0
    SIGNAL = "Signal"  # a signal killed it
    SPAWN_ERROR = "SpawnError"  # it could not be started (no argv, not found, not executable)
    SUPERVISOR_ERROR = "SupervisorError"  # its supervisor ended without telling its status
    # A webhook's end
    HTTP_ERROR = "HttpError"  # a bad URL, or the call failed or was abandoned
    HTTP_STATUS = "HttpStatus"  # the call was answered with a status that is not 2xx
    # A handler's end
    UNKNOWN_HANDLER = "UnknownHandler"  # no handler of that name in the executor
    INVALID_TASK_ARGUMENTS = "InvalidTaskArguments"  # a Python task's payload does not fit its signature
    RESULT_TOO_LARGE = "ResultTooLarge"  # the return value is over the result cap
    RESULT_NOT_SERIALIZABLE = "ResultNotSerializable"  # the return value is not JSON
    # What the executor refused or could not do
    TARGET_NOT_ALLOWED = "TargetNotAllowed"  # its allowlist refused the command or the HTTP destination
    SECRET_NOT_FOUND = "SecretNotFound"  # a `secret://NAME` its secret source does not hold
    SECRET_SOURCE_ERROR = "SecretSourceError"  # its secret source failed
    INVALID_TARGET = "InvalidTarget"  # the run has no target
    EXECUTOR_ERROR = "ExecutorError"  # an error of the executor's own, not the target's
    # Stops
    TIMEOUT = "Timeout"  # the job's execution timeout passed
    CANCELLED = "Cancelled"  # by a call, a pause, a delete, a schedule change or an overlap policy
    STOPPED = "Stopped"  # a handler stopped by its executor
    DRAINED = "Drained"  # the executor drained (SIGTERM) before the attempt ended
    CONTACT_LOST = "ContactLost"  # the executor lost the server and the signal bus for its heartbeat timeout
    # What the server or the watcher found
    HEARTBEAT_LOST = "HeartbeatLost"  # no heartbeat for its timeout: the executor died or was cut off
    NOT_HELD = "NotHeld"  # the executor, connected again, no longer holds it
    RESULT_NOT_STORED = "ResultNotStored"  # the database refused the reported result


# Never retried, whatever the policy says: trying again cannot change them.
FINAL_ERROR_TYPES = frozenset({ErrorType.TARGET_NOT_ALLOWED, ErrorType.SECRET_NOT_FOUND})
