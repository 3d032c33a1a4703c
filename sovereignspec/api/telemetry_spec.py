"""The `telemetry` section of a SpeculationPolicy: PromQL overrides, staleness, timeouts, cache TTL."""

from __future__ import annotations

from typing import Literal

from pydantic import Field

from sovereignspec.api.base import Model

_DURATION = r"^[0-9]+[smh]$"


class QueryOverrides(Model):
    """PromQL overriding the built-in default for each telemetry series (None = built-in default).

    Each query must return an instant vector with the labels the default query returns.
    """

    tensor_active: str | None = None
    fb_free: str | None = None
    tpot: str | None = None
    running: str | None = None
    running_min: str | None = Field(
        default=None, description="Fewest running requests per engine over the window."
    )
    spec_drafts: str | None = None
    spec_draft_tokens: str | None = None
    spec_accepted_per_position: str | None = None
    waiting: str | None = None
    gpu_freshness: str | None = Field(default=None, description="Last sample time per GPU (timestamp()).")
    engine_freshness: str | None = Field(default=None, description="Last sample time per engine pod.")


class TelemetrySpec(Model):
    """How the operator reads Prometheus, and when telemetry counts as missing."""

    window: str = Field(default="2m", pattern=_DURATION, description="Range for rates and smoothing.")
    staleness_seconds: float = Field(default=120.0, gt=0, description="Older telemetry counts as missing.")
    query_timeout_seconds: float = Field(default=5.0, gt=0, le=60)
    cache_ttl_seconds: float = Field(default=15.0, ge=0, le=600)
    tpot_statistic: Literal["Quantile", "PeakMean"] = Field(
        default="Quantile",
        description="How an engine's TPOT is read from vLLM's per-request TPOT histogram. `Quantile`: "
        "histogram_quantile(tpotQuantile) over the window, linear inside vLLM's buckets (a steady 30 ms "
        "engine reads 47.5 ms at 0.9). `PeakMean`: the highest mean TPOT over tpotPeakWindow-long spans "
        "in the window, from the histogram's _sum and _count (exact, and it sees a cycling load's peaks).",
    )
    tpot_quantile: float = Field(default=0.9, gt=0, lt=1, description="The quantile read under `Quantile`.")
    tpot_peak_window: str = Field(
        default="1m",
        pattern=_DURATION,
        description="Span of each mean under `PeakMean` (capped at the window; at least four scrape "
        "intervals, or rate() has too few samples).",
    )
    queries: QueryOverrides = QueryOverrides()

    @property
    def window_seconds(self) -> float:
        """`window` in seconds."""
        return _seconds(self.window)

    @property
    def tpot_peak_seconds(self) -> float:
        """`tpotPeakWindow` in seconds, at most the window."""
        return min(_seconds(self.tpot_peak_window), self.window_seconds)


def _seconds(duration: str) -> float:
    return float(duration[:-1]) * _UNIT_SECONDS[duration[-1]]


_UNIT_SECONDS = {"s": 1.0, "m": 60.0, "h": 3600.0}
