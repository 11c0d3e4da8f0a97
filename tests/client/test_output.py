"""The CLI's printing: the status line shows only on a terminal and is erased before output, tables align,
log lines name their stream."""

from __future__ import annotations

import io

from jobmesh.client import LogLine, Run
from jobmesh.client._output import Status, dumps, log_text, run_columns, run_line, table
from jobmesh.v1 import run_pb2


class Terminal(io.StringIO):
    def isatty(self) -> bool:
        return True


def test_the_status_line_is_drawn_on_a_terminal_and_erased() -> None:
    terminal = Terminal()
    status = Status(terminal)
    status.show("waiting for jobs/a/runs/b: RUNNING")
    status.show("waiting for jobs/a/runs/b: SUCCEEDED")
    status.clear()
    status.clear()  # nothing more to erase
    written = terminal.getvalue()
    assert written.count("\r\033[K") == 3
    assert "RUNNING (0s)" in written
    assert written.endswith("\r\033[K")


def test_no_status_line_when_stderr_is_not_a_terminal() -> None:
    piped = io.StringIO()
    status = Status(piped)
    status.show("waiting")
    status.clear()
    assert piped.getvalue() == ""


def test_a_table_aligns_its_columns() -> None:
    runs = [
        Run.of(run_pb2.Run(name="jobs/a/runs/1", state=run_pb2.RUN_STATE_SUCCEEDED, attempt=1, exit_code=0)),
        Run.of(run_pb2.Run(name="jobs/long-name/runs/2", state=run_pb2.RUN_STATE_QUEUED, attempt=2)),
    ]
    lines = table(runs, run_columns()).splitlines()
    assert [line.index("STATE") for line in lines[:1]] == [
        line.index(s) for line, s in zip(lines[1:2], ["SUCCEEDED"], strict=True)
    ]
    assert lines[2].split() == ["jobs/long-name/runs/2", "QUEUED", "2", "-", "-", "-", "-", "-", "-"]
    assert lines[1].split()[7] == "0"  # an exit code of 0 is shown, not taken for unset


def test_log_lines_name_their_stream_unless_stdout() -> None:
    def line(stream: run_pb2.LogStream.ValueType, text: str) -> LogLine:
        return LogLine.of(run_pb2.LogLine(stream=stream, text=text))

    assert log_text(line(run_pb2.LOG_STREAM_STDOUT, "out")) == "out"
    assert log_text(line(run_pb2.LOG_STREAM_STDERR, "err")) == "[stderr] err"
    assert log_text(line(run_pb2.LOG_STREAM_SYSTEM, "retry")) == "[system] retry"


def test_a_run_prints_its_state_by_name_and_its_json_is_the_proto_json() -> None:
    run = Run.of(run_pb2.Run(name="jobs/a/runs/1", state=run_pb2.RUN_STATE_DEAD_LETTERED, attempt=3))
    assert run_line(run) == "-  jobs/a/runs/1  DEAD_LETTERED  attempt 3"
    assert dumps(run) == '{"attempt": 3, "name": "jobs/a/runs/1", "state": "RUN_STATE_DEAD_LETTERED"}'
