"""`jobmesh jobs …` and `jobmesh runs …`: the API from a shell, on the SDK's `Client`. The `jobmesh`
command (`jobmesh.processes.command`) adds these two groups beside the mesh's processes."""

from __future__ import annotations

import itertools
import re
from collections.abc import Iterable, Iterator, Sequence
from datetime import datetime, timedelta
from typing import Any

import click
import grpc

from jobmesh.client._cli_session import EXIT_CODES_HELP, EXIT_FAILED_RUN, Session, complete_jobs, connected
from jobmesh.client._enums import RunState
from jobmesh.client._errors import DeadlineExceeded
from jobmesh.client._output import dumps, job_columns, log_text, run_columns, run_line, table
from jobmesh.client._requests import JobFields, UpdateFields
from jobmesh.client._resources import Run
from jobmesh.client._specs import at, command, cron, handler, http, immediately, retry_policy
from jobmesh.v1 import job_pb2

__all__ = ["jobs", "runs"]

_CONTEXT = {"help_option_names": ["-h", "--help"], "max_content_width": 110}
_DURATION = re.compile(r"^(?:(\d+)h)?(?:(\d+)m(?!s))?(?:(\d+(?:\.\d+)?)s)?(?:(\d+)ms)?$")
_PRIORITIES = {"high": job_pb2.PRIORITY_HIGH, "normal": job_pb2.PRIORITY_NORMAL, "low": job_pb2.PRIORITY_LOW}


class Duration(click.ParamType[timedelta, str]):
    """`90s`, `5m`, `1h30m`, `250ms`, or a number of seconds."""

    name = "DURATION"

    def convert(self, value: Any, param: click.Parameter | None, ctx: click.Context | None) -> timedelta:
        if isinstance(value, timedelta):
            return value
        text = str(value).strip()
        with_unit = _DURATION.match(text)
        if text and with_unit and any(with_unit.groups()):
            hours, minutes, seconds, millis = (float(part or 0) for part in with_unit.groups())
            return timedelta(hours=hours, minutes=minutes, seconds=seconds, milliseconds=millis)
        try:
            return timedelta(seconds=float(text))
        except ValueError:
            self.fail(f"{value!r} is not a duration such as 30s, 5m or 1h30m", param, ctx)


class Moment(click.ParamType[datetime, str]):
    """An RFC 3339 time with its offset; a time without one is refused rather than guessed."""

    name = "TIME"

    def convert(self, value: Any, param: click.Parameter | None, ctx: click.Context | None) -> datetime:
        if isinstance(value, datetime):
            return value
        try:
            moment = datetime.fromisoformat(str(value))
        except ValueError:
            self.fail(f"{value!r} is not a time such as 2026-12-24T18:00:00+01:00", param, ctx)
        if moment.tzinfo is None:
            self.fail(f"{value!r} has no time zone: add Z or an offset such as +01:00", param, ctx)
        return moment


def _labels(pairs: Sequence[str]) -> dict[str, str]:
    labels = {}
    for pair in pairs:
        key, sep, value = pair.partition("=")
        if not sep or not key:
            raise click.BadParameter(f"expected KEY=VALUE, got {pair!r}", param_hint="'--label'")
        labels[key] = value
    return labels


def _print(session: Session, items: Iterable[Any], columns: Any, *, single: bool = False) -> None:
    rows = list(items)
    if session.output == "name":
        for row in rows:
            click.echo(row.name)
    elif session.json:
        if single:
            click.echo(dumps(rows[0]))
        else:
            click.echo("[" + ",\n".join(dumps(row) for row in rows) + "]")
    else:
        click.echo(table(rows, columns))


def _limited(items: Iterator[Any], limit: int) -> Iterator[Any]:
    return itertools.islice(items, limit) if limit > 0 else items


# Options shared by create and update ------------------------------------------------------------------------

