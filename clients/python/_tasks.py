"""Python functions as jobs, the way Celery users expect them: `@tasks.task` registers a function,
`.delay(...)` runs it on an executor with its arguments as JSON, and `.result()` brings its return value back.

    tasks = Tasks(Client("127.0.0.1:50051"))

    @tasks.task(non_retryable=[InvalidOrder], retry=retry_policy(5))
    def charge(order_id: int, amount: Decimal) -> dict[str, str]: ...

    charge.delay(7, Decimal("9.90")).result(timedelta(seconds=30))

The same `Tasks` is the mapping of handlers an executor serves (`jobmesh dev --handlers myapp:tasks`, or
`Executor(handlers=HandlerRegistry(tasks))`). A task's job is a `handler` target named after the task, its
payload `{"args": [...], "kwargs": {...}}` in JSON; its return value is the run's `result`.

An exception fails the attempt with its error type: the class's `jobmesh_error_type` when it has one, else its
qualified name (`ValueError`, `myapp.billing.CardDeclined`). The classes in `non_retryable` (and their
subclasses), and `NonRetryableError`, end the run without a retry: the job's retry policy names them.
"""

from __future__ import annotations

import asyncio
import functools
import inspect
import json
import time
import typing
from collections.abc import Awaitable, Callable, Coroutine, Iterator, Mapping, Sequence
from datetime import datetime, timedelta
from typing import TYPE_CHECKING, Any, Generic, ParamSpec, Protocol, TypeVar

from jobmesh.client._enums import RunState
from jobmesh.client._requests import CreatedJob
from jobmesh.client._resources import Job, Run
from jobmesh.client._specs import at, handler, immediately
from jobmesh.client._task_codec import TaskArgumentError, from_json, to_json, typed
from jobmesh.v1 import job_pb2

if TYPE_CHECKING:
    from jobmesh.client._async_client import AsyncClient
    from jobmesh.client._client import Client

__all__ = [
    "AsyncTaskRun",
    "NonRetryableError",
    "Task",
    "TaskArgumentError",
    "TaskFailed",
    "TaskRun",
    "Tasks",
    "error_type_of",
]

P = ParamSpec("P")
R = TypeVar("R")

# Error types a task's attempt may end with besides its own exceptions (never worth a retry).
INVALID_TASK_ARGUMENTS = "InvalidTaskArguments"
RESULT_NOT_SERIALIZABLE = "ResultNotSerializable"
RESULT_TOO_LARGE = "ResultTooLarge"
_ALWAYS_FINAL = (INVALID_TASK_ARGUMENTS, RESULT_NOT_SERIALIZABLE, RESULT_TOO_LARGE)


class NonRetryableError(Exception):
    """Raise it (or a subclass) from a task to end its run at once, whatever its retry policy."""

    jobmesh_error_type = "NonRetryableError"


class TaskFailed(Exception):
    """The task's run ended without a result: `run.state` says how, `error_type` and `message` why."""

    def __init__(self, run: Run) -> None:
        self.run = run
        self.error_type = run.error.type
        self.message = run.error.message
        super().__init__(
            f"{run.name} ended {run.state.name}: {run.error.type}: {run.error.message}".rstrip(": ")
        )


class _Failure(Exception):
    """What a task's wrapper raises in the executor: the executor reads `jobmesh_error_type`."""

    def __init__(self, error_type: str, message: str) -> None:
        super().__init__(message)
        self.jobmesh_error_type = error_type


def error_type_of(kind: type[BaseException]) -> str:
    """An exception class's error type: its `jobmesh_error_type`, else its qualified name (builtins bare)."""
    chosen = getattr(kind, "jobmesh_error_type", None)
    if isinstance(chosen, str) and chosen:
        return chosen
    if kind.__module__ == "builtins":
        return kind.__qualname__
    return f"{kind.__module__}.{kind.__qualname__}"


class _HasPayload(Protocol):
    payload: bytes


class _Decorator(Protocol):
    @typing.overload
    def __call__(self, function: Callable[P, Coroutine[Any, Any, R]], /) -> Task[P, R]: ...

    @typing.overload
    def __call__(self, function: Callable[P, R], /) -> Task[P, R]: ...


