"""Hand-computed checks of every formula in DESIGN.md §2 (numbers worked out in the comments)."""

from __future__ import annotations

import math
from datetime import UTC, datetime, timedelta

import numpy as np
import pytest

from sovereignspec.api.speculation_policy import AcceleratorProfile, BetaPrior, Roofline, StepTimePoint
from sovereignspec.model.acceptance import (
    alpha_from_mean_accepted,
    estimate_acceptance,
    expected_lengths,
    extend_geometric,
    iid_curve,
    iid_expected_length,
    mean_accepted_iid,
)
from sovereignspec.model.beta import beta_cdf, beta_quantile
from sovereignspec.model.profiles import DEFAULT_PROFILES, ProfileBook, normalize_product
from sovereignspec.model.speedup import (
    break_even_slack,
    load_increase,
    neighbour_slowdown,
    real_speedup,
    slack,
    slo_margin,
    step_ratio,
)
from sovereignspec.model.steptime import StepCurve, stretched
from sovereignspec.model.telemetry import AcceptanceSample
from sovereignspec.model.workload import CheckEntry
from sovereignspec.policy.admission_check import entry_wire, set_admission_check_state
from tests.support import per_position_acceptance


def test_per_position_acceptance_and_geometric_extension() -> None:
    # p_i = accepted_per_pos[i-1] / drafts
    assert per_position_acceptance([800, 600, 450], 1000).tolist() == pytest.approx([0.8, 0.6, 0.45])
    # counter noise: p_2 > p_1 is impossible, clipped to the running minimum
    assert per_position_acceptance([500, 600], 1000).tolist() == pytest.approx([0.5, 0.5])
    # last conditional rate 0.6/0.8 = 0.75 → 0.45, 0.3375
    assert extend_geometric(np.array([0.8, 0.6]), 4).tolist() == pytest.approx([0.8, 0.6, 0.45, 0.3375])
    assert extend_geometric(np.array([0.8]), 3).tolist() == pytest.approx([0.8, 0.64, 0.512])
    assert extend_geometric(np.array([0.8, 0.6, 0.5]), 2).tolist() == pytest.approx([0.8, 0.6])


def test_expected_length() -> None:
    # E[L(k)] = 1 + sum p_i: k=0 → 1, k=1 → 1.8, k=2 → 2.4
    assert expected_lengths(np.array([0.8, 0.6])).tolist() == pytest.approx([1.0, 1.8, 2.4])
    # i.i.d.: (1 - 0.5^4)/(1 - 0.5) = 1.875 = 1 + 0.5 + 0.25 + 0.125
    assert iid_expected_length(0.5, 3) == pytest.approx(1.875)
    assert expected_lengths(iid_curve(0.5, 3))[-1] == pytest.approx(1.875)
    assert iid_expected_length(1.0, 3) == 4.0


def test_alpha_recovered_from_mean_accepted() -> None:
    # m(0.5, k=3) = 0.5 + 0.25 + 0.125 = 0.875
    assert mean_accepted_iid(0.5, 3) == pytest.approx(0.875)
    assert alpha_from_mean_accepted(0.875, 3) == pytest.approx(0.5, abs=1e-9)
    assert alpha_from_mean_accepted(0.0, 3) == 0.0
    assert alpha_from_mean_accepted(3.0, 3) == 1.0
    # k=1: m = alpha
    assert alpha_from_mean_accepted(0.7, 1) == pytest.approx(0.7, abs=1e-9)


def test_beta_quantile() -> None:
    assert beta_quantile(0.3, 1, 1) == pytest.approx(0.3)  # uniform
    assert beta_quantile(0.25, 2, 1) == pytest.approx(0.5)  # CDF x² → sqrt(q)
    assert beta_quantile(0.5, 2, 2) == pytest.approx(0.5)  # symmetric
    assert beta_cdf(0.3, 2, 3) == pytest.approx(0.3483)  # 1 - (1-x)^4 - 4x(1-x)^3


def test_acceptance_posterior_prior_observed_aggregate() -> None:
    flat = BetaPrior(mean=0.5, strength=2)  # Beta(1, 1)
    est = estimate_acceptance(flat, None, 2, 0.25)
    assert est.source == "prior" and est.alpha == pytest.approx(0.25)
    assert est.p.tolist() == pytest.approx([0.25, 0.0625])
    # one draft, position 0 accepted: r_1 ~ Beta(2, 1) → q=0.25 at 0.5; beyond k=1 geometric with 0.5
    one = AcceptanceSample(
        target_model="t", draft_model="d", method="eagle", drafts=1, accepted_per_position=[1]
    )
    est = estimate_acceptance(flat, one, 3, 0.25)
    assert est.source == "observed" and est.p.tolist() == pytest.approx([0.5, 0.25, 0.125])
    # aggregate: k=1 engines, 1000 drafts, 700 accepted → alphâ = 0.7, ~Beta(701, 301): quantile near 0.7
    agg = AcceptanceSample(
        target_model="t", draft_model="d", method="eagle", drafts=1000, draft_tokens=1000, accepted=700
    )
    est = estimate_acceptance(flat, agg, 2, 0.5)
    assert est.source == "aggregate" and est.alpha == pytest.approx(0.7, abs=0.002)
    # the conservative quantile sits below the mean
    assert estimate_acceptance(flat, agg, 2, 0.25).alpha < est.alpha


