"""`WatchRuns` resume tokens: a place in the change feed, as urlsafe base64 of JSON `[position, job, run]`.

A token holds no filter: a place in the feed means the same whatever a stream asks for. What comes back is
checked as any input is, so a forged token is INVALID_ARGUMENT and never reaches the store unchecked.
"""

from __future__ import annotations

import base64
import binascii
import json

from jobmesh.core.errors import InvalidArgument
from jobmesh.core.names import JOB_ID, RUN_ID
from jobmesh.core.ports.store import FeedCursor

FIELD = "resume_token"
MAX_TOKEN_CHARS = 256
MAX_POSITION = 2**63 - 1  # a bigint


def encode_resume_token(cursor: FeedCursor) -> str:
    payload = json.dumps([cursor.position, cursor.job_id, cursor.run_id], separators=(",", ":"))
    return base64.urlsafe_b64encode(payload.encode()).decode().rstrip("=")


def decode_resume_token(token: str) -> FeedCursor:
    """The cursor a token holds; INVALID_ARGUMENT (field `resume_token`) for what no server gave."""
    if len(token) > MAX_TOKEN_CHARS:
        raise _forged()
    try:
        payload = json.loads(base64.urlsafe_b64decode(token + "=" * (-len(token) % 4)))
    except (binascii.Error, ValueError):
        raise _forged() from None
    if not _well_formed(payload):
        raise _forged()
    position, job_id, run_id = payload
    return FeedCursor(position, job_id, run_id)


def _well_formed(payload: object) -> bool:
    if not isinstance(payload, list) or len(payload) != 3:
        return False
    position, job_id, run_id = payload
    if type(position) is not int or not 0 <= position <= MAX_POSITION:
        return False
    if not isinstance(job_id, str) or not isinstance(run_id, str):
        return False
    if not job_id:  # a place before every change at a position
        return not run_id
    return bool(JOB_ID.fullmatch(job_id) and RUN_ID.fullmatch(run_id))


def _forged() -> InvalidArgument:
    return InvalidArgument.single(FIELD, "is not a resume token this service gave")
