"""What only the in-process adapter has: TTLs on a clock of its hub's, which a test may turn by hand."""

from __future__ import annotations

from datetime import timedelta

from jobmesh.adapters.signals.memory import MemoryHub, MemorySignalBus
from jobmesh.core.attempts import AttemptRef


class Clock:
    def __init__(self) -> None:
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now


def test_a_fence_lasts_exactly_its_ttl_on_the_hubs_clock() -> None:
    clock = Clock()
    hub = MemoryHub(clock)
    one, another = MemorySignalBus(hub), MemorySignalBus(hub)
    key = AttemptRef("j", "r", 1)

    assert one.fence_attempts([key], "executors/e1", timedelta(seconds=10)) == {key}
    clock.now += 9.999
    assert another.fence_attempts([key], "executors/e2", timedelta(seconds=10)) == set()
    assert another.fence_owners([key]) == {key: "executors/e1"}

    clock.now += 0.001  # its TTL is over
    assert another.fence_owners([key]) == {}
    assert another.fence_attempts([key], "executors/e2", timedelta(seconds=10)) == {key}
    assert one.fence_attempts([key], "executors/e1", timedelta(seconds=10)) == set()
    assert one.fence_owners([key]) == {key: "executors/e2"}


def test_fencing_again_does_not_extend_a_fence() -> None:
    """SET NX, as on Redis: the owner's claim again leaves the first TTL as it was."""
    clock = Clock()
    bus = MemorySignalBus(MemoryHub(clock))
    key = AttemptRef("j", "r", 1)
    bus.fence_attempts([key], "executors/e1", timedelta(seconds=10))

    clock.now += 8
    assert bus.fence_attempts([key], "executors/e1", timedelta(seconds=10)) == {key}
    clock.now += 2

    assert bus.fence_owners([key]) == {}


def test_expired_fences_are_swept_from_the_hub() -> None:
    clock = Clock()
    hub = MemoryHub(clock)
    bus = MemorySignalBus(hub)
    bus.fence_attempts([AttemptRef("j", "r", n) for n in range(5)], "executors/e1", timedelta(seconds=1))

    clock.now += 5
    bus.fence_attempts([AttemptRef("j", "s", 1)], "executors/e1", timedelta(seconds=1))

    assert set(hub.fences) == {AttemptRef("j", "s", 1)}
