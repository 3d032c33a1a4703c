"""Evidence suite: the multi-seed output contract, claims C1-C6 measured as stated, the test that fails
when decide() turns speculation off where the ground truth gains SLO-goodput, determinism, calibration out of
sample, and the ground-truth pieces.

CI runs the suite on SEEDS (a few minutes on 2 cores); docs/evidence.md reports `--seeds 10`.
"""

from __future__ import annotations

import json
from dataclasses import replace
from datetime import datetime
from typing import Any

import numpy as np
import pytest

from sovereignspec.api.meta import ANNOTATION_TPOT_SLO_MS
from sovereignspec.api.speculation_policy import SpeculationPolicySpec
from sovereignspec.api.telemetry_spec import TelemetrySpec
from sovereignspec.cli.main import main
from sovereignspec.evidence import sovereign
from sovereignspec.evidence.calibration import PUBLISHED, fit, out_of_sample
from sovereignspec.evidence.policies import Scheduled
from sovereignspec.evidence.pools import STANDARD_POOLS, standard_pool
from sovereignspec.evidence.scenario import GOOD_EAGLE3, EngineSpec, single_gpu
from sovereignspec.evidence.sim import simulate
from sovereignspec.evidence.suite import (
    CLAIRVOYANT,
    POLICY_NAMES,
    SuiteRun,
    acceptance,
    make_policy,
    run_suite,
)
from sovereignspec.evidence.truth import GPU_TYPES, expected_length, hinge, solve, step_parts
from sovereignspec.model.cluster import ClusterSnapshot
from sovereignspec.operator.settings import OperatorSettings
from sovereignspec.policy.decision import Decision
from sovereignspec.policy.request import AdmissionRequest, Policies

SEEDS = (1, 2)
CONTRACT_POLICIES = {"off", "always-on", "seed000-recipe", "static-schedule", "in-engine-goodput",
                     "sovereignspec", "sovereignspec-no-neighbour-condition",
                     "sovereignspec-priors-only"}  # fmt: skip


@pytest.fixture(scope="session")
def suite() -> SuiteRun:
    scenarios = [standard_pool(n).scenario(("mps", 2e-3)) for n in STANDARD_POOLS]
    return run_suite(scenarios, SEEDS, jobs=2)


def test_output_contract(suite: SuiteRun) -> None:
    r = json.loads(json.dumps(suite.result))
    assert r["seeds"] == list(SEEDS)
    assert set(r["pools"]) == {"mixed", "busy", "stress"}
    for body in r["pools"].values():
        assert set(body["policies"]) >= CONTRACT_POLICIES | {CLAIRVOYANT}
        for row in body["policies"].values():
            for key in ("goodput", "bestKnownShare"):
                lo, hi = row[key]["ci95"]
                assert lo <= row[key]["mean"] <= hi
            assert set(row["sloWindowsCaused"]) == {"mean", "max"}
            assert 0 < row["bestKnownShare"]["mean"] <= 1.0
        assert set(body["paired"]) == {
            f"sovereignspec-vs-{p}" for p in body["policies"] if p != "sovereignspec"
        }
        for g in body["paired"].values():
            assert set(g) == {"meanGain", "ci95"} and g["ci95"][0] <= g["meanGain"] <= g["ci95"][1]
    assert set(r["claims"]) == {f"C{i}" for i in range(1, 7)}
    assert all(isinstance(c["pass"], bool) and "value" in c for c in r["claims"].values())


def test_best_known_is_the_per_seed_maximum(suite: SuiteRun) -> None:
    """Every policy's share is <= 1 on every seed, and some run reaches 1 on every seed."""
    for seeds in suite.pools.values():
        for ps in seeds:
            best = max(r.goodput for r in (*ps.runs.values(), *ps.fixed_k.values()))
            assert ps.runs[CLAIRVOYANT].goodput >= ps.runs["oracle"].goodput - 1e-6
            assert all(r.goodput <= best for r in ps.runs.values())


def test_claims_that_hold(suite: SuiteRun) -> None:
    c = suite.result["claims"]
    assert c["C1"]["pass"] and c["C1"]["value"]["ci95"][0] > 2.0
    assert c["C2"]["pass"]
    assert c["C3"]["pass"]
    c4 = c["C4"]["value"]
    # as the paper states it: a weak draft at k=5 and a good draft at k=8 cost the subjects > 20 %
    assert c4["weakDraftK5"]["mean"] > 0.2 and c4["goodDraftK8"]["mean"] > 0.2


def test_sovereignspec_causes_no_slo_window(suite: SuiteRun) -> None:
    for seeds in suite.pools.values():
        for ps in seeds:
            assert ps.runs["sovereignspec"].windows == 0, (ps.pool, ps.seed)


def test_always_on_harms_neighbours_on_the_stress_pool(suite: SuiteRun) -> None:
    stress = suite.result["pools"]["stress"]["policies"]
    assert stress["always-on"]["sloWindowsCaused"]["mean"] > 10
    assert stress["always-on"]["bestKnownShare"]["mean"] < 0.9


