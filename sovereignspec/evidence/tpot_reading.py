"""An engine's TPOT as the operator's default query reads it, from the simulator's per-tick history.

The operator asks Prometheus for `histogram_quantile(tpotQuantile, rate(...request_time_per_output_token
_seconds_bucket[window]))`: one observation per finished request, each the mean TPOT over that request's
decode, in vLLM's buckets, interpolated linearly inside one. Here a request finishing at a tick has
decoded for the REQUEST_S before it (its TPOT is the token-weighted mean over those ticks), requests
finish in proportion to the tokens made, and each request's TPOT spreads log-normally around that mean
(`REQUEST_TPOT_JITTER`, as in the telemetry simulator). The expected bucket counts are read with
Prometheus's interpolation (`histogram_quantile`).
"""

from __future__ import annotations

import numpy as np
from scipy.special import ndtr

from sovereignspec.evidence.sim import FloatArray, IntArray
from sovereignspec.model.tpot_histogram import REQUEST_TPOT_JITTER, TPOT_BUCKETS, histogram_quantile

REQUEST_S = 10.0
"""Decode time of one request (a 250-token answer at 40 ms per token)."""

_LOG_BOUNDS = np.log(np.asarray(TPOT_BUCKETS))


def _span_means(
    values: FloatArray, weights: FloatArray, ends: IntArray, span: int
) -> tuple[FloatArray, FloatArray]:
    """Weighted means of `values` over the `span` ticks up to each of `ends` (exclusive indices; fewer at
    the start), and the weight behind each (0: the mean is NaN)."""
    c_w = np.concatenate(([0.0], np.cumsum(weights)))
    c_vw = np.concatenate(([0.0], np.cumsum(values * weights)))
    starts = np.maximum(ends - span, 0)
    behind = c_w[ends] - c_w[starts]
    means = np.full(len(ends), np.nan)
    np.divide(c_vw[ends] - c_vw[starts], behind, out=means, where=behind > 0)
    return means, behind


def request_tpots(tpot: FloatArray, tokens: FloatArray, request_ticks: int) -> FloatArray:
    """Per tick, the TPOT of a request finishing then: the token-weighted mean over the `request_ticks`
    ticks up to it (fewer at the start of the history; NaN where no token was made)."""
    return _span_means(tpot, tokens, np.arange(1, len(tokens) + 1), request_ticks)[0]


def tpot_as_read(
    tpot: FloatArray, tokens: FloatArray, window_ticks: int, request_ticks: int, q: float
) -> float:
    """The q-quantile Prometheus gives over the last `window_ticks` of the history (`tpot`, `tokens` per
    tick; earlier ticks give the first requests their whole life). NaN when no request finished."""
    per_request = request_tpots(tpot, tokens, request_ticks)[-window_ticks:]
    weight = tokens[-window_ticks:]
    seen = (weight > 0) & np.isfinite(per_request) & (per_request > 0)
    if not seen.any():
        return float("nan")
    z = (_LOG_BOUNDS[None, :] - np.log(per_request[seen])[:, None]) / REQUEST_TPOT_JITTER
    cumulative = weight[seen] @ ndtr(z)
    return histogram_quantile(q, TPOT_BUCKETS, np.append(cumulative, weight[seen].sum()))


def peak_mean_as_read(
    tpot: FloatArray, tokens: FloatArray, window_ticks: int, request_ticks: int, sub_ticks: int
) -> float:
    """The highest mean request TPOT over `sub_ticks`-long spans ending every `sub_ticks // 2` ticks in the
    last `window_ticks` (Prometheus: `max_over_time((rate(_sum[P]) / rate(_count[P]))[window:P/2])`;
    requests finish in proportion to tokens). NaN when no request finished."""
    per_request = request_tpots(tpot, tokens, request_ticks)
    finished = np.where(np.isfinite(per_request), tokens, 0.0)
    n = len(tokens)
    ends = np.arange(n, max(n - window_ticks, 0), -max(1, sub_ticks // 2))
    means, behind = _span_means(np.nan_to_num(per_request), finished, ends, sub_ticks)
    return float(means[behind > 0].max()) if (behind > 0).any() else float("nan")
