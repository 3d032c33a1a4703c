"""The evidence simulator reads an engine's TPOT as the operator's query does: the policy's quantile of
vLLM's per-request histogram, not the window's mean (the mean until session 31)."""

from __future__ import annotations

import numpy as np
import pytest

from sovereignspec.api.speculation_policy import SpeculationPolicySpec
from sovereignspec.api.telemetry_spec import TelemetrySpec
from sovereignspec.evidence import sovereign
from sovereignspec.evidence.pools import standard_pool
from sovereignspec.evidence.sim import simulate
from sovereignspec.evidence.suite import make_policy
from sovereignspec.evidence.tpot_reading import peak_mean_as_read, request_tpots, tpot_as_read
from sovereignspec.model.tpot_histogram import TPOT_BUCKETS


def test_a_steady_engine_reads_inside_the_bucket_that_holds_its_tpot() -> None:
    for tpot in (0.008, 0.03, 0.06, 0.12):
        got = tpot_as_read(np.full(150, tpot), np.full(150, 100.0), 120, 10, 0.9)
        hi = next(b for b in TPOT_BUCKETS if b >= tpot)
        lo = max([0.0, *(b for b in TPOT_BUCKETS if b < tpot)])
        assert lo < got <= hi, (tpot, got)


def test_a_cycling_neighbour_reads_its_peaks_not_its_mean() -> None:
    """A load that spends a quarter of the window at 48 ms (SLO 47 ms) and the rest at 30 ms: the mean
    is well inside the SLO, the 90th percentile of its requests is not."""
    t = np.arange(150)
    tpot = np.where((t // 30) % 4 == 3, 0.048, 0.030)
    tokens = 2.0 / tpot  # a constant batch: fewer tokens per second while slow
    mean = float((tpot[-120:] * tokens[-120:]).sum() / tokens[-120:].sum())
    assert mean < 0.040
    assert tpot_as_read(tpot, tokens, 120, 10, 0.9) > 0.047
    assert tpot_as_read(tpot, tokens, 120, 10, 0.5) < tpot_as_read(tpot, tokens, 120, 10, 0.9)


def test_peak_mean_reads_a_steady_engine_exactly_and_a_cycling_one_at_its_slow_spans() -> None:
    """`PeakMean`: the highest mean over spans of `sub_ticks`; no bucket to interpolate in."""
    assert peak_mean_as_read(np.full(150, 0.03), np.full(150, 100.0), 120, 10, 60) == pytest.approx(0.03)
    t = np.arange(150)
    tpot = np.where((t // 30) % 4 == 3, 0.048, 0.030)
    tokens = 2.0 / tpot
    short, long = (peak_mean_as_read(tpot, tokens, 120, 10, n) for n in (30, 60))
    assert 0.030 < long < short < 0.048  # a longer span dilutes the 30 s slow phase
    assert np.isnan(peak_mean_as_read(tpot, np.zeros(150), 120, 10, 30))


def test_a_request_averages_the_steps_it_ran_through() -> None:
    tpot = np.array([0.01, 0.03, 0.03, 0.01])
    tokens = np.array([100.0, 0.0, 50.0, 100.0])
    got = request_tpots(tpot, tokens, 2)
    assert got == pytest.approx([0.01, 0.01, 0.03, (0.03 * 50 + 0.01 * 100) / 150])
    assert np.isnan(tpot_as_read(tpot, np.zeros(4), 2, 2, 0.9))  # no request finished: missing


def test_the_simulator_reads_the_policys_tpot_statistic() -> None:
    sc = standard_pool("mixed").scenario(("mps", 2e-3))
    sim = simulate(sc, make_policy("always-on"), 1)
    tick = sim.tensor.shape[0] - 1
    median, p90 = (sovereign.observe(sim, tick, TelemetrySpec(tpot_quantile=q)) for q in (0.5, 0.9))
    pairs = [(a.tpot_seconds, b.tpot_seconds) for a, b in zip(median.engines, p90.engines, strict=True)]
    assert pairs and all(a is not None and b is not None and a <= b for a, b in pairs)
    assert any(a < b for a, b in pairs)  # type: ignore[operator]
    spec = SpeculationPolicySpec.model_validate({"telemetry": {"tpotQuantile": 0.5}})
    assert sovereign.snapshot(sim, tick, spec).telemetry == median
    assert sovereign.snapshot(sim, tick, SpeculationPolicySpec()).telemetry == p90
    peak = SpeculationPolicySpec.model_validate({"telemetry": {"tpotStatistic": "PeakMean"}})
    read = sovereign.snapshot(sim, tick, peak).telemetry
    assert read == sovereign.observe(sim, tick, peak.telemetry)
    assert [e.tpot_seconds for e in read.engines] != [e.tpot_seconds for e in p90.engines]