def test_speculation_is_not_turned_off_where_the_ground_truth_gains(suite: SuiteRun) -> None:
    """Replaces "budget never worse than fixed k" (which an always-off policy passes): one H100, a batch-64
    subject next to growing load. Gain is DESIGN.md's objective, the SLO-goodput of every engine on the
    GPU: wherever some fixed k >= 1 gains more than 5 % of it over plain decoding, decide() must not have
    turned speculation off, and its schedule must be within 5 points of that k's at every point."""
    off_where_gain, behind = [], []
    for m in suite.micros:
        for p in m["budgetSweep"]:
            best = max(p["fixedKGoodput"].values())
            if best > 1.05 and p["kAtBatch64"] == 0:
                off_where_gain.append((p["background"], best))
            if p["slackAwareGoodput"] < best - 0.05:
                behind.append((p["background"], p["slackAwareGoodput"], best))
    assert not off_where_gain, f"speculation off where a fixed k gains: {off_where_gain}"
    assert not behind, f"decide()'s schedule more than 5 points behind the best fixed k: {behind}"
    # Not vacuous: on the idle GPU every k up to 4 gains more than 5 %, so an always-off policy fails.
    assert any(max(p["fixedKGoodput"].values()) > 1.05 for m in suite.micros for p in m["budgetSweep"])


def test_a_subjects_own_gain_under_load_is_taken_from_its_neighbours(suite: SuiteRun) -> None:
    """Why the test above counts the whole GPU: on the loaded points the subject alone speeds up by more
    than 5 % at k = 1 (MPS-like sharing hands it compute its neighbours had), while the GPU's SLO-goodput
    gains less than half of that. If the ground truth stopped charging the neighbours, this fails and the
    budget's contention model (t0 + g/(1 - u), neighbours' share held) needs revisiting."""
    for m in suite.micros:
        for p in m["budgetSweep"]:
            if p["background"] > 0:
                own, gpu = p["fixedK"]["1"], p["fixedKGoodput"]["1"]
                assert own > 1.05 and gpu - 1 < (own - 1) / 2, (p["background"], own, gpu)


def test_acceptance_thresholds_are_computed(suite: SuiteRun) -> None:
    a = acceptance(suite.result)
    assert set(a) == {"mixed", "busy", "stress"}
    assert all(isinstance(v["pass"], bool) and v["checks"] for v in a.values())


def test_deterministic() -> None:
    subj = EngineSpec("probe", "bank-a", 8, 100, draft=GOOD_EAGLE3, expected_batch=8)
    sc = single_gpu("det", subj, (EngineSpec("bg", "shop", 64, 100),), horizon_s=30)
    a = simulate(sc, Scheduled("k3", [[1, 1024, 3]]), 11)
    b = simulate(sc, Scheduled("k3", [[1, 1024, 3]]), 11)
    c = simulate(sc, Scheduled("k3", [[1, 1024, 3]]), 12)
    assert np.array_equal(a.tokens, b.tokens)
    assert not np.array_equal(a.tokens, c.tokens)


@pytest.mark.parametrize("curve", PUBLISHED, ids=lambda c: c.key)
def test_calibration_in_sample(curve: Any) -> None:
    f = fit(curve)
    assert f.mape <= 0.10
    prof = f.profile()
    assert prof.step_time is not None and prof.source and curve.source[:20] in prof.source


@pytest.mark.parametrize("curve", [c for c in PUBLISHED if len(c.batches) >= 5], ids=lambda c: c.key)
def test_calibration_out_of_sample(curve: Any) -> None:
    """The figure that counts: leave-one-out, and fitting B <= 24 to predict the larger batches, with
    alpha fitted over 0.6-0.9 in every fit (docs/evidence.md, Calibration)."""
    o = out_of_sample(curve)
    assert o.loo_mape <= 0.15 and o.loo_max <= 0.25
    assert o.extrapolation_mape <= 0.15


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


def test_policy_names_cover_the_contract() -> None:
    assert set(POLICY_NAMES) >= CONTRACT_POLICIES


