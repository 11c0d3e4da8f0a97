from __future__ import annotations

from datetime import UTC, datetime

from hypothesis import given
from hypothesis import strategies as st

from jobmesh.core.ids import new_job_id, new_run_id, schedule_window
from jobmesh.core.names import JOB_ID, RUN_ID


@given(st.datetimes(min_value=datetime(1970, 1, 1), max_value=datetime(9999, 12, 31), timezones=st.just(UTC)))
def test_a_run_id_locates_its_schedule_time(schedule_time: datetime) -> None:
    run_id = new_run_id(schedule_time)
    assert RUN_ID.match(run_id)
    window = schedule_window(run_id)
    assert window is not None
    assert window[0] <= schedule_time < window[1]


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
