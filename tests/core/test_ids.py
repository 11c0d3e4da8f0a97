from __future__ import annotations

import random
from datetime import UTC, datetime, timedelta

from hypothesis import given, settings
from hypothesis import strategies as st

from jobmesh.core.ids import new_job_id, new_run_id, schedule_window
from jobmesh.core.names import JOB_ID, RUN_ID

EARLIEST, LATEST = datetime(1970, 1, 1, tzinfo=UTC), datetime(9999, 12, 31, tzinfo=UTC)
# Times checked in one plain loop: hypothesis's own cost per example (~3 ms) is a thousand times the check's,
# so it searches the edges (its draws favour limits and round values) and the loop covers the range.
SWEPT_TIMES = 20_000


def assert_locates(schedule_time: datetime) -> None:
    run_id = new_run_id(schedule_time)
    assert RUN_ID.match(run_id)
    window = schedule_window(run_id)
    assert window is not None, run_id
    assert window[0] <= schedule_time < window[1], (schedule_time, window)


@settings(max_examples=1_500)
@given(
    st.datetimes(
        min_value=EARLIEST.replace(tzinfo=None), max_value=LATEST.replace(tzinfo=None), timezones=st.just(UTC)
    )
)
def test_a_run_id_locates_its_schedule_time(schedule_time: datetime) -> None:
    assert_locates(schedule_time)


def test_run_ids_locate_schedule_times_across_the_whole_range() -> None:
    draw = random.Random(20_000)
    span = (LATEST - EARLIEST) // timedelta(microseconds=1)
    for _ in range(SWEPT_TIMES):
        assert_locates(EARLIEST + timedelta(microseconds=draw.randrange(span + 1)))
    for edge in (
        EARLIEST,
        LATEST,
        EARLIEST + timedelta(microseconds=999),
        LATEST - timedelta(microseconds=1),
    ):
        assert_locates(edge)


def test_run_ids_sort_by_schedule_time_and_differ() -> None:
    early, late = datetime(2026, 1, 1, tzinfo=UTC), datetime(2026, 1, 1, 0, 0, 0, 1000, tzinfo=UTC)
    assert new_run_id(early) < new_run_id(late)
    assert new_run_id(early) != new_run_id(early)


def test_foreign_ids_have_no_window() -> None:
    assert schedule_window("r1") is None
    assert schedule_window("u" * 26) is None  # 'u' is not in the alphabet
    assert schedule_window("z" * 26) is None  # past datetime's range


def test_job_ids_are_valid_names() -> None:
    assert JOB_ID.match(new_job_id())
