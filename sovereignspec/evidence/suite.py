"""The standard suite: three cluster scenarios (mixed, saturated, stress) under every policy, the micro
experiments on one GPU (idle speed-up, the slack sweep, a fixed k vs the slack-aware budget at growing
load), the paper's claims C1-C6 and the goals, all computed from simulation output."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from sovereignspec.api.speculation_policy import SpeculationPolicySpec
from sovereignspec.evidence import policies as pol
from sovereignspec.evidence.metrics import per_tenant, summary
from sovereignspec.evidence.scenario import (
    GOOD_EAGLE3,
    SHARING,
    WEAK_EAGLE3,
    EngineSpec,
    Scenario,
    mixed,
    saturated,
    single_gpu,
    stress,
)
from sovereignspec.evidence.sim import Policy, Simulation, simulate
from sovereignspec.evidence.sovereign import SovereignSpec, calibrated_policy

POLICY_NAMES = ("off", "always-on", "static-schedule", "in-engine-goodput", "sovereignspec", "oracle")
VARIANTS = (
    "sovereignspec-calibrated",
    "sovereignspec-calibrated-drift",
    "sovereignspec-throughput",
    "sovereignspec-calibrated-throughput",
)
"""SovereignSpec as a user would configure it: with the shipped calibrated profiles, with
reconfigureOnDrift: true as well, and with the opt-in `placement: Throughput` (defaults or calibrated).
Reported next to the headline row (the out-of-the-box policy)."""
Progress = Callable[[str], None]


def make_policy(name: str) -> Policy:
    makers: dict[str, Callable[[], Policy]] = {
        "off": pol.off,
        "always-on": pol.always_on,
        "static-schedule": pol.static_schedule,
        "in-engine-goodput": pol.InEngineGoodput,
        "sovereignspec": SovereignSpec,
        "oracle": pol.Oracle,
        "sovereignspec-budget-only": lambda: SovereignSpec(budget_only=True),
        "sovereignspec-calibrated": lambda: SovereignSpec(
            calibrated_policy(), name="sovereignspec-calibrated"
        ),
        "sovereignspec-calibrated-drift": lambda: SovereignSpec(
            calibrated_policy(reconfigure_on_drift=True), name="sovereignspec-calibrated-drift"
        ),
        "sovereignspec-throughput": lambda: SovereignSpec(
            SpeculationPolicySpec(placement="Throughput"), name="sovereignspec-throughput"
        ),
        "sovereignspec-calibrated-throughput": lambda: SovereignSpec(
            calibrated_policy().model_copy(update={"placement": "Throughput"}),
            name="sovereignspec-calibrated-throughput",
        ),
    }
    return makers[name]()


@dataclass
class ScenarioResult:
    table: dict[str, dict[str, Any]] = field(default_factory=dict)
    tenants: dict[str, dict[str, dict[str, float]]] = field(default_factory=dict)
    runs: dict[str, Simulation] = field(default_factory=dict)


def run_scenario(sc: Scenario, names: tuple[str, ...], seed: int, progress: Progress) -> ScenarioResult:
    out = ScenarioResult()
    for name in names:
        progress(f"{sc.name}: {name}")
        policy = make_policy(name)
        s = simulate(sc, policy, seed)
        plain = s if name == "off" else simulate(sc, pol.Replay(s.placement.max(axis=0)), seed)
        out.runs[name] = s
        out.table[name] = summary(s, plain)
        if isinstance(policy, SovereignSpec) and policy.policy.reconfigure_on_drift:
            out.table[name]["_reconfigurations"] = policy.reconfigurations
        out.tenants[name] = per_tenant(s)
    return out


def _speedup(sc: Scenario, k: int, seed: int) -> tuple[float, float]:
    """(measured speed-up of the subject at fixed k vs plain, true slack of its plain step)."""
    spec = simulate(sc, pol.Scheduled(f"k{k}", [[1, 1024, k]]), seed)
    plain = simulate(sc, pol.off(), seed)
    e = len(sc.engines) - 1
    sigma = float(np.mean(plain.floor[:, e] / plain.step_true[:, e]))
    return float(spec.tokens[:, e].sum() / plain.tokens[:, e].sum()), sigma


C2_LOADS: tuple[tuple[int, ...], ...] = ((), (16,), (32,), (64,), (128,), (64, 64), (128, 128))


def micro(seed: int, progress: Progress) -> dict[str, Any]:
    progress("single-GPU experiments")
    subj = EngineSpec("probe", "bank-a", 2, 100, draft=GOOD_EAGLE3, expected_batch=2)
    c1, sigma1 = _speedup(single_gpu("c1-idle", subj, ()), 5, seed)
    sweep: list[dict[str, float]] = []
    probe8 = EngineSpec("probe", "bank-a", 8, 100, draft=GOOD_EAGLE3, expected_batch=8)
    for loads in C2_LOADS:
        bg = tuple(EngineSpec(f"bg{i}", "shop", b, 1000, ctx=1500) for i, b in enumerate(loads))
        sc = single_gpu("c2", probe8, bg)
        point: dict[str, float] = {"background": float(sum(loads))}
        for k in (1, 3, 5):
            s, sigma = _speedup(sc, k, seed)
            point[f"k{k}"] = round(s, 4)
            point["slack"] = round(sigma, 4)
        sweep.append(point)
    heavy = tuple(EngineSpec(f"bg{i}", "shop", 128, 1000, ctx=1500) for i in range(2))
    weak = EngineSpec("probe", "bank-a", 32, 100, draft=WEAK_EAGLE3, expected_batch=32)
    good = EngineSpec("probe", "bank-a", 32, 100, draft=GOOD_EAGLE3, expected_batch=32)
    c3_weak, _ = _speedup(single_gpu("c3-weak", weak, heavy), 3, seed)
    c3_k8, _ = _speedup(single_gpu("c3-k8", good, heavy), 8, seed)
    return {"c1": c1, "c1Slack": sigma1, "c2": sweep, "c3Weak": c3_weak, "c3ExcessiveK": c3_k8,
            "budgetSweep": budget_sweep(seed, progress)}  # fmt: skip


BUDGET_LOADS: tuple[tuple[int, ...], ...] = ((), (64,), (128,), (192,), (128, 128))
BUDGET_ARRIVAL_S = 40.0  # after the telemetry windows have filled


def budget_sweep(seed: int, progress: Progress) -> list[dict[str, Any]]:
    """One H100, a batch-64 EAGLE-3 subject next to a growing compute-heavy load: the subject's
    speed-up over plain decoding with a fixed k=5 and with decide()'s slack-aware schedule (same GPU)."""
    progress("fixed k vs slack-aware budget")
    subj = EngineSpec("probe", "bank-a", 64, 150, draft=GOOD_EAGLE3, expected_batch=64)
    out: list[dict[str, Any]] = []
    for loads in BUDGET_LOADS:
        bg = tuple(
            EngineSpec(f"bg{i}", "shop", b, 1000, ctx=2000, prefill_ratio=3.0) for i, b in enumerate(loads)
        )
        sc = single_gpu("budget", subj, bg, horizon_s=120, arrival_s=BUDGET_ARRIVAL_S)
        e = len(sc.engines) - 1
        plain = simulate(sc, pol.off(), seed)
        fixed = simulate(sc, pol.always_on(), seed)
        ours = simulate(sc, SovereignSpec(), seed)
        base = float(plain.tokens[:, e].sum())
        act = plain.active[:, e]
        out.append({
            "background": float(sum(loads)),
            "slack": round(float(np.mean(plain.floor[act, e] / plain.step_true[act, e])), 4),
            "fixedK5": round(float(fixed.tokens[:, e].sum()) / base, 4),
            "slackAware": round(float(ours.tokens[:, e].sum()) / base, 4),
            "kAtBatch64": int(ours.k[act, e].max()) if act.any() else 0,
        })  # fmt: skip
    return out


