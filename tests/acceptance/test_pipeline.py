"""The scheduling pipeline end to end: real server, watcher and executor processes on PostgreSQL, Kafka and
Redis. Commands write the instant they really start to a file, so starts are measured, not inferred."""

from __future__ import annotations

import itertools
import signal
import time
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest
from confluent_kafka import Consumer

from jobmesh.adapters.queue.codec import DEAD_LETTER_TOPIC
from jobmesh.adapters.queue.factory import open_queue
from jobmesh.adapters.store.factory import open_store
from jobmesh.control.v1 import dispatch_pb2
from jobmesh.core.attempts import Dispatchable
from jobmesh.core.definitions import decode_spec
from jobmesh.core.dispatch import message_of
from jobmesh.v1 import job_pb2, job_service_pb2, run_pb2
from jobmesh.v1.search_service_pb2_grpc import SearchServiceStub
from tests.acceptance.mesh import (
    EVERY_SECOND,
    FLOOD,
    FLOOD_MB,
    STAMP,
    TERMINAL,
    Mesh,
    assert_flood_told_truly,
    at,
    check_a_change_stops_a_cron_job,
    command_job,
    create,
    escaping_sleeps,
    get_run,
    log_texts,
    peak_rss_while,
    pid_gone,
    pids_in,
    read_times,
    rss_bytes,
    running_sleep,
    runs_of,
    wait_for_run,
    warm_up,
)
from tests.support import AT_ONCE, eventually

pytestmark = [pytest.mark.postgres, pytest.mark.kafka, pytest.mark.redis, pytest.mark.processes]


@pytest.mark.timing
def test_immediate_at_time_and_cron_runs_start_on_time(mesh: Mesh, tmp_path: Path) -> None:
    server = mesh.server()
    mesh.watcher()
    mesh.executor(server)
    jobs, search = mesh.stubs(server)
    warm_up(mesh, jobs, search)

    now_file, later_file, cron_file = tmp_path / "now", tmp_path / "later", tmp_path / "cron"
    created_at = datetime.now(UTC)
    create(jobs, command_job(mesh.queue, STAMP.format(file=now_file)))
    later = command_job(mesh.queue, STAMP.format(file=later_file))
    due = at(10)
    later.schedule.run_at.FromDatetime(due)
    create(jobs, later)
    cron = command_job(
        mesh.queue,
        STAMP.format(file=cron_file),
        schedule=job_pb2.Schedule(cron=job_pb2.Schedule.Cron(expression="* * * * * *")),
    )
    cron_job = create(jobs, cron).job

    [started] = eventually(lambda: read_times(now_file), 15, "the immediate job to start")
    assert started - created_at < timedelta(seconds=2), started - created_at
    [started_later] = eventually(lambda: read_times(later_file), 20, "the job at now+10 s to start")
    assert due <= started_later < due + timedelta(seconds=2), started_later - due

    eventually(lambda: len(_under_way(search, cron_job.name)) >= 8, 20, "eight occurrences of the cron job")
    jobs.PauseJob(job_service_pb2.PauseJobRequest(name=cron_job.name))
    runs = eventually(lambda: _ended(search, cron_job.name), 20, "the occurrences under way to end")
    times = [run.schedule_time.ToDatetime(UTC) for run in runs]
    assert len(times) >= 8
    assert len(set(times)) == len(times), "an occurrence ran twice"
    gaps = {later - earlier for earlier, later in itertools.pairwise(times)}
    assert gaps == {timedelta(seconds=1)}, f"occurrences not consecutive: {sorted(gaps)}"
    starts = read_times(cron_file)
    assert len(starts) == len([run for run in runs if run.state == run_pb2.RUN_STATE_SUCCEEDED])


