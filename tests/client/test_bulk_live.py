"""Changes by filter against a live `jobmesh dev` (issue 23): `jobmesh runs cancel|replay --filter` and
`jobmesh jobs pause|resume --filter`, each with `--dry-run`, and the SDK's `cancel_runs`, `replay_runs`,
`pause_jobs` and `resume_jobs` in both clients, with their bad inputs."""

from __future__ import annotations

import asyncio
import uuid
from datetime import timedelta

import pytest

from jobmesh.client import (
    AsyncClient,
    Client,
    InvalidArgument,
    JobState,
    RunState,
    command,
    cron,
    immediately,
    retry_policy,
)
from tests.client.test_cli_live import EXIT_INVALID, cli, ok_json

pytestmark = pytest.mark.processes

IDLE_QUEUE = "bulk-idle"  # no executor of `jobmesh dev` takes it: its runs stay pending
WAIT = timedelta(seconds=30)


def _label() -> str:
    return f"bulk-{uuid.uuid4().hex[:8]}"


def _pending_jobs(client: Client, label: str, count: int) -> None:
    for _ in range(count):
        client.create_job(immediately(), command(["true"]), queue=IDLE_QUEUE, labels={"batch": label})


def _states(client: Client, label: str) -> list[RunState]:
    return sorted(run.state for run in client.list_runs(filter=f'labels.batch = "{label}"'))


def test_cli_cancels_by_filter_after_a_dry_run(server: str, client: Client) -> None:
    label = _label()
    _pending_jobs(client, label, 3)
    by_label = f'labels.batch = "{label}"'
    dry = cli(server, "runs", "cancel", "--filter", by_label, "--dry-run")
    assert (dry.exit_code, dry.stdout) == (0, "would be cancelled: 3 runs (dry run, nothing changed)\n")
    assert RunState.CANCELLED not in _states(client, label)
    done = ok_json(server, "runs", "cancel", "--filter", by_label, "--reason", "cli bulk")
    assert done == {"matched": 3, "changed": 3, "dry_run": False, "failures": []}
    assert _states(client, label) == [RunState.CANCELLED] * 3
    again = cli(server, "runs", "cancel", "--filter", by_label)
    assert (again.exit_code, again.stdout) == (0, "cancelled: 0 of 0 runs\n")


def test_cli_replays_dead_letters_by_filter(server: str, client: Client) -> None:
    label = _label()
    for _ in range(2):
        created = client.create_job(
            immediately(),
            command(["false"]),
            labels={"batch": label},
            retry_policy=retry_policy(2, initial_backoff=timedelta(milliseconds=100)),
        )
        assert created.run is not None
        assert client.wait_for_run(created.run.name, WAIT).state == RunState.DEAD_LETTERED
    dead = f'labels.batch = "{label}" AND state = DEAD_LETTERED'
    dry = ok_json(server, "runs", "replay", "--filter", dead, "--dry-run")
    assert (dry["matched"], dry["changed"], dry["dry_run"]) == (2, 0, True)
    done = ok_json(server, "runs", "replay", "--filter", dead)
    assert (done["matched"], done["changed"]) == (2, 2)
    replays = list(client.list_runs(filter=f'labels.batch = "{label}" AND trigger = REPLAY'))
    assert len(replays) == 2


def test_cli_pauses_and_resumes_jobs_by_filter(server: str, client: Client) -> None:
    label = _label()
    for _ in range(2):
        client.create_job(cron("0 3 * * *"), command(["true"]), labels={"batch": label})
    by_label = f'labels.batch = "{label}"'
    dry = cli(server, "jobs", "pause", "--filter", by_label, "--dry-run")
    assert (dry.exit_code, dry.stdout) == (0, "would be paused: 2 jobs (dry run, nothing changed)\n")
    paused = cli(server, "jobs", "pause", "--filter", by_label)
    assert (paused.exit_code, paused.stdout) == (0, "paused: 2 of 2 jobs\n")
    assert {job.state for job in client.list_jobs(filter=by_label)} == {JobState.PAUSED}
    resumed = cli(server, "jobs", "resume", "--filter", by_label)
    assert (resumed.exit_code, resumed.stdout) == (0, "resumed: 2 of 2 jobs\n")
    assert {job.state for job in client.list_jobs(filter=by_label)} == {JobState.ACTIVE}


@pytest.mark.parametrize(
    ("args", "told"),
    [
        (("runs", "cancel", "--filter", "colour = red"), "filter: unknown field 'colour'"),
        (("runs", "replay", "--filter", "state = DONE"), "filter: 'state' must be one of"),
        (("jobs", "pause", "--filter", "attempt = 1"), "filter: unknown field 'attempt'"),
        (("runs", "cancel"), "give either RUN or --filter"),
        (("runs", "cancel", "jobs/a/runs/b", "--filter", "state = QUEUED"), "give either RUN or --filter"),
        (("jobs", "resume", "some-job", "--dry-run"), "--dry-run goes with --filter"),
        (("runs", "cancel", "--filter", "state = QUEUED", "--job", "not a job"), "parent"),
    ],
)
def test_cli_bad_input_exits_2_with_the_reason(server: str, args: tuple[str, ...], told: str) -> None:
    result = cli(server, *args)
    assert result.exit_code == EXIT_INVALID, result.output
    assert told in result.output


def test_sdk_bulk_calls_sync_and_async(server: str, client: Client) -> None:
    label = _label()
    _pending_jobs(client, label, 2)
    by_label = f'labels.batch = "{label}"'
    dry = client.cancel_runs(filter=by_label, dry_run=True)
    assert (dry.matched, dry.changed, dry.failures, dry.dry_run) == (2, 0, (), True)
    with pytest.raises(InvalidArgument) as refused:
        client.pause_jobs(filter="colour = red")
    assert {violation.field for violation in refused.value.field_violations} == {"filter"}

    async def scenario() -> None:
        async with AsyncClient(server) as async_client:
            done = await async_client.cancel_runs(filter=by_label, reason="async bulk")
            assert (done.matched, done.changed, done.dry_run) == (2, 2, False)
            replays = await async_client.replay_runs(filter=by_label, dry_run=True)
            assert replays.matched == 0  # cancelled runs are not replayable
            paused = await async_client.pause_jobs(filter=by_label, dry_run=True)
            assert paused.matched == 0  # immediate jobs are complete once their run is made
            with pytest.raises(InvalidArgument):
                await async_client.resume_jobs(filter="state = NOPE")

    asyncio.run(scenario())
    assert _states(client, label) == [RunState.CANCELLED] * 2
