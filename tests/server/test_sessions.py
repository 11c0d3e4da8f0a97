"""Cancels reach the executor streams a server holds from its change feed too: a run another replica set
CANCELLING is pushed over the stream of its executor, when this process holds it, and nothing else is."""

from __future__ import annotations

import asyncio
import contextlib
import threading
from collections.abc import Sequence
from datetime import datetime, timedelta

import pytest

from jobmesh.adapters.signals.factory import open_signals
from jobmesh.core.attempts import AttemptRef
from jobmesh.core.errors import AlreadyExists
from jobmesh.core.ports.signals import CancelNotice
from jobmesh.core.ports.store import FeedCursor, RunChange
from jobmesh.core.records import RunState
from jobmesh.core.timestamps import utcnow
from jobmesh.server.executors.session_renewals import SessionRenewals
from jobmesh.server.executors.sessions import EXECUTOR_NAME_IN_USE, CancelsSent, SessionQueue, Sessions
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


def test_a_cancel_brought_by_every_route_goes_over_the_stream_once() -> None:
    async def main() -> list[list[str]]:
        signals = open_signals("memory://sessions-once")
        sessions = Sessions(signals)
        mine = SessionQueue(asyncio.get_running_loop())
        sessions.register("here", mine)
        sessions.start()
        cut = change("cut", RunState.CANCELLING, "here").run
        notice = CancelNotice("here", (AttemptRef.of(cut),), "stop")
        assert sessions.push(notice)  # the call, on this server
        signals.publish_cancel(notice)  # the signal bus, from another replica
        sessions.push_cancelling([change("cut", RunState.CANCELLING, "here")])  # the change feed
        # A cancel of another attempt in the same batch still goes, alone.
        sessions.push(CancelNotice("here", (AttemptRef.of(cut), AttemptRef("j", "other", 1)), "stop"))
        sent = []
        with contextlib.suppress(TimeoutError):
            while True:
                message = await asyncio.wait_for(mine.get(), 0.5)
                assert message is not None
                sent.append([AttemptRef.from_proto(ref).run_id for ref in message.cancels.attempts])
        sessions.close()
        signals.close()
        return sent

    assert asyncio.run(main()) == [["cut"], ["other"]]


class _Clock:
    def __init__(self) -> None:
        self.now = 100.0

    def __call__(self) -> float:
        return self.now


def test_a_cancel_is_due_again_only_unacknowledged_past_the_resend_interval() -> None:
    clock = _Clock()
    sent = CancelsSent(3.0, clock)
    a, b = AttemptRef("j", "a", 1), AttemptRef("j", "b", 1)
    assert sent.unsent([a]) == [a]
    assert sent.unsent([a]) == []
    assert sent.due([a, b]) == [b]  # never sent: due at once; a was sent just now
    clock.now += 2.9
    assert sent.due([a]) == []
    sent.acknowledged([b])
    clock.now += 0.1
    assert sent.due([a, b]) == [
        a
    ]  # unacknowledged for the interval: again; b, sent as long ago, was acknowledged
    clock.now += 10
    assert sent.due([b]) == []
    assert sent.due([a]) == [a]


def test_a_cancel_of_an_attempt_the_stream_no_longer_holds_is_forgotten() -> None:
    clock = _Clock()
    sent = CancelsSent(3.0, clock)
    acked, young, old = AttemptRef("j", "a", 1), AttemptRef("j", "b", 1), AttemptRef("j", "c", 1)
    sent.unsent([acked, old])
    sent.acknowledged([acked])
    clock.now += 3
    sent.unsent([young])
    sent.keep_only([])  # a grant the heartbeat batch was too early to name keeps its young cancel
    assert sent.unsent([acked, young, old]) == [acked, old]


def test_one_live_stream_per_executor_name_and_a_quiet_one_gives_its_name_up() -> None:
    async def main() -> None:
        signals = open_signals("memory://sessions-names")
        sessions = Sessions(signals)
        loop = asyncio.get_running_loop()
        first, second, third = SessionQueue(loop), SessionQueue(loop), SessionQueue(loop)
        sessions.register("exec-1", first)
        with pytest.raises(AlreadyExists) as caught:
            sessions.register("exec-1", second)  # the first has just been heard from
        assert caught.value.reason == EXECUTOR_NAME_IN_USE
        sessions.register("exec-1", third, quiet_limit=0.0)  # quiet past the limit: ended and replaced
        assert await asyncio.wait_for(first.get(), 5) is None
        sessions.unregister("exec-1", first)  # the ended stream's own cleanup leaves the new one
        assert sessions.executor_ids() == ["exec-1"]
        sessions.unregister("exec-1", third)
        assert sessions.executor_ids() == []
        signals.close()

    asyncio.run(main())


