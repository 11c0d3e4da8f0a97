"""The executor: worker processes that take runs from the queue, claim them over their stream to the server,
run them (commands, webhooks, registered Python handlers) and report heartbeats, logs, progress and results.

This package's names are also the public API of an executor embedded in a user's program, serving that
program's own Python functions as `handler` targets (`jobmesh.client` re-exports them):

    handlers = HandlerRegistry()

    @handlers.handler("reports.build")
    def build(context: HandlerContext) -> None:
        context.log(f"building {context.payload.decode()}")

    config = ExecutorConfig(server="scheduler:50051", queue_url="kafka://kafka:9092", queues=("reports",))
    await Executor(config, handlers).run()   # until executor.drain()

`run()` raises QueueUnreachable at once when the mesh queues its runs where this executor's queue cannot take
them (its server says so: a `jobmesh dev` refuses any executor outside its process).

`jobmesh executor --handlers MODULE:ATTR` runs the same `Executor` as a process of its own.

The names are imported when first asked for, so that importing one of the package's modules (a handler
module importing `jobmesh.executor.handlers`, the settings importing its config) does not bring the runtime
and its queue adapters along.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from jobmesh.executor.config import ExecutorConfig
    from jobmesh.executor.handlers import Handler, HandlerContext, HandlerRegistry
    from jobmesh.executor.policy import ExecutionPolicy
    from jobmesh.executor.queue_reach import QueueUnreachable
    from jobmesh.executor.runtime import Executor

__all__ = [
    "ExecutionPolicy",
    "Executor",
    "ExecutorConfig",
    "Handler",
    "HandlerContext",
    "HandlerRegistry",
    "QueueUnreachable",
]

_MODULES = {
    "ExecutionPolicy": "policy",
    "Executor": "runtime",
    "ExecutorConfig": "config",
    "Handler": "handlers",
    "HandlerContext": "handlers",
    "HandlerRegistry": "handlers",
    "QueueUnreachable": "queue_reach",
}


def __getattr__(name: str) -> Any:
    module = _MODULES.get(name)
    if module is None:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    return getattr(importlib.import_module(f"{__name__}.{module}"), name)
