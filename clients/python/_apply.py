"""`jobmesh apply -f jobs.yaml`: the jobs a file declares, made so on a server. The file names each job by its
id with the fields of `jobmesh jobs create`; apply compares them with the jobs it manages (those labelled
`jobmesh.dev/managed-by=SET`) and creates, updates (only the changed fields, at the version it read) and
deletes (only jobs of its set) until they match. Everything is checked before anything is changed."""

from __future__ import annotations

import enum
import json
import re
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any, cast

import yaml

from jobmesh.client._client import Client
from jobmesh.client._errors import InvalidArgument
from jobmesh.client._job_options import (
    PRIORITIES,
    job_fields,
    parse_duration,
    parse_moment,
    schedule_of,
    target_of,
)
from jobmesh.client._output import json_of
from jobmesh.client._requests import JobFields, UpdateFields, create_job_request, job_name
from jobmesh.client._specs import immediately
from jobmesh.v1 import job_pb2

__all__ = [
    "DEFAULT_SET",
    "MANAGED_BY",
    "Action",
    "ApplyConflict",
    "Change",
    "DeclaredJob",
    "FieldChange",
    "ManifestError",
    "Plan",
    "apply_plan",
    "change_lines",
    "check_set_name",
    "load_jobs",
    "plan",
    "plan_json",
    "summary",
]

MANAGED_BY = "jobmesh.dev/managed-by"
DEFAULT_SET = "apply"
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
# A job's fields in a file: the options of `jobmesh jobs create`, with `command` for its program.
_FIELDS = frozenset(
    {
        "namespace",
        "display-name",
        "labels",
        "queue",
        "priority",
        "at",
        "cron",
        "time-zone",
        "command",
        "http",
        "method",
        "handler",
        "payload",
        "max-attempts",
        "execution-timeout",
    }
)
_TEXT_FIELDS = (
    "namespace",
    "display-name",
    "queue",
    "cron",
    "time-zone",
    "http",
    "method",
    "handler",
    "payload",
)
_SET_NAME = re.compile(r"^[A-Za-z0-9]([A-Za-z0-9_.-]{0,61}[A-Za-z0-9])?$")
_PAGE = 1000
_ID_RULE = "1 to 63 characters of a-z, 0-9 and '-', starting with a letter"


class ManifestError(ValueError):
    """A file that cannot be applied, with every problem found in it; nothing was changed."""

    def __init__(self, source: str, problems: Sequence[str]) -> None:
        self.problems = tuple(problems)
        listed = "\n".join(f"  {problem}" for problem in self.problems)
        super().__init__(f"{source}: nothing was changed:\n{listed}")


class ApplyConflict(ManifestError):
    """The file is valid, but a job id it declares is held by a job apply must not change."""


@dataclass(frozen=True, slots=True)
class DeclaredJob:
    """One job of the file: the request fields it sets, and the job they describe."""

    job_id: str
    namespace: str
    schedule: job_pb2.Schedule
    target: job_pb2.Target
    fields: JobFields

    @property
    def name(self) -> str:
        return job_name(self.job_id)

    def job(self) -> job_pb2.Job:
        return create_job_request(
            self.schedule, self.target, job_id=self.job_id, namespace=self.namespace, **self.fields
        ).job


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

    changes: tuple[Change, ...] = field(default_factory=tuple)

    def of(self, action: Action) -> list[Change]:
        return [change for change in self.changes if change.action is action]

    @property
    def in_sync(self) -> bool:
        return all(change.action is Action.UNCHANGED for change in self.changes)


def check_set_name(set_name: str) -> str:
    if not _SET_NAME.match(set_name):
        raise ValueError(
            f"--set {set_name!r}: 1 to 63 letters, digits, '.', '_' or '-',"
            " starting and ending with a letter or digit"
        )
    return set_name


# Reading the file -----------------------------------------------------------------------------------------