_SPEC_OPTIONS = (
    click.option("--display-name", help="free text shown on the dashboard"),
    click.option(
        "--label",
        "labels",
        multiple=True,
        metavar="KEY=VALUE",
        help="a label; repeatable (an update replaces them all)",
    ),
    click.option("--queue", help="the executor queue that takes the runs (default: default)"),
    click.option("--priority", type=click.Choice(sorted(_PRIORITIES)), help="the lane its runs travel on"),
    click.option("--at", "run_at", type=Moment(), help="run once at this time (RFC 3339, with its offset)"),
    click.option("--cron", "cron_expression", metavar="EXPR", help="run on this cron schedule"),
    click.option("--time-zone", metavar="ZONE", help="the IANA zone of --cron (default: UTC)"),
    click.option("--http", "http_url", metavar="URL", help="target: call this webhook"),
    click.option("--method", default="POST", show_default=True, help="the webhook's HTTP method"),
    click.option(
        "--handler", "handler_name", metavar="NAME", help="target: a handler registered in an executor"
    ),
    click.option("--payload", default="", help="the handler's payload (text)"),
    click.option(
        "--max-attempts",
        type=click.IntRange(min=1),
        help="attempts in all, retries included (an update replaces the retry policy)",
    ),
    click.option("--execution-timeout", type=Duration(), help="an attempt running longer ends TIMED_OUT"),
    click.argument("argv", nargs=-1, metavar="[-- PROGRAM ARGS...]"),
)


def _spec_options(function: Any) -> Any:
    for option in reversed(_SPEC_OPTIONS):
        function = option(function)
    return function


def _schedule(
    run_at: datetime | None, cron_expression: str | None, time_zone: str | None
) -> job_pb2.Schedule | None:
    if run_at is not None and cron_expression is not None:
        raise click.UsageError("give --at or --cron, not both")
    if time_zone is not None and cron_expression is None:
        raise click.UsageError("--time-zone goes with --cron")
    if cron_expression is not None:
        return cron(cron_expression, time_zone=time_zone or "UTC")
    return at(run_at) if run_at is not None else None


def _target(
    argv: Sequence[str], http_url: str | None, method: str, handler_name: str | None, payload: str
) -> job_pb2.Target | None:
    given = [
        kind
        for kind, value in (("a program", argv), ("--http", http_url), ("--handler", handler_name))
        if value
    ]
    if len(given) > 1:
        raise click.UsageError(f"one target only, not {' and '.join(given)}")
    if argv:
        return command(list(argv))
    if http_url:
        return http(http_url, method=method)
    return handler(handler_name, payload.encode()) if handler_name else None


def _fields(values: dict[str, Any], fields: JobFields) -> JobFields:
    """The job's fields that options set, added to `fields`."""
    if values["display_name"] is not None:
        fields["display_name"] = values["display_name"]
    if values["labels"]:
        fields["labels"] = _labels(values["labels"])
    if values["queue"] is not None:
        fields["queue"] = values["queue"]
    if values["priority"] is not None:
        fields["priority"] = _PRIORITIES[values["priority"]]
    if values["max_attempts"] is not None:
        fields["retry_policy"] = retry_policy(values["max_attempts"])
    if values["execution_timeout"] is not None:
        fields["execution_timeout"] = values["execution_timeout"]
    return fields


# jobs -----------------------------------------------------------------------------------------------------


@click.group(context_settings=_CONTEXT, epilog=EXIT_CODES_HELP)
def jobs() -> None:
    """Create, read and steer jobs (JobService, SearchService). JOB is `jobs/ID` or just ID."""


@jobs.command("create", context_settings=_CONTEXT, epilog=EXIT_CODES_HELP)
@click.option("--id", "job_id", default="", help="the job's id (default: the server picks one)")
@click.option("--namespace", default="", help="the job's namespace (default: default)")
@click.option("--request-id", help="makes a repeated create idempotent (default: a new one)")
@_spec_options
@connected
def create_job(session: Session, job_id: str, namespace: str, request_id: str | None, **values: Any) -> None:
    """Creates a job: now (the default), --at a time, or on --cron; running a program (after `--`), an
    --http webhook or a --handler.

    \b
      jobmesh jobs create -- sh -c 'echo hello'
      jobmesh jobs create --id nightly --cron '0 3 * * *' --time-zone Europe/Paris --http https://example.com/hook
    """
    schedule = _schedule(values.pop("run_at"), values.pop("cron_expression"), values.pop("time_zone"))
    target = _target(
        values.pop("argv"),
        values.pop("http_url"),
        values.pop("method"),
        values.pop("handler_name"),
        values.pop("payload"),
    )
    if target is None:
        raise click.UsageError("no target: give a program after `--`, --http URL or --handler NAME")
    fields = _fields(values, {})
    with session.client() as client:
        created = client.create_job(
            schedule or immediately(),
            target,
            job_id=job_id,
            namespace=namespace,
            request_id=request_id,
            **fields,
        )
    _print(session, [created.job], job_columns(), single=True)
    if created.run is not None and session.output == "table":
        click.echo(f"run: {created.run.name}")


