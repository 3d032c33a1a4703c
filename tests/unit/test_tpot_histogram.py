"""Prometheus's classic-histogram quantile, as the evidence simulator reads vLLM's TPOT histogram."""

from __future__ import annotations

import math

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st

from sovereignspec.model.tpot_histogram import TPOT_BUCKETS, histogram_quantile

BOUNDS = (0.01, 0.025, 0.05)


@pytest.mark.parametrize(
    ("q", "want"),
    [
        (0.1, 0.005),  # rank 1 in the first bucket: from 0 to 0.01
        (0.5, 0.025),  # rank 5: the top of (0.01, 0.025], which holds 3 of 3
        (0.7, 0.025 + 0.025 * 2 / 4),  # rank 7: 2 of the 4 in (0.025, 0.05]
        (0.9, 0.05),
        (0.95, 0.05),  # rank in +Inf: the highest finite bound
    ],
)
def test_linear_inside_the_bucket_holding_the_rank(q: float, want: float) -> None:
    assert histogram_quantile(q, BOUNDS, [2, 5, 9, 10]) == pytest.approx(want)


def test_nothing_observed_is_nan_and_bad_input_is_refused() -> None:
    assert math.isnan(histogram_quantile(0.9, BOUNDS, [0, 0, 0, 0]))
    with pytest.raises(ValueError, match="outside"):
        histogram_quantile(1.5, BOUNDS, [1, 2, 3, 4])
    with pytest.raises(ValueError, match="cumulative counts"):
        histogram_quantile(0.5, BOUNDS, [1, 2, 3])


def test_non_monotonic_counts_are_made_monotonic() -> None:
    """Prometheus forces cumulative counts up (a counter reset between scrapes skews rate())."""
    assert histogram_quantile(0.5, BOUNDS, [2, 1, 9, 10]) == histogram_quantile(0.5, BOUNDS, [2, 2, 9, 10])


@given(
    st.lists(st.integers(0, 50), min_size=len(TPOT_BUCKETS) + 1, max_size=len(TPOT_BUCKETS) + 1),
    st.floats(0.0, 1.0),
    st.floats(0.0, 1.0),
)
def test_quantile_rises_with_q_and_stays_inside_the_bounds(per_bucket: list[int], a: float, b: float) -> None:
    cumulative = np.cumsum(per_bucket)
    lo, hi = sorted((a, b))
    x, y = (histogram_quantile(q, TPOT_BUCKETS, cumulative) for q in (lo, hi))
    if cumulative[-1] == 0:
        assert math.isnan(x) and math.isnan(y)
        return
    if math.isnan(x):  # q = 0 on an empty first bucket: 0 / 0, as Prometheus answers
        assert lo == 0.0
        return
    assert 0.0 <= x <= y <= TPOT_BUCKETS[-1]