class Tasks(Mapping[str, Callable[[_HasPayload], object]]):
    """Tasks by name, and the clients they are sent with (`client` for `delay`, `async_client` for
    `delay_async`; either may be set later). As a mapping it is what an executor's handlers are."""

    def __init__(
        self,
        client: Client | None = None,
        *,
        async_client: AsyncClient | None = None,
        queue: str = "",
        retry: job_pb2.RetryPolicy | None = None,
    ) -> None:
        self.client = client
        self.async_client = async_client
        self.queue = queue
        self.retry = retry
        self._tasks: dict[str, Task[..., Any]] = {}

    # An async function's task gives what its coroutine returns: the first overloads say so.
    @typing.overload
    def task(self, function: Callable[P, Coroutine[Any, Any, R]], /) -> Task[P, R]: ...

    @typing.overload
    def task(self, function: Callable[P, R], /) -> Task[P, R]: ...

    @typing.overload
    def task(
        self,
        function: None = None,
        /,
        *,
        name: str = "",
        queue: str | None = None,
        retry: job_pb2.RetryPolicy | None = None,
        non_retryable: Sequence[type[BaseException]] = (),
    ) -> _Decorator: ...

    def task(
        self,
        function: Callable[..., Any] | None = None,
        /,
        *,
        name: str = "",
        queue: str | None = None,
        retry: job_pb2.RetryPolicy | None = None,
        non_retryable: Sequence[type[BaseException]] = (),
    ) -> Task[..., Any] | _Decorator:
        """Registers a function as a task, named `name` or `module.qualname`: `@tasks.task`, or
        `@tasks.task(name=..., queue=..., retry=..., non_retryable=[...])`. An async function's coroutine is
        awaited on the executor's loop; a plain function runs on a thread of its own."""

        def register(function: Callable[..., Any]) -> Task[..., Any]:
            made: Task[..., Any] = Task(
                self, function, name=name, queue=queue, retry=retry, non_retryable=non_retryable
            )
            if made.name in self._tasks:
                raise ValueError(f"task {made.name!r} is already registered")
            self._tasks[made.name] = made
            return made

        return typing.cast(_Decorator, register) if function is None else register(function)

    def __getitem__(self, name: str) -> Callable[[_HasPayload], object]:
        found = self._tasks[name]
        # A coroutine function, so that the executor runs it on its loop and cancels it on a cancel.
        return found.handle_async if inspect.iscoroutinefunction(found.function) else found.handle

    def __iter__(self) -> Iterator[str]:
        return iter(self._tasks)

    def __len__(self) -> int:
        return len(self._tasks)


