from __future__ import annotations

from datetime import UTC, datetime

import pytest

from jobmesh.core.errors import InvalidArgument
from jobmesh.core.filters import (
    DEFAULT_JOB_ORDER,
    JOB_FIELDS,
    RUN_FIELDS,
    Comparison,
    OrderKey,
    parse_filter,
    parse_order_by,
)


def test_parses_a_conjunction_into_typed_values() -> None:
    parsed = parse_filter(
        'state = active AND labels.team="billing" AND create_time > "2024-01-01T00:00:00Z" AND labels:tier',
        JOB_FIELDS,
    )
    assert parsed == (
        Comparison("state", "=", "ACTIVE"),
        Comparison("labels", "=", "billing", "team"),
        Comparison("create_time", ">", datetime(2024, 1, 1, tzinfo=UTC)),
        Comparison("labels", ":", None, "tier"),
    )


def test_run_fields_take_integers_and_job_names() -> None:
    assert parse_filter('attempt >= 2 AND job = "jobs/nightly"', RUN_FIELDS) == (
        Comparison("attempt", ">=", 2),
        Comparison("job", "=", "nightly"),
    )


def test_empty_filter_matches_everything() -> None:
    assert parse_filter("  ", JOB_FIELDS) == ()


@pytest.mark.parametrize(
    ("text", "complaint"),
    [
        ("colour = red", "unknown field"),
        ("state", "incomplete"),
        ("state =", "missing value"),
        ("state = NOPE", "must be one of"),
        ("state = ACTIVE OR state = PAUSED", "only AND"),
        ("state > ACTIVE", "does not support"),
        ('create_time > "yesterday"', "RFC 3339"),
        ('create_time > "2024-01-01T00:00:00"', "time zone"),
        ("labels.Bad = x", "not a valid label key"),
        ('job = "nightly"', "jobs/{job}"),
        ("(state = ACTIVE)", "field name"),
        ("state = ACTIVE AND", "incomplete"),
        ('display_name = "a\x00b"', "NUL"),
    ],
)
def test_bad_filters_say_what_is_wrong(text: str, complaint: str) -> None:
    fields = RUN_FIELDS if text.startswith("job ") else JOB_FIELDS
    with pytest.raises(InvalidArgument) as caught:
        parse_filter(text, fields)
    assert caught.value.violations[0].field == "filter"
    assert complaint in caught.value.violations[0].description


def test_order_by() -> None:
    assert parse_order_by("", JOB_FIELDS, DEFAULT_JOB_ORDER) == DEFAULT_JOB_ORDER
    assert parse_order_by("display_name desc, name", JOB_FIELDS, DEFAULT_JOB_ORDER) == (
        OrderKey("display_name", descending=True),
        OrderKey("name", descending=False),
    )
    for bad in ("state", "name sideways", "name, name", ","):
        with pytest.raises(InvalidArgument):
            parse_order_by(bad, JOB_FIELDS, DEFAULT_JOB_ORDER)
