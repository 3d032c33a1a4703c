"""Turn the validated query results of one refresh into GPU, engine and per-pod acceptance samples.

Pure and clocked: `now` is the reader's clock, compared with each series' last sample time
(`timestamp()`), so a smoothed value that outlives its source is caught as stale. The parts:
`assemble_gpus`, `assemble_engines`, `assemble_acceptance`; what a reading hands to the next: `carry`.
"""

from __future__ import annotations

from collections.abc import Mapping
from datetime import UTC, datetime

from sovereignspec.telemetry.assemble_acceptance import acceptance
from sovereignspec.telemetry.assemble_engines import engines
from sovereignspec.telemetry.assemble_gpus import gpus
from sovereignspec.telemetry.carry import Carry
from sovereignspec.telemetry.gaps import Gap, GapCode
from sovereignspec.telemetry.queries import Query
from sovereignspec.telemetry.reading import TelemetryReading
from sovereignspec.telemetry.results import QueryResult

__all__ = ["EMPTY_OK", "Carry", "QueryResult", "assemble"]

# No speculating engine in the window is normal, not a fault: the core then uses its priors.
EMPTY_OK = frozenset({Query.SPEC_DRAFTS, Query.SPEC_DRAFT_TOKENS, Query.SPEC_ACCEPTED_PER_POSITION})


def assemble(
    results: Mapping[Query, QueryResult], now: float, staleness_seconds: float, carry: Carry | None = None
) -> TelemetryReading:
    """One reading from one refresh's results; every doubtful value is None with a Gap. `carry`: what
    the previous reading left (see `carry.Carry`), refilled with this reading's; the reading is the same
    with or without it, but a GPU, engine or pod unchanged since keeps its object."""
    carry = carry if carry is not None else Carry()
    results = {q: [] if _empty_ok(q, r) else r for q, r in results.items()}
    gaps: list[Gap] = [r for r in results.values() if isinstance(r, Gap)]
    gpu_samples, newest_gpu = gpus(results, now, staleness_seconds, gaps, carry)
    engine_samples, fresh, newest_engine = engines(results, now, staleness_seconds, gaps, carry)
    pod_acceptance = acceptance(results, fresh, gaps)
    newest = max((t for t in (newest_gpu, newest_engine) if t is not None), default=None)
    return TelemetryReading(
        time=datetime.fromtimestamp(now, tz=UTC),
        gpus=gpu_samples,
        engines=engine_samples,
        pod_acceptance=pod_acceptance,
        gaps=gaps,
        newest_sample=newest,
        queries=len(results),
    )


def _empty_ok(q: Query, r: QueryResult) -> bool:
    return q in EMPTY_OK and isinstance(r, Gap) and r.code is GapCode.EMPTY
