"""`jobmesh jobs …`, `jobmesh runs …` and `jobmesh apply`: the API from a shell, on the SDK's `Client`. The
`jobmesh` command (`jobmesh.processes.command`) adds them beside the mesh's processes."""

from __future__ import annotations

import itertools
import json
from collections.abc import Iterable, Iterator, Sequence
from datetime import UTC, datetime, timedelta
from typing import IO, Any

import click
import grpc

from jobmesh.client._cli_session import (
    EXIT_CODES_HELP,
    EXIT_CONFLICT,
    EXIT_FAILED_RUN,
    EXIT_INVALID,
    EXIT_OTHER,
    Session,
    complete_jobs,
    connected,
)
from jobmesh.client._enums import RunState
from jobmesh.client._errors import DeadlineExceeded
from jobmesh.client._job_options import (
    PRIORITIES,
    job_fields,
    parse_duration,
    parse_moment,
    schedule_of,
    target_of,
)
from jobmesh.client._output import count_columns, dumps, job_columns, log_text, run_columns, run_line, table
from jobmesh.client._requests import JobFields, UpdateFields
from jobmesh.client._resources import BulkResult, Run
from jobmesh.client._specs import immediately

__all__ = ["apply", "jobs", "runs"]

_CONTEXT = {"help_option_names": ["-h", "--help"], "max_content_width": 110}


class Duration(click.ParamType[timedelta, str]):
    """`90s`, `5m`, `1h30m`, `250ms`, or a number of seconds."""

    name = "DURATION"

    def convert(self, value: Any, param: click.Parameter | None, ctx: click.Context | None) -> timedelta:
        if isinstance(value, timedelta):
            return value
        try:
            return parse_duration(value)
        except ValueError as error:
            self.fail(str(error), param, ctx)


class Moment(click.ParamType[datetime, str]):
    """An RFC 3339 time with its offset; a time without one is refused rather than guessed."""

    name = "TIME"

    def convert(self, value: Any, param: click.Parameter | None, ctx: click.Context | None) -> datetime:
        try:
            return parse_moment(value)
        except ValueError as error:
            self.fail(str(error), param, ctx)


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
    click.option("--priority", type=click.Choice(sorted(PRIORITIES)), help="the lane its runs travel on"),
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


def _warn_if_past(run_at: datetime | None) -> None:
    """A time already passed is accepted and its run starts at once: say so before sending it."""
    if run_at is not None and run_at <= datetime.now(UTC):
        click.echo(f"warning: --at {run_at.isoformat()} is in the past: the run starts at once", err=True)


def _spec_options(function: Any) -> Any:
    for option in reversed(_SPEC_OPTIONS):
        function = option(function)
    return function


def _fields(values: dict[str, Any], fields: JobFields) -> JobFields:
    """The job's fields that options set, added to `fields`."""
    return job_fields({**values, "labels": _labels(values["labels"])}, fields)


# Changes by filter ------------------------------------------------------------------------------------------

_BULK_FILTER = click.option(
    "--filter",
    "filter_",
    metavar="EXPR",
    help="instead of one: every one this list filter matches, at most 1,000 a call (for example "
    "'labels.team = \"a\"')",
)
_BULK_JOB = click.option(
    "--job",
    default="jobs/-",
    show_default=True,
    shell_complete=complete_jobs,
    help="with --filter: one job's runs (default: every job's)",
)
_DRY_RUN = click.option("--dry-run", is_flag=True, help="with --filter: count them, change nothing")


def _single(name: str | None, filter_: str | None, dry_run: bool, metavar: str) -> str | None:
    """The one resource named, or None for a call by --filter; a usage error for neither or both."""
    if (name is None) == (filter_ is None):
        raise click.UsageError(f"give either {metavar} or --filter")
    if name is not None and dry_run:
        raise click.UsageError("--dry-run goes with --filter")
    return name


