"""A job's parts from the text a person types, once for the options of `jobmesh jobs create|update` and the
fields of an `apply` file: durations (`90s`, `1h30m`), times (RFC 3339 with an offset), priorities, the
schedule, the target and the other fields, built with `_specs`. Bad text is a ValueError whose message names
the field as the caller spells it (`--cron` on the command line, `cron` in a file)."""

from __future__ import annotations

import re
from collections.abc import Callable, Mapping, Sequence
from datetime import datetime, timedelta
from typing import Any

from jobmesh.client._requests import JobFields
from jobmesh.client._specs import at, command, cron, handler, http, retry_policy
from jobmesh.v1 import job_pb2

__all__ = [
    "PRIORITIES",
    "Spelling",
    "job_fields",
    "option_spelling",
    "parse_duration",
    "parse_moment",
    "schedule_of",
    "target_of",
]

PRIORITIES = {"high": job_pb2.PRIORITY_HIGH, "normal": job_pb2.PRIORITY_NORMAL, "low": job_pb2.PRIORITY_LOW}
_DURATION = re.compile(r"^(?:(\d+)h)?(?:(\d+)m(?!s))?(?:(\d+(?:\.\d+)?)s)?(?:(\d+)ms)?$")

# How a message names a field: `--time-zone` for the CLI, `time-zone` in a file.
Spelling = Callable[[str], str]


def option_spelling(field: str) -> str:
    return "a program" if field == "command" else f"--{field}"


def parse_duration(value: object) -> timedelta:
    """`90s`, `5m`, `1h30m`, `250ms`, or a number of seconds."""
    text = str(value).strip()
    with_unit = _DURATION.match(text)
    if text and with_unit and any(with_unit.groups()):
        hours, minutes, seconds, millis = (float(part or 0) for part in with_unit.groups())
        return timedelta(hours=hours, minutes=minutes, seconds=seconds, milliseconds=millis)
    try:
        return timedelta(seconds=float(text))
    except ValueError:
        raise ValueError(f"{value!r} is not a duration such as 30s, 5m or 1h30m") from None


def parse_moment(value: object) -> datetime:
    """An RFC 3339 time with its offset; a time without one is refused rather than guessed."""
    if isinstance(value, datetime):
        moment = value
    else:
        try:
            moment = datetime.fromisoformat(str(value))
        except ValueError:
            raise ValueError(f"{value!r} is not a time such as 2026-12-24T18:00:00+01:00") from None
    if moment.tzinfo is None:
        raise ValueError(f"{str(value)!r} has no time zone: add Z or an offset such as +01:00")
    return moment


def schedule_of(
    run_at: datetime | None,
    cron_expression: str | None,
    time_zone: str | None,
    *,
    spell: Spelling = option_spelling,
) -> job_pb2.Schedule | None:
    """`at` or `cron` (in `time_zone`); None when neither is given."""
    if run_at is not None and cron_expression is not None:
        raise ValueError(f"give {spell('at')} or {spell('cron')}, not both")
    if time_zone is not None and cron_expression is None:
        raise ValueError(f"{spell('time-zone')} goes with {spell('cron')}")
    if cron_expression is not None:
        return cron(cron_expression, time_zone=time_zone or "UTC")
    return at(run_at) if run_at is not None else None


def target_of(
    argv: Sequence[str],
    http_url: str | None,
    method: str,
    handler_name: str | None,
    payload: str,
    *,
    spell: Spelling = option_spelling,
) -> job_pb2.Target | None:
    """A program, a webhook or a handler; None when none is given, a ValueError when more than one is."""
    given = [
        spell(kind)
        for kind, value in (("command", argv), ("http", http_url), ("handler", handler_name))
        if value
    ]
    if len(given) > 1:
        raise ValueError(f"one target only, not {' and '.join(given)}")
    if argv:
        return command(list(argv))
    if http_url:
        return http(http_url, method=method)
    return handler(handler_name, payload.encode()) if handler_name else None


def job_fields(values: Mapping[str, Any], fields: JobFields) -> JobFields:
    """The job's other fields that `values` set (None: not given), added to `fields`."""
    if values["display_name"] is not None:
        fields["display_name"] = values["display_name"]
    if values["labels"]:
        fields["labels"] = values["labels"]
    if values["queue"] is not None:
        fields["queue"] = values["queue"]
    if values["priority"] is not None:
        fields["priority"] = PRIORITIES[values["priority"]]
    if values["max_attempts"] is not None:
        fields["retry_policy"] = retry_policy(values["max_attempts"])
    if values["execution_timeout"] is not None:
        fields["execution_timeout"] = values["execution_timeout"]
    return fields
