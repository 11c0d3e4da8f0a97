"""The SignalBus contract, run on every adapter (see conftest.py)."""

from __future__ import annotations

import logging
import time
from datetime import UTC, datetime, timedelta, timezone

import pytest

from jobmesh.core.attempts import AttemptRef
from jobmesh.core.ports.signals import CancelNotice, SignalBus
from jobmesh.core.ports.subscription import Subscription
from tests.adapters.signals.conftest import OpenBus
from tests.adapters.signals.helpers import Inbox, eventually, notice, with_new_listeners

LONG = timedelta(seconds=60)
SHORT = timedelta(milliseconds=300)


def attempts(count: int) -> list[AttemptRef]:
    return [AttemptRef("j", f"r{n % 7}", n) for n in range(count)]


def test_a_reachable_bus_passes_its_probe(bus: SignalBus) -> None:
    bus.check_reachable()  # returns, again and again: a probe asks every second
    bus.check_reachable()


def test_a_notice_reaches_a_subscriber_on_another_bus(open_bus: OpenBus) -> None:
    subscriber, publisher = open_bus(), open_bus()
    inbox = Inbox()
    subscriber.subscribe_cancels(inbox)
    sent = notice(1, reason='stopped by ops: ünïcode, "quotes" and : colons')

    publisher.publish_cancel(sent)

    assert inbox.wait_for(1) == [sent]


def test_every_subscriber_receives_every_notice_in_order(open_bus: OpenBus) -> None:
    first, second, publisher = open_bus(), open_bus(), open_bus()
    inboxes = [Inbox(), Inbox(), Inbox()]
    first.subscribe_cancels(inboxes[0])
    first.subscribe_cancels(inboxes[1])
    second.subscribe_cancels(inboxes[2])
    sent = [notice(n) for n in range(5)]

    for each in sent:
        publisher.publish_cancel(each)

    for inbox in inboxes:
        assert inbox.wait_for(len(sent)) == sent


def test_a_closed_subscription_gets_nothing_more(open_bus: OpenBus) -> None:
    subscriber, publisher = open_bus(), open_bus()
    closed, open_ = Inbox(), Inbox()
    subscription, listeners = with_new_listeners(lambda: subscriber.subscribe_cancels(closed))
    subscriber.subscribe_cancels(open_)

    subscription.close()
    assert listeners
    assert not any(listener.is_alive() for listener in listeners)  # stopped, not left by a join timeout
    subscription.close()  # twice is harmless
    publisher.publish_cancel(notice(1))

    assert open_.wait_for(1) == [notice(1)]
    assert closed.notices == []


def test_closing_a_bus_ends_its_subscriptions_only(open_bus: OpenBus) -> None:
    leaving, staying, publisher = open_bus(), open_bus(), open_bus()
    left, stayed = Inbox(), Inbox()
    leaving.subscribe_cancels(left)
    staying.subscribe_cancels(stayed)

    leaving.close()
    publisher.publish_cancel(notice(1))

    assert stayed.wait_for(1) == [notice(1)]
    assert left.notices == []


def test_a_failing_handler_keeps_its_subscription(
    open_bus: OpenBus, caplog: pytest.LogCaptureFixture
) -> None:
    subscriber, publisher = open_bus(), open_bus()
    inbox = Inbox()

    def handler(received: CancelNotice) -> None:
        inbox(received)
        if received == notice(1):
            raise RuntimeError("handler bug")

    subscriber.subscribe_cancels(handler)
    with caplog.at_level(logging.ERROR, logger="jobmesh.adapters.signals"):
        publisher.publish_cancel(notice(1))
        publisher.publish_cancel(notice(2))
        assert inbox.wait_for(2) == [notice(1), notice(2)]
    assert "cancel handler failed" in caplog.text


def test_a_handler_may_close_its_own_subscription(open_bus: OpenBus) -> None:
    subscriber, publisher = open_bus(), open_bus()
    inbox = Inbox()
    subscriptions: list[Subscription] = []

    def handler(received: CancelNotice) -> None:
        subscriptions[0].close()
        inbox(received)

    subscriptions.append(subscriber.subscribe_cancels(handler))
    publisher.publish_cancel(notice(1))

    assert inbox.wait_for(1) == [notice(1)]


def test_cancel_keys_are_seen_by_other_buses_until_their_ttl(open_bus: OpenBus) -> None:
    server, executor = open_bus(), open_bus()
    short, long_, never = AttemptRef("a", "1", 1), AttemptRef("a", "1", 2), AttemptRef("x", "1", 1)

    server.set_cancel_keys([short], SHORT)
    server.set_cancel_keys([long_], LONG)

    assert executor.cancelled([short, long_, never]) == {short, long_}
    assert eventually(lambda: executor.cancelled([short, long_, never]) == {long_}, timeout=3.0)


def test_cancelled_is_exactly_the_keyed_subset(bus: SignalBus) -> None:
    every = attempts(60)
    keyed = every[::3]
    bus.set_cancel_keys(keyed, LONG)

    assert bus.cancelled(every + every[:10]) == set(keyed)
    assert bus.cancelled(every[1::3]) == set()
    assert bus.cancelled([]) == set()