@pytest.mark.parametrize("change", ["pause", "delete", "schedule change"])
def test_a_paused_deleted_or_rescheduled_cron_job_stops_at_once(
    mesh: Mesh, tmp_path: Path, change: str
) -> None:
    """Issue 20: cron runs are made minutes ahead; the change withdraws them, so nothing starts after it, and
    a resume starts again at the next fire time."""
    server = mesh.server()
    mesh.watcher()
    mesh.executor(server)
    jobs, search = mesh.stubs(server)
    warm_up(mesh, jobs, search)
    stamps = tmp_path / "cron"
    job = command_job(mesh.queue, STAMP.format(file=stamps), schedule=EVERY_SECOND)
    check_a_change_stops_a_cron_job(jobs, search, job, stamps, change)


def test_failing_command_retries_then_dead_letters_and_replays(mesh: Mesh, tmp_path: Path) -> None:
    server = mesh.server()
    mesh.watcher()
    mesh.executor(server)
    jobs, search = mesh.stubs(server)
    counter, starts = tmp_path / "count", tmp_path / "starts"
    # Fails its first three invocations, then succeeds: the replay runs it a fourth time.
    script = (
        f'{STAMP.format(file=starts)}; n=$(cat "{counter}" 2>/dev/null || echo 0); n=$((n+1)); '
        f'echo $n > "{counter}"; [ $n -gt 3 ]'
    )
    job = command_job(mesh.queue, script)
    job.retry_policy.max_attempts = 3
    job.retry_policy.initial_backoff.FromMilliseconds(500)
    run_name = create(jobs, job).run.name

    run = wait_for_run(
        search, run_name, lambda r: r.state == run_pb2.RUN_STATE_DEAD_LETTERED, 30, "dead letter"
    )
    assert run.attempt == 3
    assert [a.state for a in run.previous_attempts] == [run_pb2.RUN_STATE_FAILED] * 2
    assert all(a.error.type == "ExitCode" and a.exit_code == 1 for a in run.previous_attempts)
    first, second, third = read_times(starts)
    assert second - first >= timedelta(milliseconds=500)
    assert third - second > second - first, "the backoff grows"
    dead = runs_of(search, "jobs/-", f'state = DEAD_LETTERED AND job = "{run_name.rsplit("/runs/", 1)[0]}"')
    assert [r.name for r in dead] == [run_name]
    assert run_name in _dead_letter_topic(mesh.env["JOBMESH_KAFKA_BOOTSTRAP"], run_name)

    replay = jobs.ReplayRun(job_service_pb2.ReplayRunRequest(name=run_name)).run
    assert replay.replay_of == run_name
    eventually(lambda: get_run(search, replay.name).state == run_pb2.RUN_STATE_SUCCEEDED, 20, "the replay")


def _dead_letter_topic(bootstrap: str, wanted: str) -> set[str]:
    consumer = Consumer(
        {
            "bootstrap.servers": bootstrap,
            "group.id": f"acceptance-{time.time_ns()}",
            "auto.offset.reset": "earliest",
            "enable.auto.commit": False,
            "session.timeout.ms": 6000,
        }
    )
    names: set[str] = set()
    try:
        consumer.subscribe([DEAD_LETTER_TOPIC])
        deadline = time.monotonic() + 30
        while wanted not in names and time.monotonic() < deadline:
            message = consumer.poll(0.5)
            if message is not None and message.error() is None:
                names.add(dispatch_pb2.DispatchedRun.FromString(message.value() or b"").attempt.run)
    finally:
        consumer.close()
    return names


