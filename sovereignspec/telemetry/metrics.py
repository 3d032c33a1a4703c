"""The reader's own metrics, registered on a registry the operator passes in.

Names (stable, documented): `sovereignspec_prometheus_errors_total{query,reason}`,
`sovereignspec_telemetry_age_seconds`, `sovereignspec_prometheus_queries_total{query}`,
`sovereignspec_telemetry_refresh_seconds`.
"""

from __future__ import annotations

import threading

from prometheus_client import REGISTRY, CollectorRegistry, Counter, Gauge, Histogram

from sovereignspec.telemetry.gaps import Gap


class TelemetryMetrics:
    """Counters of every failure (one increment per Gap) and the age of the telemetry served."""

    def __init__(self, registry: CollectorRegistry | None = None) -> None:
        self.errors = Counter(
            "sovereignspec_prometheus_errors_total",
            "Telemetry values or queries counted as missing, by query and reason.",
            ["query", "reason"],
            registry=registry,
        )
        self.queries = Counter(
            "sovereignspec_prometheus_queries_total",
            "PromQL queries sent to Prometheus, by query name.",
            ["query"],
            registry=registry,
        )
        self.age = Gauge(
            "sovereignspec_telemetry_age_seconds",
            "Seconds between the reader's clock and the newest scraped sample behind the telemetry served"
            " (+Inf when none).",
            registry=registry,
        )
        self.refresh_seconds = Histogram(
            "sovereignspec_telemetry_refresh_seconds",
            "Wall time of one refresh (all queries, in parallel).",
            buckets=(0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0, 30.0),
            registry=registry,
        )

    def record_gaps(self, gaps: list[Gap]) -> None:
        for g in gaps:
            self.errors.labels(query=g.source, reason=g.code.value).inc()


_default: TelemetryMetrics | None = None
_default_lock = threading.Lock()


def default_metrics() -> TelemetryMetrics:
    """The process-wide instance on prometheus_client's default REGISTRY (created once)."""
    global _default
    with _default_lock:
        if _default is None:
            _default = TelemetryMetrics(REGISTRY)
        return _default
