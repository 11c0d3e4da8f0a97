"""The hooks of a process's runs: its traces (from the `OTEL_*` variables) and its per-step log lines."""

from __future__ import annotations

import os

from jobmesh.adapters.tracing.provider import TracingMisconfigured, tracing_hooks
from jobmesh.core.hooks import NO_HOOKS, RunHooks, chain
from jobmesh.core.run_log import RunStepLog
from jobmesh.processes.refusal import Refused


def run_hooks(role: str) -> RunHooks:
    """The hook chain of a `role` process (`server`, `watcher`, `executor`, `dev`); Refused when the
    tracing variables ask for what cannot be done."""
    try:
        tracing = tracing_hooks(role, os.environ)
    except TracingMisconfigured as error:
        raise Refused(f"tracing: {error}") from None
    return chain(tracing, RunStepLog(traced=tracing is not NO_HOOKS))
