"""The Beta distribution's CDF and quantile, the acceptance posterior's (model/acceptance.py).

SciPy's regularized incomplete beta and its inverse (Cephes, in C): every decision and every drift
evaluation takes a quantile per acceptance position, and the hand-written bisection over a continued
fraction this replaced cost 0.7-3.5 ms per quantile against about 5 us (docs/scale.md, session 11).
"""

from __future__ import annotations

from scipy.special import betainc, betaincinv


def beta_cdf(x: float, a: float, b: float) -> float:
    """Regularized incomplete beta I_x(a, b), the CDF of Beta(a, b) at x."""
    if not (a > 0 and b > 0):
        raise ValueError(f"Beta parameters must be > 0, got a={a}, b={b}")
    return float(betainc(a, b, min(max(x, 0.0), 1.0)))


def beta_quantile(q: float, a: float, b: float) -> float:
    """x with I_x(a, b) = q."""
    if not 0.0 < q < 1.0:
        raise ValueError(f"quantile must be in (0, 1), got {q}")
    if not (a > 0 and b > 0):
        raise ValueError(f"Beta parameters must be > 0, got a={a}, b={b}")
    return float(betaincinv(a, b, q))
