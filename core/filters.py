"""A documented subset of AIP-160 filters and AIP-132 `order_by`, parsed into typed values.

Grammar: `comparison (AND comparison)*`, where a comparison is `field op value` with op one of
`= != < <= > >=`, or `labels:KEY` (has). Values are bare words, numbers or quoted strings; timestamps are
RFC 3339 in quotes. A field that takes wildcards (`display_name`, `name` of jobs) reads `*` in an `=` or `!=`
value as any characters, ignoring case. Each resource declares its fields and their types; anything else is
INVALID_ARGUMENT.
"""

from __future__ import annotations

import enum
import operator
import re
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any

from jobmesh.core.audit import AuditAction
from jobmesh.core.errors import InvalidArgument
from jobmesh.core.records import JobState, Priority, RunRecord, RunState, RunTrigger, ScheduleKind

MAX_FILTER_LENGTH = 2048
MAX_COMPARISONS = 32
INT32_MIN, INT32_MAX = -(2**31), 2**31 - 1


class FieldType(enum.Enum):
    STRING = "string"
    INTEGER = "integer"
    TIMESTAMP = "timestamp"
    JOB_NAME = "job name"


@dataclass(frozen=True, slots=True)
class FieldSpec:
    type: FieldType
    choices: frozenset[str] | None = None  # for enum-like strings, the allowed upper-case names
    orderable: bool = False
    wildcards: bool = False

    def operators(self) -> frozenset[str]:
        if self.type in (FieldType.INTEGER, FieldType.TIMESTAMP):
            return frozenset({"=", "!=", "<", "<=", ">", ">="})
        return frozenset({"=", "!="})


@dataclass(frozen=True, slots=True)
class Wildcard:
    """A string value in which each `*` matches any run of characters, ignoring case."""

    pattern: str


FilterValue = str | int | datetime | Wildcard


@dataclass(frozen=True, slots=True)
class Comparison:
    """`field op value`. For `labels.KEY` the field is `labels` and `label_key` is KEY; `:` means has."""

    field: str
    operator: str
    value: FilterValue | None
    label_key: str | None = None


@dataclass(frozen=True, slots=True)
class OrderKey:
    field: str
    descending: bool


@dataclass(frozen=True, slots=True)
class ListQuery:
    """`namespaces` scopes the list to the namespaces the caller may read, whatever the filter says; None
    means every namespace."""

    comparisons: tuple[Comparison, ...]
    order_by: tuple[OrderKey, ...]
    page_size: int
    page_token: str
    namespaces: frozenset[str] | None = None
    # Runs: leave out those still SCHEDULED for after this instant (`is_upcoming`); None keeps them.
    upcoming_after: datetime | None = None


def is_upcoming(run: RunRecord, now: datetime) -> bool:
    """A run made ahead of its time and not yet due: `ListRuns` and `WatchRuns` show it only when asked
    (`show_upcoming`). A retry waiting out its backoff is not upcoming: its schedule time has passed."""
    return run.state is RunState.SCHEDULED and run.schedule_time > now


_TOKEN = re.compile(
    r"""\s*(?:
        (?P<string>"(?:[^"\\]|\\.)*"|'(?:[^'\\]|\\.)*')
      | (?P<op><=|>=|!=|=|<|>|:)
      | (?P<paren>[()])
      | (?P<word>[A-Za-z0-9_.\-+/*@]+)
    )""",
    re.VERBOSE,
)
_LABEL_KEY = re.compile(r"^[a-z0-9]([a-z0-9_.\-/]{0,61}[a-z0-9])?$|^[a-z0-9]$")
_JOB_NAME = re.compile(r"^jobs/([a-z][a-z0-9-]{0,62})$")
_JOB_NAME_PATTERN = re.compile(r"^jobs/[a-z0-9*-]{1,63}$")


def _tokens(text: str, field: str) -> list[tuple[str, str]]:
    out: list[tuple[str, str]] = []
    position = 0
    while position < len(text):
        if text[position:].strip() == "":
            break
        match = _TOKEN.match(text, position)
        if match is None or match.end() == position:
            raise InvalidArgument.single(field, f"unexpected character at offset {position}")
        kind = match.lastgroup or ""
        out.append((kind, match.group(kind)))
        position = match.end()
    return out


