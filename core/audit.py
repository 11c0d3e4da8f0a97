"""The audit trail: who changed what through the API, in which namespace, when, under which request id.

An event is written by the store in the transaction of the change it describes, so that it exists exactly when
the change happened (a failed call leaves none; one refused for its credential or role leaves a REFUSED event
of its own: server/refusals.py).
"""

from __future__ import annotations

import enum
from dataclasses import dataclass
from datetime import datetime

__all__ = ["AuditAction", "AuditEvent"]


class AuditAction(enum.StrEnum):
    CREATE = "CREATE"
    UPDATE = "UPDATE"
    DELETE = "DELETE"
    PAUSE = "PAUSE"
    RESUME = "RESUME"
    RUN_NOW = "RUN_NOW"
    CANCEL = "CANCEL"
    REPLAY = "REPLAY"
    BACKFILL = "BACKFILL"
    REFUSED = "REFUSED"  # a call refused for its credential or role (server/refusals.py)


@dataclass(frozen=True, slots=True)
class AuditEvent:
    """`resource` is `jobs/{job}` or `jobs/{job}/runs/{run}`; `job_id` its job, so a job's page lists the
    events of its runs too. `event_id` sorts by time (a run-style id of `time`)."""

    event_id: str
    time: datetime
    actor: str
    action: AuditAction
    resource: str
    job_id: str
    namespace: str
    request_id: str = ""