def mann_kendall(y: list[float]) -> tuple[float, float]:
    """(Kendall's S statistic, one-sided p-value for a decreasing trend), normal approximation with
    continuity correction, no ties correction (speed-ups are continuous)."""
    from math import erf, sqrt

    n = len(y)
    s_stat = sum(float(np.sign(y[j] - y[i])) for i in range(n) for j in range(i + 1, n))
    var = n * (n - 1) * (2 * n + 5) / 18.0
    z = (s_stat + 1.0) / sqrt(var) if s_stat < 0 else (s_stat - 1.0) / sqrt(var) if s_stat > 0 else 0.0
    return s_stat, 0.5 * (1.0 + erf(z / sqrt(2.0)))


def _subject_tokens(r: ScenarioResult, policy: str) -> float:
    sim = r.runs[policy]
    return float(sim.tokens[:, sim.subject].sum())


def _neighbour_tpot_increase(r: ScenarioResult, policy: str) -> float:
    """Token-weighted mean TPOT of the background engines under `policy` vs off, minus 1."""
    on, off = r.runs[policy], r.runs["off"]
    bg = ~on.subject

    def mean_tpot(sim: Simulation) -> float:
        w = sim.tokens[:, bg]
        return float((sim.tpot[:, bg] * w).sum() / max(w.sum(), 1e-9))

    return mean_tpot(on) / mean_tpot(off) - 1.0


