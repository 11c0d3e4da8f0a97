"""Resource names (AIP-122): `jobs/{job}` and `jobs/{job}/runs/{run}`, built and parsed here and nowhere else.

Parsing a name that is not well formed raises INVALID_ARGUMENT naming the request field it came from.
"""

from __future__ import annotations

import re

from jobmesh.core.errors import InvalidArgument

JOB_ID = re.compile(r"^[a-z][a-z0-9-]{0,62}$")
RUN_ID = re.compile(r"^[a-z0-9][a-z0-9-]{0,62}$")
# An executor queue: the jobs of one queue go to the executors that serve it.
QUEUE_NAME = re.compile(r"^[a-z0-9][a-z0-9_.\-]{0,62}$")
DEFAULT_QUEUE = "default"  # a job's queue when it names none
# A namespace: roles are granted per namespace, and every job (with its runs) lies in one.
NAMESPACE = re.compile(r"^[a-z][a-z0-9-]{0,62}$")
DEFAULT_NAMESPACE = "default"
ALL_JOBS = "jobs/-"  # the parent that lists the runs of every job (AIP-159)


def job_name(job_id: str) -> str:
    return f"jobs/{job_id}"


def run_name(job_id: str, run_id: str) -> str:
    return f"jobs/{job_id}/runs/{run_id}"


def parse_job_name(name: str, field: str = "name") -> str:
    """`jobs/{job}` → the job id."""
    job_id = name.removeprefix("jobs/")
    if not name.startswith("jobs/") or not JOB_ID.match(job_id):
        raise InvalidArgument.single(field, f"expected `jobs/{{job}}`, got {name[:200]!r}")
    return job_id


def parse_run_name(name: str, field: str = "name") -> tuple[str, str]:
    """`jobs/{job}/runs/{run}` → (job id, run id)."""
    parts = name.split("/")
    if len(parts) != 4 or parts[0] != "jobs" or parts[2] != "runs" or not JOB_ID.match(parts[1]):
        raise InvalidArgument.single(field, f"expected `jobs/{{job}}/runs/{{run}}`, got {name[:200]!r}")
    if not RUN_ID.match(parts[3]):
        raise InvalidArgument.single(field, f"{parts[3][:64]!r} is not a run id")
    return parts[1], parts[3]


def parse_run_parent(parent: str, field: str = "parent") -> str | None:
    """`jobs/{job}` → the job id; `jobs/-` → None (every job)."""
    if parent == ALL_JOBS:
        return None
    return parse_job_name(parent, field)
