"""Python tasks without a mesh: registration, arguments as typed JSON both ways, error types, retry policies,
results read back typed. The way through a real mesh is in tests/acceptance/test_tasks.py."""

from __future__ import annotations

import asyncio
import dataclasses
import enum
import inspect
import json
from datetime import UTC, datetime, timedelta
from decimal import Decimal
from types import SimpleNamespace
from typing import Any

import pytest

from jobmesh.client import (
    HandlerRegistry,
    NonRetryableError,
    Run,
    Task,
    TaskFailed,
    Tasks,
    error_type_of,
    retry_policy,
)
from jobmesh.v1 import run_pb2

WHEN = datetime(2026, 12, 5, 3, 0, tzinfo=UTC)


class Size(enum.Enum):
    SMALL = "s"
    LARGE = "l"


@dataclasses.dataclass(frozen=True)
class Line:
    sku: str
    price: Decimal
    size: Size = Size.SMALL


@dataclasses.dataclass(frozen=True)
class Order:
    id: int
    due: datetime
    lines: list[Line]
    note: str | None = None


class Declined(Exception):
    pass


class Expired(Declined):
    pass


class Named(Exception):
    jobmesh_error_type = "billing.Named"


tasks = Tasks(retry=retry_policy(4, non_retryable_error_types=["Custom"]))


@tasks.task
def place(order: Order, *, rush: bool = False) -> Order:
    if order.id < 0:
        raise Expired(f"order {order.id}")
    if order.id == 0:
        raise Named("zero")
    if order.id == 1:
        raise KeyError("one")
    return dataclasses.replace(order, note="rush" if rush else "normal")


@tasks.task(name="sum", non_retryable=[Declined])
async def total(*amounts: Decimal, **extras: int) -> tuple[Decimal, int]:
    await asyncio.sleep(0)
    return sum(amounts, Decimal(0)), sum(extras.values())


@tasks.task(name="odd")
def odd() -> object:
    return object()


ORDER = Order(7, WHEN, [Line("a", Decimal("9.90"), Size.LARGE)])


def _run(task: Task[..., Any], *args: Any, **kwargs: Any) -> object:
    """What an executor does: the handler of the task's name, given the target's payload."""
    payload = task.target(*args, **kwargs).handler.payload
    outcome = tasks[task.name](SimpleNamespace(payload=payload))
    return asyncio.run(outcome) if asyncio.iscoroutine(outcome) else outcome


def test_a_task_is_registered_by_its_qualified_name_or_its_own() -> None:
    assert place.name == f"{__name__}.place"
    assert {place.name, "sum", "odd"} <= set(tasks)
    assert HandlerRegistry(tasks).names() == sorted(tasks)  # what `jobmesh dev --handlers MODULE:tasks` loads
    assert place(ORDER).note == "normal"  # calling it runs it here
    # An async task's handler is a coroutine function: the executor runs it on its loop and can cancel it.
    assert inspect.iscoroutinefunction(tasks["sum"])
    assert not inspect.iscoroutinefunction(tasks[place.name])
    with pytest.raises(ValueError, match="already registered"):
        tasks.task(name="sum")(odd.function)


def test_a_task_in_main_needs_a_name_and_annotations_may_come_later() -> None:
    def script() -> Later:
        return Later()

    script.__module__ = "__main__"
    with pytest.raises(ValueError, match="defined in __main__: give it a name="):
        tasks.task(script)
    named = tasks.task(name="script")(script)  # `Later` is defined below: resolved when first needed
    assert named.result_of(_finished(run_pb2.RUN_STATE_SUCCEEDED, "{}")) == Later()


@dataclasses.dataclass(frozen=True)
class Later:
    pass


def test_arguments_travel_as_json_and_come_back_typed() -> None:
    target = place.target(ORDER, rush=True)
    assert target.handler.name == place.name
    sent = json.loads(target.handler.payload)
    assert sent == {
        "args": [
            {
                "id": 7,
                "due": "2026-12-05T03:00:00+00:00",
                "lines": [{"sku": "a", "price": "9.90", "size": "l"}],
                "note": None,
            }
        ],
        "kwargs": {"rush": True},
    }
    assert _run(place, ORDER, rush=True) == json.loads(json.dumps(sent["args"][0] | {"note": "rush"}))
    assert _run(total, Decimal("1.5"), Decimal(2), tip=3) == ["3.5", 3]


def test_arguments_that_do_not_fit_are_refused_before_sending() -> None:
    with pytest.raises(TypeError, match=r"task '.*place': too many positional arguments"):
        place.target(ORDER, True)  # type: ignore[call-arg]
    with pytest.raises(TypeError, match="not JSON-serialisable"):
        place.target(dataclasses.replace(ORDER, note=object()))  # type: ignore[arg-type]
    with pytest.raises(TypeError, match="not JSON-serialisable"):
        total.target(Decimal(1), bad=float("nan"))  # type: ignore[arg-type]


