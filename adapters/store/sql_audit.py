"""Audit trail statements of the SQL store. Each function runs inside the caller's transaction, so that an
event is committed with the change it describes."""

from __future__ import annotations

from collections.abc import Sequence

from sqlalchemy import Connection, RowMapping, select

from jobmesh.adapters.store.schema import audit_events
from jobmesh.adapters.store.sql_batch import insert_rows
from jobmesh.adapters.store.sql_query import Listing, fetch_page, where_clauses
from jobmesh.core.audit import AuditAction, AuditEvent
from jobmesh.core.filters import ListQuery
from jobmesh.core.ports.store import Page

AUDIT_LISTING = Listing(
    kind="auditEvents",
    fields={
        "namespace": audit_events.c.namespace,
        "actor": audit_events.c.actor,
        "action": audit_events.c.action,
        "resource": audit_events.c.resource,
        "job": audit_events.c.job_id,
        "request_id": audit_events.c.request_id,
        "time": audit_events.c.time,
    },
    sortable={"time": audit_events.c.time},
    tiebreak=(audit_events.c.event_id,),
    labels=audit_events.c.resource,  # events have no labels: the filter refuses `labels` for them
    namespace=audit_events.c.namespace,
)


_AUDIT_COLUMNS = tuple((column.name, column.type) for column in audit_events.c)


def record(connection: Connection, events: Sequence[AuditEvent | None]) -> None:
    """Writes the events given (None: the change is not audited), in one statement per thousand: a batch of
    creates has an event per job, and an INSERT per event was PostgreSQL's most frequent statement."""
    rows = [_row(_values(event)) for event in events if event is not None]
    if rows:
        insert_rows(connection, audit_events, _AUDIT_COLUMNS, rows, skip_taken=False)


def _row(values: dict[str, object]) -> tuple[object, ...]:
    return tuple(values[name] for name, _ in _AUDIT_COLUMNS)


def _values(event: AuditEvent) -> dict[str, object]:
    return {
        "event_id": event.event_id,
        "time": event.time,
        "actor": event.actor,
        "action": event.action.value,
        "resource": event.resource,
        "job_id": event.job_id,
        "namespace": event.namespace,
        "request_id": event.request_id,
    }


def list_events(connection: Connection, query: ListQuery) -> Page[AuditEvent]:
    statement = select(audit_events).where(
        *where_clauses(AUDIT_LISTING, query.comparisons, connection.dialect.name)
    )
    return fetch_page(
        connection, statement, listing=AUDIT_LISTING, query=query, scope=(), convert=_event_from_row
    )


def _event_from_row(row: RowMapping) -> AuditEvent:
    return AuditEvent(
        event_id=row["event_id"],
        time=row["time"],
        actor=row["actor"],
        action=AuditAction(row["action"]),
        resource=row["resource"],
        job_id=row["job_id"],
        namespace=row["namespace"],
        request_id=row["request_id"],
    )
