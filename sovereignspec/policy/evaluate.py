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

from sovereignspec.model.speedup import load_increase, neighbour_slowdown, step_ratio
from sovereignspec.model.steptime import U_MAX, StepCurve, stretched

FloatArray = npt.NDArray[np.float64]
IntArray = npt.NDArray[np.int64]


@dataclass(frozen=True)
class NeighbourInput:
    namespace: str
    pod: str
    sigma: float
    margin: float | None  # None: not SLO-bound (no engine, no SLO claim): not constrained
    u_total: float


@dataclass(frozen=True, eq=False)
class Neighbours:
    """A node's co-located engines, with their columns as arrays for the vectorised check."""

    items: Sequence[NeighbourInput]
    sigma: FloatArray
    margin: FloatArray  # NaN: not SLO-bound
    u_total: FloatArray
    namespaces: frozenset[str] = frozenset()

    @classmethod
    def of(cls, items: Sequence[NeighbourInput]) -> Neighbours:
        return cls(
            items=tuple(items),
            sigma=np.asarray([nb.sigma for nb in items], dtype=np.float64),
            margin=np.asarray([np.nan if nb.margin is None else nb.margin for nb in items], dtype=np.float64),
            u_total=np.asarray([nb.u_total for nb in items], dtype=np.float64),
            namespaces=frozenset(nb.namespace for nb in items),
        )


NO_NEIGHBOURS = Neighbours.of(())


@dataclass(frozen=True)
class NodeInput:
    name: str
    curve: StepCurve
    c_d: float
    u: float
    neighbours: Neighbours = NO_NEIGHBOURS


@dataclass(frozen=True)
class Evaluation:
    """Per node n: k_star[n, r] per range, and at the expected batch its S_real, slack and slowdowns."""

    nodes: Sequence[NodeInput]
    k_star: IntArray  # [N, R]
    k_star_self: IntArray  # [N, R] ignoring neighbours (to tell "no gain" from "neighbour SLO")
    speedup_expected: FloatArray  # [N]
    slack_expected: FloatArray  # [N]
    slowdown_expected: FloatArray  # [N, J] at the expected batch with its range's k*
    speedup_by_k: FloatArray  # [N, K+1] S_real at the expected batch for every k (for the record)
    step_expected: FloatArray  # [N] t_u(B) at the expected batch, plain (for placement Throughput)


def max_load_increase(sigma_j: FloatArray, thr_j: FloatArray, u_j: FloatArray) -> FloatArray:
    """Largest Δu that keeps every neighbour j within its budget thr_j = m_j(1 - safety), per node.

    eps_j(Δu) = (1 - sigma_j)·max(Δu, 0) / (1 - u_j - Δu) is increasing in Δu, so eps_j <= thr_j
    is Δu <= D_j with D_j = thr_j·(1 - u_j) / (1 - sigma_j + thr_j) (and Δu < 1 - u_j, the GPU not
    saturating); thr_j < 0 (already over its SLO) allows no increase at all (-inf), thr_j = inf
    (not SLO-bound) any. Reducing over j turns a [N, J, R, K] check into one [N, R, K] comparison.
    """
    room = 1.0 - np.minimum(u_j, U_MAX)
    with np.errstate(divide="ignore", invalid="ignore"):
        d = np.where(np.isinf(thr_j), np.inf, thr_j * room / (1.0 - sigma_j + thr_j))
    d = np.where((1.0 - sigma_j + thr_j) <= 0, room, d)  # sigma_j = 1 and thr_j = 0: only saturation
    d = np.minimum(d, np.where(np.isinf(thr_j), np.inf, np.nextafter(room, -np.inf)))
    d = np.where(thr_j < 0, -np.inf, d)
    out: FloatArray = d.min(axis=1) if d.shape[1] else np.full(d.shape[0], np.inf)
    return out


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

    # Per curve: the parts that do not depend on the node's load.
    # c_d is per (profile, method); a curve is per profile object, so nodes sharing a curve share c_d.
    cd_c: dict[int, float] = {}
    for i, nd in enumerate(nodes):
        cd_c.setdefault(int(cid[i]), nd.c_d)
    cd_arr = np.asarray([cd_c[c] for c in range(len(uniq))])[:, None, None]
    t0_3 = t0_c[:, None, None]
    tau0_c = step_ratio(t0_3, g_b_c[:, :, None], g_bk_c, 0.0, ks[None, None, :], cd_arr)  # [C, R+1, K+1]
    du0_c = load_increase(t0_3, g_b_c[:, :, None], g_bk_c, 0.0, tau0_c)

    t0 = t0_c[cid][:, None, None]
    g_b = g_b_c[cid][:, :, None]
    g_bk = g_bk_c[cid]
    u = np.asarray([nd.u for nd in nodes])[:, None, None]
    c_d = np.asarray([nd.c_d for nd in nodes])[:, None, None]
    tau = step_ratio(t0, g_b, g_bk, u, ks[None, None, :], c_d)  # [N, R+1, K+1]
    s_real = expected_length[None, None, :] / tau
    self_ok = s_real >= 1.0 + min_gain

    lens = np.fromiter((len(nd.neighbours.items) for nd in nodes), dtype=np.int64, count=n_nodes)
    n_j = int(lens.max()) if n_nodes else 0
    sigma_j = np.ones((n_nodes, n_j))
    thr_j = np.full((n_nodes, n_j), np.inf)
    u_j = np.zeros((n_nodes, n_j))
    nb_ok = np.ones_like(self_ok)
    du = np.zeros_like(s_real)
    if n_j:
        # scatter the per-node columns into [N, J] in one go (rows repeat, columns count within a row)
        rows_j = np.repeat(np.arange(n_nodes), lens)
        cols_j = np.arange(rows_j.size) - np.repeat(np.cumsum(lens) - lens, lens)
        with_nb = [nd.neighbours for nd in nodes if nd.neighbours.items]
        sigma_j[rows_j, cols_j] = np.concatenate([nb.sigma for nb in with_nb])
        u_j[rows_j, cols_j] = np.concatenate([nb.u_total for nb in with_nb])
        margin = np.concatenate([nb.margin for nb in with_nb])
        thr_j[rows_j, cols_j] = np.where(np.isnan(margin), np.inf, margin * (1.0 - safety))
        # Conservative load increase: DESIGN's Δu at the observed load u, but never below Δu on an
        # otherwise idle GPU (other tenants' load can drop at any moment, which raises our share).
        du = np.maximum(load_increase(t0, g_b, g_bk, u, tau), du0_c[cid])
        nb_ok = du <= max_load_increase(sigma_j, thr_j, u_j)[:, None, None]
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
    step_e = stretched(t0_c[cid], g_b_c[cid][:, -1], u[:, 0, 0])
    slack_e = t0_c[cid] / step_e  # sigma(B) = t0 / t_u(B)
    slow_e = neighbour_slowdown(sigma_j, du[rows, -1, k_e][:, None], u_j)  # [N, J]
    return Evaluation(
        nodes, k_all[:, :-1], k_self[:, :-1], speedup_e, slack_e, slow_e, s_real[:, -1, :], step_e
    )