def _bulk_told(session: Session, result: BulkResult, done: str, what: str) -> None:
    """Prints a bulk call's counts and each failure; exit 1 when some failed."""
    if session.json:
        click.echo(
            json.dumps(
                {
                    "matched": result.matched,
                    "changed": result.changed,
                    "dry_run": result.dry_run,
                    "failures": [{"name": f.name, "error": str(f.error)} for f in result.failures],
                },
                sort_keys=True,
            )
        )
    elif result.dry_run:
        click.echo(f"would be {done}: {result.matched} {what} (dry run, nothing changed)")
    else:
        click.echo(f"{done}: {result.changed} of {result.matched} {what}")
    for failure in result.failures:
        click.echo(f"jobmesh: {failure.name}: {failure.error}", err=True)
    if result.failures:
        raise click.exceptions.Exit(EXIT_OTHER)


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
    run_at = values.pop("run_at")
    schedule = schedule_of(run_at, values.pop("cron_expression"), values.pop("time_zone"))
    target = target_of(
        values.pop("argv"),
        values.pop("http_url"),
        values.pop("method"),
        values.pop("handler_name"),
        values.pop("payload"),
    )
    if target is None:
        raise click.UsageError("no target: give a program after `--`, --http URL or --handler NAME")
    fields = _fields(values, {})
    _warn_if_past(run_at)
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
    schedule = schedule_of(values["run_at"], values["cron_expression"], values["time_zone"])
    target = target_of(
        values["argv"], values["http_url"], values["method"], values["handler_name"], values["payload"]
    )
    if schedule is not None:
        fields["schedule"] = schedule
    if target is not None:
        fields["target"] = target
    if not fields:
        raise click.UsageError("nothing to update: give at least one field's option")
    _warn_if_past(values["run_at"])
    with session.client() as client:
        _print(session, [client.update_job(job, etag=etag, **fields)], job_columns(), single=True)


def _job_verb(name: str, help_text: str, call: str) -> None:
    @jobs.command(name, context_settings=_CONTEXT, epilog=EXIT_CODES_HELP, help=help_text)
    @click.argument("job", required=False, shell_complete=complete_jobs)
    @_BULK_FILTER
    @_DRY_RUN
    @connected
    def verb(session: Session, job: str | None, filter_: str | None, dry_run: bool) -> None:
        with session.client() as client:
            if _single(job, filter_, dry_run, "JOB") is not None:
                _print(session, [getattr(client, call)(job)], job_columns(), single=True)
                return
            _bulk_told(
                session, getattr(client, f"{call}s")(filter=filter_, dry_run=dry_run), f"{name}d", "jobs"
            )


_job_verb(
    "pause",
    "Pauses a job, or with --filter every active job it matches: no new runs until resumed.",
    "pause_job",
)
_job_verb("resume", "Resumes a paused job, or with --filter every paused job it matches.", "resume_job")


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


@jobs.command("backfill", context_settings=_CONTEXT, epilog=EXIT_CODES_HELP)
@click.argument("job", shell_complete=complete_jobs)
@click.option("--from", "start", type=Moment(), required=True, help="the range's start, included (RFC 3339)")
@click.option(
    "--to", "end", type=Moment(), required=True, help="the range's end, excluded; not in the future"
)
@click.option("--pace", type=Duration(), help="the time between two runs' due times (default 1s)")
@click.option("--request-id", default=None, help="makes a retried backfill idempotent")
@connected
def backfill_job(
    session: Session,
    job: str,
    *,
    start: datetime,
    end: datetime,
    pace: timedelta | None,
    request_id: str | None,
) -> None:
    """Runs a cron job's occurrences in [--from, --to) again, one run each (trigger BACKFILL), released one
    --pace after the other."""
    with session.client() as client:
        made = client.backfill_job(job, start, end, pace=pace, request_id=request_id)
    if session.json:
        click.echo(dumps(made))
    elif made.first_schedule_time is None or made.last_schedule_time is None or made.last_due_time is None:
        click.echo("no occurrence in the range: no run made")
    else:
        click.echo(
            f"{made.run_count} backfill runs of {made.first_schedule_time.isoformat()}"
            f" to {made.last_schedule_time.isoformat()},"
            f" the last due at {made.last_due_time.isoformat(timespec='seconds')}"
        )


# runs -----------------------------------------------------------------------------------------------------


@click.group(context_settings=_CONTEXT, epilog=EXIT_CODES_HELP)
def runs() -> None:
    """Read, follow and steer runs. RUN is `jobs/JOB/runs/ID`."""


_UPCOMING = click.option(
    "--upcoming",
    is_flag=True,
    help="include upcoming runs too: those made ahead of their time, still SCHEDULED",
)


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
@_UPCOMING
@connected
def list_runs(session: Session, *, job: str, filter_: str, order_by: str, limit: int, upcoming: bool) -> None:
    """Lists runs, latest scheduled first, a page at a time."""
    with session.client() as client:
        found = client.list_runs(
            job, filter=filter_, order_by=order_by, page_size=min(limit, 1000), show_upcoming=upcoming
        )
        _print(session, _limited(found, limit), run_columns())