@pytest.mark.timing
def test_a_killed_executors_run_is_retried_elsewhere_once_its_processes_are_gone(
    mesh: Mesh, tmp_path: Path
) -> None:
    """The command runs `sleep 60` and a `setsid sleep 60` that left its process group: SIGKILL of the
    executor takes both down within 2 s, and the retry starts on the other executor only after that."""
    server = mesh.server()
    mesh.watcher()
    first, second = mesh.executor(server, "executor-a"), mesh.executor(server, "executor-b")
    jobs, search = mesh.stubs(server)
    pids = tmp_path / "pids"
    job = command_job(mesh.queue, escaping_sleeps(tmp_path / "starts", pids))
    job.heartbeat_timeout.FromSeconds(5)
    job.retry_policy.max_attempts = 2
    job.retry_policy.initial_backoff.FromMilliseconds(100)
    run_name = create(jobs, job).run.name

    running = wait_for_run(
        search, run_name, lambda r: r.state == run_pb2.RUN_STATE_RUNNING, 20, "the first attempt"
    )
    victim, survivor = (first, second) if running.executor == "executor-a" else (second, first)
    sleeps = eventually(lambda: pids_in(pids, 2), 10, "the command and its escapee to start")
    killed_at = datetime.now(UTC)
    victim.kill(signal.SIGKILL)
    eventually(lambda: all(pid_gone(pid) for pid in sleeps), 10, "both sleeps to die with their executor")
    gone_at = datetime.now(UTC)

    retried = wait_for_run(
        search,
        run_name,
        lambda r: r.attempt == 2 and r.state == run_pb2.RUN_STATE_RUNNING,
        20,
        "the retry to run",
    )
    assert retried.executor == survivor.name

    def both_starts() -> list[datetime] | None:  # RUNNING comes with the claim, the command's stamp after
        starts = read_times(tmp_path / "starts")
        return starts if len(starts) == 2 else None

    starts = eventually(both_starts, 5, "the retry's command to start")
    assert starts[1] > gone_at  # never beside the first attempt's processes
    # Found lost within about 2 s of its heartbeat timeout (5 s): the session's renewals and the sweeps are
    # each a second apart (once 7.05 s after the kill, on a loaded machine); due a backoff (100 ms and its
    # jitter) later, and started within the 2 s every run is promised.
    [lost] = retried.previous_attempts
    due = retried.due_time.ToDatetime(UTC)
    assert due - killed_at < timedelta(seconds=5 + 1 + 1 + 0.5)
    started = retried.start_time.ToDatetime(UTC)
    assert timedelta(0) <= started - due < timedelta(seconds=2), (killed_at, due, started)
    assert lost.state == run_pb2.RUN_STATE_FAILED
    assert lost.error.type == "HeartbeatLost"
    assert "executor-" in lost.error.message


@pytest.mark.timing
def test_an_executor_killed_and_started_again_under_its_name_retries_what_it_ran(
    mesh: Mesh, tmp_path: Path
) -> None:
    """Executor names are stable where credentials bind them. The new process renews the name's session at
    once, which kept the dead process's attempt RUNNING for ever; its hello holds nothing, so the attempt
    ends `NotHeld` and is retried well within its heartbeat timeout, on the same name."""
    server = mesh.server()
    mesh.watcher()
    first = mesh.executor(server, "executor-stable")
    jobs, search = mesh.stubs(server)
    marker = tmp_path / "first-attempt-ran"
    job = command_job(
        mesh.queue, f"if [ -e {marker} ]; then echo again; else touch {marker}; exec sleep 60; fi"
    )
    job.heartbeat_timeout.FromSeconds(60)  # the sweeper alone would wait a minute
    job.retry_policy.max_attempts = 2
    job.retry_policy.initial_backoff.FromMilliseconds(100)
    run_name = create(jobs, job).run.name
    # RUNNING comes with the claim, before the command starts: killed before its `touch`, the first attempt
    # would leave the retry to sleep instead.
    eventually(marker.exists, 20, "the first attempt's command to start")
    first.kill(signal.SIGKILL)
    restarted_at = datetime.now(UTC)
    mesh.executor(server, "executor-stable")

    done = wait_for_run(
        search, run_name, lambda r: r.state == run_pb2.RUN_STATE_SUCCEEDED, 30, "the retry to succeed"
    )
    assert done.attempt == 2
    assert done.executor == "executor-stable"
    [lost] = done.previous_attempts
    assert lost.error.type == "NotHeld"
    assert done.start_time.ToDatetime(UTC) - restarted_at < timedelta(seconds=30)


