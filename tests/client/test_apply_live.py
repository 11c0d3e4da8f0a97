"""`jobmesh apply -f FILE` against a live `jobmesh dev`, through the `jobmesh` command: a file of 20 jobs
applied, then changed (the dry run's diff is exactly what the apply then does, as the job list shows), a
second apply that changes nothing, bad files that change nothing, and the jobs apply must never touch. Each
test manages its own set (`--set`), so that the tests share the server without seeing each other's jobs."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
import yaml
from click.testing import Result

from jobmesh.client import Client
from jobmesh.client._apply import apply_plan, plan
from jobmesh.client._apply_file import MANAGED_BY, load_jobs
from jobmesh.client._errors import Conflict
from tests.client.test_cli_live import cli, create
from tests.client.test_readme import block

pytestmark = pytest.mark.processes

EXIT_INVALID, EXIT_NOT_FOUND, EXIT_CONFLICT = 2, 3, 4


def apply(server: str, file: Path, *args: str) -> Result:
    return cli(server, "apply", "-f", str(file), *args)


def applied_json(server: str, file: Path, *args: str) -> dict[str, Any]:
    result = apply(server, file, "-o", "json", *args)
    assert result.exit_code == 0, result.output
    answer: dict[str, Any] = json.loads(result.stdout)
    return answer


def managed(server: str, set_name: str) -> dict[str, dict[str, Any]]:
    """The live jobs of a set, by name, as `jobs list` shows them (but their next run time, which a cron
    job's occurrence moves on)."""
    listed = cli(
        server,
        "jobs",
        "list",
        "--filter",
        f'labels.{MANAGED_BY} = "{set_name}"',
        "--limit",
        "0",
        "-o",
        "json",
    )
    assert listed.exit_code == 0, listed.output
    return {
        job["name"]: {key: value for key, value in job.items() if key != "next_run_time"}
        for job in json.loads(listed.stdout)
    }


def write(path: Path, jobs: dict[str, dict[str, Any]]) -> Path:
    path.write_text(yaml.safe_dump({"jobs": jobs}, sort_keys=False))
    return path


def twenty_jobs(prefix: str) -> dict[str, dict[str, Any]]:
    """Every kind of schedule and target, and every field of `jobs create`."""
    jobs: dict[str, dict[str, Any]] = {}
    for number in range(20):
        job: dict[str, Any] = {"display-name": f"job {number}", "labels": {"team": f"t{number % 3}"}}
        if number % 4 == 0:
            job |= {
                "cron": f"{number} 3 * * *",
                "time-zone": "Europe/Paris",
                "http": "https://example.com/hook",
            }
        elif number % 4 == 1:
            job |= {"cron": "*/30 * * * *", "command": ["sh", "-c", f"echo {number}"], "max-attempts": 3}
        elif number % 4 == 2:
            job |= {"at": "2030-01-01T00:00:00+01:00", "handler": "report", "payload": f"p{number}"}
        else:
            job |= {
                "cron": "@hourly",
                "http": "https://example.com/put",
                "method": "PUT",
                "queue": "ops",
                "priority": "high",
                "execution-timeout": "90s",
            }
        jobs[f"{prefix}-{number:02d}"] = job
    return jobs


def changed_file(declared: dict[str, dict[str, Any]]) -> dict[str, dict[str, Any]]:
    """Three jobs changed, two removed, two added, fifteen as they were."""
    changed = {job_id: dict(job) for job_id, job in declared.items() if job_id not in ("acc-18", "acc-19")}
    changed["acc-00"]["display-name"] = "renamed"
    changed["acc-01"]["cron"] = "*/10 * * * *"
    del changed["acc-01"]["max-attempts"]
    changed["acc-03"] |= {"queue": "reports", "labels": {"team": "t0", "tier": "gold"}}
    del changed["acc-03"]["execution-timeout"]
    changed["acc-20"] = {"cron": "0 4 * * *", "http": "https://example.com/new"}
    changed["acc-21"] = {"command": ["true"], "at": "2030-06-01T12:00:00Z"}
    return changed


# The updates of `changed_file`, field by field, in the JSON of `apply -o json`.
CHANGED_FIELDS: list[dict[str, Any]] = [
    {"name": "jobs/acc-00", "fields": {"display_name": {"before": "job 0", "after": "renamed"}}},
    {
        "name": "jobs/acc-01",
        "fields": {
            "schedule": {
                "before": {"cron": {"expression": "*/30 * * * *", "time_zone": "UTC"}},
                "after": {"cron": {"expression": "*/10 * * * *", "time_zone": "UTC"}},
            },
            "retry_policy": {"before": {"max_attempts": 3}, "after": None},
        },
    },
    {
        "name": "jobs/acc-03",
        "fields": {
            "labels": {
                "before": {"team": "t0", MANAGED_BY: "acceptance"},
                "after": {"team": "t0", "tier": "gold", MANAGED_BY: "acceptance"},
            },
            "queue": {"before": "ops", "after": "reports"},
            "execution_timeout": {"before": "90s", "after": None},
        },
    },
]
OWNED = (
    "display_name",
    "labels",
    "queue",
    "priority",
    "schedule",
    "target",
    "retry_policy",
    "execution_timeout",
)


def check_created(jobs: dict[str, dict[str, Any]]) -> None:
    """The first file's jobs, each field as declared."""
    assert jobs["jobs/acc-00"]["schedule"]["cron"] == {"expression": "0 3 * * *", "time_zone": "Europe/Paris"}
    assert jobs["jobs/acc-00"]["labels"] == {"team": "t0", MANAGED_BY: "acceptance"}
    assert jobs["jobs/acc-00"]["display_name"] == "job 0"
    assert jobs["jobs/acc-01"]["target"]["command"]["argv"] == ["sh", "-c", "echo 1"]
    assert jobs["jobs/acc-01"]["retry_policy"] == {"max_attempts": 3}
    assert jobs["jobs/acc-02"]["schedule"]["run_at"] == "2029-12-31T23:00:00Z"
    assert jobs["jobs/acc-02"]["target"]["handler"] == {"name": "report", "payload": "cDI="}
    assert jobs["jobs/acc-03"]["target"]["http"] == {"method": "PUT", "url": "https://example.com/put"}
    assert (jobs["jobs/acc-03"]["queue"], jobs["jobs/acc-03"]["priority"]) == ("ops", "PRIORITY_HIGH")
    assert jobs["jobs/acc-03"]["execution_timeout"] == "90s"


def check_updated(before: dict[str, dict[str, Any]], after: dict[str, dict[str, Any]]) -> None:
    """Each updated job is one version on, with exactly the changed fields changed."""
    for update in CHANGED_FIELDS:
        job, old = after[update["name"]], before[update["name"]]
        assert job["etag"] == str(int(old["etag"]) + 1)
        for path in OWNED:
            expected = update["fields"][path]["after"] if path in update["fields"] else old.get(path)
            assert job.get(path) == expected, (update["name"], path)


def test_twenty_jobs_then_the_file_changed_the_dry_run_shows_exactly_what_apply_does(
    server: str, tmp_path: Path
) -> None:
    declared = twenty_jobs("acc")
    file = write(tmp_path / "jobs.yaml", declared)
    names = [f"jobs/{job_id}" for job_id in declared]

    planned = applied_json(server, file, "--dry-run", "--set", "acceptance")
    assert planned == {"dry_run": True, "create": names, "update": [], "delete": [], "unchanged": []}
    lines = apply(server, file, "--dry-run", "--set", "acceptance").stdout.splitlines()
    assert lines[:20] == [f"create    {name}" for name in names]
    assert lines[20] == "20 to create, 0 to update, 0 to delete, 0 unchanged (dry run: nothing was changed)"
    assert managed(server, "acceptance") == {}

    done = apply(server, file, "--set", "acceptance")
    assert done.exit_code == 0, done.output
    assert done.stdout.splitlines()[-1] == "20 created, 0 updated, 0 deleted, 0 unchanged"
    before = managed(server, "acceptance")
    assert sorted(before) == sorted(names)
    check_created(before)

    write(file, changed_file(declared))
    diff = applied_json(server, file, "--dry-run", "--set", "acceptance")
    untouched = [name for name in names[:18] if name not in ("jobs/acc-00", "jobs/acc-01", "jobs/acc-03")]
    assert diff == {
        "dry_run": True,
        "create": ["jobs/acc-20", "jobs/acc-21"],
        "update": CHANGED_FIELDS,
        "delete": ["jobs/acc-18", "jobs/acc-19"],
        "unchanged": untouched,
    }
    text = "\n".join(apply(server, file, "--dry-run", "--set", "acceptance").stdout.splitlines())
    assert 'update    jobs/acc-00\n    display_name: "job 0" -> "renamed"\n' in text
    assert '    retry_policy: {"max_attempts": 3} -> (unset)\n' in text
    assert text.endswith("2 to create, 3 to update, 2 to delete, 15 unchanged (dry run: nothing was changed)")
    assert managed(server, "acceptance") == before  # the dry run wrote nothing

    done = apply(server, file, "--set", "acceptance")
    assert done.exit_code == 0, done.output
    assert done.stdout.splitlines()[-1] == "2 created, 3 updated, 2 deleted, 15 unchanged"
    after = managed(server, "acceptance")
    assert sorted(after) == sorted([*names[:18], "jobs/acc-20", "jobs/acc-21"])
    assert [after[name] for name in untouched] == [before[name] for name in untouched]  # not even written
    check_updated(before, after)
    assert after["jobs/acc-20"]["target"]["http"]["url"] == "https://example.com/new"
    for gone in ("acc-18", "acc-19"):
        assert cli(server, "jobs", "get", gone).exit_code == EXIT_NOT_FOUND

    again = apply(server, file, "--set", "acceptance")
    assert (again.exit_code, again.stdout) == (0, f"no change: the 20 jobs of {file} match the server\n")
    assert managed(server, "acceptance") == after
    unchanged = applied_json(server, file, "--set", "acceptance")
    assert unchanged["unchanged"] == [*names[:18], "jobs/acc-20", "jobs/acc-21"]


BAD_FILES = {
    "invalid YAML": ("jobs:\n  fine:\n    http: [https://example.com\n", "not valid YAML: line 4"),
    "unknown field": (
        "jobs:\n  fine:\n    http: https://example.com\n  colour-job:\n    http: https://x.example\n"
        "    colour: red\n",
        "job colour-job: unknown field 'colour'",
    ),
    "invalid cron": (
        "jobs:\n  fine:\n    http: https://example.com\n  hourly:\n    cron: '61 * * * *'\n"
        "    http: https://x.example\n",
        "job hourly: cron: minute field: 61 is out of range 0-59",
    ),
    "duplicate ids": (
        "jobs:\n  fine:\n    http: https://example.com\n  fine:\n    http: https://x.example\n",
        "line 4, column 3: 'fine' is given twice",
    ),
    "no target": (
        "jobs:\n  fine:\n    http: https://example.com\n  idle:\n    cron: '@daily'\n",
        "job idle: no target",
    ),
    "two targets": (
        "jobs:\n  fine:\n    http: https://example.com\n  both:\n    http: https://x.example\n"
        "    command: [sh]\n",
        "job both: one target only, not command and http",
    ),
    "a time without its zone": (
        "jobs:\n  fine:\n    http: https://example.com\n  naive:\n    at: 2030-01-01T00:00:00\n"
        "    http: https://x.example\n",
        "job naive: at: '2030-01-01 00:00:00' has no time zone",
    ),
    "bad duration": (
        "jobs:\n  fine:\n    http: https://example.com\n  slow:\n    http: https://x.example\n"
        "    execution-timeout: soon\n",
        "job slow: execution-timeout: 'soon' is not a duration",
    ),
    "bad job id": (
        "jobs:\n  fine:\n    http: https://example.com\n  Bad_Id:\n    http: https://x\n",
        "job Bad_Id: not a valid job id",
    ),
    "apply's own label": (
        "jobs:\n  fine:\n    http: https://example.com\n    labels: {jobmesh.dev/managed-by: other}\n",
        "job fine: labels: jobmesh.dev/managed-by is apply's own label",
    ),
    "a command word that is not text": (
        "jobs:\n  fine:\n    http: https://example.com\n  sleepy:\n    command: [sleep, 5]\n",
        "job sleepy: command: 5 is not text: quote it",
    ),
    "unknown time zone": (
        "jobs:\n  fine:\n    http: https://example.com\n  martian:\n    cron: '@daily'\n"
        "    time-zone: Mars/Olympus\n    http: https://x.example\n",
        "job martian: unknown time zone 'Mars/Olympus'",
    ),
    "a time zone without cron": (
        "jobs:\n  fine:\n    http: https://example.com\n    time-zone: Europe/Paris\n",
        "job fine: time-zone goes with cron",
    ),
    "no jobs key": ("fine:\n  http: https://example.com\n", "expected a mapping with `jobs:`"),
}


@pytest.mark.parametrize(("text", "told"), BAD_FILES.values(), ids=BAD_FILES.keys())
def test_a_bad_file_is_refused_naming_job_and_field_and_changes_nothing(
    server: str, tmp_path: Path, text: str, told: str
) -> None:
    file = tmp_path / "jobs.yaml"
    file.write_text(text)
    for args in (("--dry-run",), ()):
        refused = apply(server, file, "--set", "bad-files", *args)
        assert refused.exit_code == EXIT_INVALID, refused.output
        assert refused.stdout == ""
        assert refused.stderr.startswith(f"jobmesh: {file}: nothing was changed:\n")
        assert told in refused.stderr
    assert managed(server, "bad-files") == {}


def test_every_problem_of_a_file_is_told_at_once(server: str, tmp_path: Path) -> None:
    file = tmp_path / "jobs.yaml"
    file.write_text(
        "jobs:\n  one:\n    http: https://x.example\n    colour: red\n"
        "  two:\n    http: https://x.example\n    priority: urgent\n    max-attempts: 0\n"
    )
    refused = apply(server, file)
    assert refused.exit_code == EXIT_INVALID
    assert refused.stderr.splitlines()[1:] == [
        "  job one: unknown field 'colour'; known fields: at, command, cron, display-name, execution-timeout,"
        " handler, http, labels, max-attempts, method, namespace, payload, priority, queue, time-zone",
        "  job two: priority: 'urgent' is not one of high, low, normal",
        "  job two: max-attempts: expected a whole number of at least 1, got 0",
    ]


def test_jobs_apply_does_not_manage_are_never_deleted_nor_taken_over(server: str, tmp_path: Path) -> None:
    outsider = create(server, "--id", "outsider", "--cron", "0 5 * * *", "--", "true")
    neighbour = write(tmp_path / "other.yaml", {"neighbour": {"cron": "0 6 * * *", "command": ["true"]}})
    assert apply(server, neighbour, "--set", "other").exit_code == 0
    mine = write(tmp_path / "mine.yaml", {"mine": {"cron": "0 7 * * *", "command": ["true"]}})
    assert apply(server, mine, "--set", "mine").exit_code == 0

    emptied = write(tmp_path / "mine.yaml", {})
    assert applied_json(server, emptied, "--set", "mine")["delete"] == ["jobs/mine"]
    assert cli(server, "jobs", "get", "outsider").exit_code == 0
    assert list(managed(server, "other")) == ["jobs/neighbour"]

    for taken, told in (
        ("outsider", "jobs/outsider exists and is not managed by apply"),
        ("neighbour", "jobs/neighbour exists and belongs to the apply set 'other'"),
        ("mine", "jobs/mine was deleted, and a job id is never used again"),
    ):
        file = write(
            tmp_path / "taken.yaml", {taken: {"http": "https://example.com"}, "fresh": {"command": ["true"]}}
        )
        refused = apply(server, file, "--set", "mine")
        assert refused.exit_code == EXIT_CONFLICT, refused.output
        assert told in refused.stderr
        assert managed(server, "mine") == {}
    job = json.loads(cli(server, "jobs", "get", "outsider", "-o", "json").stdout)
    assert job["etag"] == outsider["etag"]


def test_a_job_changed_after_the_plan_is_not_overwritten(server: str, tmp_path: Path) -> None:
    file = write(tmp_path / "jobs.yaml", {"raced": {"cron": "0 8 * * *", "command": ["true"]}})
    assert apply(server, file, "--set", "raced").exit_code == 0
    with Client(server) as client:
        declared = load_jobs("jobs:\n  raced:\n    cron: '0 9 * * *'\n    command: ['true']\n", "f", "raced")
        planned = plan(client, declared, "raced", "f")
        client.update_job("raced", display_name="changed meanwhile")
        with pytest.raises(Conflict, match="ABORTED"):
            list(apply_plan(client, planned))
        job = client.get_job("raced")
    assert (job.display_name, job.schedule.cron.expression) == ("changed meanwhile", "0 8 * * *")


def test_a_file_from_standard_input_and_a_bad_set_name(server: str) -> None:
    result = cli(server, "apply", "-f", "-", "--set", "stdin", "--dry-run")
    assert result.exit_code == EXIT_INVALID  # an empty input declares nothing: refused, not "delete all"
    assert "expected a mapping with `jobs:`" in result.stderr
    refused = cli(server, "apply", "-f", "-", "--set", "not a name")
    assert refused.exit_code == EXIT_INVALID
    assert "--set 'not a name'" in refused.stderr


def test_the_readme_example_applies_as_written(server: str, tmp_path: Path) -> None:
    file = tmp_path / "jobs.yaml"
    file.write_text(block("apply-example"))
    created = applied_json(server, file, "--set", "readme")
    assert created["create"] == ["jobs/nightly-report", "jobs/export-cleanup", "jobs/new-year"]
    jobs = managed(server, "readme")
    assert jobs["jobs/export-cleanup"]["execution_timeout"] == "300s"
    assert jobs["jobs/new-year"]["target"]["handler"]["name"] == "greet"
    assert applied_json(server, file, "--set", "readme")["unchanged"] == created["create"]


def test_a_job_namespace_never_changes(server: str, tmp_path: Path) -> None:
    file = write(tmp_path / "jobs.yaml", {"placed": {"command": ["true"], "cron": "0 1 * * *"}})
    assert apply(server, file, "--set", "placed").exit_code == 0
    write(file, {"placed": {"command": ["true"], "cron": "0 2 * * *", "namespace": "elsewhere"}})
    refused = apply(server, file, "--set", "placed")
    assert refused.exit_code == EXIT_CONFLICT
    assert "job placed: namespace: is 'default', and a job's namespace never changes" in refused.stderr
    assert managed(server, "placed")["jobs/placed"]["schedule"]["cron"]["expression"] == "0 1 * * *"