class Task(Generic[P, R]):
    """A registered function. Calling it runs it here; `delay` and `apply_at` run it on an executor,
    `apply_on` on a schedule such as `cron(...)`."""

    def __init__(
        self,
        tasks: Tasks,
        function: Callable[P, Any],
        *,
        name: str = "",
        queue: str | None = None,
        retry: job_pb2.RetryPolicy | None = None,
        non_retryable: Sequence[type[BaseException]] = (),
    ) -> None:
        if not callable(function):
            raise TypeError(f"a task is a function, not a {type(function).__name__}")
        for kind in non_retryable:
            if not (isinstance(kind, type) and issubclass(kind, BaseException)):
                raise TypeError(f"non_retryable lists exception classes, not {kind!r}")
        if not name and function.__module__ == "__main__":
            # The executor imports the module by its own name: `__main__.f` would be unknown there.
            raise ValueError(f"task {function.__qualname__!r} is defined in __main__: give it a name=")
        self.function = function
        self.name = name or f"{function.__module__}.{function.__qualname__}"
        self._tasks = tasks
        self._queue = queue
        self._retry = retry
        self._non_retryable: tuple[type[BaseException], ...] = (NonRetryableError, *non_retryable)
        self._signature = inspect.signature(function)
        functools.update_wrapper(self, function)

    @functools.cached_property
    def _hints(self) -> dict[str, Any]:
        """The annotations, resolved on first use: they may name classes defined after the function."""
        return typing.get_type_hints(self.function)

    def __call__(self, *args: P.args, **kwargs: P.kwargs) -> Any:
        """Runs the function here and now (an async one's coroutine, to await)."""
        return self.function(*args, **kwargs)

    # Sending --------------------------------------------------------------------------------------------

    def target(self, *args: P.args, **kwargs: P.kwargs) -> job_pb2.Target:
        """The job's target for these arguments. TypeError when they do not fit the function or JSON."""
        try:
            self._signature.bind(*args, **kwargs)
        except TypeError as exc:
            raise TypeError(f"task {self.name!r}: {exc}") from None
        try:
            payload = to_json({"args": list(args), "kwargs": kwargs})
        except (TypeError, ValueError) as exc:
            raise TypeError(f"task {self.name!r}: the arguments are not JSON-serialisable: {exc}") from None
        return handler(self.name, payload.encode())

    def retry_policy(self) -> job_pb2.RetryPolicy:
        """The job's retry policy: the task's (or its `Tasks`'), naming the non-retryable error types."""
        policy = job_pb2.RetryPolicy()
        chosen = self._retry or self._tasks.retry
        if chosen is not None:
            policy.CopyFrom(chosen)
        names = [*_ALWAYS_FINAL, *(error_type_of(kind) for kind in self._non_retryable)]
        policy.non_retryable_error_types.extend(n for n in names if n not in policy.non_retryable_error_types)
        return policy

    def delay(self, *args: P.args, **kwargs: P.kwargs) -> TaskRun[R]:
        """Runs it now on an executor."""
        created = self._create(immediately(), self.target(*args, **kwargs))
        return TaskRun(self, self._client(), created.job.name, created.run.name if created.run else None)

    def apply_at(self, moment: datetime, *args: P.args, **kwargs: P.kwargs) -> TaskRun[R]:
        """Runs it at `moment` (an aware datetime), never before."""
        created = self._create(at(moment), self.target(*args, **kwargs))
        return TaskRun(self, self._client(), created.job.name, created.run.name if created.run else None)

    def apply_on(self, schedule: job_pb2.Schedule, *args: P.args, **kwargs: P.kwargs) -> Job:
        """A job that runs it on `schedule` (such as `cron("0 3 * * *")`); `result_of` reads its runs."""
        return self._create(schedule, self.target(*args, **kwargs)).job

    async def delay_async(self, *args: P.args, **kwargs: P.kwargs) -> AsyncTaskRun[R]:
        """`delay` through the `AsyncClient`."""
        client = self._async_client()
        target = self.target(*args, **kwargs)
        created = await client.create_job(immediately(), target, **self._fields())
        return AsyncTaskRun(self, client, created.job.name, created.run.name if created.run else None)

    def result_of(self, run: Run) -> R:
        """The return value kept on a run of this task, typed by the function's return annotation.
        TaskFailed when the run did not succeed."""
        if run.state is not RunState.SUCCEEDED:
            raise TaskFailed(run)
        value = from_json(run.proto.result) if run.proto.result else None
        return typing.cast(R, typed(value, self._hints.get("return", Any), f"task {self.name!r}'s result"))

    def _create(self, schedule: job_pb2.Schedule, target: job_pb2.Target) -> CreatedJob:
        return self._client().create_job(schedule, target, **self._fields())

    def _fields(self) -> dict[str, Any]:
        queue = self._tasks.queue if self._queue is None else self._queue
        return {"retry_policy": self.retry_policy(), **({"queue": queue} if queue else {})}

    def _client(self) -> Client:
        if self._tasks.client is None:
            raise RuntimeError(f"task {self.name!r}: its Tasks has no client (Tasks(Client(...)))")
        return self._tasks.client

    def _async_client(self) -> AsyncClient:
        if self._tasks.async_client is None:
            raise RuntimeError(f"task {self.name!r}: its Tasks has no async_client (Tasks(async_client=...))")
        return self._tasks.async_client

    # Running (in the executor) ---------------------------------------------------------------------------

    def handle(self, context: _HasPayload) -> object:
        """The handler an executor calls for a plain function: the arguments from the payload, typed; the
        return value as JSON values; an exception as a failure of the right error type."""
        args, kwargs = self._arguments(context.payload)
        try:
            value = self.function(*args, **kwargs)
        except Exception as exc:
            raise self._failure(exc) from exc
        return _json_values(value)

    async def handle_async(self, context: _HasPayload) -> object:
        """`handle` for an async function."""
        args, kwargs = self._arguments(context.payload)
        try:
            value = await typing.cast(Awaitable[object], self.function(*args, **kwargs))
        except Exception as exc:
            raise self._failure(exc) from exc
        return _json_values(value)

    def _arguments(self, payload: bytes) -> tuple[list[Any], dict[str, Any]]:
        try:
            decoded = json.loads(payload or b'{"args": [], "kwargs": {}}')
            args, kwargs = decoded["args"], decoded["kwargs"]
            bound = self._signature.bind(*args, **kwargs)
        except (ValueError, KeyError, TypeError) as exc:
            raise _Failure(INVALID_TASK_ARGUMENTS, f"task {self.name!r}: bad arguments: {exc}") from None
        try:
            for name, value in bound.arguments.items():
                kind = self._signature.parameters[name].kind
                hint = self._hints.get(name, Any)
                if kind is inspect.Parameter.VAR_POSITIONAL:
                    bound.arguments[name] = tuple(typed(v, hint, f"argument {name!r}") for v in value)
                elif kind is inspect.Parameter.VAR_KEYWORD:
                    bound.arguments[name] = {k: typed(v, hint, f"argument {k!r}") for k, v in value.items()}
                else:
                    bound.arguments[name] = typed(value, hint, f"argument {name!r}")
        except TaskArgumentError as exc:
            raise _Failure(INVALID_TASK_ARGUMENTS, f"task {self.name!r}: {exc}") from None
        return list(bound.args), dict(bound.kwargs)

    def _failure(self, exc: Exception) -> _Failure:
        kind = next((k for k in self._non_retryable if isinstance(exc, k)), type(exc))
        return _Failure(error_type_of(kind), str(exc) or repr(exc))