class _UniqueKeys(yaml.SafeLoader):
    """YAML where a key given twice in one mapping (a job id, or a field of a job) is an error, not a
    silent overwrite."""

    def construct_mapping(self, node: yaml.MappingNode, deep: bool = False) -> dict[Any, Any]:
        seen: set[Any] = set()
        for key_node, _ in node.value:
            key = self.construct_object(key_node, deep=deep)
            if key in seen:
                raise yaml.constructor.ConstructorError(
                    None, None, f"{key!r} is given twice", key_node.start_mark
                )
            seen.add(key)
        return super().construct_mapping(node, deep=deep)


def load_jobs(text: str, source: str, set_name: str) -> list[DeclaredJob]:
    """The jobs of a file (`jobs:` mapping each job id to its fields), labelled as managed by `set_name`.
    ManifestError lists every problem, each naming its job and field."""
    loader = _UniqueKeys(text)
    try:
        document = loader.get_single_data()
    except yaml.YAMLError as error:
        raise ManifestError(source, [f"not valid YAML: {_yaml_problem(error)}"]) from None
    finally:
        loader.dispose()
    if not isinstance(document, dict) or "jobs" not in document:
        raise ManifestError(source, ["expected a mapping with `jobs:`, each job id with its fields"])
    problems = [f"unknown top-level key {key!r}: only `jobs`" for key in document if key != "jobs"]
    jobs = document["jobs"] or {}
    if not isinstance(jobs, dict):
        raise ManifestError(source, [*problems, "`jobs` maps each job id to its fields"])
    declared = []
    for job_id, spec in jobs.items():
        job, found = _declared(str(job_id), spec, set_name)
        problems += [f"job {job_id}: {problem}" for problem in found]
        if job is not None:
            declared.append(job)
    if problems:
        raise ManifestError(source, problems)
    return declared


def _yaml_problem(error: yaml.YAMLError) -> str:
    """The parser's complaint, with its line and column in the file."""
    if not isinstance(error, yaml.MarkedYAMLError) or error.problem_mark is None:
        return str(error)
    mark = error.problem_mark
    told = ": ".join(part for part in (error.context, error.problem) if part)
    return f"line {mark.line + 1}, column {mark.column + 1}: {told}"


def _declared(job_id: str, spec: object, set_name: str) -> tuple[DeclaredJob | None, list[str]]:
    if not isinstance(spec, dict):
        return None, ["expected a mapping of fields, such as `cron: '0 3 * * *'` and `http: https://…`"]
    problems = [
        f"unknown field {key!r}; known fields: {', '.join(sorted(_FIELDS))}"
        for key in spec
        if key not in _FIELDS
    ]
    values: dict[str, Any] = {}
    for read in (_text_fields, _labels, _priority, _at, _command, _max_attempts, _execution_timeout):
        try:
            values.update(read(spec, set_name))
        except ValueError as error:
            problems.append(str(error))
    if problems:
        return None, problems
    try:
        return _job(job_id, values), []
    except ValueError as error:
        return None, [str(error)]


def _job(job_id: str, values: Mapping[str, Any]) -> DeclaredJob:
    if values["method"] is not None and values["http"] is None:
        raise ValueError("method: goes with http")
    if values["payload"] is not None and values["handler"] is None:
        raise ValueError("payload: goes with handler")
    schedule = schedule_of(values["at"], values["cron"], values["time-zone"], spell=str)
    target = target_of(
        values["command"],
        values["http"],
        values["method"] or "POST",
        values["handler"],
        values["payload"] or "",
        spell=str,
    )
    if target is None:
        raise ValueError("no target: give command, http or handler")
    fields = job_fields(
        {
            "display_name": values["display-name"],
            "labels": values["labels"],
            "queue": values["queue"],
            "priority": values["priority"],
            "max_attempts": values["max-attempts"],
            "execution_timeout": values["execution-timeout"],
        },
        {},
    )
    return DeclaredJob(job_id, values["namespace"] or "", schedule or immediately(), target, fields)


