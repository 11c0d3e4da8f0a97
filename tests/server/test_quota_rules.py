"""The quota rules on their own (server/admission/quotas.py), with a store that only counts: a cron job firing
more often than the minimum interval is refused, its schedule change too, and a namespace's usage is read
again once USAGE_TTL has passed (what other replicas made counts then)."""

from __future__ import annotations

from datetime import timedelta
from typing import cast

import pytest

from jobmesh.core.errors import QuotaExceeded
from jobmesh.core.ports.store import NamespaceUsage, Store
from jobmesh.server.admission import quotas
from jobmesh.server.admission.quotas import NamespaceQuotas, QuotaLimits, Quotas, shortest_interval
from jobmesh.v1 import job_pb2


class CountingStore:
    def __init__(self) -> None:
        self.usage = NamespaceUsage(jobs=0, cron_jobs=0)
        self.reads = 0

    def namespace_usage(self, namespace: str) -> NamespaceUsage:
        self.reads += 1
        return self.usage


def cron(expression: str, namespace: str = "team-a") -> job_pb2.Job:
    return job_pb2.Job(
        schedule=job_pb2.Schedule(cron=job_pb2.Schedule.Cron(expression=expression)), namespace=namespace
    )


@pytest.mark.parametrize(
    ("expression", "seconds"),
    [("* * * * * *", 1), ("*/10 * * * * *", 10), ("0,30 * * * *", 1800), ("0 0 * * *", 86400)],
)
def test_the_shortest_interval_of_a_cron(expression: str, seconds: int) -> None:
    assert shortest_interval(job_pb2.Schedule.Cron(expression=expression)) == timedelta(seconds=seconds)


def test_a_cron_firing_more_often_than_the_minimum_is_refused_on_create_and_on_update() -> None:
    guard = NamespaceQuotas(
        QuotaLimits(Quotas(min_cron_interval=timedelta(seconds=10))), cast(Store, CountingStore())
    )
    guard.admit_jobs([cron("*/10 * * * * *")])
    with pytest.raises(QuotaExceeded) as refused:
        guard.admit_jobs([cron("*/2 * * * * *")])
    [(subject, description)] = refused.value.violations
    assert subject == "namespace:team-a"
    assert "min_cron_interval" in description
    assert "2 s apart" in description
    with pytest.raises(QuotaExceeded):
        guard.admit_schedule(cron("* * * * * *"), was_cron=True)


def test_a_job_that_becomes_a_cron_counts_against_the_cron_quota() -> None:
    store = CountingStore()
    store.usage = NamespaceUsage(jobs=3, cron_jobs=2)
    guard = NamespaceQuotas(QuotaLimits(Quotas(cron_jobs=2)), cast(Store, store))
    guard.admit_schedule(cron("0 * * * *"), was_cron=True)  # already one of the two
    with pytest.raises(QuotaExceeded):
        guard.admit_schedule(cron("0 * * * *"), was_cron=False)


def test_usage_is_counted_here_and_read_again_after_its_ttl(monkeypatch: pytest.MonkeyPatch) -> None:
    now = [0.0]
    store = CountingStore()
    guard = NamespaceQuotas(QuotaLimits(Quotas(jobs=3)), cast(Store, store), clock=lambda: now[0])
    guard.admit_jobs([cron("0 * * * *"), cron("0 * * * *")])
    guard.admit_jobs([cron("0 * * * *")])
    with pytest.raises(QuotaExceeded):
        guard.admit_jobs([cron("0 * * * *")])
    assert store.reads == 1
    now[0] += quotas.USAGE_TTL + 0.1
    store.usage = NamespaceUsage(jobs=0, cron_jobs=0)  # deleted meanwhile
    guard.admit_jobs([cron("0 * * * *")])
    assert store.reads == 2


def test_jobs_no_counted_quota_covers_are_admitted_without_reading_the_store() -> None:
    """Under the default quotas (cron jobs only), a job that is not a cron is admitted on the create path's
    event loop: no store read, no lock; a cron job is counted."""
    store = CountingStore()
    rules = NamespaceQuotas(QuotaLimits(Quotas(cron_jobs=5)), cast(Store, store))
    immediate = job_pb2.Job(
        schedule=job_pb2.Schedule(immediate=job_pb2.Schedule.Immediate()), namespace="team-a"
    )
    assert rules.admits_at_once([immediate, immediate])
    rules.admit_jobs([immediate, immediate])
    assert store.reads == 0
    assert not rules.admits_at_once([immediate, cron("0 0 * * *")])
    rules.admit_jobs([immediate, cron("0 0 * * *")])
    assert store.reads == 1
    assert not NamespaceQuotas(QuotaLimits(Quotas(runs_per_minute=10)), cast(Store, store)).admits_at_once(
        [immediate]
    )
