"""What one refresh read from Prometheus, before the acceptance counters are joined to draft identities."""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import datetime

from sovereignspec.model.telemetry import EngineSample, GpuSample
from sovereignspec.telemetry.gaps import Gap


@dataclass(frozen=True)
class PodAcceptance:
    """Speculative-decoding counter increases of one engine pod over the window.

    `accepted_per_position[i]` = drafts whose position i (0-based) was accepted; its length is
    the k the pod runs with (the positions vLLM exports).
    """

    namespace: str
    pod: str
    drafts: float
    draft_tokens: float | None = None
    accepted_per_position: tuple[float, ...] = ()
    model_name: str | None = None


@dataclass(frozen=True)
class TelemetryReading:
    time: datetime
    gpus: list[GpuSample] = field(default_factory=list)
    engines: list[EngineSample] = field(default_factory=list)
    pod_acceptance: list[PodAcceptance] = field(default_factory=list)
    gaps: list[Gap] = field(default_factory=list)
    newest_sample: float | None = None  # Unix time of the newest scraped sample seen, for the age gauge.
    queries: int = 0
    seconds: float = 0.0
