"""The `jobmesh` command.

- `jobmesh dev`: the whole mesh in one process on the embedded adapters (SQLite, in-process queue and
  signals).
- `jobmesh server`, `jobmesh watcher`, `jobmesh executor`: each process alone, against the database, queue
  and signal bus named by `JOBMESH_DATABASE_URL`, `JOBMESH_KAFKA_BOOTSTRAP` (or `JOBMESH_QUEUE_URL`) and
  `JOBMESH_REDIS_URL` (or `JOBMESH_SIGNALS_URL`).
- `jobmesh migrate`: brings a database's schema up to date.
"""

from __future__ import annotations

import argparse
import asyncio
import logging
import sys
from collections.abc import Sequence

from jobmesh.executor.config import ExecutorConfig
from jobmesh.executor.main import add_handlers_argument, handlers_from_args
from jobmesh.server.config import ServerConfig


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="jobmesh", description="A distributed job scheduler.")
    commands = parser.add_subparsers(dest="command", required=True)
    for name, text in (
        ("dev", "the whole mesh in one process on the embedded adapters (SQLite by default)"),
        ("server", "the gRPC server (JobService, SearchService, ExecutorControl, health, reflection)"),
        ("watcher", "the scheduling loop (any number may run: one leads, the others stand by)"),
        ("executor", "a worker that runs jobs (connects to the server given by --server)"),
        ("migrate", "upgrade a database's schema to the latest version"),
    ):
        command = commands.add_parser(name, help=text, description=text)
        command.add_argument("--database-url", help="SQLAlchemy URL (env JOBMESH_DATABASE_URL)")
        if name in ("dev", "server"):
            command.add_argument("--listen", help="host:port to serve gRPC on (env JOBMESH_LISTEN)")
        if name == "executor":
            command.add_argument("--server", help="host:port of a server (env JOBMESH_SERVER)")
            command.add_argument("--concurrency", type=int, help="runs at once (env JOBMESH_CONCURRENCY)")
            command.add_argument("--queues", help="comma-separated executor queues (env JOBMESH_QUEUES)")
            add_handlers_argument(command)
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    args = _parser().parse_args(argv)
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(levelname)s %(name)s: %(message)s")
    logging.getLogger("alembic").setLevel(logging.WARNING)
    config = ServerConfig.from_env(listen=getattr(args, "listen", None), database_url=args.database_url)
    try:
        return _run(args, config)
    except OSError as error:
        print(f"jobmesh {args.command}: {error}", file=sys.stderr)
        return 1


def _run(args: argparse.Namespace, config: ServerConfig) -> int:
    from jobmesh.processes import assembly as processes

    if args.command == "migrate":
        from jobmesh.adapters.store.migrate import upgrade

        upgrade(config.database_url)
        print(f"schema up to date: {processes.redacted(config.database_url)}")
    elif args.command == "server":
        asyncio.run(processes.serve(config, "jobmesh server"))
    elif args.command == "watcher":
        from jobmesh.watcher.config import WatcherConfig

        asyncio.run(processes.watch(config, WatcherConfig.from_env()))
    elif args.command == "executor":
        try:
            handlers = handlers_from_args(args)
        except ValueError as error:
            print(f"jobmesh executor: {error}", file=sys.stderr)
            return 2
        asyncio.run(processes.execute(_executor_config(args, config), handlers))
    else:
        asyncio.run(processes.dev(config))
    return 0


def _executor_config(args: argparse.Namespace, config: ServerConfig) -> ExecutorConfig:
    return ExecutorConfig.from_env(
        server=args.server,
        concurrency=args.concurrency,
        queues=args.queues,
        queue_url=config.queue_url,
        signals_url=config.signals_url,
    )


if __name__ == "__main__":
    sys.exit(main())
