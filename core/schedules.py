"""Cron expressions and the next occurrence of a schedule, in the schedule's time zone."""

from __future__ import annotations

import re
from dataclasses import dataclass
from datetime import UTC, datetime
from zoneinfo import ZoneInfo, ZoneInfoNotFoundError

from croniter import croniter

MACROS = frozenset({"@yearly", "@annually", "@monthly", "@weekly", "@daily", "@midnight", "@hourly"})
MAX_EXPRESSION_LENGTH = 256
# Each field's name and span, the leading seconds field (6-field expressions) first.
_FIELD_SPANS = (
    ("second", 60),
    ("minute", 60),
    ("hour", 24),
    ("day of month", 31),
    ("month", 12),
    ("day of week", 7),
)


class CronError(ValueError):
    """The expression or time zone is not usable; the message says why."""


@dataclass(frozen=True, slots=True)
class CronSpec:
    expression: str
    time_zone: ZoneInfo

    @property
    def has_seconds(self) -> bool:
        return not self.expression.startswith("@") and len(self.expression.split()) == 6


def parse_time_zone(name: str) -> ZoneInfo:
    if not name:
        return ZoneInfo("UTC")
    if len(name) > 64 or "\x00" in name or name.startswith(("/", ".")) or ".." in name:
        raise CronError(f"{name!r} is not an IANA time zone")
    try:
        return ZoneInfo(name)
    except (ZoneInfoNotFoundError, ValueError, OSError):
        raise CronError(f"{name!r} is not an IANA time zone") from None


def parse_cron(expression: str, time_zone: str) -> CronSpec:
    """Accepts 5 fields, 6 fields with leading seconds, or a macro such as `@hourly`."""
    text = " ".join(expression.split())
    if not text:
        raise CronError("the expression is empty")
    if len(text) > MAX_EXPRESSION_LENGTH:
        raise CronError(f"the expression is longer than {MAX_EXPRESSION_LENGTH} characters")
    if text.startswith("@"):
        if text.lower() not in MACROS:
            raise CronError(f"unknown macro {text!r}; known: {', '.join(sorted(MACROS))}")
        text = text.lower()
    else:
        fields = text.split()
        if len(fields) not in (5, 6):
            raise CronError(f"expected 5 fields (or 6 with leading seconds), got {len(fields)}")
        _check_steps(fields)
        if not _is_valid(text):
            raise CronError(f"{text!r} is not a valid cron expression")
    spec = CronSpec(text, parse_time_zone(time_zone))
    try:
        next_occurrence(spec, datetime(2000, 1, 1, tzinfo=UTC))
    except CronError:
        raise
    except Exception:  # croniter raises several types for expressions that can never match
        raise CronError(f"{text!r} never matches") from None
    return spec


def _check_steps(fields: list[str]) -> None:
    """A step (`*/N`) longer than its field's span can never repeat: croniter takes it, and its arithmetic
    on a step of 20 digits is not what anyone meant."""
    spans = _FIELD_SPANS[-len(fields) :]
    for (name, span), field in zip(spans, fields, strict=True):
        for step in re.findall(r"/(\d+)", field):
            if len(step) > 3 or not 1 <= int(step) <= span:
                raise CronError(f"the step /{step[:20]} of the {name} field must be 1 to {span}")


def _is_valid(text: str) -> bool:
    try:
        return bool(croniter.is_valid(text, second_at_beginning=len(text.split()) == 6))
    except Exception:  # croniter's validator itself can raise on odd input
        return False


def next_occurrence(spec: CronSpec, after: datetime) -> datetime:
    """The first occurrence strictly after `after`, as an aware UTC datetime.

    Daylight saving: a local time that does not exist (clocks jump forward) runs at the next valid instant;
    a local time that happens twice (clocks fall back) runs once, on its first pass.
    """
    cursor = after
    while True:
        iterator = croniter(
            spec.expression,
            cursor.astimezone(spec.time_zone),
            second_at_beginning=spec.has_seconds,
            max_years_between_matches=50,
        )
        value = iterator.get_next(datetime)
        if not isinstance(value, datetime):
            raise CronError(f"{spec.expression!r} has no next occurrence")
        if not _second_pass(value, spec.time_zone):
            return value.astimezone(UTC)
        cursor = value


def _second_pass(value: datetime, zone: ZoneInfo) -> bool:
    """True for an instant on the second pass of a repeated local time (after clocks fell back)."""
    wall = value.replace(tzinfo=None)
    first = wall.replace(fold=0, tzinfo=zone).utcoffset()
    second = wall.replace(fold=1, tzinfo=zone).utcoffset()
    return first != second and value.utcoffset() == second