def _text_fields(spec: Mapping[str, Any], _: str) -> dict[str, Any]:
    for key in _TEXT_FIELDS:
        if key in spec and not isinstance(spec[key], str):
            raise ValueError(f"{key}: expected text, got {spec[key]!r} (quote it)")
    return {key: spec.get(key) for key in _TEXT_FIELDS}


def _labels(spec: Mapping[str, Any], set_name: str) -> dict[str, Any]:
    labels = spec.get("labels") or {}
    if not isinstance(labels, dict) or not all(
        isinstance(key, str) and isinstance(value, str) for key, value in labels.items()
    ):
        raise ValueError(
            "labels: expected a mapping of text to text, such as `team: billing` (quote numbers)"
        )
    if MANAGED_BY in labels:
        raise ValueError(f"labels: {MANAGED_BY} is apply's own label (choose its value with --set)")
    return {"labels": {**labels, MANAGED_BY: set_name}}


def _priority(spec: Mapping[str, Any], _: str) -> dict[str, Any]:
    priority = spec.get("priority")
    if priority is not None and priority not in PRIORITIES:
        raise ValueError(f"priority: {priority!r} is not one of {', '.join(sorted(PRIORITIES))}")
    return {"priority": priority}


def _at(spec: Mapping[str, Any], _: str) -> dict[str, Any]:
    if spec.get("at") is None:
        return {"at": None}
    try:
        moment: datetime = parse_moment(spec["at"])
    except ValueError as error:
        raise ValueError(f"at: {error}") from None
    return {"at": moment}


def _command(spec: Mapping[str, Any], _: str) -> dict[str, Any]:
    argv = spec.get("command")
    if argv is None:
        return {"command": []}
    if not isinstance(argv, list) or not argv:
        raise ValueError("command: expected a list of text, such as [sh, -c, 'echo hi']")
    for word in argv:
        if not isinstance(word, str):  # YAML reads true, 5 or null as other things than text
            raise ValueError(f"command: {word!r} is not text: quote it, as in [sleep, '5'] or ['true']")
    return {"command": argv}


def _max_attempts(spec: Mapping[str, Any], _: str) -> dict[str, Any]:
    attempts = spec.get("max-attempts")
    if attempts is not None and (isinstance(attempts, bool) or not isinstance(attempts, int) or attempts < 1):
        raise ValueError(f"max-attempts: expected a whole number of at least 1, got {attempts!r}")
    return {"max-attempts": attempts}


def _execution_timeout(spec: Mapping[str, Any], _: str) -> dict[str, Any]:
    timeout = spec.get("execution-timeout")
    if timeout is None:
        return {"execution-timeout": None}
    try:
        return {"execution-timeout": parse_duration(timeout)}
    except ValueError as error:
        raise ValueError(f"execution-timeout: {error}") from None


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
        fields = _changed(current, job.job())
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
    if job.state == job_pb2.JOB_STATE_DELETED:
        return [f"{name} was deleted, and a job id is never used again: give the job another id"]
    owner = job.labels.get(MANAGED_BY)
    if owner is not None and owner != set_name:
        return [f"{name} exists and belongs to the apply set {owner!r} (--set {owner})"]
    return [
        f"{name} exists and is not managed by apply: to adopt it, label it {MANAGED_BY}={set_name}"
        " (jobmesh jobs update … --label), or give the file's job another id"
    ]


def _value(job: job_pb2.Job, path: str) -> Any:
    return json_of(job).get(path) or None


def _changed(current: job_pb2.Job, declared: job_pb2.Job) -> tuple[FieldChange, ...]:
    pairs = ((path, _value(current, path), _value(declared, path)) for path in OWNED_FIELDS)
    return tuple(FieldChange(path, before, after) for path, before, after in pairs if before != after)


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
