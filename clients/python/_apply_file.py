"""The jobs an `apply` file declares: YAML (a key given twice is an error, not an overwrite) whose `jobs:`
maps each job id to the fields of `jobmesh jobs create`, spelled as its options without their dashes. Each
job is built with the CLI's own parsers (`_job_options`) and labelled as managed by its set; every problem
of the file is found before any is told, each naming its job and field."""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import Any

import yaml

from jobmesh.client._job_options import (
    PRIORITIES,
    job_fields,
    parse_duration,
    parse_moment,
    schedule_of,
    target_of,
)
from jobmesh.client._requests import JobFields, create_job_request, job_name
from jobmesh.client._specs import immediately
from jobmesh.v1 import job_pb2

__all__ = ["MANAGED_BY", "DeclaredJob", "ManifestError", "check_set_name", "load_jobs"]

# The label of the jobs apply manages; its value names their set (`--set`, `apply` by default).
MANAGED_BY = "jobmesh.dev/managed-by"
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


class ManifestError(ValueError):
    """A file that cannot be applied, with every problem found in it; nothing was changed."""

    def __init__(self, source: str, problems: Sequence[str]) -> None:
        self.problems = tuple(problems)
        listed = "\n".join(f"  {problem}" for problem in self.problems)
        super().__init__(f"{source}: nothing was changed:\n{listed}")


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


def check_set_name(set_name: str) -> str:
    if not _SET_NAME.match(set_name):
        raise ValueError(
            f"--set {set_name!r}: 1 to 63 letters, digits, '.', '_' or '-',"
            " starting and ending with a letter or digit"
        )
    return set_name


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
