"""The evidence simulator's `histogram_quantile` against a real Prometheus on the same bucket counts: the
simulator reads an engine's TPOT with the interpolation the operator's query gets."""

from __future__ import annotations

import math

import numpy as np
import pytest

from sovereignspec.model.tpot_histogram import TPOT_BUCKETS, histogram_quantile
from tests.telemetry.promproc import PrometheusProcess

pytestmark = [pytest.mark.prometheus, pytest.mark.timeout(120)]


def _promql(q: float, cumulative: list[float]) -> str:
    les = [repr(b) for b in TPOT_BUCKETS] + ["+Inf"]
    series = " or ".join(
        f'label_replace(vector({c!r}), "le", "{le}", "", "")' for le, c in zip(les, cumulative, strict=True)
    )
    return f"histogram_quantile({q!r}, {series})"


def test_same_quantile_as_prometheus(empty_prometheus: PrometheusProcess) -> None:
    rng = np.random.default_rng(31)
    cases: list[tuple[float, list[float]]] = []
    n = len(TPOT_BUCKETS) + 1
    for _ in range(40):
        per_bucket = rng.poisson(rng.uniform(0, 30, n)) * (rng.random(n) < 0.6)  # some buckets empty
        q = float(rng.choice([0.5, 0.9, 0.99, rng.uniform(0.01, 0.99)]))
        cases.append((q, np.cumsum(per_bucket).tolist()))
    cases.append((0.9, [0.0] * 5 + [7.5] * (len(TPOT_BUCKETS) - 4)))  # all in one bucket, fractional counts
    for q, cumulative in cases:
        got = empty_prometheus.query(_promql(q, cumulative))
        ours = histogram_quantile(q, TPOT_BUCKETS, cumulative)
        if cumulative[-1] == 0:
            assert math.isnan(ours) and (not got or math.isnan(float(got[0]["value"][1])))
            continue
        assert len(got) == 1, got
        assert ours == pytest.approx(float(got[0]["value"][1]), rel=1e-9), (q, cumulative)
