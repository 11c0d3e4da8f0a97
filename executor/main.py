"""Running an executor as a process: `run_executor(config, handlers)` drains on SIGTERM or SIGINT (a second
signal cuts the drain grace to nothing), and the flags the `jobmesh executor` command offers.

`--handlers MODULE:ATTR` (env `JOBMESH_HANDLERS`) loads the `handler` targets' functions: ATTR is a mapping
of handler name to callable (a dict, or a `HandlerRegistry`) in an importable MODULE.

`python -m jobmesh.executor.main [flags]` runs one without the CLI.
"""

from __future__ import annotations

import argparse
import asyncio
import importlib
import logging
import os
import signal
import sys
from collections.abc import Mapping, Sequence

from jobmesh.core.ports.queue import RunQueue
from jobmesh.core.ports.signals import SignalBus
from jobmesh.executor.config import ExecutorConfig
from jobmesh.executor.handlers import Handler, HandlerRegistry
from jobmesh.executor.runtime import Executor

log = logging.getLogger(__name__)


async def run_executor(
    config: ExecutorConfig,
    handlers: Mapping[str, Handler] | HandlerRegistry | None = None,
    *,
    queue: RunQueue | None = None,
    signals: SignalBus | None = None,
    handle_signals: bool = True,
) -> None:
    """Runs an executor until SIGTERM or SIGINT, then drains it and returns. `queue` and `signals` default to
    the adapters the config's URLs name (pass them to share in-process ones, as `jobmesh dev` does). A
    process that handles its own signals (one loop has one handler per signal) passes `handle_signals=False`
    and uses `Executor` directly, calling its `drain()`."""
    executor = Executor(config, handlers, queue=queue, signals=signals)
    loop = asyncio.get_running_loop()
    signalled = False

    def on_signal() -> None:
        nonlocal signalled
        if signalled:
            log.warning("second signal: stopping running work now")
            executor.drain(grace=0.0)
        else:
            executor.drain()
        signalled = True

    installed = []
    for signum in (signal.SIGTERM, signal.SIGINT) if handle_signals else ():
        try:
            loop.add_signal_handler(signum, on_signal)
        except (NotImplementedError, RuntimeError, ValueError):  # not the main thread: the caller drains
            continue
        installed.append(signum)
    try:
        await executor.run()
    finally:
        for signum in installed:
            loop.remove_signal_handler(signum)


def add_arguments(parser: argparse.ArgumentParser) -> None:
    """The executor's flags; each defaults to its `JOBMESH_*` variable, then to the built-in default."""
    parser.add_argument(
        "--server", help="ExecutorControl host:port (env JOBMESH_SERVER, default 127.0.0.1:50051)"
    )
    parser.add_argument("--queue-url", help="memory://NAME or kafka://HOST:PORT,... (env JOBMESH_QUEUE_URL)")
    parser.add_argument(
        "--signals-url", help="memory://NAME or redis://HOST:PORT/DB (env JOBMESH_SIGNALS_URL)"
    )
    parser.add_argument("--queues", help="comma-separated executor queues (env JOBMESH_QUEUES)")
    parser.add_argument("--concurrency", type=int, help="attempts at once (env JOBMESH_CONCURRENCY)")
    parser.add_argument("--executor-id", help="unique id of this process (env JOBMESH_EXECUTOR_ID)")
    parser.add_argument(
        "--cancel-grace", type=float, help="seconds from SIGTERM to SIGKILL (env JOBMESH_CANCEL_GRACE)"
    )
    parser.add_argument(
        "--drain-grace", type=float, help="seconds work may finish at shutdown (env JOBMESH_DRAIN_GRACE)"
    )
    add_handlers_argument(parser)


def add_handlers_argument(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--handlers",
        metavar="MODULE:ATTR",
        help="a mapping of handler name to callable, for `handler` targets (env JOBMESH_HANDLERS)",
    )


def load_handlers(spec: str) -> HandlerRegistry:
    """The handlers that `MODULE:ATTR` names (ATTR may be dotted). ValueError says what is wrong with it."""
    module_name, _, attribute = spec.strip().partition(":")
    if not module_name or not attribute:
        raise ValueError(f"handlers {spec!r}: expected MODULE:ATTR, such as myapp.tasks:handlers")
    try:
        found: object = importlib.import_module(module_name)
    except ImportError as exc:
        raise ValueError(
            f"handlers {spec!r}: cannot import {module_name!r} ({exc}; on PYTHONPATH?)"
        ) from None
    for part in attribute.split("."):
        try:
            found = getattr(found, part)
        except AttributeError:
            raise ValueError(f"handlers {spec!r}: {module_name!r} has no attribute {attribute!r}") from None
    if isinstance(found, HandlerRegistry):
        return found
    if not isinstance(found, Mapping):
        raise ValueError(
            f"handlers {spec!r}: a {type(found).__name__}, not a mapping of handler names to callables"
        )
    try:
        return HandlerRegistry(found)
    except (TypeError, ValueError) as exc:
        raise ValueError(f"handlers {spec!r}: {exc}") from None


def handlers_from_args(
    args: argparse.Namespace, env: Mapping[str, str] | None = None
) -> HandlerRegistry | None:
    """`--handlers`, else `JOBMESH_HANDLERS`, loaded; None when neither is set."""
    env = os.environ if env is None else env
    spec = getattr(args, "handlers", None) or env.get("JOBMESH_HANDLERS", "").strip()
    return load_handlers(spec) if spec else None


def config_from_args(args: argparse.Namespace, env: Mapping[str, str] | None = None) -> ExecutorConfig:
    return ExecutorConfig.from_env(
        env,
        server=args.server,
        queue_url=args.queue_url,
        signals_url=args.signals_url,
        queues=args.queues,
        concurrency=args.concurrency,
        executor_id=args.executor_id,
        cancel_grace=args.cancel_grace,
        drain_grace=args.drain_grace,
    )


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="jobmesh-executor", description="A jobmesh executor.")
    add_arguments(parser)
    args = parser.parse_args(argv)
    config = config_from_args(args)
    try:
        handlers = handlers_from_args(args)
    except ValueError as exc:
        parser.error(str(exc))
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(levelname)s %(name)s: %(message)s")
    asyncio.run(run_executor(config, handlers))
    return 0


if __name__ == "__main__":
    sys.exit(main())