@jobs.command("get", context_settings=_CONTEXT, epilog=EXIT_CODES_HELP)
@click.argument("job", shell_complete=complete_jobs)
@connected
def get_job(session: Session, job: str) -> None:
    """Shows a job."""
    with session.client() as client:
        _print(session, [client.get_job(job)], job_columns(), single=True)


@jobs.command("list", context_settings=_CONTEXT, epilog=EXIT_CODES_HELP)
@click.option(
    "--filter",
    "filter_",
    default="",
    metavar="EXPR",
    help="for example 'state = PAUSED AND labels.team = \"ops\"'",
)
@click.option("--order-by", default="", help="for example `next_run_time` or `create_time desc`")
@click.option(
    "--limit", type=click.IntRange(min=0), default=50, show_default=True, help="at most this many (0: all)"
)
@click.option("--show-deleted", is_flag=True, help="include deleted jobs")
@connected
def list_jobs(session: Session, filter_: str, order_by: str, limit: int, show_deleted: bool) -> None:
    """Lists jobs, newest first, a page at a time."""
    with session.client() as client:
        found = client.list_jobs(
            filter=filter_, order_by=order_by, page_size=min(limit, 1000), show_deleted=show_deleted
        )
        _print(session, _limited(found, limit), job_columns())


@jobs.command("update", context_settings=_CONTEXT, epilog=EXIT_CODES_HELP)
@click.argument("job", shell_complete=complete_jobs)
@click.option("--etag", default="", help="only if the job is still at this version (see `jobs get -o json`)")
@_spec_options
@connected
def update_job(session: Session, job: str, etag: str, **values: Any) -> None:
    """Changes the fields given, and only those (the update mask is built from the options)."""
    fields: UpdateFields = {}
    _fields(values, fields)
    schedule = _schedule(values["run_at"], values["cron_expression"], values["time_zone"])
    target = _target(
        values["argv"], values["http_url"], values["method"], values["handler_name"], values["payload"]
    )
    if schedule is not None:
        fields["schedule"] = schedule
    if target is not None:
        fields["target"] = target
    if not fields:
        raise click.UsageError("nothing to update: give at least one field's option")
    with session.client() as client:
        _print(session, [client.update_job(job, etag=etag, **fields)], job_columns(), single=True)


def _job_verb(name: str, help_text: str, call: str) -> None:
    @jobs.command(name, context_settings=_CONTEXT, epilog=EXIT_CODES_HELP, help=help_text)
    @click.argument("job", shell_complete=complete_jobs)
    @connected
    def verb(session: Session, job: str) -> None:
        with session.client() as client:
            _print(session, [getattr(client, call)(job)], job_columns(), single=True)


_job_verb("pause", "Pauses a job: no new runs until it is resumed.", "pause_job")
_job_verb("resume", "Resumes a paused job.", "resume_job")


@jobs.command("delete", context_settings=_CONTEXT, epilog=EXIT_CODES_HELP)
@click.argument("job", shell_complete=complete_jobs)
@click.option("--etag", default="", help="only if the job is still at this version")
@connected
def delete_job(session: Session, job: str, etag: str) -> None:
    """Deletes a job: its pending and running runs are cancelled, its history is kept."""
    with session.client() as client:
        _print(session, [client.delete_job(job, etag=etag)], job_columns(), single=True)


@jobs.command("run-now", context_settings=_CONTEXT, epilog=EXIT_CODES_HELP)
@click.argument("job", shell_complete=complete_jobs)
@connected
def run_job_now(session: Session, job: str) -> None:
    """Starts a run of a job now, outside its schedule."""
    with session.client() as client:
        _print(session, [client.run_job_now(job)], run_columns(), single=True)


# runs -----------------------------------------------------------------------------------------------------


@click.group(context_settings=_CONTEXT, epilog=EXIT_CODES_HELP)
def runs() -> None:
    """Read, follow and steer runs. RUN is `jobs/JOB/runs/ID`."""


@runs.command("list", context_settings=_CONTEXT, epilog=EXIT_CODES_HELP)
@click.option(
    "--job",
    default="jobs/-",
    show_default=True,
    shell_complete=complete_jobs,
    help="one job's runs (default: every job's)",
)
@click.option("--filter", "filter_", default="", metavar="EXPR", help="for example 'state = FAILED'")
@click.option("--order-by", default="", help="for example `start_time desc`")
@click.option(
    "--limit", type=click.IntRange(min=0), default=50, show_default=True, help="at most this many (0: all)"
)
@connected
def list_runs(session: Session, job: str, filter_: str, order_by: str, limit: int) -> None:
    """Lists runs, latest scheduled first, a page at a time."""
    with session.client() as client:
        found = client.list_runs(job, filter=filter_, order_by=order_by, page_size=min(limit, 1000))
        _print(session, _limited(found, limit), run_columns())