@runs.command("count", context_settings=_CONTEXT, epilog=EXIT_CODES_HELP)
@connected
def count_runs(session: Session) -> None:
    """Counts the runs per namespace, queue and state, as the mesh keeps them (the dashboard's board counts):
    each count is what `runs list --filter 'state = ...'` lists; upcoming runs are counted apart."""
    if session.output == "name":
        raise click.UsageError("runs count has no names to print: use -o table or -o json")
    with session.client() as client:
        _print(session, client.count_runs(), count_columns())


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
@click.argument("run", required=False)
@click.option("--reason", default="", help="why, recorded on the run")
@_BULK_FILTER
@_BULK_JOB
@_DRY_RUN
@connected
def cancel_run(  # noqa: PLR0917 - one argument per option
    session: Session, run: str | None, reason: str, filter_: str | None, job: str, dry_run: bool
) -> None:
    """Cancels a pending or running run, or with --filter every one it matches."""
    with session.client() as client:
        if (single := _single(run, filter_, dry_run, "RUN")) is not None:
            _print(session, [client.cancel_run(single, reason=reason)], run_columns(), single=True)
            return
        result = client.cancel_runs(job, filter=filter_ or "", reason=reason, dry_run=dry_run)
        _bulk_told(session, result, "cancelled", "runs")


@runs.command("replay", context_settings=_CONTEXT, epilog=EXIT_CODES_HELP)
@click.argument("run", required=False)
@_BULK_FILTER
@_BULK_JOB
@_DRY_RUN
@connected
def replay_run(session: Session, run: str | None, filter_: str | None, job: str, dry_run: bool) -> None:
    """Runs a failed, timed-out or dead-lettered run again, as a new run; with --filter, every one it
    matches."""
    with session.client() as client:
        if (single := _single(run, filter_, dry_run, "RUN")) is not None:
            _print(session, [client.replay_run(single)], run_columns(), single=True)
            return
        _bulk_told(
            session, client.replay_runs(job, filter=filter_ or "", dry_run=dry_run), "replayed", "runs"
        )


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
@_UPCOMING
@connected
def watch_runs(session: Session, job: str, filter_: str, timeout: timedelta | None, upcoming: bool) -> None:
    """Prints the matching runs now, then each change as it happens, until Ctrl-C (or --timeout)."""
    seen = 0
    with session.client() as client:
        try:
            for changes in client.watch_runs(job, filter=filter_, timeout=timeout, show_upcoming=upcoming):
                session.status.clear()
                for changed in changes.runs:
                    click.echo(_change(session, changed))
                seen += len(changes.runs)
                session.status.show(f"watching {job}: {seen} changes")
        except DeadlineExceeded:
            return


# apply ----------------------------------------------------------------------------------------------------


@click.command("apply", context_settings=_CONTEXT, epilog=EXIT_CODES_HELP)
@click.option(
    "-f",
    "--filename",
    "file",
    type=click.File("r"),
    required=True,
    help="the YAML file of jobs (`-`: standard input)",
)
@click.option("--dry-run", is_flag=True, help="print the changes and make none")
@click.option(
    "--set",
    "set_name",
    default="apply",
    show_default=True,
    metavar="NAME",
    help="the set of jobs the file manages: those labelled jobmesh.dev/managed-by=NAME",
)
@connected
def apply(session: Session, file: IO[str], dry_run: bool, set_name: str) -> None:
    """Makes the server's jobs match a file: creates, updates and deletes jobs.

    \b
    The file maps each job id to the fields of `jobs create` (see the README):
      jobs:
        nightly-report:
          cron: '0 3 * * *'
          time-zone: Europe/Paris
          http: https://example.com/report
          labels: {team: billing}
    Only jobs labelled jobmesh.dev/managed-by=NAME (--set) are ever updated or deleted. The whole file is
    checked first: a bad one changes nothing. A file already applied changes nothing and says so.
    """
    from jobmesh.client import _apply as applying
    from jobmesh.client._apply_file import ManifestError, check_set_name, load_jobs

    source = file.name if file.name != "<stdin>" else "standard input"
    try:
        declared = load_jobs(file.read(), source, check_set_name(set_name))
        with session.client() as client:
            plan = applying.plan(client, declared, set_name, source)
            if not dry_run:
                for change in applying.apply_plan(client, plan):
                    if not session.json:
                        click.echo("\n".join(applying.change_lines(change, done=True)))
    except ManifestError as refused:
        click.echo(f"jobmesh: {refused}", err=True)
        conflict = isinstance(refused, applying.ApplyConflict)
        raise click.exceptions.Exit(EXIT_CONFLICT if conflict else EXIT_INVALID) from None
    if session.json:
        click.echo(json.dumps(applying.plan_json(plan, dry_run=dry_run), sort_keys=True))
        return
    if dry_run:
        for change in plan.changes:
            if change.action is not applying.Action.UNCHANGED:
                click.echo("\n".join(applying.change_lines(change, done=False)))
    click.echo(applying.summary(plan, source, dry_run=dry_run))
