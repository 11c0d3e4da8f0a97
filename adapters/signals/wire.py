"""How signals look on Redis, and the argument checks both adapters share.

Keys and channel, under a deployment prefix:
  `{prefix}:cancels`                pub/sub channel, each message one CancelNotice:
                                    `{"v":1,"executor":…,"attempts":[[run,attempt],…],"reason":…}`
  `{prefix}:cancel:{run}:{attempt}` cancel key, value `1`, with a TTL
  `{prefix}:hb:{run}:{attempt}`     fallback heartbeat, with a TTL: `{"at":"<ISO 8601, UTC>","executor":…}`
  `{prefix}:fence:{run}:{attempt}`  the executor whose claim of the attempt was granted while the database
                                    was away (SET NX), with a TTL
JSON keeps the payloads readable with `redis-cli` and decodable from any SDK language; `v` lets a later format
be told apart (a subscriber drops, and logs, what it cannot read).
"""

from __future__ import annotations

import json
import math
from collections.abc import Sequence
from datetime import UTC, datetime, timedelta
from typing import Any

from jobmesh.core.attempts import AttemptRef
from jobmesh.core.errors import InvalidArgument
from jobmesh.core.ports.signals import CancelNotice

NOTICE_VERSION = 1
# How long closing a subscription waits for its thread to end.
SUBSCRIBER_JOIN_TIMEOUT_S = 2.0
_COMPACT = (",", ":")


def cancels_channel(prefix: str) -> str:
    return f"{prefix}:cancels"


def cancel_key(prefix: str, attempt: AttemptRef) -> str:
    return f"{prefix}:cancel:{attempt.run_name}:{attempt.attempt}"


def heartbeat_key(prefix: str, attempt: AttemptRef) -> str:
    return f"{prefix}:hb:{attempt.run_name}:{attempt.attempt}"


def fence_key(prefix: str, attempt: AttemptRef) -> str:
    return f"{prefix}:fence:{attempt.run_name}:{attempt.attempt}"


def encode_notice(notice: CancelNotice) -> bytes:
    body = {
        "v": NOTICE_VERSION,
        "executor": notice.executor_id,
        "attempts": [[ref.run_name, ref.attempt] for ref in notice.attempts],
        "reason": notice.reason,
    }
    return json.dumps(body, separators=_COMPACT).encode()


def decode_notice(data: bytes | str) -> CancelNotice:
    """Raises ValueError for anything that is not a notice of this version."""
    try:
        body = json.loads(data)
        if body["v"] != NOTICE_VERSION:
            raise ValueError(f"unknown version {body['v']!r}")
        attempts = tuple(AttemptRef.parse(_text(run), _integer(n)) for run, n in body["attempts"])
        return CancelNotice(_text(body["executor"]), attempts, _text(body["reason"]))
    except (ValueError, KeyError, TypeError, InvalidArgument) as error:
        raise ValueError(f"not a cancel notice ({error}): {data!r:.200}") from error


def encode_heartbeat(executor_id: str, at: datetime) -> bytes:
    body = {"at": utc(at).isoformat(), "executor": executor_id}
    return json.dumps(body, separators=_COMPACT).encode()


def decode_heartbeat(data: bytes | str) -> datetime:
    """Raises ValueError for a value that is not a heartbeat."""
    try:
        return utc(datetime.fromisoformat(_text(json.loads(data)["at"])))
    except (ValueError, KeyError, TypeError) as error:
        raise ValueError(f"not a heartbeat ({error}): {data!r:.200}") from error


def utc(at: datetime) -> datetime:
    """`at` in UTC. A naive time is refused: which zone it meant cannot be known."""
    if at.tzinfo is None or at.utcoffset() is None:
        raise ValueError(f"heartbeat time must be timezone-aware, got {at!r}")
    return at.astimezone(UTC)


def ttl_ms(ttl: timedelta) -> int:
    """Whole milliseconds, rounded up so a tiny TTL still leaves the key for a moment."""
    if ttl <= timedelta(0):
        raise ValueError(f"ttl must be positive, got {ttl!r}")
    return math.ceil(ttl / timedelta(milliseconds=1))


def unique(attempts: Sequence[AttemptRef]) -> list[AttemptRef]:
    """The attempts once each, in order (callers may pass duplicates; each key is read once)."""
    return list(dict.fromkeys(attempts))


def _text(value: Any) -> str:
    if not isinstance(value, str):
        raise TypeError(f"expected a string, got {value!r:.50}")
    return value


def _integer(value: Any) -> int:
    if not isinstance(value, int) or isinstance(value, bool):
        raise TypeError(f"expected an integer, got {value!r:.50}")
    return value
