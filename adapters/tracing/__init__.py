"""OpenTelemetry traces of runs: the hook that makes the spans (`spans`), and the tracer set up from the
standard `OTEL_*` variables (`provider`). Off unless those variables ask for an exporter."""
