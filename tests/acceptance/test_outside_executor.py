"""An executor outside `jobmesh dev` (another process: `jobmesh executor`, or the SDK's embeddable `Executor`
with its defaults) cannot read dev's in-process queue: dev refuses it at its hello with FAILED_PRECONDITION,
reason QUEUE_UNREACHABLE and the fix in the message, and the executor stops within 5 s, saying so, instead
of waiting for runs that never come. Dev's own executor runs the jobs all along; a hello that names a queue
dev does not have is refused the same way."""

from __future__ import annotations

import asyncio
import subprocess
import time
from collections.abc import Iterator

import grpc
import pytest

from jobmesh.client import Executor, ExecutorConfig, QueueUnreachable
from jobmesh.control.v1 import executor_control_pb2 as pb
from jobmesh.control.v1 import executor_control_pb2_grpc
from jobmesh.v1 import run_pb2
from tests.acceptance.mesh import create, wait_for_run
from tests.acceptance.processes import BIN, REPO, free_port
from tests.acceptance.test_dev import Stubs, command, dev
from tests.server.errors import error_info

pytestmark = pytest.mark.processes

SAYS_SO_WITHIN = 5.0  # seconds from the executor's start to its error: what the issue asks
# The fix the refusal names: dev's own executor, or a queue and a signal bus that other processes reach.
FIX = (
    "jobmesh dev --handlers MODULE:ATTR",
    "--queue-url kafka://HOST:PORT --signals-url redis://HOST:PORT/DB",
)


@pytest.fixture(scope="module")
def live_dev(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[str, Stubs]]:
    address = f"127.0.0.1:{free_port()}"
    with dev(tmp_path_factory.mktemp("outside"), address) as (_, stubs):
        yield address, stubs


def _assert_dev_still_runs_jobs(stubs: Stubs) -> None:
    jobs, search = stubs
    name = create(jobs, command("echo inside")).run.name
    wait_for_run(search, name, lambda r: r.state == run_pb2.RUN_STATE_SUCCEEDED, 60, "dev's own executor")


@pytest.mark.parametrize(
    "queue_flags",
    [[], ["--queue-url", f"kafka://127.0.0.1:{free_port()}"]],  # its default (memory://), and a Kafka
    ids=["default-queue", "kafka-queue"],
)
def test_the_executor_process_is_refused_within_5s_with_the_fix(
    live_dev: tuple[str, Stubs], queue_flags: list[str]
) -> None:
    address, stubs = live_dev
    executor = subprocess.Popen(
        [str(BIN / "jobmesh"), "executor", "--server", address, *queue_flags],
        cwd=REPO,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    try:
        assert executor.stdout is not None
        executor.stdout.readline()  # its banner: the interpreter has started, the executor starts now
        began = time.monotonic()
        out, err = executor.communicate(timeout=60)
        took = time.monotonic() - began
    finally:
        if executor.poll() is None:
            executor.kill()
            executor.wait()
    assert executor.returncode == 2, out + err
    assert took <= SAYS_SO_WITHIN, f"it said so after {took:.1f}s"
    [error] = [line for line in err.splitlines() if line.startswith("Error: ")]
    assert "the server refused this executor" in error
    assert all(fix in error for fix in FIX), error
    _assert_dev_still_runs_jobs(stubs)


def test_the_sdks_executor_with_its_defaults_is_refused_within_5s_with_the_fix(
    live_dev: tuple[str, Stubs],
) -> None:
    address, stubs = live_dev
    executor = Executor(ExecutorConfig(server=address))  # its queue: memory://, this process's own

    async def run() -> float:
        began = time.monotonic()
        with pytest.raises(QueueUnreachable) as caught:
            await asyncio.wait_for(executor.run(), 60)
        assert all(fix in caught.value.message for fix in FIX), caught.value.message
        return time.monotonic() - began

    took = asyncio.run(run())
    assert took <= SAYS_SO_WITHIN, f"it said so after {took:.1f}s"
    _assert_dev_still_runs_jobs(stubs)


@pytest.mark.parametrize("named", ["", "0123456789abcdef"])
def test_a_hello_that_does_not_name_devs_queue_is_refused_failed_precondition(
    live_dev: tuple[str, Stubs], named: str
) -> None:
    address, _ = live_dev
    hello = pb.ExecutorHello(executor_id=f"raw-{named or 'none'}", queues=["default"], in_process_queue=named)
    with grpc.insecure_channel(address) as channel:
        stream = executor_control_pb2_grpc.ExecutorControlStub(channel).Connect(
            iter([pb.ConnectRequest(hello=hello)]), timeout=30
        )
        with pytest.raises(grpc.RpcError) as caught:
            next(stream)
    error = caught.value
    assert error.code() == grpc.StatusCode.FAILED_PRECONDITION, error
    info = error_info(error)
    assert (info.reason, dict(info.metadata)) == ("QUEUE_UNREACHABLE", {"queue_kind": "IN_PROCESS"})
    assert all(fix in str(error.details()) for fix in FIX)
