"""Cancels reach the executor streams a server holds from its change feed too: a run another replica set
CANCELLING is pushed over the stream of its executor, when this process holds it, and nothing else is."""

from __future__ import annotations

import asyncio
import contextlib

from jobmesh.adapters.signals.factory import open_signals
from jobmesh.core.attempts import AttemptRef
from jobmesh.core.ports.store import FeedCursor, RunChange
from jobmesh.core.records import RunState
from jobmesh.server.sessions import SessionQueue, Sessions
from tests.adapters.store.builders import run


def change(run_id: str, state: RunState, executor: str) -> RunChange:
    return RunChange(run("j", run_id, state=state, executor=executor, attempt=2), {}, FeedCursor(1))


def test_a_run_seen_cancelling_is_cancelled_over_the_stream_of_its_executor_held_here() -> None:
    async def main() -> list[str]:
        signals = open_signals("memory://sessions-test")
        sessions = Sessions(signals)
        mine = SessionQueue(asyncio.get_running_loop())
        sessions.register("here", mine)
        sessions.push_cancelling(
            [
                change("cut", RunState.CANCELLING, "here"),
                change("other-executor", RunState.CANCELLING, "elsewhere"),
                change("still-running", RunState.RUNNING, "here"),
            ]
        )
        message = await asyncio.wait_for(mine.get(), 5)
        with contextlib.suppress(TimeoutError):  # nothing else comes: the others are not this stream's
            extra = await asyncio.wait_for(mine.get(), 0.2)
            raise AssertionError(f"pushed as well: {extra}")
        signals.close()
        assert message is not None
        return [AttemptRef.from_proto(ref).run_id for ref in message.cancels.attempts]

    assert asyncio.run(main()) == ["cut"]