def test_setting_a_cancel_key_again_extends_it(bus: SignalBus) -> None:
    key = AttemptRef("a", "1", 1)
    bus.set_cancel_keys([key], SHORT)
    bus.set_cancel_keys([key, key], LONG)

    time.sleep(SHORT.total_seconds() + 0.2)

    assert bus.cancelled([key]) == {key}


def test_heartbeats_round_trip_across_buses_and_expire(open_bus: OpenBus) -> None:
    executor, watcher = open_bus(), open_bus()
    first, second, brief, none = attempts(4)
    at = datetime(2030, 5, 17, 8, 30, 15, 123456, tzinfo=UTC)
    later = datetime(2030, 5, 17, 10, 30, 20, 654321, tzinfo=timezone(timedelta(hours=2)))

    executor.put_heartbeats("executors/e1", [first, second], at, LONG)
    executor.put_heartbeats("executors/e1", [second], later, LONG)
    executor.put_heartbeats("executors/e1", [brief], at, SHORT)
    seen = watcher.heartbeats([first, second, brief, none, first])

    assert seen == {first: at, second: later, brief: at}
    assert all(value.tzinfo is not None for value in seen.values())
    assert eventually(lambda: watcher.heartbeats([first, brief]) == {first: at}, timeout=3.0)
    assert watcher.heartbeats([]) == {}


def test_empty_batches_do_nothing(bus: SignalBus) -> None:
    cancelled, beating = attempts(2)
    at = datetime(2030, 5, 17, 8, 30, tzinfo=UTC)
    bus.set_cancel_keys([cancelled], LONG)
    bus.put_heartbeats("executors/e1", [beating], at, LONG)

    bus.set_cancel_keys([], LONG)
    bus.put_heartbeats("executors/e1", [], datetime.now(UTC), LONG)

    assert bus.cancelled([cancelled, beating]) == {cancelled}  # what was there stays, nothing is added
    assert bus.heartbeats([cancelled, beating]) == {beating: at}


@pytest.mark.parametrize("ttl", [timedelta(0), timedelta(seconds=-1)])
def test_a_ttl_must_be_positive(bus: SignalBus, ttl: timedelta) -> None:
    key = AttemptRef("a", "1", 1)
    with pytest.raises(ValueError, match="ttl"):
        bus.set_cancel_keys([key], ttl)
    with pytest.raises(ValueError, match="ttl"):
        bus.put_heartbeats("executors/e1", [key], datetime.now(UTC), ttl)


def test_a_heartbeat_time_must_say_its_zone(bus: SignalBus) -> None:
    with pytest.raises(ValueError, match="timezone"):
        bus.put_heartbeats("executors/e1", [AttemptRef("a", "1", 1)], datetime(2030, 1, 1), LONG)


def test_the_first_owner_of_a_fence_holds_it_across_buses(open_bus: OpenBus) -> None:
    one_server, another_server = open_bus(), open_bus()
    first, second, third = attempts(3)

    assert one_server.fence_attempts([first, second], "executors/e1", LONG) == {first, second}
    assert another_server.fence_attempts([second, third], "executors/e2", LONG) == {third}
    assert another_server.fence_attempts([first], "executors/e2", LONG) == set()

    assert one_server.fence_owners([first, second, third]) == {
        first: "executors/e1",
        second: "executors/e1",
        third: "executors/e2",
    }


def test_the_owner_of_a_fence_is_granted_it_again(bus: SignalBus) -> None:
    held, new = attempts(2)
    bus.fence_attempts([held], "executors/e1", LONG)

    # What it held already, with what it takes now: the answer is what it holds, repeats once.
    assert bus.fence_attempts([held, new, held], "executors/e1", LONG) == {held, new}
    assert bus.fence_attempts([held, new], "executors/e2", LONG) == set()
    assert bus.fence_owners([held, new, held]) == {held: "executors/e1", new: "executors/e1"}


def test_fence_owners_names_only_fenced_attempts(bus: SignalBus) -> None:
    fenced, unfenced = attempts(2)
    bus.fence_attempts([fenced], "executors/ünïcode:1", LONG)
    bus.set_cancel_keys([unfenced], LONG)  # other keys of the attempt are no fence
    bus.put_heartbeats("executors/e2", [unfenced], datetime.now(UTC), LONG)

    assert bus.fence_owners([fenced, unfenced]) == {fenced: "executors/ünïcode:1"}
    assert bus.fence_owners([]) == {}
    assert bus.fence_attempts([], "executors/e1", LONG) == set()


def test_a_fence_expires_after_its_ttl_and_another_owner_may_take_it(open_bus: OpenBus) -> None:
    one_server, another_server = open_bus(), open_bus()
    brief, lasting = attempts(2)
    one_server.fence_attempts([brief], "executors/e1", SHORT)
    one_server.fence_attempts([lasting], "executors/e1", LONG)

    assert eventually(lambda: another_server.fence_owners([brief, lasting]) == {lasting: "executors/e1"}, 3.0)
    assert another_server.fence_attempts([brief, lasting], "executors/e2", LONG) == {brief}
    assert one_server.fence_owners([brief, lasting]) == {brief: "executors/e2", lasting: "executors/e1"}


def test_a_fence_ttl_must_be_positive(bus: SignalBus) -> None:
    key = AttemptRef("a", "1", 1)
    with pytest.raises(ValueError, match="ttl"):
        bus.fence_attempts([key], "executors/e1", timedelta(0))
    assert bus.fence_owners([key]) == {}