def claims(
    m: dict[str, Any], mix: ScenarioResult, sat: ScenarioResult, st: ScenarioResult
) -> dict[str, dict[str, Any]]:
    k3 = [p["k3"] for p in m["c2"]]
    mk_s, mk_p = mann_kendall(k3)
    fall = 1.0 - k3[-1] / k3[0]
    max_rise = float(max(0.0, *np.diff(k3)))
    tax = 1.0 - _subject_tokens(st, "always-on") / _subject_tokens(st, "off")
    gpu_tax = 1.0 - st.table["always-on"]["_throughput"] / st.table["off"]["_throughput"]
    nb_tpot = _neighbour_tpot_increase(st, "always-on")
    c5 = st.table["sovereignspec-budget-only"]["goodput"] / st.table["always-on"]["goodput"] - 1.0
    c5_sat = sat.table["sovereignspec-budget-only"]["goodput"] / sat.table["always-on"]["goodput"] - 1.0
    harm_blind = st.table["in-engine-goodput"]["_neighboursHarmed"]
    harm_blind_mixed = mix.table["in-engine-goodput"]["_neighboursHarmed"]
    harm_ours = sum(r.table[p]["sloViolationsCaused"] for r in (mix, sat, st)
                    for p in ("sovereignspec", *VARIANTS))  # fmt: skip
    return {
        "C1": {"value": round(m["c1"], 3), "pass": bool(m["c1"] > 2.0),
               "what": "idle H100, batch 2, EAGLE-3 k=5: measured speed-up (> 2)"},
        "C2": {"value": {"speedupK3": [round(x, 3) for x in k3], "mannKendallS": mk_s,
                         "pDecreasing": round(mk_p, 4), "fall": round(fall, 3),
                         "maxRise": round(max_rise, 3)},
               "pass": bool(mk_p < 0.05 and fall >= 0.15),
               "what": "H100, batch 8, k=3, co-located plain load growing: a decreasing trend "
                       "(Mann-Kendall, p < 0.05) and a fall >= 15 % over the load range"},
        "C3": {"value": {"weakDraftK3": round(m["c3Weak"], 3), "goodDraftK8": round(m["c3ExcessiveK"], 3)},
               "pass": bool(m["c3Weak"] < 1.0 and m["c3ExcessiveK"] < 1.0),
               "what": "saturated H100, batch 32: weak draft at k=3, good draft at k=8 (both < 1)"},
        "C4": {"value": {"subjectTax": round(tax, 3), "gpuThroughputTax": round(gpu_tax, 3),
                         "neighbourTpotIncrease": round(nb_tpot, 3)},
               "pass": bool(tax > 0.2),
               "what": "stress pool: subjects' own token throughput lost by always-on k=5 vs off (> 0.2); "
                       "the GPUs' total throughput lost and the neighbours' TPOT increase alongside"},
        "C5": {"value": {"stress": round(c5, 3), "saturated": round(c5_sat, 3), "sweep": m["budgetSweep"]},
               "pass": bool(c5 >= 0.15),
               "what": "stress pool, same placement: decide()'s schedule vs fixed k=5, SLO goodput gain "
                       "(>= 0.15); the single-GPU sweep shows the same at growing load"},
        "C6": {"value": {"neighboursHarmedWithoutCondition": harm_blind,
                         "neighboursHarmedWithoutConditionMixed": harm_blind_mixed,
                         "violationsCausedWithCondition": harm_ours},
               "pass": bool(harm_blind >= 2 and harm_ours == 0),
               "what": "stress pool: neighbours pushed over SLO by neighbour-blind in-engine goodput (>= 2); "
                       "SovereignSpec (every configuration, every scenario): 0 windows"},
    }  # fmt: skip


def public_table(t: dict[str, dict[str, Any]]) -> dict[str, dict[str, Any]]:
    return {
        p: {k: v for k, v in row.items() if not k.startswith("_")}
        for p, row in t.items()
        if p in POLICY_NAMES
    }


def _goals(mix: ScenarioResult, sat: ScenarioResult, st: ScenarioResult, ours: str) -> dict[str, Any]:
    runs = {"mixed": mix, "saturated": sat, "stress": st}
    g: dict[str, Any] = {
        f"oracleShare{k.capitalize()}": round(r.table[ours]["goodput"] / r.table["oracle"]["goodput"], 4)
        for k, r in runs.items()
    }
    g["violationsCaused"] = sum(r.table[ours]["sloViolationsCaused"] for r in runs.values())
    for k in ("saturated", "stress"):
        t = runs[k].table
        gain = t[ours]["goodput"] / t["always-on"]["goodput"] - 1.0
        g[f"gainOverAlwaysOn{k.capitalize()}"] = round(gain, 4)
    g["pass"] = bool(
        min(g[f"oracleShare{k.capitalize()}"] for k in runs) >= 0.97
        and g["violationsCaused"] == 0
        and g["gainOverAlwaysOnStress"] >= 0.2
    )
    return g


