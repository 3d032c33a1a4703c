"""Vectorised speculation evaluation over candidate nodes x batch ranges x draft budgets k.

One call of `evaluate_nodes` computes, for N nodes, R batch ranges (+1 column at the expected batch)
and k = 0..kMax, the step ratio τ, S_real, the load increase Δu and every neighbour's slowdown ε, then
picks k*(B) = argmax S_real under the self-benefit and neighbour-SLO conditions (ties → smaller k;
k = 0 always qualifies with S_real = 1). Curves are evaluated once per distinct accelerator profile.

Neighbour check, conservative where DESIGN.md is silent: Δu is max(Δu at the observed load, Δu on an
idle GPU), and budget k passes only if every budget below it passes too. Both keep the SLO guarantee
when others' load drops, and make k* non-increasing as background load grows.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np
import numpy.typing as npt

from sovereignspec.model.speedup import load_increase, neighbour_slowdown, slack, step_ratio
from sovereignspec.model.steptime import U_MAX, StepCurve

FloatArray = npt.NDArray[np.float64]
IntArray = npt.NDArray[np.int64]


@dataclass(frozen=True)
class NeighbourInput:
    namespace: str
    pod: str
    sigma: float
    margin: float | None  # None: not SLO-bound (no engine, no SLO claim): not constrained
    u_total: float


@dataclass(frozen=True)
class NodeInput:
    name: str
    curve: StepCurve
    c_d: float
    u: float
    neighbours: Sequence[NeighbourInput]


@dataclass(frozen=True)
class Evaluation:
    """Per node n: k_star[n, r] per range, and at the expected batch its S_real, slack and slowdowns."""

    nodes: Sequence[NodeInput]
    k_star: IntArray  # [N, R]
    k_star_self: IntArray  # [N, R] ignoring neighbours (to tell "no gain" from "neighbour SLO")
    speedup_expected: FloatArray  # [N]
    slack_expected: FloatArray  # [N]
    slowdown_expected: FloatArray  # [N, J] at the expected batch with its range's k*


def evaluate_nodes(
    nodes: Sequence[NodeInput],
    expected_length: FloatArray,
    range_ends: Sequence[int],
    expected_batch: int,
    expected_range: int,
    min_gain: float,
    safety: float,
) -> Evaluation:
    n_nodes, n_k = len(nodes), expected_length.size
    ks = np.arange(n_k, dtype=np.float64)
    batches = np.asarray([*range_ends, expected_batch], dtype=np.float64)  # [R+1]
    curves: dict[int, int] = {}
    uniq: list[StepCurve] = []
    cid = np.empty(n_nodes, dtype=np.int64)
    for i, nd in enumerate(nodes):
        key = id(nd.curve)
        if key not in curves:
            curves[key] = len(uniq)
            uniq.append(nd.curve)
        cid[i] = curves[key]
    t0_c = np.asarray([c.t0 for c in uniq])
    g_b_c = np.stack([c.g(batches) for c in uniq])  # [C, R+1]
    g_bk_c = np.stack([c.g(batches[:, None] * (ks[None, :] + 1.0)) for c in uniq])  # [C, R+1, K+1]

    t0 = t0_c[cid][:, None, None]
    g_b = g_b_c[cid][:, :, None]
    g_bk = g_bk_c[cid]
    u = np.asarray([nd.u for nd in nodes])[:, None, None]
    c_d = np.asarray([nd.c_d for nd in nodes])[:, None, None]
    tau = step_ratio(t0, g_b, g_bk, u, ks[None, None, :], c_d)  # [N, R+1, K+1]
    s_real = expected_length[None, None, :] / tau
    self_ok = s_real >= 1.0 + min_gain

    n_j = max((len(nd.neighbours) for nd in nodes), default=0)
    sigma_j = np.ones((n_nodes, n_j))
    thr_j = np.full((n_nodes, n_j), np.inf)
    u_j = np.zeros((n_nodes, n_j))
    nb_ok = np.ones_like(self_ok)
    du = np.zeros_like(s_real)
    if n_j:
        for i, nd in enumerate(nodes):
            for j, nb in enumerate(nd.neighbours):
                sigma_j[i, j] = nb.sigma
                u_j[i, j] = nb.u_total
                if nb.margin is not None:
                    thr_j[i, j] = nb.margin * (1.0 - safety)
        # Conservative load increase: DESIGN's Δu at the observed load u, but never below Δu on an
        # otherwise idle GPU (other tenants' load can drop at any moment, which raises our share).
        tau0 = step_ratio(t0, g_b, g_bk, 0.0, ks[None, None, :], c_d)
        du = np.maximum(load_increase(t0, g_b, g_bk, u, tau), load_increase(t0, g_b, g_bk, 0.0, tau0))
        du_pos = np.maximum(du, 0.0)
        room = 1.0 - du
        # eps_j <= thr_j  <=>  head_j > 0 and (1 - sigma_j)·max(du, 0) <= thr_j·head_j, with
        # head_j = 1 - u_j - du (multiplied out: no division, no inf; same result as neighbour_slowdown).
        for j in range(n_j):  # one neighbour slot at a time keeps temporaries at [N, R+1, K+1]
            bound = np.isfinite(thr_j[:, j])
            if not bound.any():
                continue
            head = room - np.minimum(u_j[:, j], U_MAX)[:, None, None]
            thr = np.where(bound, thr_j[:, j], 0.0)[:, None, None]
            ok = (head > 0) & ((1.0 - sigma_j[:, j])[:, None, None] * du_pos <= thr * head)
            nb_ok &= ok | ~bound[:, None, None]
        # A budget k is safe only if every smaller budget is (the engine may run fewer draft tokens
        # than num_speculative_tokens); this also makes k* non-increasing in background load.
        nb_ok = np.logical_and.accumulate(nb_ok, axis=2)

    def pick(valid: npt.NDArray[np.bool_]) -> IntArray:
        score = np.where(valid, s_real, -np.inf)
        score[..., 0] = 1.0
        best: IntArray = np.argmax(score, axis=2).astype(np.int64)
        return best

    k_all = pick(self_ok & nb_ok)
    k_self = pick(self_ok)
    k_e = k_all[:, expected_range]
    rows = np.arange(n_nodes)
    speedup_e = s_real[rows, -1, k_e]
    slack_e = slack(t0_c[cid], g_b_c[cid][:, -1], u[:, 0, 0])
    slow_e = neighbour_slowdown(sigma_j, du[rows, -1, k_e][:, None], u_j)  # [N, J]
    return Evaluation(nodes, k_all[:, :-1], k_self[:, :-1], speedup_e, slack_e, slow_e)
