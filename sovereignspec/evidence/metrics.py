"""Per-run metrics: SLO goodput, token-weighted TPOT percentiles, neighbour SLO violations caused by
speculation (against a counterfactual with the same placements and speculation off), and occupied
GPU-seconds per 1k tokens (an energy proxy)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np

from sovereignspec.evidence.sim import FloatArray, Simulation

WINDOW_S = 10.0
"""A neighbour violates its SLO in a window when its token-weighted mean TPOT there exceeds the SLO."""


def weighted_percentile(values: FloatArray, weights: FloatArray, q: float) -> float:
    if values.size == 0 or weights.sum() <= 0:
        return float("nan")
    order = np.argsort(values)
    cw = np.cumsum(weights[order])
    return float(values[order][np.searchsorted(cw, q * cw[-1])])


def goodput(sim: Simulation) -> float:
    ok = sim.active & (sim.tpot <= sim.slo[None, :])
    return float((sim.tokens * ok).sum() / sim.sc.horizon_s)


def windows(sim: Simulation) -> tuple[FloatArray, Any, Any]:
    """(mean TPOT [W, E], any own k>0 [W, E], any co-located engine with k>0 [W, E])."""
    w = max(1, round(WINDOW_S / sim.sc.dt_s))
    n_w = sim.sc.ticks // w
    sl = slice(0, n_w * w)
    tok = sim.tokens[sl].reshape(n_w, w, -1)
    tp = (sim.tpot[sl].reshape(n_w, w, -1) * tok).sum(axis=1) / np.maximum(tok.sum(axis=1), 1e-9)
    own = (sim.k[sl] > 0).reshape(n_w, w, -1).any(axis=1)
    spec_on_gpu = np.zeros((sim.sc.ticks, len(sim.gpus)))
    for t in range(n_w * w):
        placed = sim.placement[t] >= 0
        np.add.at(spec_on_gpu[t], sim.placement[t][placed], (sim.k[t][placed] > 0).astype(float))
    g = np.where(sim.placement[sl] >= 0, sim.placement[sl], 0)
    near = np.take_along_axis(spec_on_gpu[sl], g, axis=1) - (sim.k[sl] > 0)
    others = np.where(sim.placement[sl] >= 0, near, 0).reshape(n_w, w, -1).any(axis=1)
    return tp, own, others


@dataclass(frozen=True)
class Violations:
    windows: int  # neighbour windows violated with speculation and not without it
    neighbours: int  # distinct engines harmed


def caused_windows(sim: Simulation, plain: Simulation) -> Any:
    """[W, E]: engine e's window w is over its SLO beside a speculating engine, plain itself, and not over
    it in `plain` (the same placements with speculation off)."""
    tp, own, others = windows(sim)
    tp0, _, _ = windows(plain)
    slo = sim.slo[None, :]
    return (tp > slo) & ~(tp0 > slo) & others & ~own & (tp > 0)


def violations_caused(sim: Simulation, plain: Simulation) -> Violations:
    caused = caused_windows(sim, plain)
    return Violations(int(caused.sum()), int(caused.any(axis=0).sum()))


def summary(sim: Simulation, plain: Simulation) -> dict[str, float | int]:
    act = sim.active & (sim.tokens > 0)
    tpots, weights = sim.tpot[act], sim.tokens[act]
    occupied = 0.0
    for t in range(sim.sc.ticks):
        occupied += len(set(sim.placement[t][sim.placement[t] >= 0].tolist())) * sim.sc.dt_s
    v = violations_caused(sim, plain)
    return {
        "goodput": round(goodput(sim), 1),
        "tpotP50": round(1000 * weighted_percentile(tpots, weights, 0.5), 2),
        "tpotP99": round(1000 * weighted_percentile(tpots, weights, 0.99), 2),
        "sloViolationsCaused": v.windows,
        "gpuSecondsPer1kTokens": round(occupied / max(sim.tokens.sum() / 1000.0, 1e-9), 4),
        "_neighboursHarmed": v.neighbours,
        "_throughput": round(float(sim.tokens.sum() / sim.sc.horizon_s), 1),
    }


def per_tenant(sim: Simulation) -> dict[str, dict[str, float]]:
    out: dict[str, dict[str, float]] = {}
    for tenant in sorted({e.tenant for e in sim.sc.engines}):
        cols = [i for i, e in enumerate(sim.sc.engines) if e.tenant == tenant]
        act = sim.active[:, cols] & (sim.tokens[:, cols] > 0)
        tp, w = sim.tpot[:, cols][act], sim.tokens[:, cols][act]
        out[tenant] = {
            "tpotP50": round(1000 * weighted_percentile(tp, w, 0.5), 2),
            "tpotP99": round(1000 * weighted_percentile(tp, w, 0.99), 2),
        }
    return out