def _scenario_json(sc: Scenario, r: ScenarioResult) -> dict[str, Any]:
    out: dict[str, Any] = {
        "description": sc.description,
        "policies": public_table(r.table),
        "variants": {p: {k: v for k, v in r.table[p].items() if not k.startswith("_")}
                     for p in (*VARIANTS, "sovereignspec-budget-only") if p in r.table},
        "neighboursHarmed": {p: row["_neighboursHarmed"] for p, row in r.table.items()},
    }  # fmt: skip
    drift = {p: row["_reconfigurations"] for p, row in r.table.items() if "_reconfigurations" in row}
    if drift:
        out["reconfigurations"] = drift
    return out


def decomposition(sc: Scenario | None = None, seed: int = 7) -> dict[str, dict[str, float]]:
    """Diagnostic (not in the standard suite): goodput of every placement (sovereignspec's, the
    oracle's, LeastAllocated's, DESIGN's rule fed the true S_real, placement Throughput's, and the
    Throughput rule fed the true decode rate) crossed with every draft budget
    (decide() pinned to that placement, the oracle's per-tick k, plain, fixed k=5). Splits
    sovereignspec's gap to the oracle into what its placement and what its budget lose.
    `.venv/bin/python -c "from sovereignspec.evidence.suite import decomposition as d; print(d())"`"""
    from sovereignspec.evidence.metrics import goodput

    sc = sc or mixed()
    throughput = SpeculationPolicySpec(placement="Throughput")
    placements = {
        "sovereignspec": simulate(sc, SovereignSpec(), seed).placement.max(axis=0),
        "oracle": simulate(sc, pol.Oracle(), seed).placement.max(axis=0),
        "least-allocated": simulate(sc, pol.off(), seed).placement.max(axis=0),
        "design-rule-true": simulate(sc, pol.DesignRuleTruth(), seed).placement.max(axis=0),
        "throughput": simulate(sc, SovereignSpec(throughput), seed).placement.max(axis=0),
        "throughput-rule-true": simulate(sc, pol.ThroughputRuleTruth(), seed).placement.max(axis=0),
    }
    out: dict[str, dict[str, float]] = {}
    for where, placed in placements.items():
        budgets: dict[str, Policy] = {
            "sovereignspec": SovereignSpec(throughput if where == "throughput" else None, placed=placed),
            "oracle": pol.PlacedOracle(placed),
            "off": pol.Placed(placed, None, "placed-off"),
            "k5": pol.Placed(placed, [[1, 1024, 5]], "placed-k5"),
        }
        out[where] = {b: round(goodput(simulate(sc, p, seed)), 1) for b, p in budgets.items()}
    return out


def run_standard(seed: int = 7, progress: Progress | None = None) -> tuple[dict[str, Any], dict[str, Any]]:
    """(the JSON result, the raw material for plots)."""
    say = progress or (lambda _msg: None)
    mix = run_scenario(mixed(), (*POLICY_NAMES, *VARIANTS), seed, say)
    sat = run_scenario(saturated(), (*POLICY_NAMES, *VARIANTS, "sovereignspec-budget-only"), seed, say)
    st = run_scenario(stress(), (*POLICY_NAMES, *VARIANTS, "sovereignspec-budget-only"), seed, say)
    m = micro(seed, say)
    sharing, timeslice_s = SHARING.get()
    result = {
        "suite": "standard",
        "seed": seed,
        "sharing": {"mode": sharing, "timesliceMs": round(timeslice_s * 1000.0, 3)},
        "policies": public_table(mix.table),
        "scenarios": {"mixed": _scenario_json(mixed(), mix), "saturated": _scenario_json(saturated(), sat),
                      "stress": _scenario_json(stress(), st)},
        "tenants": {"mixed": mix.tenants, "saturated": sat.tenants, "stress": st.tenants},
        "claims": claims(m, mix, sat, st),
        "goals": _goals(mix, sat, st, "sovereignspec"),
        "goalsCalibrated": _goals(mix, sat, st, "sovereignspec-calibrated"),
        "goalsThroughput": _goals(mix, sat, st, "sovereignspec-throughput"),
        "goalsCalibratedThroughput": _goals(mix, sat, st, "sovereignspec-calibrated-throughput"),
    }  # fmt: skip
    return result, {"mixed": mix, "saturated": sat, "stress": st, "micro": m}
