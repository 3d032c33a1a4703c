"""Evidence suite: claims C1-C6 computed on the standard suite, determinism, calibration, CLI shape,
and the ground-truth pieces."""

from __future__ import annotations

import json
from typing import Any

import numpy as np
import pytest

from sovereignspec.cli.main import main
from sovereignspec.evidence.calibration import PUBLISHED, fit
from sovereignspec.evidence.policies import Scheduled
from sovereignspec.evidence.scenario import GOOD_EAGLE3, EngineSpec, single_gpu
from sovereignspec.evidence.sim import simulate
from sovereignspec.evidence.suite import POLICY_NAMES, run_standard
from sovereignspec.evidence.truth import GPU_TYPES, expected_length, hinge, solve, step_parts


@pytest.fixture(scope="session")
def standard() -> tuple[dict[str, Any], dict[str, Any]]:
    return run_standard(seed=7)


def test_shape(standard: tuple[dict[str, Any], dict[str, Any]]) -> None:
    result, _ = standard
    assert set(result["policies"]) == set(POLICY_NAMES)
    for row in result["policies"].values():
        assert set(row) == {"goodput", "tpotP50", "tpotP99", "sloViolationsCaused", "gpuSecondsPer1kTokens"}
        assert row["goodput"] > 0
    assert set(result["claims"]) == {f"C{i}" for i in range(1, 7)}
    assert all(set(c) >= {"value", "pass"} for c in result["claims"].values())


def test_claims_that_hold(standard: tuple[dict[str, Any], dict[str, Any]]) -> None:
    c = standard[0]["claims"]
    assert c["C1"]["pass"] and c["C1"]["value"] > 2.0
    assert c["C2"]["pass"] and c["C2"]["value"]["pDecreasing"] < 0.05 and c["C2"]["value"]["fall"] >= 0.15
    assert c["C3"]["pass"]
    assert c["C5"]["pass"] and c["C5"]["value"]["stress"] >= 0.15
    assert c["C6"]["pass"] and c["C6"]["value"]["neighboursHarmedWithoutCondition"] >= 2
    assert c["C6"]["value"]["violationsCausedWithCondition"] == 0


def test_mann_kendall() -> None:
    from sovereignspec.evidence.suite import mann_kendall

    assert mann_kendall([5.0, 4.0, 3.0, 2.0, 1.0, 0.5, 0.1])[1] < 0.01
    assert mann_kendall([1.0, 2.0, 3.0, 4.0, 5.0, 6.0, 7.0])[1] > 0.99
    assert 0.2 < mann_kendall([1.0, 3.0, 2.0, 3.0, 1.0, 2.0, 2.5])[1] < 0.8


def test_slack_aware_budget_never_worse_than_fixed_k(standard: tuple[dict[str, Any], dict[str, Any]]) -> None:
    sweep = standard[0]["claims"]["C5"]["value"]["sweep"]
    assert [p["slack"] for p in sweep] == sorted((p["slack"] for p in sweep), reverse=True)
    assert all(p["slackAware"] >= p["fixedK5"] for p in sweep)
    assert sweep[-1]["fixedK5"] < 1.0  # a fixed k loses once the load has eaten the slack


def test_stress_pool_is_saturated_and_always_on_harms_neighbours(
    standard: tuple[dict[str, Any], dict[str, Any]],
) -> None:
    _, raw = standard
    st = raw["stress"]
    off = st.runs["off"]
    kr = [j for j, g in enumerate(off.gpus) if g.jurisdiction == "KR" and g.kind != "rtx4090"]
    assert off.tensor[100:, kr].mean() > 0.9
    assert st.table["always-on"]["_neighboursHarmed"] >= 3
    assert st.table["sovereignspec"]["sloViolationsCaused"] == 0


def test_calibrated_policy_loads_shipped_profiles() -> None:
    from sovereignspec.evidence.sovereign import calibrated_policy

    p = calibrated_policy(reconfigure_on_drift=True)
    assert p.reconfigure_on_drift and {a.product for a in p.accelerator_profiles} >= {"NVIDIA-H100-80GB-HBM3"}