class _HeldRenewals:
    """Session writes of a store, in the order they finish; the renewal waits for `release_renewal`."""

    def __init__(self, *, holds: bool = True) -> None:
        """`holds`: whether the renewal finds the sessions it renews this server's (else another's)."""
        self.renewing, self.release_renewal = threading.Event(), threading.Event()
        self.finished: list[str] = []
        self._holds = holds

    def renew_sessions(
        self, executor_ids: Sequence[str], server_id: str, now: datetime, *, stale_after: timedelta
    ) -> frozenset[str]:
        self.renewing.set()
        self.release_renewal.wait(30)
        self.finished.append(f"renew {','.join(executor_ids)}")
        return frozenset(executor_ids if self._holds else ())

    def release_session(self, executor_id: str, server_id: str) -> None:
        self.finished.append(f"release {executor_id}")


def _renewals(store: _HeldRenewals, sessions: Sessions) -> SessionRenewals:
    return SessionRenewals(
        store,  # type: ignore[arg-type]
        sessions,
        utcnow,
        server_id="server-1",
        interval=timedelta(hours=1),
        stale_after=timedelta(hours=1),
    )


def test_a_renewal_that_read_the_streams_before_a_stream_took_its_name_leaves_that_stream_alone() -> None:
    """The renewal's write can find the name another server's (it was, until that server released it) while
    the new stream's take, just after, finds it free. Ending that stream would release a name a live stream
    had just taken: another server could take it at once."""

    async def main() -> list[str]:
        signals = open_signals("memory://sessions-take")
        sessions = Sessions(signals)
        stream = SessionQueue(asyncio.get_running_loop())
        sessions.register("exec-1", stream)  # registered, its take not yet made
        store = _HeldRenewals(holds=False)
        renewing = threading.Thread(target=_renewals(store, sessions).renew)
        renewing.start()
        assert store.renewing.wait(30)
        sessions.hold(stream)  # the take committed, after the renewal read the streams
        store.release_renewal.set()
        renewing.join(30)
        with contextlib.suppress(TimeoutError):
            ended = await asyncio.wait_for(stream.get(), 0.5)
            raise AssertionError(f"the stream got {ended!r}")
        signals.close()
        return store.finished

    assert asyncio.run(main()) == ["renew "]  # it renewed nothing: the stream did not hold its name yet


def test_a_renewal_that_finds_a_held_name_taken_elsewhere_ends_its_stream() -> None:
    async def main() -> None:
        signals = open_signals("memory://sessions-lost")
        sessions = Sessions(signals)
        stream = SessionQueue(asyncio.get_running_loop())
        sessions.register("exec-1", stream)
        sessions.hold(stream)
        store = _HeldRenewals(holds=False)
        store.release_renewal.set()
        _renewals(store, sessions).renew()
        assert await asyncio.wait_for(stream.get(), 5) is None
        signals.close()

    asyncio.run(main())


def test_a_stream_that_ends_during_a_renewal_is_released_after_it() -> None:
    """Else the renewal, which read the live streams before this one ended, took its name back after the
    release: held by no stream until it went stale, refusing the executor anywhere else."""

    async def main() -> list[str]:
        signals = open_signals("memory://sessions-release")
        sessions = Sessions(signals)
        stream = SessionQueue(asyncio.get_running_loop())
        sessions.register("exec-1", stream)
        sessions.hold(stream)
        store = _HeldRenewals()
        renewals = _renewals(store, sessions)
        renewing = threading.Thread(target=renewals.renew)
        renewing.start()
        assert store.renewing.wait(30)
        sessions.unregister("exec-1", stream)  # the stream ends, as the server's Connect does on its way out
        releasing = threading.Thread(target=renewals.release, args=("exec-1",))
        releasing.start()
        releasing.join(0.5)
        store.release_renewal.set()
        for thread in (renewing, releasing):
            thread.join(30)
        signals.close()
        return store.finished

    assert asyncio.run(main()) == ["renew exec-1", "release exec-1"]