@pytest.mark.parametrize(
    ("payload", "message"),
    [
        (b"{not json", "bad arguments"),
        (b'{"args": []}', "bad arguments"),
        (b'{"args": [], "kwargs": {}}', "missing a required argument"),
        (b'{"args": [{"id": "seven", "due": "2026-12-05", "lines": []}], "kwargs": {}}', "Order.id"),
        (b'{"args": [{"id": 7, "due": "yesterday", "lines": []}], "kwargs": {}}', "Order.due"),
        (b'{"args": [{"id": 7, "due": "2026-12-05", "lines": [], "colour": 1}], "kwargs": {}}', "colour"),
        (
            b'{"args": [{"id": 7, "due": "2026-12-05", "lines": [{"sku": "a", "price": "9", "size": "m"}]}], '
            b'"kwargs": {}}',
            "Line.size",
        ),
    ],
)
def test_a_payload_that_does_not_fit_the_annotations_fails_as_invalid_arguments(
    payload: bytes, message: str
) -> None:
    with pytest.raises(Exception, match=message) as failed:
        tasks[place.name](SimpleNamespace(payload=payload))
    assert getattr(failed.value, "jobmesh_error_type", None) == "InvalidTaskArguments"


def test_exceptions_get_their_error_types() -> None:
    assert error_type_of(KeyError) == "KeyError"
    assert error_type_of(Declined) == f"{__name__}.Declined"
    assert error_type_of(Named) == "billing.Named"
    assert error_type_of(NonRetryableError) == "NonRetryableError"
    cases = [(Order(-1, WHEN, []), f"{__name__}.Expired", "order -1")]
    cases += [(Order(0, WHEN, []), "billing.Named", "zero"), (Order(1, WHEN, []), "KeyError", "one")]
    for order, error_type, message in cases:
        with pytest.raises(Exception, match=message) as failed:
            _run(place, order)
        assert failed.value.jobmesh_error_type == error_type  # type: ignore[attr-defined]
        assert isinstance(failed.value.__cause__, (Declined, Named, KeyError))  # the traceback in the log


def test_a_subclass_of_a_non_retryable_class_fails_as_that_class() -> None:
    @tasks.task(name="expires", non_retryable=[Declined])
    def expires() -> None:
        raise Expired("late")

    with pytest.raises(Exception, match="late") as failed:
        _run(expires)
    assert failed.value.jobmesh_error_type == f"{__name__}.Declined"  # type: ignore[attr-defined]


def test_the_retry_policy_names_what_is_not_retried() -> None:
    policy = total.retry_policy()
    assert policy.max_attempts == 4  # the Tasks' policy
    assert list(policy.non_retryable_error_types) == [
        "Custom",
        "InvalidTaskArguments",
        "ResultNotSerializable",
        "ResultTooLarge",
        "NonRetryableError",
        f"{__name__}.Declined",
    ]
    assert tasks.retry is not None
    assert list(tasks.retry.non_retryable_error_types) == ["Custom"]  # untouched
    with pytest.raises(TypeError, match="exception classes"):
        tasks.task(name="bad", non_retryable=[ValueError("x")])(odd.function)  # type: ignore[list-item]


def test_a_return_value_json_cannot_write_fails_by_name() -> None:
    with pytest.raises(Exception, match="not JSON-serialisable") as failed:
        _run(odd)
    assert failed.value.jobmesh_error_type == "ResultNotSerializable"  # type: ignore[attr-defined]


def _finished(state: run_pb2.RunState.ValueType, result: str = "", error: tuple[str, str] = ("", "")) -> Run:
    proto = run_pb2.Run(name="jobs/j/runs/r", state=state, result=result)
    proto.error.type, proto.error.message = error
    return Run.of(proto)


def test_a_runs_result_is_read_back_typed() -> None:
    text = json.dumps({"id": 7, "due": "2026-12-05T03:00:00+00:00", "lines": [], "note": "x"})
    run = _finished(run_pb2.RUN_STATE_SUCCEEDED, text)
    assert run.result == json.loads(text)  # the SDK's Run: plain JSON values
    assert place.result_of(run) == Order(7, WHEN, [], "x")
    assert total.result_of(_finished(run_pb2.RUN_STATE_SUCCEEDED, '["3.5", 3]')) == (Decimal("3.5"), 3)


def test_a_run_that_did_not_succeed_raises_task_failed() -> None:
    run = _finished(run_pb2.RUN_STATE_DEAD_LETTERED, error=("KeyError", "'one'"))
    with pytest.raises(TaskFailed, match="DEAD_LETTERED: KeyError") as failed:
        place.result_of(run)
    assert (failed.value.error_type, failed.value.run) == ("KeyError", run)


def test_sending_needs_a_client() -> None:
    with pytest.raises(RuntimeError, match="has no client"):
        place.delay(ORDER)
    with pytest.raises(RuntimeError, match="has no async_client"):
        asyncio.run(place.delay_async(ORDER))
    with pytest.raises(RuntimeError, match="has no client"):
        place.apply_at(WHEN + timedelta(days=1), ORDER)
