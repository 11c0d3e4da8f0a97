"""Limits that more than one process must agree on."""

from __future__ import annotations

# The largest gRPC message a server or an executor sends or accepts (both sides set it on their channels).
MAX_GRPC_MESSAGE_BYTES = 16 * 1024 * 1024
# A log line is a message field, not a file: longer output is split into lines of at most this many characters
# by the executor, and cut to it by the server.
MAX_LOG_LINE_CHARS = 16 * 1024
# An attempt's error, as reported and stored.
MAX_ERROR_TYPE = 256
MAX_ERROR_MESSAGE = 4096
MAX_PROGRESS_MESSAGE = 1024
# A handler's return value, as JSON text in UTF-8: a result, not a data store (kept on the run's row).
MAX_RESULT_BYTES = 64 * 1024
# The error types of a return value that cannot be kept.
RESULT_TOO_LARGE = "ResultTooLarge"
RESULT_NOT_SERIALIZABLE = "ResultNotSerializable"