def test_a_flood_of_output_is_cut_at_the_budget_with_a_true_marker_and_flat_memory(mesh: Mesh) -> None:
    server = mesh.server()
    mesh.watcher()
    executor = mesh.executor(server)
    jobs, search = mesh.stubs(server)
    warm_up(mesh, jobs, search)
    before = rss_bytes(executor.popen.pid)
    name = create(jobs, command_job(mesh.queue, FLOOD)).run.name
    peak = peak_rss_while(executor.popen.pid, lambda: get_run(search, name).state in TERMINAL, timeout=120)
    run = get_run(search, name)
    assert run.state == run_pb2.RUN_STATE_SUCCEEDED, run  # its error says why
    print(f"a {FLOOD_MB} MB flood: the executor grew by {(peak - before) / 2**20:.1f} MiB")
    assert peak - before < 20 * 2**20, f"the executor grew by {(peak - before) / 2**20:.1f} MiB"
    assert_flood_told_truly(log_texts(search, name), budget_lines=100_000)


@pytest.mark.timing
def test_cancel_stops_the_process_over_the_stream_and_without_it(mesh: Mesh, tmp_path: Path) -> None:
    front, back = mesh.server("server-a"), mesh.server("server-b")
    mesh.watcher()
    mesh.executor(front)
    jobs, search = mesh.stubs(back)

    run_name, pid = running_sleep(mesh, jobs, search, tmp_path / "pid1")
    jobs.CancelRun(job_service_pb2.CancelRunRequest(name=run_name, reason="test"))
    eventually(lambda: pid_gone(pid), AT_ONCE, "the process to stop (stream up)", interval=0.02)
    eventually(lambda: get_run(search, run_name).state == run_pb2.RUN_STATE_CANCELLED, 10, "CANCELLED")

    run_name, pid = running_sleep(mesh, jobs, search, tmp_path / "pid2")
    front.kill(signal.SIGKILL)  # the executor's stream is cut
    jobs.CancelRun(job_service_pb2.CancelRunRequest(name=run_name, reason="test"))
    eventually(lambda: pid_gone(pid), AT_ONCE, "the process to stop (stream cut)", interval=0.02)


def test_standby_watcher_takes_over_without_missing_or_doubling(
    mesh: Mesh, tmp_path: Path, database: str
) -> None:
    server = mesh.server()
    watchers = {"watcher-1": mesh.watcher("watcher-1"), "watcher-2": mesh.watcher("watcher-2")}
    mesh.executor(server)
    jobs, search = mesh.stubs(server)
    cron = command_job(
        mesh.queue,
        STAMP.format(file=tmp_path / "cron"),
        schedule=job_pb2.Schedule(cron=job_pb2.Schedule.Cron(expression="* * * * * *")),
    )
    job = create(jobs, cron).job
    store = open_store(database, migrate=False)
    try:
        leader = eventually(lambda: _lease_holder(store), 15, "a leader")
        eventually(lambda: len(_under_way(search, job.name)) >= 3, 15, "occurrences under the first leader")
        watchers[leader].kill(signal.SIGKILL)
        eventually(lambda: _lease_holder(store) not in (None, leader), 15, "the standby to lead")
        took_over = datetime.now(UTC)

        def enough_under_the_standby() -> bool:
            runs = _under_way(search, job.name)
            return len(runs) >= 12 and sum(run.schedule_time.ToDatetime(UTC) > took_over for run in runs) >= 8

        eventually(enough_under_the_standby, 30, "occurrences under the standby")
    finally:
        store.close()
    jobs.PauseJob(job_service_pb2.PauseJobRequest(name=job.name))
    runs = eventually(lambda: _ended(search, job.name), 20, "the occurrences under way to end")
    times = [run.schedule_time.ToDatetime(UTC) for run in runs]
    assert len(set(times)) == len(times), "an occurrence ran twice"
    gaps = {later - earlier for earlier, later in itertools.pairwise(times)}
    assert gaps == {timedelta(seconds=1)}, f"an occurrence was missed: {sorted(gaps)}"
    assert len(times) >= 12


