"""How the CLI prints resources: aligned tables for people, JSON (the proto's JSON form, with its field
names) for programs, and a status line on stderr while a command waits."""

from __future__ import annotations

import json
import sys
import time
from collections.abc import Callable, Iterable, Sequence
from datetime import UTC
from typing import IO, Any, Protocol

from google.protobuf import json_format, timestamp_pb2
from google.protobuf.message import Message

from jobmesh.client._enums import LogStream
from jobmesh.client._resources import Job, LogLine, Run

__all__ = [
    "Status",
    "count_columns",
    "dumps",
    "job_columns",
    "json_of",
    "log_text",
    "run_columns",
    "run_line",
    "table",
]

Columns = Sequence[tuple[str, Callable[[Any], str]]]


class _Resource(Protocol):
    """What the SDK hands out, with the message it was read from."""

    @property
    def proto(self) -> Message: ...


def json_of(resource: Message | _Resource) -> dict[str, Any]:
    message = resource if isinstance(resource, Message) else resource.proto
    return json_format.MessageToDict(message, preserving_proto_field_name=True)


def dumps(resource: Message | _Resource) -> str:
    return json.dumps(json_of(resource), sort_keys=True)


def _time(stamp: timestamp_pb2.Timestamp) -> str:
    if not stamp.seconds and not stamp.nanos:
        return "-"
    moment = stamp.ToDatetime(tzinfo=UTC)
    return moment.isoformat(timespec="seconds").replace("+00:00", "Z")


def _schedule(job: Job) -> str:
    kind = job.schedule.WhichOneof("kind")
    if kind == "cron":
        zone = job.schedule.cron.time_zone or "UTC"
        return f"cron {job.schedule.cron.expression} ({zone})"
    if kind == "run_at":
        return f"at {_time(job.schedule.run_at)}"
    return "now" if kind == "immediate" else "-"


def _target(job: Job) -> str:
    kind = job.target.WhichOneof("kind")
    if kind == "command":
        return " ".join(job.target.command.argv)
    if kind == "http":
        return f"{job.target.http.method or 'POST'} {job.target.http.url}"
    return f"handler {job.target.handler.name}" if kind == "handler" else "-"


def job_columns() -> Columns:
    return (
        ("NAME", lambda job: job.name),
        ("STATE", lambda job: job.state.name),
        ("SCHEDULE", _schedule),
        ("TARGET", _target),
        ("NEXT RUN", lambda job: _time(job.next_run_time)),
        ("DISPLAY NAME", lambda job: job.display_name or "-"),
    )


def run_columns() -> Columns:
    return (
        ("NAME", lambda run: run.name),
        ("STATE", lambda run: run.state.name),
        ("ATTEMPT", lambda run: str(run.attempt)),
        ("TRIGGER", lambda run: run.trigger.name if run.trigger else "-"),
        ("SCHEDULED", lambda run: _time(run.schedule_time)),
        ("STARTED", lambda run: _time(run.start_time)),
        ("ENDED", lambda run: _time(run.end_time)),
        ("EXIT", lambda run: "-" if run.exit_code is None else str(run.exit_code)),
        ("ERROR", lambda run: f"{run.error.type}: {run.error.message}" if run.error.type else "-"),
    )


def count_columns() -> Columns:
    """`RunCount`s' columns."""
    return (
        ("NAMESPACE", lambda count: count.namespace),
        ("QUEUE", lambda count: count.queue),
        ("STATE", lambda count: count.state.name),
        ("RUNS", lambda count: str(count.run_count)),
        ("UPCOMING", lambda count: str(count.upcoming_run_count) if count.upcoming_run_count else "-"),
    )


def run_line(run: Run) -> str:
    """A run's change on one line, as `runs watch` prints them."""
    state = run.state.name
    error = f"  {run.error.type}: {run.error.message}" if run.error.type else ""
    return f"{_time(run.update_time)}  {run.name}  {state}  attempt {run.attempt}{error}"


def table(rows: Iterable[Any], columns: Columns) -> str:
    """Rows under a header, each column as wide as its widest cell."""
    cells = [[header for header, _ in columns]]
    cells += [[cell(row) for _, cell in columns] for row in rows]
    widths = [max(len(line[i]) for line in cells) for i in range(len(columns))]
    return "\n".join(
        "  ".join(c.ljust(w) for c, w in zip(line, widths, strict=True)).rstrip() for line in cells
    )


def log_text(line: LogLine) -> str:
    prefix = "" if line.stream == LogStream.STDOUT else f"[{line.stream.name.lower()}] "
    return prefix + line.text


class Status:
    """One line on stderr that says what a command waits for, redrawn in place; only when stderr is a
    terminal, so that piped and captured output stays clean."""

    def __init__(self, stream: IO[str] | None = None) -> None:
        self._stream = stream if stream is not None else sys.stderr
        self._shown = False
        self._started = time.monotonic()
        self.enabled = self._stream.isatty()

    def show(self, text: str) -> None:
        if self.enabled:
            elapsed = int(time.monotonic() - self._started)
            self._stream.write(f"\r\033[K{text} ({elapsed}s)")
            self._stream.flush()
            self._shown = True

    def clear(self) -> None:
        """Before a line goes to stdout, or at the end: the status line is erased."""
        if self._shown:
            self._stream.write("\r\033[K")
            self._stream.flush()
            self._shown = False
