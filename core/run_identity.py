"""A run's identity as its target sees it: one value per run, the same on every attempt, so that a target
which must act once per run (charge a card, send a mail) can tell a retry from a new run.

The value is the run's resource name (`jobs/{job}/runs/{run}`). A command finds it in `JOBMESH_RUN` (and the
attempt number in `JOBMESH_ATTEMPT`), a webhook in the `Idempotency-Key` header, a handler in `ctx.run`. The
executor sets them last, over the job's own `env` and `headers`; the API refuses a job that sets them.
"""

from __future__ import annotations

from collections.abc import Mapping

from jobmesh.core.attempts import AttemptRef

# The W3C trace context of the attempt, as OpenTelemetry's environment carrier names it; set only when traced.
TRACE_VARIABLES = {"traceparent": "TRACEPARENT", "tracestate": "TRACESTATE"}
RUN_VARIABLE = "JOBMESH_RUN"
ATTEMPT_VARIABLE = "JOBMESH_ATTEMPT"
IDENTITY_VARIABLES = frozenset({RUN_VARIABLE, ATTEMPT_VARIABLE})
IDEMPOTENCY_HEADER = "Idempotency-Key"


def identity_environment(ref: AttemptRef) -> dict[str, str]:
    """The variables a command of this attempt is given."""
    return {RUN_VARIABLE: ref.run_name, ATTEMPT_VARIABLE: str(ref.attempt)}


def trace_environment(trace_context: Mapping[str, str]) -> dict[str, str]:
    """The variables that carry an attempt's trace context to its command: `TRACEPARENT`, `TRACESTATE`."""
    return {variable: trace_context[key] for key, variable in TRACE_VARIABLES.items() if key in trace_context}


def with_idempotency_key(headers: Mapping[str, str], ref: AttemptRef) -> dict[str, str]:
    """`headers` with the run's idempotency key, in place of any the job set (header names ignore case)."""
    kept = {name: value for name, value in headers.items() if not is_idempotency_header(name)}
    return {**kept, IDEMPOTENCY_HEADER: ref.run_name}


def is_idempotency_header(name: str) -> bool:
    return name.lower() == IDEMPOTENCY_HEADER.lower()
