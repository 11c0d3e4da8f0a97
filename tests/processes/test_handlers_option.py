"""`--handlers MODULE:ATTR` (env JOBMESH_HANDLERS): a module's handlers are loaded into the executor, and a
bad MODULE:ATTR is a clear error, not a traceback."""

from __future__ import annotations

import asyncio
import os
import signal
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from jobmesh.executor.handlers import HandlerRegistry
from jobmesh.processes import command as cli
from tests.executor.fake_control import FakeControl

pytestmark = pytest.mark.processes


MODULE = """
from jobmesh.executor.handlers import HandlerRegistry

def stamp(context):
    return None

async def greet(context):
    return None

HANDLERS = {"bench.stamp": stamp, "greet": greet}
REGISTRY = HandlerRegistry({"only": stamp})

class Holder:
    handlers = {"nested": stamp}

NOT_A_MAPPING = [stamp]
NOT_CALLABLE = {"broken": 42}
"""


@pytest.fixture
def module(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> str:
    name = f"bench_handlers_{os.getpid()}"
    (tmp_path / f"{name}.py").write_text(textwrap.dedent(MODULE))
    monkeypatch.syspath_prepend(str(tmp_path))
    monkeypatch.delitem(sys.modules, name, raising=False)
    return name


def test_a_modules_mapping_is_loaded(module: str) -> None:
    registry = HandlerRegistry.load(f"{module}:HANDLERS")
    assert registry.names() == ["bench.stamp", "greet"]
    assert HandlerRegistry.load(f"{module}:REGISTRY").names() == ["only"]
    assert HandlerRegistry.load(f" {module}:Holder.handlers ").names() == ["nested"]


def test_the_flag_wins_over_the_environment(module: str, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("JOBMESH_HANDLERS", f"{module}:REGISTRY")
    assert cli.resolved("executor")["handlers"] == f"{module}:REGISTRY"
    assert cli.resolved("executor", ["--handlers", f"{module}:HANDLERS"])["handlers"] == f"{module}:HANDLERS"
    assert cli.resolved("dev", ["--handlers", f"{module}:HANDLERS"])["handlers"] == f"{module}:HANDLERS"
    monkeypatch.delenv("JOBMESH_HANDLERS")
    assert cli.resolved("executor")["handlers"] is None


@pytest.mark.parametrize(
    ("attr", "message"),
    [
        ("", "expected MODULE:ATTR"),
        (":HANDLERS", "expected MODULE:ATTR"),
        ("{module}", "expected MODULE:ATTR"),
        ("no_such_module_xyz:HANDLERS", "cannot import 'no_such_module_xyz'"),
        ("{module}:MISSING", "has no attribute 'MISSING'"),
        ("{module}:NOT_A_MAPPING", "a list, not a mapping of handler names to callables"),
        ("{module}:NOT_CALLABLE", "handler 'broken' is not callable"),
    ],
)
def test_a_bad_spec_says_what_is_wrong(module: str, attr: str, message: str) -> None:
    spec = attr.format(module=module)
    with pytest.raises(ValueError, match="handlers") as raised:
        HandlerRegistry.load(spec)
    assert message in str(raised.value)


def test_the_cli_reports_a_bad_spec_and_exits_2(capsys: pytest.CaptureFixture[str]) -> None:
    assert cli.main(["executor", "--handlers", "no_such_module_xyz:HANDLERS"]) == 2
    error = capsys.readouterr().err
    assert "'--handlers' (env var: 'JOBMESH_HANDLERS')" in error
    assert "handlers 'no_such_module_xyz:HANDLERS': cannot import" in error
    assert "Traceback" not in error


def test_the_executor_command_offers_the_loaded_handlers(module: str, tmp_path: Path) -> None:
    """`jobmesh executor --handlers` as a real process: its hello names the module's handlers."""

    async def scenario() -> None:
        fake = FakeControl()
        await fake.start()
        env = {
            key: value
            for key, value in os.environ.items()
            if key not in ("JOBMESH_KAFKA_BOOTSTRAP", "JOBMESH_QUEUE_URL", "JOBMESH_REDIS_URL")
        }
        env.update(
            PYTHONPATH=os.pathsep.join([str(tmp_path), env.get("PYTHONPATH", "")]),
            JOBMESH_EXECUTOR_ID="with-handlers",
            JOBMESH_SIGNALS_URL="memory://",
            JOBMESH_DRAIN_GRACE="1",
        )
        process = await asyncio.create_subprocess_exec(
            str(Path(sys.executable).parent / "jobmesh"),
            "executor",
            "--server",
            fake.address,
            "--handlers",
            f"{module}:HANDLERS",
            env=env,
            stdout=subprocess.DEVNULL,
            stderr=subprocess.PIPE,
        )
        try:
            await fake.wait_until(lambda: fake.hellos, timeout=30)
            assert fake.hellos[0].executor_id == "with-handlers"
            assert list(fake.hellos[0].handlers) == ["bench.stamp", "greet"]
            process.send_signal(signal.SIGTERM)
            _, stderr = await asyncio.wait_for(process.communicate(), 30)
            assert process.returncode == 0, stderr.decode()
        finally:
            if process.returncode is None:
                process.kill()
                await process.wait()
            await fake.stop()

    asyncio.run(scenario())
