"""S_real, τ, slack, break-even slack, Δu, neighbour slowdown ε_j, its inverse (the largest Δu a
neighbour tolerates), the slowdown through memory bandwidth and the allowance it leaves, and the SLO margin
(DESIGN.md §2; the bandwidth term: docs/decision.md, "Memory bandwidth at arrival"): each formula once,
here.

The vectorised forms are numpy ufunc-style functions that broadcast over any shape (k x batch ranges x
nodes x neighbours); a `_scalar` form beside one computes the same number in plain Python for code that
evaluates one value at a time (numpy's per-call overhead would dominate there).

Inputs are the curve pieces already evaluated: t0, g(B) and g(B(k+1)), so one evaluation per distinct
accelerator profile serves every node that shares it.
"""

from __future__ import annotations

import numpy as np
import numpy.typing as npt

from sovereignspec.model.steptime import U_MAX, stretched

FloatArray = npt.NDArray[np.float64]
Arr = npt.ArrayLike


def slack(t0: Arr, g_b: Arr, u: Arr) -> FloatArray:
    """sigma(B) = t0 / t_u(B) ∈ (0, 1]."""
    out: FloatArray = np.asarray(t0, dtype=np.float64) / stretched(t0, g_b, u)
    return out


def slack_scalar(t0: float, g_b: float, u: float) -> float:
    """`slack` for one node: t0 / (t0 + g(B) / (1 - u))."""
    return t0 / (t0 + g_b / (1.0 - min(u, U_MAX)))


def step_ratio(t0: Arr, g_b: Arr, g_bk: Arr, u: Arr, k: Arr, c_d: Arr) -> FloatArray:
    """τ(k, B) = t_u(B(k+1)) / t_u(B) + k·c_d."""
    ratio = stretched(t0, g_bk, u) / stretched(t0, g_b, u) + np.asarray(k) * np.asarray(c_d)
    return np.asarray(ratio, dtype=np.float64)


def real_speedup(expected_length: Arr, tau: Arr) -> FloatArray:
    """S_real = E[L(k)] / τ(k, B)."""
    return np.asarray(expected_length, dtype=np.float64) / np.asarray(tau, dtype=np.float64)


def break_even_slack(expected_length: Arr, k: Arr, c_d: Arr) -> FloatArray:
    """sigma0(k) = 1 + c_d - (E[L(k)] - 1)/k: below this slack draft budget k loses (linear g)."""
    kk = np.asarray(k, dtype=np.float64)
    return 1.0 + np.asarray(c_d) - (np.asarray(expected_length) - 1.0) / kk


def load_increase(t0: Arr, g_b: Arr, g_bk: Arr, u: Arr, tau: Arr) -> FloatArray:
    """Δu(k, B) = g(B(k+1)) / (τ·t_u(B)) - g(B) / t_u(B): the extra share of wall time our tensor work
    occupies once verification runs k+1 tokens per sequence."""
    t_ub = stretched(t0, g_b, u)
    return np.asarray(g_bk) / (np.asarray(tau) * t_ub) - np.asarray(g_b) / t_ub


def arrival_share(t0: Arr, g_b: Arr, u: Arr) -> FloatArray:
    """g(B) / t_u(B): the share of wall time our plain tensor work occupies at load u (`load_increase`'s
    second term), the load a neighbour sees appear when we arrive; with Δu on top, our whole share."""
    out: FloatArray = np.asarray(g_b, dtype=np.float64) / stretched(t0, g_b, u)
    return out


def neighbour_slowdown(sigma_j: Arr, du: Arr, u_total: Arr) -> FloatArray:
    """ε_j = (1 - sigma_j)·Δu / (1 - u_total - Δu) if u_total + Δu < 1, else ∞."""
    du_a = np.asarray(du, dtype=np.float64)
    head = 1.0 - np.minimum(np.asarray(u_total, dtype=np.float64), U_MAX) - du_a
    with np.errstate(divide="ignore", invalid="ignore"):
        eps = (1.0 - np.asarray(sigma_j)) * du_a / head
    return np.where(head > 0, np.maximum(eps, 0.0), np.inf)


def max_load_increase(sigma_j: FloatArray, thr_j: FloatArray, u_j: FloatArray) -> FloatArray:
    """Largest Δu that keeps every neighbour j within its budget thr_j = m_j(1 - safety), per node
    (rows of the [N, J] inputs): `neighbour_slowdown` solved for Δu.

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


def memory_share_scalar(t0: float, sigma: float, tpot_seconds: float | None) -> float:
    """The share of an engine's step spent reading its weights, as measured: t0 over its TPOT, never
    above its slack sigma = t0 / t_u(B) (the roofline's t_u leaves out the per-step CPU time, which
    reads no memory, so sigma alone overstates it). 0 where it reports no TPOT: an engine without
    metrics is priced by the policy's assumed margin alone, so that a pod claiming an SLO without
    metrics cannot switch its neighbours' speculation off (docs/hostile-tenant.md)."""
    if tpot_seconds is None or tpot_seconds <= 0:
        return 0.0
    return min(sigma, t0 / tpot_seconds)


def bandwidth_slowdown(memory_j: Arr, v: Arr) -> FloatArray:
    """A neighbour's slowdown when a newcomer reads memory for a share v of its wall time: under fair
    sharing of DRAM bandwidth the neighbour's memory part (memory_j of its step) is stretched by at most
    1 + v, so it slows by memory_j·v."""
    return np.asarray(memory_j, dtype=np.float64) * np.asarray(v, dtype=np.float64)


def allowance_left(thr_j: Arr, slowed: Arr) -> FloatArray:
    """What is left of a neighbour's allowed slowdown thr_j once something has slowed it by `slowed`:
    slowdowns compound, (1 + slowed)(1 + ε) ≤ 1 + thr_j, so ε ≤ (1 + thr_j) / (1 + slowed) - 1 (thr_j
    itself where nothing slowed it; +inf stays +inf, a negative allowance stays negative)."""
    thr = np.asarray(thr_j, dtype=np.float64)
    sl = np.asarray(slowed, dtype=np.float64)
    with np.errstate(invalid="ignore"):
        left = (1.0 + thr) / (1.0 + sl) - 1.0
    out: FloatArray = np.where((sl == 0) | np.isinf(thr), thr, left)
    return out


def slo_margin(slo_seconds: Arr, tpot_seconds: Arr) -> FloatArray:
    """m_j = SLO_j / TPOT_j - 1 (≤ 0 when already over the SLO)."""
    return np.asarray(slo_seconds, dtype=np.float64) / np.asarray(tpot_seconds, dtype=np.float64) - 1.0


def slo_margin_scalar(slo_seconds: float, tpot_seconds: float) -> float:
    """`slo_margin` for one neighbour."""
    return slo_seconds / tpot_seconds - 1.0


def margin_at_slack(margin: float, sigma: float, sigma_at: float) -> float:
    """A neighbour's SLO margin once its own batch moves to one where its slack is `sigma_at`: its step
    t_u = t0 / sigma scales its TPOT by sigma / sigma_at, so m' = (1 + m)·sigma_at / sigma - 1."""
    return (1.0 + margin) * sigma_at / sigma - 1.0
