"""The standard suite: both cluster scenarios under every policy, the micro experiments on one GPU,
the paper's claims C1-C6 and the goals, all computed from simulation output."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from sovereignspec.evidence import policies as pol
from sovereignspec.evidence.metrics import per_tenant, summary
from sovereignspec.evidence.scenario import (
    GOOD_EAGLE3,
    WEAK_EAGLE3,
    EngineSpec,
    Scenario,
    mixed,
    saturated,
    single_gpu,
)
from sovereignspec.evidence.sim import Policy, Simulation, simulate
from sovereignspec.evidence.sovereign import SovereignSpec

POLICY_NAMES = ("off", "always-on", "static-schedule", "in-engine-goodput", "sovereignspec", "oracle")
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
        s = simulate(sc, make_policy(name), seed)
        plain = s if name == "off" else simulate(sc, pol.Replay(s.placement.max(axis=0)), seed)
        out.runs[name] = s
        out.table[name] = summary(s, plain)
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
    return {"c1": c1, "c1Slack": sigma1, "c2": sweep, "c3Weak": c3_weak, "c3ExcessiveK": c3_k8}


def claims(m: dict[str, Any], mix: ScenarioResult, sat: ScenarioResult) -> dict[str, dict[str, Any]]:
    k3 = [p["k3"] for p in m["c2"]]
    steps = np.diff(k3)
    st = sat.table
    sub = [i for i, e in enumerate(sat.runs["off"].sc.engines) if e.subject]
    tok_off = sat.runs["off"].tokens[:, sub].sum()
    tok_on = sat.runs["always-on"].tokens[:, sub].sum()
    tax = 1.0 - tok_on / tok_off
    c5 = st["sovereignspec-budget-only"]["goodput"] / st["always-on"]["goodput"] - 1.0
    harm_blind = mix.table["in-engine-goodput"]["_neighboursHarmed"]
    harm_ours = (
        mix.table["sovereignspec"]["sloViolationsCaused"] + sat.table["sovereignspec"]["sloViolationsCaused"]
    )
    return {
        "C1": {"value": round(m["c1"], 3), "pass": bool(m["c1"] > 2.0),
               "what": "idle H100, batch 2, EAGLE-3 k=5: measured speed-up (> 2)"},
        "C2": {"value": [round(x, 3) for x in k3],
               "pass": bool(np.all(steps <= 0.02) and k3[0] - k3[-1] > 0.3),
               "what": "batch 8, k=3, co-located plain load growing: speed-up per step (falls steadily)"},
        "C3": {"value": {"weakDraftK3": round(m["c3Weak"], 3), "goodDraftK8": round(m["c3ExcessiveK"], 3)},
               "pass": bool(m["c3Weak"] < 1.0 and m["c3ExcessiveK"] < 1.0),
               "what": "saturated H100, batch 32: weak draft at k=3, good draft at k=8 (both < 1)"},
        "C4": {"value": round(float(tax), 3), "pass": bool(tax > 0.2),
               "what": "saturated suite: subjects' token throughput lost by always-on k=5 vs off (> 0.2)"},
        "C5": {"value": round(c5, 3), "pass": bool(c5 >= 0.15),
               "what": "saturated suite, same placement: decide()'s schedule vs fixed k=5, SLO goodput gain"},
        "C6": {"value": {"neighboursHarmedWithoutCondition": harm_blind, "violationsCausedWithCondition": harm_ours},  # noqa: E501
               "pass": bool(harm_blind >= 2 and harm_ours == 0),
               "what": "mixed suite: neighbours pushed over SLO by in-engine goodput (>= 2) vs SovereignSpec (0)"},  # noqa: E501
    }  # fmt: skip


def public_table(t: dict[str, dict[str, Any]]) -> dict[str, dict[str, Any]]:
    return {
        p: {k: v for k, v in row.items() if not k.startswith("_")}
        for p, row in t.items()
        if p in POLICY_NAMES
    }


def run_standard(seed: int = 7, progress: Progress | None = None) -> tuple[dict[str, Any], dict[str, Any]]:
    """(the JSON result, the raw material for plots)."""
    say = progress or (lambda _msg: None)
    mix = run_scenario(mixed(), POLICY_NAMES, seed, say)
    sat = run_scenario(saturated(), (*POLICY_NAMES, "sovereignspec-budget-only"), seed, say)
    m = micro(seed, say)
    cl = claims(m, mix, sat)
    ours_m, ours_s = mix.table["sovereignspec"], sat.table["sovereignspec"]
    goals = {
        "oracleShareMixed": round(ours_m["goodput"] / mix.table["oracle"]["goodput"], 4),
        "oracleShareSaturated": round(ours_s["goodput"] / sat.table["oracle"]["goodput"], 4),
        "violationsCaused": ours_m["sloViolationsCaused"] + ours_s["sloViolationsCaused"],
        "gainOverAlwaysOnSaturated": round(ours_s["goodput"] / sat.table["always-on"]["goodput"] - 1.0, 4),
    }
    goals["pass"] = bool(
        min(goals["oracleShareMixed"], goals["oracleShareSaturated"]) >= 0.97
        and goals["violationsCaused"] == 0
        and goals["gainOverAlwaysOnSaturated"] >= 0.2
    )
    result = {
        "suite": "standard",
        "seed": seed,
        "policies": public_table(mix.table),
        "scenarios": {
            "mixed": {"description": mixed().description, "policies": public_table(mix.table),
                      "neighboursHarmed": {p: r["_neighboursHarmed"] for p, r in mix.table.items()}},
            "saturated": {"description": saturated().description, "policies": public_table(sat.table),
                          "budgetOnly": {k: v for k, v in sat.table["sovereignspec-budget-only"].items()
                                         if not k.startswith("_")},
                          "neighboursHarmed": {p: r["_neighboursHarmed"] for p, r in sat.table.items()}},
        },
        "tenants": {"mixed": mix.tenants, "saturated": sat.tenants},
        "claims": cl,
        "goals": goals,
    }  # fmt: skip
    return result, {"mixed": mix, "saturated": sat, "micro": m}
