"""The tracer of a process, set up from the standard OpenTelemetry variables, and off unless they ask for it.

Traces are on when `OTEL_TRACES_EXPORTER` names an exporter (`otlp` or `console`), or when an OTLP endpoint
is set (`OTEL_EXPORTER_OTLP_ENDPOINT`, `OTEL_EXPORTER_OTLP_TRACES_ENDPOINT`; the exporter is then `otlp`), and
`OTEL_SDK_DISABLED` is not `true`. The rest is the SDK's own reading of the variables: the OTLP exporter's
endpoint, headers, certificates and timeout (`OTEL_EXPORTER_OTLP_*`, over gRPC), the batch processor
(`OTEL_BSP_*`), the sampler (`OTEL_TRACES_SAMPLER`, `..._ARG`) and the resource (`OTEL_SERVICE_NAME`,
`OTEL_RESOURCE_ATTRIBUTES`; the service is `jobmesh-{role}` unless named).

Off, nothing is loaded and the hook is `NO_HOOKS`: the hops make no span and carry no context.
"""

from __future__ import annotations

from collections.abc import Mapping

from jobmesh.core.hooks import NO_HOOKS, RunHooks

EXPORTERS = ("otlp", "console", "none")
_ENDPOINTS = ("OTEL_EXPORTER_OTLP_ENDPOINT", "OTEL_EXPORTER_OTLP_TRACES_ENDPOINT")
_PROTOCOLS = ("OTEL_EXPORTER_OTLP_TRACES_PROTOCOL", "OTEL_EXPORTER_OTLP_PROTOCOL")


class TracingMisconfigured(ValueError):
    """The `OTEL_*` variables ask for something this build cannot do; the message says what and why."""


def exporter_of(variables: Mapping[str, str]) -> str:
    """The exporter the variables ask for: `none` when traces are off."""
    if variables.get("OTEL_SDK_DISABLED", "").strip().lower() == "true":
        return "none"
    named = variables.get("OTEL_TRACES_EXPORTER", "").strip().lower()
    if not named:
        named = "otlp" if any(variables.get(name, "").strip() for name in _ENDPOINTS) else "none"
    if "," in named:
        raise TracingMisconfigured(f"OTEL_TRACES_EXPORTER={named!r}: name one exporter, one of {EXPORTERS}")
    if named not in EXPORTERS:
        raise TracingMisconfigured(f"OTEL_TRACES_EXPORTER={named!r}: jobmesh exports to one of {EXPORTERS}")
    if named == "otlp":
        protocol = next((variables[name] for name in _PROTOCOLS if variables.get(name)), "grpc").strip()
        if protocol != "grpc":
            raise TracingMisconfigured(f"OTLP protocol {protocol!r}: jobmesh exports traces over 'grpc' only")
    return named


def tracing_hooks(role: str, variables: Mapping[str, str]) -> RunHooks:
    """The hook that traces this process's hops, or `NO_HOOKS` when the `variables` (the process's
    environment, which the SDK's exporter and processor read too) leave traces off. TracingMisconfigured for
    variables that ask for what cannot be done."""
    exporter = exporter_of(variables)
    if exporter == "none":
        return NO_HOOKS
    # Loaded only when on: a process with traces off imports none of the SDK's exporters.
    from opentelemetry.sdk.resources import SERVICE_NAME, Resource
    from opentelemetry.sdk.trace import TracerProvider
    from opentelemetry.sdk.trace.export import BatchSpanProcessor, ConsoleSpanExporter, SpanExporter

    from jobmesh.adapters.tracing.spans import RunIdGenerator, TracingHooks

    attributes = {} if variables.get("OTEL_SERVICE_NAME") else {SERVICE_NAME: f"jobmesh-{role}"}
    provider = TracerProvider(resource=Resource.create(attributes), id_generator=RunIdGenerator())
    span_exporter: SpanExporter
    if exporter == "console":
        span_exporter = ConsoleSpanExporter()
    else:
        from opentelemetry.exporter.otlp.proto.grpc.trace_exporter import OTLPSpanExporter

        span_exporter = OTLPSpanExporter()
    provider.add_span_processor(BatchSpanProcessor(span_exporter))
    return TracingHooks(provider.get_tracer("jobmesh"), provider)
