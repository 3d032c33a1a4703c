"""Operator settings from environment variables (SOVEREIGNSPEC_*) or `sovereignspec run` flags."""

from __future__ import annotations

from typing import Annotated, Literal

from pydantic import Field
from pydantic_settings import BaseSettings, SettingsConfigDict

# Bounded kinds of setting: the bounds live in the type.
Port = Annotated[int, Field(ge=0, le=65535)]
"""A TCP port; 0 disables the server."""
Seconds = Annotated[float, Field(gt=0)]
"""A positive interval."""
Share = Annotated[float, Field(gt=0, le=1)]
"""A share in (0, 1] (of the operator's CPU, of wall time)."""


class OperatorSettings(BaseSettings):
    model_config = SettingsConfigDict(env_prefix="SOVEREIGNSPEC_", extra="ignore")

    kubeconfig: str | None = Field(default=None, description="Path; None = $KUBECONFIG, then in-cluster.")
    namespaces: list[str] = Field(default_factory=list, description="Workload namespaces; empty = all.")
    prometheus_url: str | None = Field(default=None, description="None = telemetry missing, speculation off.")
    metrics_port: Port = Field(default=8080, description="0 disables the metrics server.")
    health_port: Port = Field(default=8081, description="/healthz and /readyz; 0 disables.")
    bind_address: str = "0.0.0.0"
    log_format: Literal["json", "text"] = "json"
    log_level: Literal["DEBUG", "INFO", "WARNING", "ERROR"] = "INFO"
    field_manager: str = "sovereignspec"
    controller_name: str = "sovereignspec.io/admission"
    leader_election: bool = True
    lease_name: str = "sovereignspec-leader"
    lease_namespace: str = "sovereignspec-system"
    lease_duration_seconds: int = Field(default=15, ge=2)
    lease_renew_deadline_seconds: int = Field(default=10, ge=1)
    lease_retry_period_seconds: int = Field(default=2, ge=1)
    identity: str | None = Field(default=None, description="Leader-election identity; None = hostname+pid.")
    resync_seconds: Seconds = Field(default=5.0, description="Sweep of workloads still Pending.")
    drift_interval_seconds: Seconds = Field(
        default=10.0,
        description="Seconds from the end of one drift sweep to the start of the next. The sweep is how "
        "neighbour harm that arrives after admission is found; its CPU stays under the shares below "
        "whatever the interval (docs/decision.md, 'The drift sweep every 10 s').",
    )
    drift_cpu_share: Share = Field(
        default=0.1,
        description="Most of the operator's own CPU a drift sweep may take: the sweep is paced to it, and "
        "a sweep longer than the interval delays the next one. 1 = unpaced.",
    )
    drift_idle_share: Share = Field(
        default=0.02,
        description="Share of wall time a drift sweep may always take, so that it ends while the operator "
        "is otherwise idle (capped by drift_cpu_share): at about 1.2 ms per admitted workload, a sweep "
        "over 1,000 takes a minute then.",
    )
    drift_busy_share: Share = Field(
        default=0.02,
        description="Most of the operator's CPU spent while it answers admission checks (a decision or "
        "its write in flight, or one ended within a second) that a drift sweep may take; that time earns "
        "drift_cpu_share and drift_idle_share nothing: admissions come first (capped by drift_cpu_share).",
    )
    drift_message_refresh_seconds: Seconds = Field(
        default=300.0,
        description="Least seconds between two rewrites of a Drift=False (NoDrift) condition whose "
        "message's live figures moved; a new status, and a drifted verdict's new message, are written "
        "at once.",
    )
    telemetry_refresh_seconds: Seconds = 10.0
    gc_young_threshold: Annotated[int, Field(ge=0)] = Field(
        default=10_000,
        description="Net container allocations between two young collections of Python's garbage "
        "collector (CPython's default is 700; 0 keeps CPython's pace). Larger: fewer collections and "
        "fewer full ones, cycles reclaimed later (operator/collector.py).",
    )
    api_concurrency: Annotated[int, Field(ge=1, le=256)] = Field(
        default=32,
        description="API writes in flight at once (their own threads and connections): with asyncio's "
        "default pool, about 6 threads on a small node, a backlog drained at 6 round trips at a time.",
    )
