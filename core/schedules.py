"""Cron expressions and the next occurrence of a schedule, in the schedule's time zone."""

from __future__ import annotations

import re
from dataclasses import dataclass
from datetime import UTC, datetime
from functools import lru_cache
from zoneinfo import ZoneInfo, ZoneInfoNotFoundError

from croniter import croniter

MACROS = frozenset({"@yearly", "@annually", "@monthly", "@weekly", "@daily", "@midnight", "@hourly"})
MAX_EXPRESSION_LENGTH = 256


@dataclass(frozen=True, slots=True)
class _Field:
    """One field of an expression: the values it takes and the span of its steps."""

    name: str
    low: int
    high: int
    span: int
    names: tuple[str, ...] = ()  # the names of its values from `low` on (jan, feb...), in any case
    extras: str = ""  # what else it takes, for the error message


_MONTHS = ("jan", "feb", "mar", "apr", "may", "jun", "jul", "aug", "sep", "oct", "nov", "dec")
_WEEKDAYS = ("sun", "mon", "tue", "wed", "thu", "fri", "sat")
# The leading seconds field (6-field expressions) first. Sunday is 0 or 7.
_FIELDS = (
    _Field("second", 0, 59, 60),
    _Field("minute", 0, 59, 60),
    _Field("hour", 0, 23, 24),
    _Field("day of month", 1, 31, 31, extras=" or L"),
    _Field("month", 1, 12, 12, _MONTHS, " or jan-dec"),
    _Field("day of week", 0, 7, 7, _WEEKDAYS, " or sun-sat"),
)
_ELEMENT = re.compile(r"^(?P<first>[^-/]+)(?:-(?P<last>[^-/]+))?(?:/(?P<step>[^/]*))?$")


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


# A pure function of two strings, and ~150 us a call: every job read shows its next fire time (the API's
# `next_run_time`), so the specs of the expressions in use are kept. A refused expression raises: not kept.
@lru_cache(maxsize=4096)
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
            raise CronError(_field_problem(fields) or f"{text!r} is not a valid cron expression")
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
    for spec, field in zip(_FIELDS[-len(fields) :], fields, strict=True):
        for step in re.findall(r"/(\d+)", field):
            if len(step) > 3 or not 1 <= int(step) <= spec.span:
                raise CronError(f"the step /{step[:20]} of the {spec.name} field must be 1 to {spec.span}")


def _field_problem(fields: list[str]) -> str | None:
    """What is wrong with the first field that is wrong, naming the field and its range, such as `minute
    field: 61 is out of range 0-59`; None when no single field is to blame (croniter's own reasons)."""
    for spec, field in zip(_FIELDS[-len(fields) :], fields, strict=True):
        for element in field.split(","):
            if problem := _element_problem(spec, element):
                return f"{spec.name} field: {problem}"
    return None


def _element_problem(spec: _Field, element: str) -> str | None:
    """An element is `*`, `?`, a value, or a range `a-b`, each maybe with a step `/n`; day of month takes `L`
    and day of week `n#k` and `nL` too, which croniter judges itself."""
    shown = repr(element[:20])
    match = _ELEMENT.match(element)
    if match is None:
        return f"{shown} is not a value, a range or a step"
    first, last, step = match["first"], match["last"], match["step"]
    if step is not None and not step.isdigit():
        return f"{step[:20]!r} is not a step (1 to {spec.span})"
    if first in ("*", "?") and last is None:
        return None
    for part in (first, last):
        if part is None or _is_special(spec, part):
            continue
        value = _value(spec, part)
        if value is None:
            return f"{part[:20]!r} is not a value in {spec.low}-{spec.high}{spec.extras}"
        if not spec.low <= value <= spec.high:
            return f"{part[:20]} is out of range {spec.low}-{spec.high}"
    return None


def _is_special(spec: _Field, part: str) -> bool:
    """`L`, `5L` or `5#3` (last day, last Friday, third Friday): forms that croniter checks itself."""
    lowered = part.lower()
    if spec.name == "day of month":
        return lowered == "l"
    return spec.name == "day of week" and ("#" in lowered or lowered.endswith("l"))


def _value(spec: _Field, part: str) -> int | None:
    if part.isdigit():
        return int(part[:9])
    if part.lower() in spec.names:
        return spec.low + spec.names.index(part.lower())
    return None


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
