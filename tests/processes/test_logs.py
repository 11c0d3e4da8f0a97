"""How the processes log: text lines that name the process, or JSON objects that carry each record's fields,
at the level asked for; `jobmesh --version`."""

from __future__ import annotations

import json
import logging
import re
import subprocess
import sys

from jobmesh.processes.logs import JsonLines
from tests.acceptance.processes import BIN

SCRIPT = """
import logging
from jobmesh.processes.logs import LogSettings, configure_logging
configure_logging({role!r}, worker={worker!r}, settings=LogSettings({level!r}, {format!r}))
log = logging.getLogger("jobmesh.test")
log.debug("debug line", extra={{"run": "jobs/a/runs/1"}})
log.info("info line", extra={{"executor": "e-1", "attempt": 2}})
log.warning("warning line")
try:
    raise ValueError("boom")
except ValueError:
    log.exception("failed")
"""


def logged(role: str, level: str, format_: str, worker: str = "") -> list[str]:
    script = SCRIPT.format(role=role, worker=worker, level=level, format=format_)
    done = subprocess.run(
        [sys.executable, "-c", script], capture_output=True, text=True, timeout=60, check=True
    )
    return done.stderr.splitlines()


def test_json_lines_parse_and_carry_each_records_fields() -> None:
    lines = [json.loads(line) for line in logged("watcher", "debug", "json")]
    assert [line["message"] for line in lines] == ["debug line", "info line", "warning line", "failed"]
    assert {line["process"] for line in lines} == {"watcher"}
    assert all(isinstance(line["pid"], int) and line["logger"] == "jobmesh.test" for line in lines)
    assert lines[0]["run"] == "jobs/a/runs/1"
    assert (lines[1]["executor"], lines[1]["attempt"], lines[1]["level"]) == ("e-1", 2, "INFO")
    assert "ValueError: boom" in lines[3]["traceback"]
    assert re.fullmatch(r"\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{3}\+00:00", lines[0]["time"])


def test_text_lines_name_the_process_and_its_worker_at_the_level_asked_for() -> None:
    lines = logged("server", "warning", "text", worker="server-0a1b")
    assert len([line for line in lines if " WARNING " in line or " ERROR " in line]) == 2
    assert not any("debug line" in line or "info line" in line for line in lines)
    assert re.match(r"^\S+ \S+ WARNING server\[\d+ server-0a1b\] jobmesh\.test: warning line$", lines[0])


def test_a_record_field_that_json_cannot_hold_is_written_as_text() -> None:
    record = logging.LogRecord("jobmesh.test", logging.INFO, __file__, 1, "with %s", ("args",), None)
    record.executors = {"b", "a"}  # a set: not JSON
    line = json.loads(JsonLines().format(record))
    assert line["message"] == "with args"
    assert line["executors"] in ("{'a', 'b'}", "{'b', 'a'}")


def test_the_version_is_the_packages() -> None:
    done = subprocess.run(
        [str(BIN / "jobmesh"), "--version"], capture_output=True, text=True, timeout=60, check=True
    )
    assert re.fullmatch(r"jobmesh \d+\.\d+\.\d+\S*\n", done.stdout)
