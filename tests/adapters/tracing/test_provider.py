"""Which `OTEL_*` variables turn traces on, and the clear refusal of those asking what cannot be done."""

from __future__ import annotations

import pytest

from jobmesh.adapters.tracing.provider import TracingMisconfigured, exporter_of, tracing_hooks
from jobmesh.adapters.tracing.spans import TracingHooks
from jobmesh.core.hooks import NO_HOOKS


@pytest.mark.parametrize(
    ("environ", "exporter"),
    [
        ({}, "none"),
        ({"OTEL_TRACES_EXPORTER": "none"}, "none"),
        ({"OTEL_EXPORTER_OTLP_ENDPOINT": "http://collector:4317"}, "otlp"),
        ({"OTEL_EXPORTER_OTLP_TRACES_ENDPOINT": "http://collector:4317"}, "otlp"),
        ({"OTEL_TRACES_EXPORTER": "otlp"}, "otlp"),
        ({"OTEL_TRACES_EXPORTER": "Console"}, "console"),
        ({"OTEL_TRACES_EXPORTER": "otlp", "OTEL_SDK_DISABLED": "true"}, "none"),
        ({"OTEL_TRACES_EXPORTER": "otlp", "OTEL_EXPORTER_OTLP_PROTOCOL": "grpc"}, "otlp"),
    ],
)
def test_the_variables_choose_the_exporter(environ: dict[str, str], exporter: str) -> None:
    assert exporter_of(environ) == exporter


@pytest.mark.parametrize(
    ("environ", "complaint"),
    [
        ({"OTEL_TRACES_EXPORTER": "zipkin"}, "'zipkin': jobmesh exports to one of"),
        ({"OTEL_TRACES_EXPORTER": "otlp,console"}, "name one exporter"),
        ({"OTEL_TRACES_EXPORTER": "otlp", "OTEL_EXPORTER_OTLP_PROTOCOL": "http/protobuf"}, "'grpc' only"),
        (
            {"OTEL_EXPORTER_OTLP_ENDPOINT": "x", "OTEL_EXPORTER_OTLP_TRACES_PROTOCOL": "http/json"},
            "'grpc' only",
        ),
    ],
)
def test_what_cannot_be_done_is_refused_with_a_reason(environ: dict[str, str], complaint: str) -> None:
    with pytest.raises(TracingMisconfigured, match=complaint):
        exporter_of(environ)


def test_off_by_default_the_hops_have_no_hook() -> None:
    assert tracing_hooks("server", {}) is NO_HOOKS


def test_on_the_process_gets_a_tracing_hook_for_its_service() -> None:
    hooks = tracing_hooks("executor", {"OTEL_TRACES_EXPORTER": "console"})
    try:
        assert isinstance(hooks, TracingHooks)
    finally:
        hooks.close()
