"""The wire's values (`jobmesh.v1`) of core's other enums, both ways where both are read: a run's priority and
trigger, a log line's stream, an audit event's action. The states' are `core.states`'; nothing else maps a
core enum to the wire (`tests/test_layout.py`)."""

from __future__ import annotations

from collections.abc import Mapping

from jobmesh.core.audit import AuditAction
from jobmesh.core.records import Priority, RunTrigger
from jobmesh.v1 import audit_pb2, job_pb2, run_pb2

PRIORITY_TO_WIRE: Mapping[Priority, job_pb2.Priority.ValueType] = {
    priority: job_pb2.Priority.Value(f"PRIORITY_{priority.value}") for priority in Priority
}
# A job that names no priority has the normal one.
PRIORITY_FROM_WIRE: Mapping[job_pb2.Priority.ValueType, Priority] = {
    **{wire: priority for priority, wire in PRIORITY_TO_WIRE.items()},
    job_pb2.PRIORITY_UNSPECIFIED: Priority.NORMAL,
}
RUN_TRIGGER_TO_WIRE: Mapping[RunTrigger, run_pb2.RunTrigger.ValueType] = {
    trigger: run_pb2.RunTrigger.Value(f"RUN_TRIGGER_{trigger.value}") for trigger in RunTrigger
}
AUDIT_ACTION_TO_WIRE: Mapping[AuditAction, audit_pb2.AuditAction.ValueType] = {
    action: audit_pb2.AuditAction.Value(f"AUDIT_ACTION_{action.value}") for action in AuditAction
}
# A log line's stream as stored (`LogRecord.stream`); a stream the wire does not name is stored as STDOUT.
LOG_STREAM_TO_WIRE: Mapping[str, run_pb2.LogStream.ValueType] = {
    name: run_pb2.LogStream.Value(f"LOG_STREAM_{name}") for name in ("STDOUT", "STDERR", "SYSTEM")
}
LOG_STREAM_FROM_WIRE: Mapping[run_pb2.LogStream.ValueType, str] = {
    wire: name for name, wire in LOG_STREAM_TO_WIRE.items()
}
DEFAULT_LOG_STREAM = "STDOUT"
