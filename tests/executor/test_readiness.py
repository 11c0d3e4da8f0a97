"""An executor's readiness: its stream to the server is down until the server welcomes it, up while it holds,
and down again once it breaks (until the next welcome)."""

from __future__ import annotations

import asyncio

import grpc

from jobmesh.core.readiness import NOT_CHECKED, Readiness
from jobmesh.executor.config import ExecutorConfig
from jobmesh.executor.runtime import STREAM, Executor
from tests.executor.fake_control import FakeControl
from tests.executor.support import running_executor
from tests.support import AT_ONCE, arrives


def _stream(readiness: Readiness) -> tuple[bool, str]:
    [state] = [state for state in readiness.states() if state.name == STREAM]
    return state.up, state.detail


def test_a_new_executor_is_not_ready() -> None:
    executor = Executor(ExecutorConfig(), {})
    assert _stream(executor.readiness) == (False, NOT_CHECKED)
    assert not executor.readiness.ready()


def test_the_executor_reports_to_the_process_readiness() -> None:
    readiness = Readiness("dev", expected=("store",))
    readiness.report("store", True)
    executor = Executor(ExecutorConfig(), {}, readiness=readiness)
    assert executor.readiness is readiness
    assert [state.name for state in readiness.states()] == ["store", STREAM]
    assert not readiness.ready()


def test_the_stream_is_down_until_welcomed_up_while_it_holds_and_down_once_it_breaks() -> None:
    async def scenario() -> None:
        fake = FakeControl()
        fake.refuse_with = grpc.StatusCode.UNAVAILABLE  # a server that cannot take it yet
        await fake.start()
        try:
            async with running_executor(fake, connected=False) as rig:
                readiness = rig.executor.readiness
                await fake.wait_until(lambda: len(fake.hellos) >= 2)
                assert _stream(readiness) == (False, NOT_CHECKED)
                assert not readiness.ready()

                fake.refuse_with = None
                await arrives(readiness.ready, AT_ONCE + 1, "the stream up once welcomed")
                assert _stream(readiness) == (True, "server fake")

                await fake.stop()  # as a killed server would: the stream breaks
                await arrives(lambda: not readiness.ready(), AT_ONCE, "the stream down")
                assert _stream(readiness) == (False, f"no stream to {fake.address}")

                await fake.start()
                await arrives(readiness.ready, AT_ONCE + 1, "the stream up again")
        finally:
            await fake.stop()

    asyncio.run(scenario())
