"""`jobmesh apply -f jobs.yaml`: the server's jobs made to match a file (which `_apply_file` reads). Apply
compares the file's jobs with the jobs of its set (those labelled `jobmesh.dev/managed-by=SET`) and creates,
updates (only the changed fields, at the version it read) and deletes (only jobs of its set) until they
match; whatever the server must say about the file (a schedule it refuses, an id another job holds) is
asked before anything is changed."""

from __future__ import annotations

import enum
import json
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from typing import Any, cast

from jobmesh.client._apply_file import MANAGED_BY, DeclaredJob, ManifestError
from jobmesh.client._client import Client
from jobmesh.client._enums import JobState
from jobmesh.client._errors import InvalidArgument
from jobmesh.client._output import json_of
from jobmesh.client._requests import UpdateFields
from jobmesh.v1 import job_pb2

__all__ = [
    "OWNED_FIELDS",
    "Action",
    "ApplyConflict",
    "Change",
    "FieldChange",
    "Plan",
    "apply_plan",
    "change_lines",
    "plan",
    "plan_json",
    "selector",
    "summary",
]

# What apply owns on a job: the file sets each of them (one it leaves out, to unset) and nothing else.
OWNED_FIELDS = (
    "display_name",
    "labels",
    "queue",
    "priority",
    "schedule",
    "target",
    "retry_policy",
    "execution_timeout",
)
_PAGE = 1000
_ID_RULE = "1 to 63 characters of a-z, 0-9 and '-', starting with a letter"


class ApplyConflict(ManifestError):
    """The file is valid, but a job id it declares is held by a job apply must not change."""


class Action(enum.StrEnum):
    CREATE = "create"
    UPDATE = "update"
    DELETE = "delete"
    UNCHANGED = "unchanged"


@dataclass(frozen=True, slots=True)
class FieldChange:
    """One field of a job, in its JSON form before and after (None: unset)."""

    path: str
    before: Any
    after: Any


@dataclass(frozen=True, slots=True)
class Change:
    action: Action
    name: str
    declared: DeclaredJob | None = None
    etag: str = ""
    fields: tuple[FieldChange, ...] = ()


@dataclass(frozen=True, slots=True)
class Plan:
    """What apply does to make the server match the file, job by job in the file's order, deletes last."""

    changes: tuple[Change, ...]

    def of(self, action: Action) -> list[Change]:
        return [change for change in self.changes if change.action is action]

    @property
    def in_sync(self) -> bool:
        return all(change.action is Action.UNCHANGED for change in self.changes)


# Comparing with the server --------------------------------------------------------------------------------


def selector(set_name: str) -> str:
    """The list filter of the jobs that apply manages for `set_name`."""
    return f'labels.{MANAGED_BY} = "{set_name}"'


def plan(client: Client, declared: Sequence[DeclaredJob], set_name: str, source: str) -> Plan:
    """The changes that make the server's jobs of `set_name` match `declared`. Reads only; ManifestError
    (a schedule the server refuses) or ApplyConflict (an id held by a job apply must not touch) when the file
    cannot be applied as it is."""
    managed = {job.name: job for job in client.list_jobs(filter=selector(set_name), page_size=_PAGE)}
    changes, invalid, conflicts = [], [], []
    for job in declared:
        current = managed.pop(job.name, None)
        if current is None:
            try:
                conflicts += _held(client, job.name, set_name)
            except InvalidArgument:  # the server's rule for names, which is its rule for new ids
                invalid.append(f"job {job.job_id}: not a valid job id: {_ID_RULE}")
            changes.append(Change(Action.CREATE, job.name, job))
            continue
        if job.namespace and job.namespace != current.namespace:
            conflicts.append(
                f"job {job.job_id}: namespace: is {current.namespace!r}, and a job's namespace never changes"
            )
        fields = _changed(current.proto, job.job())
        changes.append(
            Change(Action.UPDATE if fields else Action.UNCHANGED, job.name, job, current.etag, fields)
        )
    changes += [Change(Action.DELETE, name, etag=job.etag) for name, job in sorted(managed.items())]
    invalid += _refused_schedules(client, changes)
    if invalid:
        raise ManifestError(source, invalid + conflicts)
    if conflicts:
        raise ApplyConflict(source, conflicts)
    return Plan(tuple(changes))


def _held(client: Client, name: str, set_name: str) -> list[str]:
    """Why `name` cannot be created, when a job (of no set, of another set, or deleted) holds its id."""
    found = list(client.list_jobs(filter=f'name = "{name}"', show_deleted=True, page_size=1))
    if not found:
        return []
    job = found[0]
    if job.state is JobState.DELETED:
        return [f"{name} was deleted, and a job id is never used again: give the job another id"]
    owner = job.labels.get(MANAGED_BY)
    if owner is not None and owner != set_name:
        return [f"{name} exists and belongs to the apply set {owner!r} (--set {owner})"]
    return [
        f"{name} exists and is not managed by apply: to adopt it, label it {MANAGED_BY}={set_name}"
        " (jobmesh jobs update … --label), or give the file's job another id"
    ]