def test_step_curve_table_and_roofline() -> None:
    c = StepCurve.from_points([(0, 0.006), (4096, 0.14)])
    assert c.t0 == 0.006
    assert float(c.t(2048)) == pytest.approx(0.073)
    assert float(c.g(8192)) == pytest.approx(0.268)  # extrapolated with the last slope
    assert c.t_scalar(8192) == pytest.approx(float(c.t(8192)))
    r = StepCurve.from_roofline(
        Roofline(peak_tflops=100, memory_bandwidth_gbs=1000, params_b=8, bytes_per_param=2, mfu=1, mbu=1)
    )
    # t0 = 16e9 B / 1e12 B/s = 0.016 s; g(T) = T·16e9 / 1e14 = 1.6e-4·T
    assert r.t0 == pytest.approx(0.016) and float(r.g(10)) == pytest.approx(1.6e-3)
    with pytest.raises(ValueError):
        StepCurve.from_points([(0, 0.01), (10, 0.005)])
    with pytest.raises(ValueError):
        AcceleratorProfile(product="x", step_time=[StepTimePoint(tokens=5, seconds=0.1)] * 2)


def test_stretch_slack_tau_speedup_break_even() -> None:
    assert float(stretched(0.01, 0.01, 0.5)) == pytest.approx(0.03)  # t0 + g/(1-u)
    assert float(slack(0.01, 0.01, 0.5)) == pytest.approx(1 / 3)
    # linear g = 0.001·T, t0 = 0.01, B = 2, k = 3, c_d = 0.02, u = 0:
    # t(2) = 0.012, t(8) = 0.018 → τ = 1.5 + 0.06 = 1.56; first order: 1 + 3(1 - 0.8333) + 0.06 = 1.56
    tau = float(step_ratio(0.01, 0.002, 0.008, 0.0, 3, 0.02))
    assert tau == pytest.approx(1.56)
    sigma = 0.01 / 0.012
    assert tau == pytest.approx(1 + 3 * (1 - sigma) + 3 * 0.02)
    assert float(real_speedup(2.5, tau)) == pytest.approx(2.5 / 1.56)
    # sigma0(k=2) = 1 + 0.1 - (1.8 - 1)/2 = 0.7
    assert float(break_even_slack(1.8, 2, 0.1)) == pytest.approx(0.7)
    # S_real = 1 exactly at the break-even slack (linear g): pick t0, g so that sigma = 0.7
    t0, gb = 0.007, 0.003  # sigma = 0.7
    tau_be = float(step_ratio(t0, gb, 3 * gb, 0.0, 2, 0.1))
    assert float(real_speedup(1.8, tau_be)) == pytest.approx(1.0)


def test_load_increase_slowdown_margin() -> None:
    # Δu = 0.008/(1.56·0.012) - 0.002/0.012 = 0.427350 - 0.166667
    du = float(load_increase(0.01, 0.002, 0.008, 0.0, 1.56))
    assert du == pytest.approx(0.008 / (1.56 * 0.012) - 0.002 / 0.012)
    assert du == pytest.approx(0.260684, abs=1e-6)
    # ε = (1 - 0.5)·0.1 / (1 - 0.4 - 0.1) = 0.1; infinite when the GPU would saturate
    assert float(neighbour_slowdown(0.5, 0.1, 0.4)) == pytest.approx(0.1)
    assert math.isinf(float(neighbour_slowdown(0.5, 0.1, 0.95)))
    assert float(slo_margin(0.05, 0.04)) == pytest.approx(0.25)
    assert float(slo_margin(0.04, 0.05)) < 0  # already over its SLO


def test_default_profiles_name_sources_and_resolve() -> None:
    assert {normalize_product(p.product) for p in DEFAULT_PROFILES} >= {
        "nvidia-a100-sxm4-80gb",
        "nvidia-h100-80gb-hbm3",
        "nvidia-h200",
        "nvidia-geforce-rtx-4090",
    }
    assert all(
        (p.source and "datasheet" in p.source) or "whitepaper" in (p.source or "") for p in DEFAULT_PROFILES
    )
    book = ProfileBook(DEFAULT_PROFILES)
    assert book.find("NVIDIA H100 80GB HBM3", "any") is book.find("NVIDIA-H100-80GB-HBM3", None)
    assert book.find("NVIDIA-A100-SXM4-80GB-MIG-1g.10gb", "m") is not None
    assert book.find("unknown", "m") is None
    exact = AcceleratorProfile(
        product="NVIDIA-H200",
        target_model="m",
        step_time=[StepTimePoint(tokens=0, seconds=0.004), StepTimePoint(tokens=100, seconds=0.005)],
    )
    book2 = ProfileBook([exact, *DEFAULT_PROFILES])
    assert book2.find("NVIDIA H200", "m") is exact
    assert book2.find("NVIDIA H200", "other") is not exact


def test_admission_check_transition_is_clocked() -> None:
    t0 = datetime(2026, 1, 1, tzinfo=UTC)
    t1 = t0 + timedelta(minutes=1)
    pending = CheckEntry(name="c", state="Pending", message="", last_transition_time=t0)
    ready = CheckEntry(name="c", state="Ready", message="ok")
    moved = set_admission_check_state(pending, ready, t1)
    assert moved.last_transition_time == t1 and moved.state == "Ready"
    again = set_admission_check_state(
        moved, ready.model_copy(update={"message": "still"}), t1 + timedelta(hours=1)
    )
    assert again.last_transition_time == t1 and again.message == "still"
    assert set_admission_check_state(None, ready, t1).last_transition_time == t1
    wire = entry_wire(moved)
    assert wire["lastTransitionTime"] == "2026-01-01T00:01:00Z" and wire["state"] == "Ready"