def test_sovereignspec_causes_no_violations_and_beats_always_on(
    standard: tuple[dict[str, Any], dict[str, Any]],
) -> None:
    result = standard[0]
    for key in ("goals", "goalsCalibrated", "goalsThroughput", "goalsCalibratedThroughput"):
        goals = result[key]
        assert goals["violationsCaused"] == 0
        assert goals["gainOverAlwaysOnSaturated"] > 0
        assert goals["gainOverAlwaysOnStress"] >= 0.2
        assert goals["oracleShareSaturated"] > 0.95 and goals["oracleShareStress"] > 0.95
    for scen in ("saturated", "stress"):
        t = result["scenarios"][scen]["policies"]
        assert t["sovereignspec"]["goodput"] > t["off"]["goodput"]


@pytest.mark.parametrize(
    "goals",
    [
        pytest.param(
            key,
            marks=pytest.mark.xfail(strict=True, reason=f"mixed pool: {why} (docs/evidence.md, Goals)"),
        )
        for key, why in (
            ("goals", "0.933 of the oracle; DESIGN's placement by relative S_real caps it at 0.965 even "
             "with perfect estimates and the oracle's per-tick k"),
            ("goalsCalibrated", "0.968 of the oracle, same placement cap"),
            ("goalsThroughput", "0.951 of the oracle; placement Throughput with the oracle's per-tick k "
             "reaches 0.983: what is left is decide()'s admission-time budget (report-1 runs plain as "
             "batch class, chat-2/chat-3 at k 2/1.4 where the oracle runs 4.2/3.0)"),
            ("goalsCalibratedThroughput", "0.949 of the oracle, same budget gap"),
        )
    ],
)  # fmt: skip
def test_goal_oracle_share_mixed(standard: tuple[dict[str, Any], dict[str, Any]], goals: str) -> None:
    assert standard[0][goals]["pass"]


def test_placement_throughput_closes_part_of_the_mixed_gap(
    standard: tuple[dict[str, Any], dict[str, Any]],
) -> None:
    """Opt-in placement Throughput: above the default on the mixed pool, not below it on busy/stress."""
    result = standard[0]
    assert result["goalsThroughput"]["oracleShareMixed"] >= result["goals"]["oracleShareMixed"] + 0.01
    for pool in ("Saturated", "Stress"):
        assert result["goalsThroughput"][f"oracleShare{pool}"] >= result["goals"][f"oracleShare{pool}"]
    variants = result["scenarios"]["mixed"]["variants"]
    assert variants["sovereignspec-throughput"]["sloViolationsCaused"] == 0


def test_decomposition_reproduces_the_diagonal(standard: tuple[dict[str, Any], dict[str, Any]]) -> None:
    """The placement x budget crossing (docs/evidence.md) is faithful: its diagonal is the suite's runs."""
    from sovereignspec.evidence.suite import decomposition

    t = standard[0]["scenarios"]["mixed"]["policies"]
    d = decomposition()
    assert d["sovereignspec"]["sovereignspec"] == pytest.approx(t["sovereignspec"]["goodput"], abs=0.1)
    assert d["oracle"]["oracle"] == pytest.approx(t["oracle"]["goodput"], abs=0.1)
    assert d["least-allocated"]["off"] == pytest.approx(t["off"]["goodput"], abs=0.1)
    assert d["least-allocated"]["k5"] == pytest.approx(t["always-on"]["goodput"], abs=0.1)
    v = standard[0]["scenarios"]["mixed"]["variants"]
    assert d["throughput"]["sovereignspec"] == pytest.approx(
        v["sovereignspec-throughput"]["goodput"], abs=0.1
    )


