"""The operator's own Prometheus metrics, on the process-wide default registry.

The telemetry reader registers its counters there too, so one /metrics endpoint serves both.
"""

from __future__ import annotations

from prometheus_client import REGISTRY, Counter, Gauge, Histogram

DECISIONS = Counter(
    "sovereignspec_decisions_total",
    "Decisions written to Kueue, by check state, speculation mode and primary reason.",
    ["state", "mode", "reason"],
    registry=REGISTRY,
)
DECISION_DURATION = Histogram(
    "sovereignspec_decision_duration_seconds",
    "From our check entry seen Pending to the status apply acknowledged by the API server.",
    buckets=(0.002, 0.005, 0.01, 0.02, 0.05, 0.1, 0.2, 0.5, 1.0, 2.0, 5.0),
    registry=REGISTRY,
)
DECISION_ERRORS = Counter(
    "sovereignspec_decision_errors_total",
    "Failures while deciding or writing a decision, by stage.",
    ["stage"],
    registry=REGISTRY,
)
DRIFT_GAUGE = Gauge(
    "sovereignspec_drift_decisions",
    "Admitted decisions whose current best mode or budget differs from the admitted one.",
    registry=REGISTRY,
)
DRIFT_CHECKS = Counter(
    "sovereignspec_drift_checks_total",
    "Drift re-evaluations of admitted decisions, by outcome (stable|drifted|reconfigured).",
    ["outcome"],
    registry=REGISTRY,
)
DRIFT_STAGES = ("views", "parse", "evaluate")
DRIFT_CPU = Counter(
    "sovereignspec_drift_cpu_seconds_total",
    "CPU (the sweep's thread) the drift sweep spent, by stage: views (indexes, bodies and snapshot taken "
    "again after a telemetry refresh), parse (the decision and workload bodies), evaluate (re-deciding on "
    "the workload's node). Writes are not counted: they run in the API threads.",
    ["stage"],
    registry=REGISTRY,
)
SNAPSHOT_BUILDS = Counter(
    "sovereignspec_snapshot_builds_total",
    "Base snapshots behind decisions, by how they were had: reused (nothing but reservations changed), "
    "patched (only pods changed), full (nodes, namespaces or telemetry changed).",
    ["how"],
    registry=REGISTRY,
)
LEADER = Gauge("sovereignspec_leader", "1 while this replica holds the leader lease.", registry=REGISTRY)
WATCH_EVENTS = Counter(
    "sovereignspec_watch_events_total",
    "Watch events handled, by resource: the operator's CPU grows with this rate (each event costs about a "
    "millisecond of kopf's machinery), not with the number of decisions alone.",
    ["resource"],
    registry=REGISTRY,
)