def _unquote(raw: str) -> str:
    body = raw[1:-1]
    return re.sub(r"\\(.)", r"\1", body)


def parse_filter(
    text: str, fields: Mapping[str, FieldSpec], *, field: str = "filter"
) -> tuple[Comparison, ...]:
    """Parses `text` against a resource's `fields`; raises InvalidArgument naming `field`."""
    if len(text) > MAX_FILTER_LENGTH:
        raise InvalidArgument.single(field, f"longer than {MAX_FILTER_LENGTH} characters")
    if "\x00" in text:
        raise InvalidArgument.single(field, "contains a NUL character")
    tokens = _tokens(text, field)
    comparisons: list[Comparison] = []
    index = 0
    while index < len(tokens):
        if comparisons:
            kind, word = tokens[index]
            if kind != "word" or word != "AND":
                raise InvalidArgument.single(field, f"expected AND, got {word!r} (only AND is supported)")
            index += 1
        comparison, index = _comparison(tokens, index, fields, field)
        comparisons.append(comparison)
        if len(comparisons) > MAX_COMPARISONS:
            raise InvalidArgument.single(field, f"more than {MAX_COMPARISONS} comparisons")
    return tuple(comparisons)


def _comparison(
    tokens: list[tuple[str, str]], index: int, fields: Mapping[str, FieldSpec], field: str
) -> tuple[Comparison, int]:
    if index + 1 >= len(tokens):
        raise InvalidArgument.single(field, "incomplete comparison: expected `field operator value`")
    (name_kind, name), (op_kind, operator) = tokens[index], tokens[index + 1]
    if name_kind != "word":
        raise InvalidArgument.single(field, f"expected a field name, got {name!r}")
    if op_kind != "op":
        raise InvalidArgument.single(field, f"expected an operator after {name!r}, got {operator!r}")
    if name == "labels" and operator == ":" and "labels" in fields:
        if index + 2 >= len(tokens):
            raise InvalidArgument.single(field, "`labels:` needs a label key")
        return Comparison("labels", ":", None, _label_key(tokens[index + 2][1], field)), index + 3
    if index + 2 >= len(tokens):
        raise InvalidArgument.single(field, f"missing value after `{name} {operator}`")
    value_kind, raw = tokens[index + 2]
    if value_kind not in ("word", "string"):
        raise InvalidArgument.single(field, f"expected a value after `{name} {operator}`, got {raw!r}")
    text = _unquote(raw) if value_kind == "string" else raw
    if name.startswith("labels.") and "labels" in fields:
        if operator not in ("=", "!="):
            raise InvalidArgument.single(field, f"labels support = and !=, not {operator!r}")
        return Comparison(
            "labels", operator, text, _label_key(name.removeprefix("labels."), field)
        ), index + 3
    spec = fields.get(name)
    if spec is None or name == "labels":
        known = ", ".join(sorted(fields))
        raise InvalidArgument.single(field, f"unknown field {name!r}; known fields: {known}")
    if operator not in spec.operators():
        raise InvalidArgument.single(field, f"{name!r} does not support {operator!r}")
    return Comparison(name, operator, _typed_value(name, spec, text, field)), index + 3


def _label_key(key: str, field: str) -> str:
    if not _LABEL_KEY.match(key):
        raise InvalidArgument.single(field, f"{key!r} is not a valid label key")
    return key


