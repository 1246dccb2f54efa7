"""What the library tells operators: structured logs, Prometheus metrics, OpenTelemetry spans
and metrics."""