def test_the_c6_ablation_decides_on_the_same_snapshot_without_the_neighbour_condition(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """`sovereignspec-no-neighbour-condition` hands decide() the snapshot `sovereignspec` gets (every SLO
    annotation, every engine sample) and only switches the neighbour protection off: the condition in its
    Policies, and the re-admission on neighbour harm in its SpeculationPolicy; the old information
    ablation, `sovereignspec-neighbour-blind`, hides the SLOs and engines instead."""
    calls: list[tuple[ClusterSnapshot, Policies]] = []
    real = sovereign.decide

    def spy(request: AdmissionRequest, snap: ClusterSnapshot, policies: Policies, now: datetime) -> Decision:
        calls.append((snap, policies))
        return real(request, snap, policies, now)

    monkeypatch.setattr(sovereign, "decide", spy)
    sc = standard_pool("mixed").scenario(("mps", 2e-3))
    seen: dict[str, list[tuple[ClusterSnapshot, Policies]]] = {}
    for name in ("sovereignspec", "sovereignspec-no-neighbour-condition", "sovereignspec-neighbour-blind"):
        calls.clear()
        simulate(sc, make_policy(name), 1)
        seen[name] = list(calls)
    (ours, ours_p), (fair, fair_p), (blind, blind_p) = (seen[n][0] for n in seen)
    # The first decision: nothing has diverged yet, but for the ablation's reconfigureOnNeighbourHarm.
    unprotected = [
        sp.model_copy(update={"spec": sp.spec.model_copy(update={"reconfigure_on_neighbour_harm": False})})
        for sp in ours.speculation_policies
    ]
    assert all(sp.spec.reconfigure_on_neighbour_harm for sp in ours.speculation_policies)
    assert fair.model_dump() == ours.model_copy(update={"speculation_policies": unprotected}).model_dump()
    assert ours_p.neighbour_condition and not fair_p.neighbour_condition
    assert all(not p.neighbour_condition for _, p in seen["sovereignspec-no-neighbour-condition"])
    for snap, _ in seen["sovereignspec-no-neighbour-condition"]:
        assert snap.telemetry is not None and snap.telemetry.engines
        assert all(ANNOTATION_TPOT_SLO_MS in p.annotations for p in snap.pods)
    assert blind_p.neighbour_condition and blind.telemetry is not None and not blind.telemetry.engines
    assert not any(ANNOTATION_TPOT_SLO_MS in p.annotations for p in blind.pods)
    assert fair_p == replace(
        ours_p,
        speculation=ours_p.speculation.model_copy(update={"reconfigure_on_neighbour_harm": False}),
        neighbour_condition=False,
        sovereignty=fair_p.sovereignty,
    )


def test_the_simulator_reads_the_policys_telemetry_window() -> None:
    """decide() in the simulator sees what Prometheus answers to the policy's own queries: GPU load, TPOT
    and acceptance counters over `telemetry.window` (fixed at 30/60/120 s before session 22, whatever the
    policy said)."""
    sc = standard_pool("mixed").scenario(("mps", 2e-3))
    sim = simulate(sc, make_policy("always-on"), 1)
    tick = sim.tensor.shape[0] - 1
    ref = sovereign.data_tick(sim, tick)
    short, long = (sovereign.observe(sim, tick, TelemetrySpec(window=w)) for w in ("30s", "300s"))
    for j, (a, b) in enumerate(zip(short.gpus, long.gpus, strict=True)):
        means = [sim.tensor[ref - round(w / sc.dt_s) + 1 : ref + 1, j].mean() for w in (30.0, 300.0)]
        if 0.0 < a.tensor_active < 1.0 and 0.0 < b.tensor_active < 1.0:  # same noise draw, not clipped
            assert a.tensor_active - b.tensor_active == pytest.approx(means[0] - means[1], abs=1e-9)
    assert [g.tensor_active for g in short.gpus] != [g.tensor_active for g in long.gpus]
    assert [a.drafts for a in short.acceptance] != [a.drafts for a in long.acceptance]
    spec = SpeculationPolicySpec.model_validate({"telemetry": {"window": "30s"}})
    assert sovereign.snapshot(sim, tick, spec).telemetry == short
    assert sovereign.snapshot(sim, tick, SpeculationPolicySpec()).telemetry == sovereign.observe(
        sim, tick, TelemetrySpec()
    )


def test_the_simulator_reads_the_operators_last_refresh() -> None:
    """Between two telemetry refreshes the operator decides on the last one's answers, so the simulated
    policy does too: one reading per refresh period, 15-25 s old, never the tick's own."""
    assert OperatorSettings.model_fields["telemetry_refresh_seconds"].default == sovereign.REFRESH_S
    sc = standard_pool("mixed").scenario(("mps", 2e-3))
    period = round(sovereign.REFRESH_S / sc.dt_s)
    for seed in (1, 2, 3):
        sim = simulate(sc, make_policy("always-on"), seed)
        ticks = range(period + round(sovereign.LAG_S / sc.dt_s), sim.tensor.shape[0])  # past the start
        read = [sovereign.refresh_tick(sim, t) for t in ticks]
        assert all(0 <= t - r < period for t, r in zip(ticks, read, strict=True))
        assert {r % period for r in read} == {read[0] % period}  # one phase per run
        first = read.index(read[0] + period)  # the first tick of the next refresh
        t0, t1 = ticks[0], ticks[first]
        inside = [sovereign.observe(sim, t, TelemetrySpec()) for t in range(t0, t1)]
        assert all(snap == inside[0] for snap in inside)
        assert sovereign.observe(sim, t1, TelemetrySpec()) != inside[0]
        for t in (t0, t1 - 1, t1):
            held = sovereign.observe(sim, t, TelemetrySpec()).time - sovereign.EPOCH
            age = t * sc.dt_s - held.total_seconds()
            assert sovereign.LAG_S <= age < sovereign.LAG_S + sovereign.REFRESH_S