def test_drift_rule_no_longer_flip_flops(standard: tuple[dict[str, Any], dict[str, Any]]) -> None:
    """reconfigureOnDrift with the operator's rule (own load taken out, grace period, minGain hysteresis):
    it used to restart mixed-pool engines 20 times in 600 s (19758 vs 22842 tok/s)."""
    mixed = standard[0]["scenarios"]["mixed"]
    assert mixed["reconfigurations"]["sovereignspec-calibrated-drift"] <= 8
    with_drift = mixed["variants"]["sovereignspec-calibrated-drift"]["goodput"]
    assert with_drift >= 0.95 * mixed["variants"]["sovereignspec-calibrated"]["goodput"]


def test_deterministic() -> None:
    subj = EngineSpec("probe", "bank-a", 8, 100, draft=GOOD_EAGLE3, expected_batch=8)
    sc = single_gpu("det", subj, (EngineSpec("bg", "shop", 64, 100),), horizon_s=30)
    a = simulate(sc, Scheduled("k3", [[1, 1024, 3]]), 11)
    b = simulate(sc, Scheduled("k3", [[1, 1024, 3]]), 11)
    c = simulate(sc, Scheduled("k3", [[1, 1024, 3]]), 12)
    assert np.array_equal(a.tokens, b.tokens)
    assert not np.array_equal(a.tokens, c.tokens)


@pytest.mark.parametrize("curve", PUBLISHED, ids=lambda c: c.key)
def test_calibration_mape(curve: Any) -> None:
    f = fit(curve)
    assert f.mape <= 0.10
    prof = f.profile()
    assert prof.step_time is not None and prof.source and curve.source[:20] in prof.source


def test_hinge_and_kv_term() -> None:
    assert hinge(np.array(3.0), np.array(0.0)) == pytest.approx(3.0)
    assert hinge(np.array(3.0), np.array(3.0)) > 3.0
    g = GPU_TYPES["h100"]
    short = step_parts(g.tflops, g.bandwidth_gbs, g.mfu, g.mbu, g.overhead_s, 32, 0, 500)
    long = step_parts(g.tflops, g.bandwidth_gbs, g.mfu, g.mbu, g.overhead_s, 32, 0, 4000)
    assert float(long.mem) > float(short.mem) and float(long.comp) > float(short.comp)


def test_contention_slows_and_shares_sum_below_one() -> None:
    g = GPU_TYPES["h100"]
    b = np.array([16.0, 128.0])
    p = step_parts(g.tflops, g.bandwidth_gbs, g.mfu, g.mbu, g.overhead_s, b, np.array([0, 0]), 1500, b * 2)
    alone = solve(p, np.eye(2))
    shared = solve(p, np.ones((2, 1)))
    assert np.all(shared.t > alone.t)
    assert shared.compute_share.sum() < 1.0


def test_acceptance_decays_with_depth() -> None:
    q = GOOD_EAGLE3.conditional(GOOD_EAGLE3.a0, 8)
    assert np.all(np.diff(q) < 0)
    el = expected_length(np.broadcast_to(q, (9, 8)), np.arange(9))
    assert np.all(np.diff(el) > 0) and el[8] < 9


def test_cli_calibrate_and_measure(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["calibrate", "-o", "json"]) == 0
    out = json.loads(capsys.readouterr().out)
    assert len(out["fits"]) == 3 and all(f["mape"] <= 0.10 for f in out["fits"])
    assert main(["calibrate", "--measure"]) == 2
    assert "GPU" in capsys.readouterr().err


@pytest.mark.parametrize(
    "claim",
    [
        pytest.param(
            "C4",
            marks=pytest.mark.xfail(
                strict=True,
                reason="ground truth shares compute in proportion to demand: always-on's own loss at "
                "saturation is ~8 % (<= 14 % in single-GPU probes at tensor-active 0.99), the tax lands on "
                "neighbours; strict time-slicing puts it on the subject but reaches only 0.18 and breaks "
                "C2/C3 (docs/evidence.md, Sharing model)",
            ),
        )
    ],
)
def test_claims_not_reproduced_yet(standard: tuple[dict[str, Any], dict[str, Any]], claim: str) -> None:
    """Strict xfail: the day one of these starts passing, the suite says so and docs must be updated."""
    assert standard[0]["claims"][claim]["pass"]
