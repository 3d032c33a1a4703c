"""vLLM's per-request TPOT histogram and the quantile Prometheus reads from it.

The operator reads an engine's TPOT as `histogram_quantile(tpotQuantile, ...)` over
`vllm:request_time_per_output_token_seconds` (telemetry/queries.py), not as a mean. Both simulators
(the telemetry simulator behind the e2e tests and the evidence simulator) fill the same buckets and the
evidence simulator reads them with the same interpolation, so a policy is judged on the number the
operator would see.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
import numpy.typing as npt

TPOT_BUCKETS: tuple[float, ...] = (
    0.01,
    0.025,
    0.05,
    0.075,
    0.1,
    0.15,
    0.2,
    0.3,
    0.4,
    0.5,
    0.75,
    1.0,
    2.5,
    5.0,
    7.5,
    10.0,
    20.0,
    40.0,
    80.0,
)
"""vLLM's upper bounds (seconds) for request_time_per_output_token_seconds; +Inf follows."""

REQUEST_TPOT_JITTER = 0.08
"""Log-normal sigma of one request's TPOT around its engine's TPOT over the request's life."""


def histogram_quantile(q: float, bounds: Sequence[float], cumulative: npt.ArrayLike) -> float:
    """Prometheus's quantile of a classic histogram (promql/quantile.go, `BucketQuantile`): linear inside
    the bucket that holds rank q x count, from 0 below the first bound; the highest finite bound when the
    rank falls in +Inf. `cumulative` holds the counts at each of `bounds` (ascending) and then at +Inf.
    NaN when nothing was observed."""
    if not 0.0 <= q <= 1.0:
        raise ValueError(f"quantile {q} is outside [0, 1]")
    counts = np.maximum.accumulate(np.asarray(cumulative, dtype=np.float64))
    if counts.shape != (len(bounds) + 1,):
        raise ValueError(f"{counts.shape[0]} cumulative counts for {len(bounds)} bounds and +Inf")
    total = float(counts[-1])
    if total <= 0.0:
        return float("nan")
    rank = q * total
    b = int(np.searchsorted(counts[:-1], rank, side="left"))
    if b == len(bounds):
        return float(bounds[-1])
    start, end, count = 0.0, float(bounds[b]), float(counts[b])
    if b > 0:
        start = float(bounds[b - 1])
        count -= float(counts[b - 1])
        rank -= float(counts[b - 1])
    return start + (end - start) * (rank / count) if count > 0 else float("nan")
