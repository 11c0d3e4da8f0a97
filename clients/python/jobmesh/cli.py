"""The `jobmesh` command: `jobmesh dev` runs the whole mesh in one process; `jobmesh server` runs the gRPC
server against the database named by `JOBMESH_DATABASE_URL`; `jobmesh migrate` brings a database's schema
up to date."""

from __future__ import annotations

import argparse
import asyncio
import logging
import signal
import sys
from collections.abc import Sequence
from pathlib import Path

from jobmesh.server.config import ServerConfig

log = logging.getLogger("jobmesh")


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="jobmesh", description="A distributed job scheduler.")
    commands = parser.add_subparsers(dest="command", required=True)
    for name, text in (
        ("dev", "the whole mesh in one process on the embedded store (SQLite by default)"),
        ("server", "the gRPC server (JobService, SearchService, ExecutorControl, health, reflection)"),
    ):
        command = commands.add_parser(name, help=text, description=text)
        command.add_argument("--listen", help="host:port to serve gRPC on (env JOBMESH_LISTEN)")
        command.add_argument("--database-url", help="SQLAlchemy URL (env JOBMESH_DATABASE_URL)")
    migrate = commands.add_parser("migrate", help="upgrade a database's schema to the latest version")
    migrate.add_argument("--database-url", help="SQLAlchemy URL (env JOBMESH_DATABASE_URL)")
    return parser


async def _serve(config: ServerConfig, banner: str) -> None:
    from jobmesh.server.app import start_server
    from jobmesh.server.store.factory import open_store

    _ensure_sqlite_folder(config.database_url)
    store = await asyncio.to_thread(
        open_store,
        config.database_url,
        retention_days=config.retention_days,
        partition_ahead_days=config.partition_ahead_days,
    )
    try:
        running = await start_server(config, store)
        stop = asyncio.Event()
        loop = asyncio.get_running_loop()
        for sig in (signal.SIGINT, signal.SIGTERM):
            loop.add_signal_handler(sig, stop.set)
        host = config.listen.rsplit(":", 1)[0]
        print(
            f"{banner}: gRPC on {host}:{running.port} (store: {_redacted(config.database_url)})", flush=True
        )
        print(f"  try: grpcurl -plaintext {host}:{running.port} list   (Ctrl-C stops)", flush=True)
        await stop.wait()
        print(f"{banner}: stopping", flush=True)
        await running.stop()
    finally:
        store.close()


def _ensure_sqlite_folder(url: str) -> None:
    from sqlalchemy.engine import make_url

    parsed = make_url(url)
    if parsed.get_backend_name() == "sqlite" and parsed.database not in (None, "", ":memory:"):
        Path(parsed.database).expanduser().parent.mkdir(parents=True, exist_ok=True)


def _redacted(url: str) -> str:
    from sqlalchemy.engine import make_url

    return make_url(url).render_as_string(hide_password=True)


def main(argv: Sequence[str] | None = None) -> int:
    args = _parser().parse_args(argv)
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(levelname)s %(name)s: %(message)s")
    config = ServerConfig.from_env(
        listen=getattr(args, "listen", None), database_url=getattr(args, "database_url", None)
    )
    if args.command == "migrate":
        from jobmesh.server.store.migrate import upgrade

        upgrade(config.database_url)
        print(f"schema up to date: {_redacted(config.database_url)}")
        return 0
    banner = "jobmesh dev" if args.command == "dev" else "jobmesh server"
    try:
        asyncio.run(_serve(config, banner))
    except OSError as error:
        print(f"{banner}: {error}", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
