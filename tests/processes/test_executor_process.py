"""`jobmesh executor` as a real process: it connects, says what it will run (by default no command), and
SIGTERM drains it to a clean exit."""

from __future__ import annotations

import asyncio
import os
import signal
import subprocess
import sys
import time

import pytest

from tests.executor.fake_control import FakeControl

pytestmark = pytest.mark.processes


@pytest.mark.timing
def test_sigterm_drains_and_exits_cleanly() -> None:
    async def scenario() -> None:
        fake = FakeControl()
        await fake.start()
        env = {key: value for key, value in os.environ.items() if not key.startswith("JOBMESH_")}
        env.update(JOBMESH_SERVER=fake.address, JOBMESH_EXECUTOR_ID="spawned-1")
        process = await asyncio.create_subprocess_exec(
            sys.executable,
            "-m",
            "jobmesh.processes",
            "executor",
            "--drain-grace",
            "1s",
            env=env,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
        )
        try:
            await fake.wait_until(lambda: fake.hellos, timeout=15)
            assert fake.hellos[0].executor_id == "spawned-1"
            began = time.monotonic()
            process.send_signal(signal.SIGTERM)
            stdout, stderr = await asyncio.wait_for(process.communicate(), 10)
            assert process.returncode == 0, stderr.decode()
            assert time.monotonic() - began < 3.0
            assert b"draining" in stderr
            assert b"executor runs commands none; calls hosts * in networks public" in stdout
        finally:
            if process.returncode is None:
                process.kill()
                await process.wait()
            await fake.stop()

    asyncio.run(scenario())
