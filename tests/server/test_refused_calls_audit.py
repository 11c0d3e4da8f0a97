"""Refused calls are in the audit trail (SQLite and PostgreSQL): a call refused `PERMISSION_DENIED` leaves a
REFUSED event with its caller, method and namespace; one refused `UNAUTHENTICATED` leaves one whose actor is
`anonymous`, which only callers who view every namespace list."""

from __future__ import annotations

import threading
from collections.abc import Iterator
from pathlib import Path

import grpc
import pytest

from jobmesh.core.audit import AuditEvent
from jobmesh.core.errors import PermissionDenied
from jobmesh.core.ports.pipeline_store import SchedulerStore
from jobmesh.core.timestamps import utcnow
from jobmesh.server.refusals import RefusalTrail
from jobmesh.v1 import (
    audit_pb2,
    job_pb2,
    job_service_pb2,
    job_service_pb2_grpc,
    search_service_pb2,
    search_service_pb2_grpc,
)
from tests.server.errors import call_error
from tests.server.secured import Secured, secured_server
from tests.server.tokens import TokenFile, bearer
from tests.support import eventually

CREATE = "/jobmesh.v1.JobService/CreateJob"


def with_team_viewer(tokens: TokenFile) -> None:
    tokens.add("team-viewer", roles={"team-a": "viewer"})


@pytest.fixture
def secured(store: SchedulerStore, tmp_path: Path) -> Iterator[Secured]:
    with secured_server(store, tmp_path, add_tokens=with_team_viewer) as server:
        yield server


def refused_events(channel: grpc.Channel, token: str) -> list[audit_pb2.AuditEvent]:
    search = search_service_pb2_grpc.SearchServiceStub(channel)
    request = search_service_pb2.ListAuditEventsRequest(filter="action = REFUSED")
    return list(search.ListAuditEvents(request, metadata=bearer(token), timeout=10).audit_events)


def test_refused_calls_leave_refused_events(secured: Secured) -> None:
    job = job_pb2.Job(
        target=job_pb2.Target(command=job_pb2.Target.Command(argv=["true"])), namespace="team-a"
    )
    job.schedule.immediate.SetInParent()
    with grpc.insecure_channel(secured.address) as channel:
        jobs = job_service_pb2_grpc.JobServiceStub(channel)
        create = job_service_pb2.CreateJobRequest(job=job)
        call_error(
            lambda: jobs.CreateJob(create, metadata=bearer(secured.token("team-viewer"))),
            grpc.StatusCode.PERMISSION_DENIED,
        )
        call_error(
            lambda: jobs.CreateJob(create, metadata=bearer("jm_" + "x" * 43)), grpc.StatusCode.UNAUTHENTICATED
        )
        admin = secured.token("admin")

        def both() -> list[audit_pb2.AuditEvent] | None:
            events = refused_events(channel, admin)
            return events if len(events) == 2 else None

        found = eventually(both, 10, "both refusals in the audit trail")
        by_actor = {event.actor: event for event in found}
        denied, unauthenticated = by_actor["team-viewer"], by_actor["anonymous"]
        assert (denied.resource, denied.namespace) == (CREATE, "team-a")
        assert denied.action == audit_pb2.AUDIT_ACTION_REFUSED
        assert (unauthenticated.resource, unauthenticated.namespace) == (CREATE, "")
        # The team's viewer sees its namespace's refusal, not the anonymous one of no namespace.
        assert [event.actor for event in refused_events(channel, secured.token("team-viewer"))] == [
            "team-viewer"
        ]


class _HeldAuditStore:
    """A store whose audit writes wait for `release`."""

    def __init__(self) -> None:
        self.started, self.release = threading.Event(), threading.Event()
        self.written: list[AuditEvent] = []

    def record_audit(self, events: list[AuditEvent]) -> None:
        self.started.set()
        self.release.wait(30)
        self.written += events


def test_the_trail_closes_after_the_write_under_way_and_writes_nothing_after() -> None:
    """The server's stop closes the trail before the store: a write still running would hold a connection of
    a store about to close."""
    store = _HeldAuditStore()
    trail = RefusalTrail(store, utcnow)  # type: ignore[arg-type]
    trail.note("someone", CREATE, PermissionDenied("no"))
    assert store.started.wait(30)
    closing = threading.Thread(target=trail.close)
    closing.start()
    closing.join(0.5)
    assert closing.is_alive(), "closed while a write was under way"
    store.release.set()
    closing.join(30)
    assert not closing.is_alive()
    assert [event.actor for event in store.written] == ["someone"]

    trail.note("later", CREATE, PermissionDenied("no"))  # the call's refusal stands; no write, no error
    assert [event.actor for event in store.written] == ["someone"]