def _typed_value(name: str, spec: FieldSpec, text: str, field: str) -> FilterValue:
    if spec.wildcards and "*" in text:
        return _wildcard(name, spec, text, field)
    if spec.type is FieldType.INTEGER:
        try:
            value = int(text)
        except ValueError:
            raise InvalidArgument.single(field, f"{name!r} takes an integer, got {text!r}") from None
        if not INT32_MIN <= value <= INT32_MAX:
            raise InvalidArgument.single(field, f"{name!r} takes a value from {INT32_MIN} to {INT32_MAX}")
        return value
    if spec.type is FieldType.TIMESTAMP:
        return parse_timestamp(text, field, name)
    if spec.type is FieldType.JOB_NAME:
        match = _JOB_NAME.match(text)
        if match is None:
            raise InvalidArgument.single(field, f"{name!r} takes a job name `jobs/{{job}}`, got {text!r}")
        return match.group(1)
    if spec.choices is not None:
        upper = text.upper()
        if upper not in spec.choices:
            raise InvalidArgument.single(
                field, f"{name!r} must be one of {', '.join(sorted(spec.choices))}, got {text!r}"
            )
        return upper
    if len(text) > 256:
        raise InvalidArgument.single(field, f"value for {name!r} is longer than 256 characters")
    return text


def _wildcard(name: str, spec: FieldSpec, text: str, field: str) -> Wildcard:
    if len(text) > 256:
        raise InvalidArgument.single(field, f"value for {name!r} is longer than 256 characters")
    if spec.type is FieldType.JOB_NAME:
        if not _JOB_NAME_PATTERN.match(text):
            raise InvalidArgument.single(field, f"{name!r} takes a pattern `jobs/{{job}}`, got {text!r}")
        text = text.removeprefix("jobs/")
    return Wildcard(text)


def parse_timestamp(text: str, field: str, name: str) -> datetime:
    try:
        value = datetime.fromisoformat(text.replace("Z", "+00:00").replace("z", "+00:00"))
    except ValueError:
        raise InvalidArgument.single(
            field, f"{name!r} takes an RFC 3339 timestamp, got {text[:64]!r}"
        ) from None
    if value.tzinfo is None:
        raise InvalidArgument.single(field, f"{name!r} timestamp needs a time zone offset, got {text[:64]!r}")
    try:
        return value.astimezone(UTC)
    except OverflowError:
        raise InvalidArgument.single(
            field, f"{name!r} timestamp out of range (years 0001 to 9999 in UTC), got {text[:64]!r}"
        ) from None


def parse_order_by(
    text: str, fields: Mapping[str, FieldSpec], default: tuple[OrderKey, ...], *, field: str = "order_by"
) -> tuple[OrderKey, ...]:
    if not text.strip():
        return default
    if len(text) > 256:
        raise InvalidArgument.single(field, "longer than 256 characters")
    keys: list[OrderKey] = []
    for part in text.split(","):
        words = part.split()
        if not words or len(words) > 2 or (len(words) == 2 and words[1].lower() not in ("asc", "desc")):
            raise InvalidArgument.single(field, f"expected `field [asc|desc]`, got {part.strip()!r}")
        spec = fields.get(words[0])
        if spec is None or not spec.orderable:
            allowed = ", ".join(sorted(name for name, s in fields.items() if s.orderable))
            raise InvalidArgument.single(field, f"cannot order by {words[0]!r}; allowed: {allowed}")
        if any(key.field == words[0] for key in keys):
            raise InvalidArgument.single(field, f"{words[0]!r} appears twice")
        keys.append(OrderKey(words[0], len(words) == 2 and words[1].lower() == "desc"))
    return tuple(keys)


def _names(enum_type: type[enum.StrEnum]) -> frozenset[str]:
    return frozenset(member.value for member in enum_type)


def _job_fields() -> dict[str, FieldSpec]:
    return {
        "namespace": FieldSpec(FieldType.STRING),
        "state": FieldSpec(FieldType.STRING, _names(JobState)),
        "schedule": FieldSpec(FieldType.STRING, _names(ScheduleKind)),
        "priority": FieldSpec(FieldType.STRING, _names(Priority)),
        "queue": FieldSpec(FieldType.STRING),
        "display_name": FieldSpec(FieldType.STRING, orderable=True, wildcards=True),
        "name": FieldSpec(FieldType.JOB_NAME, orderable=True, wildcards=True),
        "labels": FieldSpec(FieldType.STRING),
        "create_time": FieldSpec(FieldType.TIMESTAMP, orderable=True),
        "update_time": FieldSpec(FieldType.TIMESTAMP, orderable=True),
        "next_run_time": FieldSpec(FieldType.TIMESTAMP, orderable=True),
    }