def _describe(run: Run) -> str:
    state = run.state.name
    progress = f", {run.progress:.0%} {run.progress_message}".rstrip() if run.progress else ""
    return f"waiting for {run.name}: {state} (attempt {run.attempt}{progress})"


@runs.command("get", context_settings=_CONTEXT, epilog=EXIT_CODES_HELP)
@click.argument("run")
@click.option("--wait", is_flag=True, help="wait until the run ends; exit 7 unless it SUCCEEDED")
@click.option("--timeout", type=Duration(), help="with --wait: give up after this long (exit 6)")
@connected
def get_run(session: Session, run: str, wait: bool, timeout: timedelta | None) -> None:
    """Shows a run; with --wait, once it has ended (its state shown on stderr meanwhile)."""
    with session.client() as client:
        if not wait:
            _print(session, [client.get_run(run)], run_columns(), single=True)
            return
        try:
            ended = client.wait_for_run(run, timeout, on_update=lambda r: session.status.show(_describe(r)))
        except TimeoutError as error:
            raise DeadlineExceeded(grpc.StatusCode.DEADLINE_EXCEEDED, str(error)) from None
    session.status.clear()
    _print(session, [ended], run_columns(), single=True)
    if ended.state != RunState.SUCCEEDED:
        raise click.exceptions.Exit(EXIT_FAILED_RUN)


@runs.command("cancel", context_settings=_CONTEXT, epilog=EXIT_CODES_HELP)
@click.argument("run")
@click.option("--reason", default="", help="why, recorded on the run")
@connected
def cancel_run(session: Session, run: str, reason: str) -> None:
    """Cancels a pending or running run."""
    with session.client() as client:
        _print(session, [client.cancel_run(run, reason=reason)], run_columns(), single=True)


@runs.command("replay", context_settings=_CONTEXT, epilog=EXIT_CODES_HELP)
@click.argument("run")
@connected
def replay_run(session: Session, run: str) -> None:
    """Runs a failed, timed-out or dead-lettered run again, as a new run."""
    with session.client() as client:
        _print(session, [client.replay_run(run)], run_columns(), single=True)


@runs.command("logs", context_settings=_CONTEXT, epilog=EXIT_CODES_HELP)
@click.argument("run")
@click.option("--follow", "-f", is_flag=True, help="keep printing new lines until the run ends")
@click.option("--after", type=click.IntRange(min=0), default=0, help="only lines after this sequence number")
@connected
def run_logs(session: Session, run: str, follow: bool, after: int) -> None:
    """Prints a run's log lines (stderr and system lines are marked)."""
    count = 0
    with session.client() as client:
        for line in client.tail_run_logs(run, follow=follow, after_sequence=after):
            session.status.clear()
            click.echo(dumps(line) if session.json else log_text(line))
            count += 1
            if follow:
                session.status.show(f"following {run}: {count} lines")


def _change(session: Session, run: Run) -> str:
    if session.output == "name":
        return run.name
    return dumps(run) if session.json else run_line(run)


@runs.command("watch", context_settings=_CONTEXT, epilog=EXIT_CODES_HELP)
@click.option(
    "--job",
    default="jobs/-",
    show_default=True,
    shell_complete=complete_jobs,
    help="one job's runs (default: every job's)",
)
@click.option("--filter", "filter_", default="", metavar="EXPR", help="for example 'state = RUNNING'")
@click.option("--timeout", type=Duration(), help="stop watching after this long (exit 0)")
@connected
def watch_runs(session: Session, job: str, filter_: str, timeout: timedelta | None) -> None:
    """Prints the matching runs now, then each change as it happens, until Ctrl-C (or --timeout)."""
    seen = 0
    with session.client() as client:
        try:
            for changes in client.watch_runs(job, filter=filter_, timeout=timeout):
                session.status.clear()
                for changed in changes.runs:
                    click.echo(_change(session, changed))
                seen += len(changes.runs)
                session.status.show(f"watching {job}: {seen} changes")
        except DeadlineExceeded:
            return
