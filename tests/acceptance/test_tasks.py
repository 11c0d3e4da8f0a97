"""Python tasks end to end, on a real `jobmesh dev` and on the production mesh (server, watcher and executor
processes on PostgreSQL, Kafka and Redis): a decorated function called with `.delay(...)` returns its value
through `result()`, sync and async; its exception marked not retryable ends the run on its first attempt; an
unknown task, arguments that do not fit and a return value too large end the run with a named error type."""

from __future__ import annotations

import asyncio
import dataclasses
from collections.abc import Iterator
from datetime import UTC, datetime, timedelta

import pytest

from jobmesh.client import (
    AsyncClient,
    Client,
    NonRetryableError,
    RunState,
    RunTrigger,
    TaskFailed,
    TaskRun,
    Tasks,
    cron,
    handler,
    immediately,
    retry_policy,
)
from tests.acceptance.mesh import Mesh, warm_up
from tests.acceptance.processes import REPO, free_port
from tests.acceptance.test_dev import dev

pytestmark = pytest.mark.processes

# Retried up to three times, quickly: a retry would show as a second attempt.
tasks = Tasks(retry=retry_policy(3, initial_backoff=timedelta(milliseconds=100)))
WAIT = timedelta(seconds=60)


@dataclasses.dataclass(frozen=True)
class Order:
    id: int
    due: datetime


class CardDeclined(Exception):
    pass


@tasks.task(name="tasks.add")
def add(x: int, y: int) -> int:
    return x + y


@tasks.task(name="tasks.later")
async def later(order: Order, days: int = 1) -> Order:
    await asyncio.sleep(0)
    return Order(order.id, order.due + timedelta(days=days))


@tasks.task(name="tasks.charge", non_retryable=[CardDeclined])
def charge(order_id: int) -> None:
    raise CardDeclined(f"order {order_id}: declined")


@tasks.task(name="tasks.flaky")
def flaky(order_id: int) -> None:
    raise RuntimeError(f"order {order_id}: try again")


@tasks.task(name="tasks.give-up")
def give_up() -> None:
    raise NonRetryableError("nothing to retry")


@tasks.task(name="tasks.huge")
def huge() -> str:
    return "x" * (64 * 1024 + 1)


ORDER = Order(7, datetime(2026, 12, 5, 3, 0, tzinfo=UTC))


def check_tasks(client: Client, address: str, queue: str = "") -> None:
    """What acceptance asks for, on the mesh at `address` that serves `tasks`."""
    tasks.client, tasks.queue = client, queue
    assert add.delay(2, 3).result(WAIT) == 5

    async def sent_async() -> Order:
        async with AsyncClient(address) as connected:
            tasks.async_client = connected
            return await (await later.delay_async(ORDER, days=2)).result(WAIT)

    assert asyncio.run(sent_async()) == Order(7, ORDER.due + timedelta(days=2))

    declined = charge.delay(7)
    with pytest.raises(TaskFailed) as failed:
        declined.result(WAIT)
    assert failed.value.error_type == f"{__name__}.CardDeclined"
    assert failed.value.message == "order 7: declined"
    assert (failed.value.run.state, failed.value.run.attempt) == (RunState.DEAD_LETTERED, 1)  # no retry

    gave_up = give_up.delay().wait(WAIT)
    assert (gave_up.error.type, gave_up.attempt) == ("NonRetryableError", 1)
    retried = flaky.delay(8).wait(WAIT)  # not marked: retried as its policy says
    assert (retried.state, retried.attempt, retried.error.type) == (RunState.DEAD_LETTERED, 3, "RuntimeError")

    too_large = huge.delay().wait(WAIT)
    assert (too_large.state, too_large.attempt, too_large.result) == (RunState.DEAD_LETTERED, 1, None)
    assert too_large.error.type == "ResultTooLarge"


def check_bad_inputs(client: Client, queue: str = "") -> None:
    """A task the executor does not have, and a payload that does not fit the function's annotations."""
    created = client.create_job(
        immediately(), handler("tasks.unknown", b'{"args": [], "kwargs": {}}'), queue=queue
    )
    assert created.run is not None
    unknown = client.wait_for_run(created.run.name, WAIT)
    assert (unknown.state, unknown.error.type) == (RunState.FAILED, "UnknownHandler")
    wrong = add.target(1, 2)
    wrong.handler.payload = b'{"args": ["one", 2], "kwargs": {}}'
    created = client.create_job(immediately(), wrong, queue=queue, retry_policy=add.retry_policy())
    assert created.run is not None
    refused = client.wait_for_run(created.run.name, WAIT)
    assert (refused.state, refused.attempt, refused.error.type) == (
        RunState.DEAD_LETTERED,
        1,
        "InvalidTaskArguments",
    )
    assert "argument 'x'" in refused.error.message


@pytest.fixture(scope="module")
def dev_address(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    address = f"127.0.0.1:{free_port()}"
    with pytest.MonkeyPatch.context() as patch:
        patch.setenv("PYTHONPATH", str(REPO))  # for `--handlers` to import this module
        with dev(tmp_path_factory.mktemp("dev"), address, "--handlers", f"{__name__}:tasks"):
            patch.undo()
            yield address


def test_on_jobmesh_dev_a_task_returns_its_value_and_a_non_retryable_exception_is_not_retried(
    dev_address: str,
) -> None:
    with Client(dev_address) as client:
        check_tasks(client, dev_address)


def test_on_jobmesh_dev_a_task_runs_at_a_time_and_on_a_cron(dev_address: str) -> None:
    """`apply_at` and `apply_on`; a handle whose run is not known yet finds it by its job."""
    with Client(dev_address) as client:
        tasks.client, tasks.queue = client, ""
        soon = datetime.now(UTC) + timedelta(seconds=1)
        assert add.apply_at(soon, 20, 22).result(WAIT) == 42
        sent = add.delay(1, 2)
        assert TaskRun(add, client, sent.job, None).result(WAIT) == 3
        job = add.apply_on(cron("* * * * * *"), 4, 5)  # every second
        try:
            first = TaskRun(add, client, job.name, None).wait(WAIT)
            assert add.result_of(first) == 9
            assert first.trigger == RunTrigger.SCHEDULE
        finally:
            client.delete_job(job.name)


def test_on_jobmesh_dev_bad_inputs_end_the_run_with_a_named_error(dev_address: str) -> None:
    with Client(dev_address) as client:
        check_bad_inputs(client)


@pytest.mark.postgres
@pytest.mark.kafka
@pytest.mark.redis
def test_on_the_production_mesh_a_task_returns_its_value_and_is_not_retried_when_marked(mesh: Mesh) -> None:
    server = mesh.server()
    mesh.watcher()
    mesh.env["PYTHONPATH"] = str(REPO)  # for `--handlers` to import this module
    mesh.executor(server, args=["--handlers", f"{__name__}:tasks"])
    warm_up(mesh, *mesh.stubs(server))
    with Client(server.address) as client:
        check_tasks(client, server.address, mesh.queue)
        check_bad_inputs(client, mesh.queue)
