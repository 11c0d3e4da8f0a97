"""Flow control's decisions: concurrency keys, queue concurrency limits, queue pacing, their settings and
their validation."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import pytest

from jobmesh.core.errors import InvalidConfig
from jobmesh.core.flow_control import (
    FLOW_LEAD,
    KEY_RETRY,
    MAX_CONCURRENCY_KEY,
    Admitted,
    Concurrency,
    Deferred,
    FlowCandidate,
    Pacing,
    concurrency_of,
    concurrency_problems,
    decide_flow,
    parse_queue_limits,
    parse_queue_rates,
)
from jobmesh.v1 import job_pb2

NOW = datetime(2026, 12, 5, 12, tzinfo=UTC)
MS = timedelta(milliseconds=1)


def candidate(
    name: str, *, key: str | None = None, limit: int = 1, queue: str = "q", due: datetime = NOW
) -> FlowCandidate:
    return FlowCandidate(("job", name), due, queue, Concurrency(key, limit) if key else None)


def test_a_key_admits_up_to_its_limit_counting_the_running_and_the_batch() -> None:
    batch = [candidate(n, key="customer-1", limit=3) for n in "abcd"]
    decisions, changed = decide_flow(batch, NOW, running={"customer-1": 1}, next_starts={}, rates={})
    assert [decisions[("job", n)] for n in "abcd"] == [
        Admitted(NOW),
        Admitted(NOW),
        Deferred(NOW + KEY_RETRY),
        Deferred(NOW + KEY_RETRY),
    ]
    assert changed == {}


def test_keys_are_independent_and_a_run_without_key_is_admitted() -> None:
    batch = [candidate("a", key="k1"), candidate("b", key="k2"), candidate("c"), candidate("d", key="k1")]
    decisions, _ = decide_flow(batch, NOW, running={}, next_starts={}, rates={})
    assert [type(decisions[("job", n)]) for n in "abcd"] == [Admitted, Admitted, Admitted, Deferred]


def test_a_paced_queue_spaces_its_starts_and_defers_those_beyond_the_lead() -> None:
    pacing = Pacing(10)
    batch = [candidate(str(n)) for n in range(8)]
    decisions, changed = decide_flow(batch, NOW, running={}, next_starts={"q": None}, rates={"q": pacing})
    starts = [decisions[("job", str(n))] for n in range(8)]
    assert starts[:6] == [Admitted(NOW + n * 100 * MS) for n in range(6)]  # within the 500 ms lead
    assert starts[6:] == [Deferred(NOW + 600 * MS - FLOW_LEAD)] * 2
    assert changed == {"q": NOW + 600 * MS}


def test_pacing_continues_from_the_queue_s_next_start_and_never_starts_early() -> None:
    later = NOW + timedelta(seconds=3)
    batch = [candidate("early"), candidate("due-later", due=NOW + 50 * MS)]
    decisions, changed = decide_flow(
        batch, NOW, running={}, next_starts={"q": NOW + 20 * MS}, rates={"q": Pacing(2)}
    )
    assert decisions[("job", "early")] == Admitted(NOW + 20 * MS)
    assert decisions[("job", "due-later")] == Deferred(NOW + 520 * MS - FLOW_LEAD)
    assert changed == {"q": NOW + 520 * MS}
    # A next start in the past is no credit: the run starts now.
    decisions, _ = decide_flow(
        [candidate("x")], later, running={}, next_starts={"q": NOW}, rates={"q": Pacing(2)}
    )
    assert decisions[("job", "x")] == Admitted(later)


def test_a_run_held_back_by_its_key_takes_no_start_of_its_queue() -> None:
    batch = [candidate("a", key="k"), candidate("b", key="k"), candidate("c")]
    decisions, changed = decide_flow(batch, NOW, running={}, next_starts={"q": None}, rates={"q": Pacing(5)})
    assert decisions[("job", "a")] == Admitted(NOW)
    assert decisions[("job", "b")] == Deferred(NOW + KEY_RETRY)
    assert decisions[("job", "c")] == Admitted(NOW + 200 * MS)
    assert changed == {"q": NOW + 400 * MS}


def test_a_controlled_run_due_beyond_the_lead_is_deferred_until_just_before_it() -> None:
    due = NOW + timedelta(seconds=30)
    decisions, _ = decide_flow([candidate("a", key="k", due=due)], NOW, running={}, next_starts={}, rates={})
    assert decisions[("job", "a")] == Deferred(due - FLOW_LEAD)


@pytest.mark.parametrize("rate", [10, 3, 7, 0.5, 100])
def test_no_second_holds_more_starts_than_the_rate(rate: float) -> None:
    batch = [candidate(str(n)) for n in range(int(rate) * 3 + 3)]
    starts: list[datetime] = []
    next_starts: dict[str, datetime | None] = {"q": None}
    moment = NOW
    while len(starts) < len(batch):  # claimed again and again, as executors do, until all started
        decisions, changed = decide_flow(
            batch[len(starts) :], moment, running={}, next_starts=next_starts, rates={"q": Pacing(rate)}
        )
        starts += [d.start for d in decisions.values() if isinstance(d, Admitted)]
        next_starts.update(changed)
        moment += 7 * MS
    most = max(sum(1 for t in starts if s <= t < s + timedelta(seconds=1)) for s in starts)
    assert most == max(int(rate), 1)


@pytest.mark.parametrize("rate", [0, -1, float("inf"), float("nan")])
def test_a_pacing_needs_a_positive_rate(rate: float) -> None:
    with pytest.raises(ValueError, match="positive number"):
        Pacing(rate)


def test_queue_rates_are_parsed_and_bad_ones_refused() -> None:
    assert parse_queue_rates("") == {}
    assert parse_queue_rates("io=10, reports = 0.5") == {"io": Pacing(10), "reports": Pacing(0.5)}
    for text in ("io", "io=fast", "io=0", "io=1,io=2", "=3", "io=-1"):
        with pytest.raises(InvalidConfig) as caught:
            parse_queue_rates(text)
        assert caught.value.field == "queue_rate_limits"


def test_a_job_s_concurrency_and_its_problems() -> None:
    assert concurrency_of(job_pb2.Job()) is None
    assert concurrency_of(job_pb2.Job(concurrency_key="c", concurrency_limit=2)) == Concurrency("c", 2)
    assert concurrency_problems("", 0) == {}
    assert concurrency_problems("customer-1", 1) == {}
    assert set(concurrency_problems("customer-1", 0)) == {"concurrency_limit"}
    assert set(concurrency_problems("customer-1", -3)) == {"concurrency_limit"}
    assert set(concurrency_problems("", 2)) == {"concurrency_limit"}
    assert set(concurrency_problems("x" * (MAX_CONCURRENCY_KEY + 1), 1)) == {"concurrency_key"}
    assert set(concurrency_problems("tab\there", 1)) == {"concurrency_key"}


def test_a_queue_limit_admits_up_to_it_counting_the_held_and_the_batch() -> None:
    batch = [candidate(n, queue="io") for n in "abcd"] + [candidate("e", queue="other")]
    decisions, changed = decide_flow(
        batch, NOW, running={}, next_starts={}, rates={}, queue_limits={"io": 3}, queues_running={"io": 1}
    )
    assert [decisions[("job", n)] for n in "abcd"] == [
        Admitted(NOW),
        Admitted(NOW),
        Deferred(NOW + KEY_RETRY),
        Deferred(NOW + KEY_RETRY),
    ]
    assert decisions[("job", "e")] == Admitted(NOW)
    assert changed == {}


def test_a_full_queue_defers_and_admits_once_a_run_of_it_ended() -> None:
    limits = {"io": 2}
    full, _ = decide_flow(
        [candidate("a", queue="io")],
        NOW,
        running={},
        next_starts={},
        rates={},
        queue_limits=limits,
        queues_running={"io": 2},
    )
    assert full == {("job", "a"): Deferred(NOW + KEY_RETRY)}
    later = NOW + KEY_RETRY
    freed, _ = decide_flow(
        [candidate("a", queue="io")],
        later,
        running={},
        next_starts={},
        rates={},
        queue_limits=limits,
        queues_running={"io": 1},
    )
    assert freed == {("job", "a"): Admitted(later)}


def test_a_run_takes_neither_its_queue_nor_its_key_when_the_other_is_full() -> None:
    limits = {"io": 1}
    # Its key is full: the queue's room is left to the run after it.
    batch = [candidate("a", key="k", queue="io"), candidate("b", queue="io")]
    decisions, _ = decide_flow(
        batch, NOW, running={"k": 1}, next_starts={}, rates={}, queue_limits=limits, queues_running={}
    )
    assert decisions == {("job", "a"): Deferred(NOW + KEY_RETRY), ("job", "b"): Admitted(NOW)}
    # Its queue is full: the key's room is left to the run of another queue after it.
    batch = [candidate("a", key="k", queue="io"), candidate("b", key="k", queue="other")]
    decisions, _ = decide_flow(
        batch, NOW, running={}, next_starts={}, rates={}, queue_limits=limits, queues_running={"io": 1}
    )
    assert decisions == {("job", "a"): Deferred(NOW + KEY_RETRY), ("job", "b"): Admitted(NOW)}


def test_a_limited_queue_s_later_run_is_deferred_to_its_lead_and_a_full_paced_one_keeps_its_pace() -> None:
    due = NOW + timedelta(seconds=5)
    decisions, _ = decide_flow(
        [candidate("a", queue="io", due=due)],
        NOW,
        running={},
        next_starts={},
        rates={},
        queue_limits={"io": 1},
    )
    assert decisions == {("job", "a"): Deferred(due - FLOW_LEAD)}
    # Limited and paced: a run its limit holds back takes no turn of the pace.
    decisions, changed = decide_flow(
        [candidate("a", queue="io"), candidate("b", queue="io")],
        NOW,
        running={},
        next_starts={"io": None},
        rates={"io": Pacing(1000)},
        queue_limits={"io": 1},
        queues_running={},
    )
    assert decisions == {("job", "a"): Admitted(NOW), ("job", "b"): Deferred(NOW + KEY_RETRY)}
    assert changed == {"io": NOW + Pacing(1000).interval}


def test_claims_again_and_again_never_hold_more_than_the_queue_s_limit() -> None:
    """Runs end at random; each round's claims see the held runs: never more than the limit at once."""
    limit, held, done, moment = 3, 0, 0, NOW
    waiting = [candidate(str(n), queue="io") for n in range(30)]
    ends: list[datetime] = []
    while waiting:
        ends = [end for end in ends if end > moment]
        decisions, _ = decide_flow(
            waiting,
            moment,
            running={},
            next_starts={},
            rates={},
            queue_limits={"io": limit},
            queues_running={"io": len(ends)},
        )
        admitted = [c for c in waiting if isinstance(decisions[c.key], Admitted)]
        ends += [moment + (1 + len(ends) % 4) * 10 * MS for _ in admitted]
        held = max(held, len(ends))
        done += len(admitted)
        waiting = [c for c in waiting if c not in admitted]
        moment += 7 * MS
    assert (held, done) == (limit, 30)


def test_queue_limits_are_parsed_and_bad_ones_refused() -> None:
    assert parse_queue_limits("") == {}
    assert parse_queue_limits(" io=3, reports = 1 ") == {"io": 3, "reports": 1}
    for text, message in (
        ("io", "'io' is not queue=runs-at-once"),
        ("io=many", "is not queue=runs-at-once"),
        ("io=1.5", "is not queue=runs-at-once"),
        ("io=-1", "is not queue=runs-at-once"),
        ("io=0", "the limit of 'io' must be at least 1, not 0"),
        ("io=1,io=2", "queue 'io' is named twice"),
        ("=3", "is not queue=runs-at-once"),
    ):
        with pytest.raises(InvalidConfig, match=message) as caught:
            parse_queue_limits(text)
        assert caught.value.field == "queue_concurrency_limits"