def _run_fields() -> dict[str, FieldSpec]:
    return {
        "namespace": FieldSpec(FieldType.STRING),
        "state": FieldSpec(FieldType.STRING, _names(RunState)),
        "job": FieldSpec(FieldType.JOB_NAME),
        "attempt": FieldSpec(FieldType.INTEGER),
        "trigger": FieldSpec(FieldType.STRING, _names(RunTrigger)),
        "executor": FieldSpec(FieldType.STRING),
        "labels": FieldSpec(FieldType.STRING),
        "schedule_time": FieldSpec(FieldType.TIMESTAMP, orderable=True),
        "due_time": FieldSpec(FieldType.TIMESTAMP, orderable=True),
        "start_time": FieldSpec(FieldType.TIMESTAMP, orderable=True),
        "end_time": FieldSpec(FieldType.TIMESTAMP, orderable=True),
        "create_time": FieldSpec(FieldType.TIMESTAMP, orderable=True),
        "update_time": FieldSpec(FieldType.TIMESTAMP, orderable=True),
    }


def _audit_fields() -> dict[str, FieldSpec]:
    return {
        "namespace": FieldSpec(FieldType.STRING),
        "actor": FieldSpec(FieldType.STRING),
        "action": FieldSpec(FieldType.STRING, _names(AuditAction)),
        "resource": FieldSpec(FieldType.STRING),
        "job": FieldSpec(FieldType.JOB_NAME),
        "request_id": FieldSpec(FieldType.STRING),
        "time": FieldSpec(FieldType.TIMESTAMP, orderable=True),
    }


JOB_FIELDS: Mapping[str, FieldSpec] = _job_fields()
RUN_FIELDS: Mapping[str, FieldSpec] = _run_fields()
AUDIT_FIELDS: Mapping[str, FieldSpec] = _audit_fields()
DEFAULT_JOB_ORDER = (OrderKey("create_time", descending=True),)
DEFAULT_RUN_ORDER = (OrderKey("schedule_time", descending=True),)
DEFAULT_AUDIT_ORDER = (OrderKey("time", descending=True),)


# Run fields whose record attribute has another name, and those whose unset value reads as a value (an
# executor nobody took yet is "", as in the API's message).
_RUN_ATTRIBUTES = {"job": "job_id"}
_UNSET_READS_AS = {"executor": ""}
_COMPARE: Mapping[str, Callable[[Any, Any], bool]] = {
    "=": operator.eq,
    "!=": operator.ne,
    "<": operator.lt,
    "<=": operator.le,
    ">": operator.gt,
    ">=": operator.ge,
}


def run_matches(comparisons: Sequence[Comparison], run: RunRecord, labels: Mapping[str, str]) -> bool:
    """Whether a run passes a filter, answered as the store's query answers it (a live feed filters in
    memory; tests/adapters/store/test_feed.py holds them to it): a comparison with an unset time is false, an
    unset executor is "", and `labels.k != v` holds when k is absent."""
    return all(_holds(comparison, run, labels) for comparison in comparisons)


def in_namespaces(namespaces: frozenset[str] | None, namespace: str) -> bool:
    """Whether a resource of `namespace` lies in a `ListQuery.namespaces` scope."""
    return namespaces is None or namespace in namespaces


def _holds(comparison: Comparison, run: RunRecord, labels: Mapping[str, str]) -> bool:
    if comparison.field == "labels":
        if comparison.operator == ":":
            return comparison.label_key in labels
        equal = labels.get(comparison.label_key or "") == comparison.value
        return equal if comparison.operator == "=" else not equal
    value = getattr(run, _RUN_ATTRIBUTES.get(comparison.field, comparison.field))
    if value is None:
        value = _UNSET_READS_AS.get(comparison.field)
    return value is not None and _COMPARE[comparison.operator](value, comparison.value)