def _json_values(value: object) -> object:
    try:
        return json.loads(to_json(value))
    except (TypeError, ValueError, RecursionError) as exc:
        raise _Failure(RESULT_NOT_SERIALIZABLE, f"the return value is not JSON-serialisable: {exc}") from None


def _seconds(timeout: timedelta | float) -> float:
    return timeout.total_seconds() if isinstance(timeout, timedelta) else float(timeout)


class TaskRun(Generic[R]):
    """A task's run, sent with a `Client`. `run` is None until the run is made (a task due later)."""

    def __init__(self, task: Task[..., R], client: Client, job: str, run: str | None) -> None:
        self.task, self.job, self.run = task, job, run
        self._client = client

    def wait(self, timeout: timedelta | float = 60.0) -> Run:
        """The run once it has ended; TimeoutError when `timeout` passes first."""
        limit = time.monotonic() + _seconds(timeout)
        while self.run is None:
            self.run = next((run.name for run in self._client.list_runs(self.job, page_size=1)), None)
            if self.run is None:
                if time.monotonic() >= limit:
                    raise TimeoutError(f"{self.job} made no run within {timeout}")
                time.sleep(min(0.5, max(limit - time.monotonic(), 0.0)))
        left = timedelta(seconds=max(limit - time.monotonic(), 0.001))
        return self._client.wait_for_run(self.run, left)

    def result(self, timeout: timedelta | float = 60.0) -> R:
        """The task's return value once its run has succeeded; TaskFailed when it ended otherwise."""
        return self.task.result_of(self.wait(timeout))


class AsyncTaskRun(Generic[R]):
    """A task's run, sent with an `AsyncClient`."""

    def __init__(self, task: Task[..., R], client: AsyncClient, job: str, run: str | None) -> None:
        self.task, self.job, self.run = task, job, run
        self._client = client

    async def wait(self, timeout: timedelta | float = 60.0) -> Run:
        limit = time.monotonic() + _seconds(timeout)
        while self.run is None:
            self.run = await anext(
                (run.name async for run in self._client.list_runs(self.job, page_size=1)), None
            )
            if self.run is None:
                if time.monotonic() >= limit:
                    raise TimeoutError(f"{self.job} made no run within {timeout}")
                await asyncio.sleep(min(0.5, max(limit - time.monotonic(), 0.0)))
        left = timedelta(seconds=max(limit - time.monotonic(), 0.001))
        return await self._client.wait_for_run(self.run, left)

    async def result(self, timeout: timedelta | float = 60.0) -> R:
        return self.task.result_of(await self.wait(timeout))