def _owned(job: job_pb2.Job) -> dict[str, Any]:
    """The fields apply owns, in their JSON form; an unset (or empty) one as None."""
    found = json_of(job)
    return {path: found.get(path) or None for path in OWNED_FIELDS}


def _changed(current: job_pb2.Job, declared: job_pb2.Job) -> tuple[FieldChange, ...]:
    before, after = _owned(current), _owned(declared)
    return tuple(
        FieldChange(path, before[path], after[path]) for path in OWNED_FIELDS if before[path] != after[path]
    )


def _refused_schedules(client: Client, changes: Sequence[Change]) -> Iterator[str]:
    """The schedules to be written that the server refuses, checked as a create checks them."""
    for change in changes:
        job = change.declared
        to_write = change.action is Action.CREATE or any(f.path == "schedule" for f in change.fields)
        if job is None or not to_write or job.schedule.HasField("immediate"):
            continue
        try:
            client.preview_schedule(job.schedule, count=1)
        except InvalidArgument as refused:
            field = "cron" if job.schedule.HasField("cron") else "at"
            reasons = "; ".join(v.description for v in refused.field_violations) or refused.message
            yield f"job {job.job_id}: {field}: {reasons}"


# Changing the server --------------------------------------------------------------------------------------


def apply_plan(client: Client, plan: Plan) -> Iterator[Change]:
    """Makes each change, yielding it once made: creates and updates in the file's order, then deletes.
    Updates and deletes carry the etag read by `plan`, so a job changed meanwhile fails as a Conflict."""
    for change in sorted(plan.changes, key=lambda c: c.action is Action.DELETE):
        job = change.declared
        if change.action is Action.CREATE and job is not None:
            client.create_job(
                job.schedule, job.target, job_id=job.job_id, namespace=job.namespace, **job.fields
            )
        elif change.action is Action.UPDATE and job is not None:
            _update(client, change, job)
        elif change.action is Action.DELETE:
            client.delete_job(change.name, etag=change.etag)
        else:
            continue
        yield change


def _update(client: Client, change: Change, job: DeclaredJob) -> None:
    given: dict[str, Any] = {**job.fields, "schedule": job.schedule, "target": job.target}
    paths = [f.path for f in change.fields]
    to_set = cast(UpdateFields, {path: given[path] for path in paths if path in given})
    client.update_job(
        change.name, etag=change.etag, clear=[path for path in paths if path not in given], **to_set
    )


# Telling what changes -------------------------------------------------------------------------------------

_DONE = {Action.CREATE: "created", Action.UPDATE: "updated", Action.DELETE: "deleted"}


def _shown(value: Any) -> str:
    return "(unset)" if value is None else json.dumps(value, sort_keys=True)


def change_lines(change: Change, *, done: bool) -> list[str]:
    """A change as people read it: its verb and job, then each changed field's value before and after."""
    verb = _DONE[change.action] if done else change.action.value
    lines = [f"{verb:<9} {change.name}"]
    lines += [f"    {f.path}: {_shown(f.before)} -> {_shown(f.after)}" for f in change.fields]
    return lines


def summary(plan: Plan, source: str, *, dry_run: bool) -> str:
    if plan.in_sync:
        return f"no change: the {len(plan.changes)} jobs of {source} match the server"
    counts = [(len(plan.of(action)), action) for action in Action]
    if dry_run:
        told = ", ".join(
            f"{count} to {action.value}" for count, action in counts if action is not Action.UNCHANGED
        )
        return f"{told}, {len(plan.of(Action.UNCHANGED))} unchanged (dry run: nothing was changed)"
    told = ", ".join(f"{count} {_DONE[action]}" for count, action in counts if action is not Action.UNCHANGED)
    return f"{told}, {len(plan.of(Action.UNCHANGED))} unchanged"


def plan_json(plan: Plan, *, dry_run: bool) -> dict[str, Any]:
    """The plan for programs: the jobs to create, update (each changed field before and after), delete and
    leave as they are."""
    return {
        "dry_run": dry_run,
        "create": [change.name for change in plan.of(Action.CREATE)],
        "update": [
            {
                "name": change.name,
                "fields": {f.path: {"before": f.before, "after": f.after} for f in change.fields},
            }
            for change in plan.of(Action.UPDATE)
        ],
        "delete": [change.name for change in plan.of(Action.DELETE)],
        "unchanged": [change.name for change in plan.of(Action.UNCHANGED)],
    }