def _under_way(search: SearchServiceStub, job: str) -> list[run_pb2.Run]:
    """The job's runs past SCHEDULED (queued, running or ended)."""
    return [run for run in runs_of(search, job) if run.state != run_pb2.RUN_STATE_SCHEDULED]


def _ended(search: SearchServiceStub, job: str) -> list[run_pb2.Run] | None:
    """The job's runs past SCHEDULED once every one of them has ended; None while some are under way."""
    runs = _under_way(search, job)
    return runs if all(run.state in TERMINAL for run in runs) else None


def _lease_holder(store: object) -> str | None:
    from sqlalchemy import text

    with store.engine.connect() as connection:  # type: ignore[attr-defined]
        row = connection.execute(text("SELECT holder, expires_at FROM leases WHERE name = 'watcher'")).first()
    if row is None or row.expires_at < datetime.now(UTC):
        return None
    return str(row.holder)


def test_a_duplicate_message_starts_the_attempt_once(mesh: Mesh, tmp_path: Path, database: str) -> None:
    server = mesh.server()
    mesh.watcher()
    mesh.executor(server)
    jobs, search = mesh.stubs(server)
    job = command_job(mesh.queue, STAMP.format(file=tmp_path / "starts"))
    job.schedule.run_at.FromDatetime(at(4))
    created = create(jobs, job)
    store = open_store(database, migrate=False)
    queue = open_queue(mesh.env["JOBMESH_KAFKA_BOOTSTRAP"])
    try:
        run = store.get_run(created.job.name.removeprefix("jobs/"), created.run.name.rsplit("/", 1)[1])
        spec = decode_spec(store.get_job(run.job_id).spec)
        message = message_of(Dispatchable(run, spec), datetime.now(UTC))
        queue.publish([message, message])  # twice, on top of the watcher's own
    finally:
        queue.close()
        store.close()
    eventually(lambda: get_run(search, created.run.name).state == run_pb2.RUN_STATE_SUCCEEDED, 20, "the run")
    time.sleep(2)
    assert len(read_times(tmp_path / "starts")) == 1


def test_a_busy_executor_holds_no_runs_hostage(mesh: Mesh) -> None:
    """Both slots of one executor are busy with 60 s sleeps: it steps aside from the queue, so every one of
    200 short jobs runs on the idle executor while the sleeps go on, none waiting in the busy one's share."""
    server = mesh.server()
    mesh.executor(server, "busy", concurrency=2)
    jobs, search = mesh.stubs(server)
    sleeps = [create(jobs, command_job(mesh.queue, "sleep 60")).run.name for _ in range(2)]
    for name in sleeps:
        wait_for_run(search, name, lambda run: run.state == run_pb2.RUN_STATE_RUNNING, 30, "a sleep")
    mesh.executor(server, "idle")
    batch = job_service_pb2.BatchCreateJobsRequest(
        requests=[job_service_pb2.CreateJobRequest(job=command_job(mesh.queue, "true")) for _ in range(200)]
    )
    names = [result.run.name for result in jobs.BatchCreateJobs(batch).results]

    def all_done() -> list[run_pb2.Run] | None:
        runs = [get_run(search, name) for name in names]
        return runs if all(run.state == run_pb2.RUN_STATE_SUCCEEDED for run in runs) else None

    done = eventually(all_done, 40, "the short jobs, while the sleeps run", interval=0.5)
    assert {run.executor for run in done} == {"idle"}
    assert [get_run(search, name).state for name in sleeps] == [run_pb2.RUN_STATE_RUNNING] * 2
