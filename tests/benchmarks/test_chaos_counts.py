"""The chaos run's counts (`benchmarks/chaos_counts.py`): what counts as started twice, overlapping, early,
run again after a success, missing, and how lateness is split by fault window."""

from __future__ import annotations

import math

from benchmarks.chaos_counts import (
    NEVER,
    Start,
    StoredRun,
    Window,
    attempts_started_twice,
    early_starts,
    first_starts,
    late_runs,
    lateness_by_segment,
    missing_cron_occurrences,
    never_started,
    overlapping_runs,
    parse_command_records,
    parse_handler_records,
    segment,
    succeeded_run_again,
    summary,
)

S = 10**9  # a second, in ns


def test_handler_records_pair_each_end_with_its_latest_open_start_and_keep_cut_starts() -> None:
    lines = [
        "S jobs/a/runs/1 1 100",
        "S jobs/a/runs/1 1 150",  # the same attempt again, before the first one ended
        "E jobs/a/runs/1 1 160",
        "S jobs/b/runs/2 2 200",  # cut short by a kill: no end
        "E jobs/a/runs/1 1 170",
        "S jobs/c/runs/3 1",  # a line cut by a kill
    ]
    assert parse_handler_records(lines) == [
        Start("jobs/a/runs/1", 1, 100, 170),
        Start("jobs/a/runs/1", 1, 150, 160),
        Start("jobs/b/runs/2", 2, 200, None),
    ]


def test_command_records_give_each_copy_its_last_sign_of_life() -> None:
    lines = ["5 start", "5 alive 7", "9 start", "5 alive 8", "9 alive 10", "9 end 11", "12 start", "13 ali"]
    assert parse_command_records("r", lines) == [Start("r", 0, 5, 8), Start("r", 0, 9, 11), Start("r", 0, 12)]


def test_an_attempt_stamped_twice_counts_and_commands_count_their_starts_beyond_the_attempts() -> None:
    starts = [
        Start("a", 1, 1),
        Start("a", 1, 2),  # attempt 1 again
        Start("a", 2, 3),
        Start("b", 1, 1),
        Start("b", 2, 5),  # a retry: not twice
        Start("c", 0, 1),
        Start("c", 0, 9),
        Start("c", 0, 20),  # three copies of a command whose run had two attempts
        Start("d", 0, 1),
    ]
    assert attempts_started_twice(starts, {"a": 2, "b": 2, "c": 2, "d": 1}) == {"a": 1, "c": 1}


def test_a_start_while_an_earlier_one_of_its_run_is_alive_overlaps() -> None:
    starts = [
        Start("killed-then-retried", 1, 0, 5 * S),
        Start("killed-then-retried", 2, 6 * S, 20 * S),  # after the first one's last sign of life
        Start("orphan", 1, 0, 30 * S),  # outlived its executor
        Start("orphan", 2, 16 * S, 36 * S),
        Start("orphan", 3, 40 * S, 41 * S),
        Start("instants", 1, 7),
        Start("instants", 2, 7),  # two instants at once: a duplicate, not an overlap
    ]
    assert overlapping_runs(starts) == {"orphan": 1}


def test_a_start_before_its_schedule_time_beyond_the_database_precision_is_early() -> None:
    schedule = {"a": 10 * S, "b": 10 * S}
    starts = [
        Start("a", 1, 10 * S - 2_000),
        Start("a", 2, 11 * S),
        Start("b", 1, 10 * S - 500),
        Start("x", 1, 0),
    ]
    assert early_starts(starts, schedule) == [Start("a", 1, 10 * S - 2_000)]


def test_something_run_after_a_success_is_a_succeeded_attempt_run_again() -> None:
    runs = {
        "retried-after-success": StoredRun("j", "SUCCEEDED", 0, 2, (1, 2)),
        "started-after-success": StoredRun("j", "SUCCEEDED", 0, 1, (1,)),
        "again-same-attempt": StoredRun("j", "SUCCEEDED", 0, 1, (1,)),
        "fine": StoredRun("j", "SUCCEEDED", 0, 2, (2,)),
        "failed": StoredRun("j", "FAILED", 0, 3),
    }
    starts = [
        Start("started-after-success", 1, 1, 2),
        Start("started-after-success", 2, 5),  # not in the database, but it started
        Start("again-same-attempt", 1, 1, 2),
        Start("again-same-attempt", 1, 3, 4),
        Start("fine", 1, 1),
        Start("fine", 2, 5, 6),
    ]
    assert succeeded_run_again(runs, starts) == {
        "retried-after-success": 1,
        "started-after-success": 1,
        "again-same-attempt": 1,
    }


