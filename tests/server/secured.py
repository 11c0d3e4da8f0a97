"""A whole server (`start_server`) with authentication on, on an event loop in a thread of its own, and the
credentials it accepts: an opaque-token file with an admin, a viewer without an executor grant, and an
executor bound to `exec-1` serving the `default` queue (and others: see `secured_config`); and a key that
signs JWTs."""

from __future__ import annotations

import asyncio
import contextlib
import dataclasses
import threading
import uuid
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from jobmesh.adapters.queue.factory import open_queue
from jobmesh.adapters.signals.factory import open_signals
from jobmesh.core.ports.pipeline_store import SchedulerStore
from jobmesh.server.app import RunningServer, start_server
from jobmesh.server.config import ServerConfig
from tests.server.tokens import AUDIENCE, ISSUER, Signer, TokenFile, ec_signer
from tests.support import SUITE_LOOP_LAG


@dataclass
class Secured:
    address: str
    tokens: TokenFile
    signer: Signer
    server: RunningServer
    names: str  # the in-process queue and signal bus the server uses
    in_process_queue: str  # that queue's identity: what the hello of an executor in this process names

    def token(self, subject: str) -> str:
        return self.tokens.tokens[subject]


def secured_config(
    directory: Path, *, add_tokens: Callable[[TokenFile], None] | None = None, **overrides: Any
) -> tuple[ServerConfig, TokenFile, Signer]:
    """The config, its token file (with `add_tokens`' tokens too) and its JWT signer."""
    tokens = TokenFile(directory / "tokens.yaml")
    tokens.add("admin", roles={"*": "admin"})
    tokens.add("viewer", roles={"*": "viewer"})
    tokens.add("exec-1", executor={"name": "exec-1", "queues": ["default"]})
    tokens.add("exec-2", executor={"name": "exec-2", "queues": ["default", "payments"]})
    tokens.add("exec-3", executor={"name": "exec-3", "queues": ["default"], "namespaces": ["team-a"]})
    if add_tokens is not None:
        add_tokens(tokens)
    signer = ec_signer(directory)
    config = ServerConfig(
        listen="127.0.0.1:0",
        max_loop_lag=SUITE_LOOP_LAG,
        authentication=True,
        token_hashes_file=tokens.path,
        jwt_public_keys=(signer.public_pem,),
        jwt_issuer=ISSUER,
        jwt_audience=AUDIENCE,
    )
    return dataclasses.replace(config, **overrides), tokens, signer


@contextlib.contextmanager
def secured_server(
    store: SchedulerStore,
    directory: Path,
    *,
    add_tokens: Callable[[TokenFile], None] | None = None,
    **overrides: Any,
) -> Iterator[Secured]:
    config, tokens, signer = secured_config(directory, add_tokens=add_tokens, **overrides)
    names = f"memory://secured-{uuid.uuid4().hex[:8]}"
    queue, signals = open_queue(names), open_signals(names)
    loop = asyncio.new_event_loop()
    thread = threading.Thread(target=loop.run_forever, name="secured-server", daemon=True)
    thread.start()

    def run(coroutine: Any) -> Any:
        return asyncio.run_coroutine_threadsafe(coroutine, loop).result(timeout=30)

    running: RunningServer = run(start_server(config, store, queue, signals))

    async def stop() -> None:
        """Stops the server, then the calls it cancelled (a stream's tasks) before the loop closes."""
        await running.stop(grace=0)
        others = [task for task in asyncio.all_tasks() if task is not asyncio.current_task()]
        for task in others:
            task.cancel()
        await asyncio.gather(*others, return_exceptions=True)

    try:
        yield Secured(f"127.0.0.1:{running.port}", tokens, signer, running, names, queue.in_process_id)
    finally:
        run(stop())
        loop.call_soon_threadsafe(loop.stop)
        thread.join(timeout=30)
        loop.close()
        signals.close()
        queue.close()
