"""S_real, τ, slack, break-even slack, Δu and neighbour slowdown ε (DESIGN.md §2), as numpy ufunc-style
functions that broadcast over any shape (k x batch ranges x nodes x neighbours).

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


def neighbour_slowdown(sigma_j: Arr, du: Arr, u_total: Arr) -> FloatArray:
    """ε_j = (1 - sigma_j)·Δu / (1 - u_total - Δu) if u_total + Δu < 1, else ∞."""
    du_a = np.asarray(du, dtype=np.float64)
    head = 1.0 - np.minimum(np.asarray(u_total, dtype=np.float64), U_MAX) - du_a
    with np.errstate(divide="ignore", invalid="ignore"):
        eps = (1.0 - np.asarray(sigma_j)) * du_a / head
    return np.where(head > 0, np.maximum(eps, 0.0), np.inf)


def slo_margin(slo_seconds: Arr, tpot_seconds: Arr) -> FloatArray:
    """m_j = SLO_j / TPOT_j - 1 (≤ 0 when already over the SLO)."""
    return np.asarray(slo_seconds, dtype=np.float64) / np.asarray(tpot_seconds, dtype=np.float64) - 1.0