def test_the_first_start_is_the_earliest_whatever_the_attempt_and_the_rest_never_started() -> None:
    first = first_starts([Start("a", 2, 9), Start("a", 1, 4), Start("b", 1, 6)])
    assert first == {"a": 4, "b": 6}
    assert never_started({"a": 0, "b": 0, "c": 0}, first) == ["c"]


def test_cron_occurrences_are_expected_on_multiples_of_their_period_inside_their_span() -> None:
    span = (int(100.5 * S), int(110.5 * S))  # occurrences at 102, 104, ..., 110 for a 2 s period
    expected, missing, duplicated = missing_cron_occurrences(
        {"every-2": 2, "every-5": 5},
        {"every-2": span, "every-5": span},
        {"every-2": [102 * S, 104 * S, 104 * S, 108 * S, 110 * S], "every-5": [105 * S, 110 * S]},
    )
    assert (expected, missing, duplicated) == (7, 1, 1)


def test_lateness_counts_by_the_window_its_run_was_due_in() -> None:
    windows = [Window("kafka", 10 * S, 20 * S), Window("postgres", 50 * S, 60 * S)]
    assert segment(15 * S, windows, 5) == ["in:kafka"]
    assert segment(20 * S, windows, 5) == ["in:kafka"]  # the end belongs to the window
    assert segment(24 * S, windows, 5) == ["outside", "after:kafka"]
    assert segment(40 * S, windows, 5) == ["outside", "quiet"]
    due = {"in-kafka": 12 * S, "late-after": 22 * S, "quiet": 40 * S, "never": 55 * S, "on-time": 52 * S}
    first = {"in-kafka": 15 * S, "late-after": 22 * S + S // 2, "quiet": 40 * S + S // 10, "on-time": 52 * S}
    assert lateness_by_segment(due, first, windows, 5) == {
        "in:kafka": [3.0],
        "outside": [0.5, 0.1],
        "after:kafka": [0.5],
        "quiet": [0.1],
        "in:postgres": [NEVER, 0.0],
    }


def test_late_runs_are_profiled_by_kind_and_due_second_from_their_windows_edge() -> None:
    windows = [Window("kafka", 10 * S, 20 * S), Window("postgres", 50 * S, 60 * S)]
    due = {
        "a": 12 * S,
        "b": 21 * S + S // 2,
        "c": 21 * S,
        "on-time": 22 * S,
        "never": 55 * S,
        "quiet": 40 * S,
    }
    first = {"a": 15 * S, "b": 26 * S, "c": 23 * S + S // 2, "on-time": 23 * S, "quiet": 43 * S}
    kinds = {"a": "run_at", "b": "cron", "c": "immediate", "on-time": "cron"}
    found = late_runs(
        due,
        first,
        dispatched={"b": 25 * S},
        claimed={"b": 25 * S, "c": 23 * S + S // 10},
        kinds=kinds,
        windows=windows,
        after_s=5,
        keep=1,
    )
    assert set(found) == {"in:kafka", "after:kafka", "in:postgres"}  # the quiet run is in no window's profile
    assert found["in:kafka"]["by_kind"] == {"run_at": 1}
    assert found["in:kafka"]["by_due_second"] == {2: 1}
    assert found["after:kafka"]["by_kind"] == {"cron": 1, "immediate": 1}
    assert found["after:kafka"]["by_due_second"] == {1: 2}
    assert found["after:kafka"]["dispatched_late_by_kind"] == {"cron": 1}  # b went out 3.5 s late
    assert found["after:kafka"]["claimed_late_by_kind"] == {"cron": 1, "immediate": 1}
    assert found["after:kafka"]["latest"] == [["b", "cron", 1.5, 4.5, 3.5]]  # only the latest kept
    assert found["in:postgres"]["latest"] == [["never", "?", 5.0, NEVER, None]]


def test_a_run_never_started_is_infinitely_late_in_the_summary() -> None:
    figures = summary([0.1] * 98 + [3.0, NEVER])
    assert figures["due"] == 100
    assert figures["started"] == 99
    assert figures["p50"] == 0.1
    assert figures["p99"] == 3.0
    assert figures["max"] == NEVER
    assert figures["within_2s_pct"] == 98.0
    assert math.isnan(summary([])["p99"])
