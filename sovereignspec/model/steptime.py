"""Step time of a target forward pass: t(T) = t0 + g(T), and its stretch by background load (DESIGN.md §2).

`StepCurve` is a monotone piecewise-linear table, extrapolated linearly past its last point with the
last segment's slope (a forward over more tokens than calibrated keeps costing at the marginal rate).
A roofline profile becomes the exact two-point line t0 + T·slope. Everything is vectorised: `t`, `g`
accept numpy arrays of token counts.
"""

from __future__ import annotations

from bisect import bisect_right
from dataclasses import dataclass, field

import numpy as np
import numpy.typing as npt

from sovereignspec.api.speculation_policy import AcceleratorProfile, Roofline

FloatArray = npt.NDArray[np.float64]

U_MAX = 1.0 - 1e-6
"""Background load is clipped below 1 so that a saturated GPU gives a huge, finite stretch."""


@dataclass(frozen=True, eq=False)
class StepCurve:
    tokens: FloatArray
    seconds: FloatArray
    last_slope: float = field(init=False)

    def __post_init__(self) -> None:
        if self.tokens.size < 2 or self.tokens[0] != 0:
            raise ValueError("a step curve needs >= 2 points, the first at 0 tokens")
        if np.any(np.diff(self.tokens) <= 0) or np.any(np.diff(self.seconds) < 0):
            raise ValueError("a step curve must be monotone (tokens increasing, seconds non-decreasing)")
        if self.seconds[0] <= 0:
            raise ValueError("t0 must be > 0")
        slope = (self.seconds[-1] - self.seconds[-2]) / (self.tokens[-1] - self.tokens[-2])
        object.__setattr__(self, "last_slope", float(slope))
        object.__setattr__(self, "_xs", [float(x) for x in self.tokens])
        object.__setattr__(self, "_ys", [float(y) for y in self.seconds])
        object.__setattr__(self, "_t0", float(self.seconds[0]))

    def t_scalar(self, tokens: float) -> float:
        """t(T) for one T in plain Python (no numpy call overhead); same result as `t`."""
        xs: list[float] = self._xs  # type: ignore[attr-defined]
        ys: list[float] = self._ys  # type: ignore[attr-defined]
        if tokens >= xs[-1]:
            return ys[-1] + (tokens - xs[-1]) * self.last_slope
        if tokens <= xs[0]:
            return ys[0]
        i = bisect_right(xs, tokens) - 1
        return ys[i] + (ys[i + 1] - ys[i]) * (tokens - xs[i]) / (xs[i + 1] - xs[i])

    @classmethod
    def from_points(cls, points: list[tuple[float, float]]) -> StepCurve:
        arr = np.asarray(points, dtype=np.float64)
        return cls(arr[:, 0].copy(), arr[:, 1].copy())

    @classmethod
    def from_roofline(cls, r: Roofline) -> StepCurve:
        t0 = r.params_b * 1e9 * r.bytes_per_param / (r.memory_bandwidth_gbs * 1e9 * r.mbu)
        per_token = 2.0 * r.params_b * 1e9 / (r.peak_tflops * 1e12 * r.mfu)
        return cls(np.array([0.0, 1.0]), np.array([t0, t0 + per_token]))

    @classmethod
    def from_profile(cls, p: AcceleratorProfile) -> StepCurve:
        if p.step_time is not None:
            return cls.from_points([(pt.tokens, pt.seconds) for pt in p.step_time])
        assert p.roofline is not None  # guaranteed by AcceleratorProfile's validator
        return cls.from_roofline(p.roofline)

    @property
    def t0(self) -> float:
        t0: float = self._t0  # type: ignore[attr-defined]
        return t0

    def t(self, tokens: npt.ArrayLike) -> FloatArray:
        x = np.asarray(tokens, dtype=np.float64)
        inside = np.interp(x, self.tokens, self.seconds)
        beyond = self.seconds[-1] + (x - self.tokens[-1]) * self.last_slope
        return np.where(x > self.tokens[-1], beyond, inside)

    def g(self, tokens: npt.ArrayLike) -> FloatArray:
        """The token-dependent (compute) part, g(0) = 0."""
        return self.t(tokens) - self.t0


def stretched(t0: npt.ArrayLike, g: npt.ArrayLike, u: npt.ArrayLike) -> FloatArray:
    """t_u(T) = t0 + g(T) / (1 - u): other tenants' load stretches only the compute part."""
    uu = np.minimum(np.asarray(u, dtype=np.float64), U_MAX)
    return np.asarray(t0, dtype=np.float64) + np.asarray(g, dtype=np.float64) / (1.0 - uu)


def compute_part(t_u: npt.ArrayLike, t0: npt.ArrayLike, u: npt.ArrayLike) -> FloatArray:
    """g(T) from t_u(T), t0 and u: `stretched` inverted in g, g = (t_u - t0)(1 - u)."""
    uu = np.minimum(np.asarray(u, dtype=np.float64), U_MAX)
    out: FloatArray = (np.asarray(t_u, dtype=np.float64) - np.asarray(t0, dtype=np.float64)) * (1.0 - uu)
    return out
