"""Calibration: AcceleratorProfile step-time tables, fitted two ways.

From published speed-ups: fit the step-time curve (and the draft cost c_d) so that the decision core's
own S_real(k, B) = E[L(k)] / (t(B(k+1))/t(B) + k·c_d) reproduces a published speed-up curve. Only ratios
of t enter S_real, so the shape is fitted with t0 = 1 (t(T) = 1 + a·T + b·max(0, T - T_k), a hinge-shaped
piecewise-linear table) by an exhaustive grid on MAPE; the absolute t0 comes from the product's roofline
(weights / bandwidth), which the speed-ups cannot identify.

From measured step times (`fit_step_table`, fed by `calibrate --measure`): (T, seconds) samples become a
monotone piecewise-linear table by isotonic regression, with t(0) extrapolated from the first segment.
"""

from __future__ import annotations

import math
from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

from sovereignspec.api.speculation_policy import AcceleratorProfile, SpeculationPolicy, StepTimePoint
from sovereignspec.model.acceptance import iid_expected_length


@dataclass(frozen=True)
class PublishedCurve:
    key: str
    product: str
    target_model: str
    k: int
    batches: tuple[int, ...]
    speedups: tuple[float, ...]
    t0_seconds: float  # roofline memory-bound step (weights / (bandwidth x 0.75)), for scale only
    source: str
    alpha: float = 0.8  # assumed i.i.d. acceptance (EAGLE-3 prior mean): the papers give speed-ups only


PUBLISHED = (
    PublishedCurve("sglang-h100-eagle3-chain3", "NVIDIA-H100-80GB-HBM3", "llama-3.1-8b", 3,
                   (2, 4, 8, 16, 24, 32, 48, 56, 64), (1.81, 1.82, 1.62, 1.48, 1.39, 1.32, 1.38, 1.34, 1.38),
                   16.06e9 / (3350e9 * 0.75),
                   "EAGLE-3 (Li et al. 2025, arXiv:2503.01840), LLaMA-3.1-8B, MT-bench, SGLang on H100, chain "  # noqa: E501
                   "length 3; speed-up vs batch as listed in SovereignSpec issue 7; alpha 0.8 assumed"),
    PublishedCurve("vllm-rtx3090-eagle3-chain2", "NVIDIA-GeForce-RTX-3090", "llama-3.1-8b", 2,
                   (2, 4, 8, 16, 24, 32, 48, 56), (1.75, 1.68, 1.58, 1.49, 1.42, 1.36, 1.21, 1.01),
                   16.06e9 / (936e9 * 0.75),
                   "EAGLE-3 (Li et al. 2025, arXiv:2503.01840), LLaMA-3.1-8B, MT-bench, vLLM on RTX 3090, "
                   "chain length 2; speed-up vs batch as listed in SovereignSpec issue 7; alpha 0.8 assumed"),
    PublishedCurve("vllm-eagle3.1-gb200", "NVIDIA-GB200", "kimi-k2.6-nvfp4", 3, (1, 4, 16), (2.03, 1.71, 1.66),  # noqa: E501
                   0.004,
                   "vLLM blog 'EAGLE 3.1' (2026-05-26): output throughput 2.03x/1.71x/1.66x at concurrency "
                   "1/4/16; secondary reports name Kimi-K2.6-NVFP4, TP=4, GB200, SPEED-Bench coding, "
                   "num_speculative_tokens 3 (assumed here); t0 is a placeholder scale; alpha 0.8 assumed"),
)  # fmt: skip


@dataclass(frozen=True)
class Fit:
    curve: PublishedCurve
    slope: float
    knee: float
    extra_slope: float
    draft_cost: float
    predicted: tuple[float, ...]
    mape: float

    def profile(self) -> AcceleratorProfile:
        c, t0 = self.curve, self.curve.t0_seconds
        t_max = max(4096.0, max(c.batches) * (c.k + 1) * 2.0)
        pts = [(0.0, t0), (self.knee, t0 * (1 + self.slope * self.knee)),
               (t_max, t0 * (1 + self.slope * t_max + self.extra_slope * (t_max - self.knee)))]  # fmt: skip
        return AcceleratorProfile(
            product=c.product,
            target_model=c.target_model,
            step_time=[StepTimePoint(tokens=round(x), seconds=round(y, 6)) for x, y in pts],
            draft_cost={"eagle3": round(self.draft_cost, 4)},
            source=f"{c.source}; fitted by sovereignspec calibrate, MAPE {100 * self.mape:.1f}%",
        )


def model_speedup(el: float, k: int, b: np.ndarray, slope: np.ndarray, knee: np.ndarray, extra: np.ndarray,
                  c_d: np.ndarray) -> np.ndarray:  # fmt: skip
    def t(tok: np.ndarray) -> np.ndarray:
        return np.asarray(1.0 + slope * tok + extra * np.maximum(0.0, tok - knee), dtype=np.float64)

    out = np.asarray(el / (t(b * (k + 1)) / t(b) + k * c_d), dtype=np.float64)
    return out


def fit(curve: PublishedCurve) -> Fit:
    el = iid_expected_length(curve.alpha, curve.k)
    b = np.asarray(curve.batches, dtype=np.float64)
    s = np.asarray(curve.speedups)
    slope = np.concatenate([[0.0], np.logspace(-5, -1, 41)])[:, None, None, None, None]
    knee = np.asarray([8, 16, 32, 64, 96, 128, 192, 256, 384, 512], dtype=np.float64)[
        None, :, None, None, None
    ]
    extra = np.concatenate([[0.0], np.logspace(-5, -1, 33)])[None, None, :, None, None]
    c_d = np.linspace(0.0, 0.5, 51)[None, None, None, :, None]
    pred = model_speedup(el, curve.k, b[None, None, None, None, :], slope, knee, extra, c_d)
    mape = np.mean(np.abs(pred - s) / s, axis=-1)
    i = np.unravel_index(int(np.argmin(mape)), mape.shape)
    return Fit(curve, float(slope.ravel()[i[0]]), float(knee.ravel()[i[1]]), float(extra.ravel()[i[2]]),
               float(c_d.ravel()[i[3]]), tuple(round(float(x), 3) for x in pred[i]), float(mape[i]))  # fmt: skip  # noqa: E501


ALPHAS = tuple(round(0.6 + 0.05 * i, 2) for i in range(7))
"""The alpha sweep of the out-of-sample figures (0.6-0.9): the published curves give speed-ups only, and
in sample alpha is not identifiable (MAPE is flat over this range while c_d moves)."""
EXTRAPOLATE_FROM = 24
"""Extrapolation: fit on B <= 24, predict the larger batches."""


@dataclass(frozen=True)
class OutOfSample:
    """Prediction error of the calibration at batches it was not fitted on, alpha fitted in every fit.

    `loo_*`: leave-one-out (fit without batch B, predict B). `extrapolation_*`: fit B <= 24, predict the
    larger batches (None without both). `by_alpha`: alpha -> (in-sample MAPE, LOO MAPE, extrapolation MAPE)
    with alpha held fixed; `loo_alphas`: the alpha each leave-one-out fit chose."""

    loo_mape: float
    loo_max: float
    extrapolation_mape: float | None
    extrapolation_max: float | None
    loo_alphas: tuple[float, ...]
    extrapolation_alpha: float | None
    by_alpha: dict[float, tuple[float, float, float | None]]


def _inverse_tau(curve: PublishedCurve) -> np.ndarray:
    """1 / tau over the fit grid x the curve's batches: [grid, batches] (alpha-free: S = E[L] / tau)."""
    b = np.asarray(curve.batches, dtype=np.float64)
    slope = np.concatenate([[0.0], np.logspace(-5, -1, 41)])[:, None, None, None, None]
    knee = np.asarray([8, 16, 32, 64, 96, 128, 192, 256, 384, 512], dtype=np.float64)[
        None, :, None, None, None
    ]
    extra = np.concatenate([[0.0], np.logspace(-5, -1, 33)])[None, None, :, None, None]
    c_d = np.linspace(0.0, 0.5, 51)[None, None, None, :, None]
    inv = model_speedup(1.0, curve.k, b[None, None, None, None, :], slope, knee, extra, c_d)
    return inv.reshape(-1, b.size)


def out_of_sample(curve: PublishedCurve, alphas: Sequence[float] = ALPHAS) -> OutOfSample:
    s = np.asarray(curve.speedups)
    n = s.size
    inv = _inverse_tau(curve)
    preds = {a: iid_expected_length(a, curve.k) * inv for a in alphas}  # alpha -> [grid, n]
    rel = {a: (np.abs(p - s) / s).astype(np.float32) for a, p in preds.items()}

    total = {a: r.sum(axis=1) for a, r in rel.items()}

    def fit_on(mask: np.ndarray, among: Sequence[float]) -> tuple[float, int]:
        """(alpha, grid index) of the least MAPE on the batches in `mask`."""
        held = ~mask
        best: tuple[float, float, int] | None = None
        for a in among:
            m = (total[a] - rel[a][:, held].sum(axis=1)) if held.any() else total[a]
            g = int(np.argmin(m))
            if best is None or m[g] < best[0]:
                best = (float(m[g]), a, g)
        assert best is not None
        return best[1], best[2]

    def loo(among: Sequence[float]) -> tuple[list[float], list[float]]:
        errs, chosen = [], []
        for j in range(n):
            mask = np.arange(n) != j
            a, g = fit_on(mask, among)
            errs.append(float(rel[a][g, j]))
            chosen.append(a)
        return errs, chosen

    def extrapolate(among: Sequence[float]) -> tuple[list[float], float] | None:
        train = np.asarray(curve.batches) <= EXTRAPOLATE_FROM
        if train.sum() < 2 or train.all():
            return None
        a, g = fit_on(train, among)
        return [float(x) for x in rel[a][g, ~train]], a

    errs, chosen = loo(alphas)
    ext = extrapolate(alphas)
    by_alpha: dict[float, tuple[float, float, float | None]] = {}
    for a in alphas:
        e_a, _ = loo([a])
        x_a = extrapolate([a])
        by_alpha[a] = (float(rel[a].mean(axis=1).min()), float(np.mean(e_a)),
                       None if x_a is None else float(np.mean(x_a[0])))  # fmt: skip
    return OutOfSample(
        loo_mape=float(np.mean(errs)),
        loo_max=float(np.max(errs)),
        extrapolation_mape=None if ext is None else float(np.mean(ext[0])),
        extrapolation_max=None if ext is None else float(np.max(ext[0])),
        loo_alphas=tuple(chosen),
        extrapolation_alpha=None if ext is None else ext[1],
        by_alpha=by_alpha,
    )


def policy_fragment(profiles: Sequence[AcceleratorProfile], name: str = "calibrated") -> dict[str, object]:
    """A SpeculationPolicy carrying `profiles` under `acceleratorProfiles`, checked against the API model.

    The same shape as sovereignspec/evidence/profiles/published.yaml: paste it into a policy or apply it.
    """
    fragment: dict[str, object] = {
        "apiVersion": "sovereignspec.io/v1alpha1",
        "kind": "SpeculationPolicy",
        "metadata": {"name": name},
        "spec": {"acceleratorProfiles": [p.wire() for p in profiles]},
    }
    SpeculationPolicy.model_validate(fragment)  # raises on a shape the operator would reject
    return fragment


MAX_TABLE_POINTS = 64
"""AcceleratorProfile.stepTime holds at most 64 points (the CRD's maxItems)."""


@dataclass(frozen=True)
class StepTableFit:
    """A monotone step-time table fitted to measured (T, seconds) samples, and its error against them.

    `mape` / `max_error`: relative error of the shipped (rounded) table at the samples. `loo_mape`: the
    error at each interior knot when the table is rebuilt without it, i.e. how well linear interpolation
    predicts a T between grid points (None under 3 knots). `pooled`: samples merged with a neighbour by
    the isotonic fit because the measurement was not monotone there.
    """

    points: tuple[tuple[int, float], ...]
    mape: float
    max_error: float
    loo_mape: float | None
    pooled: int

    def step_time(self) -> list[StepTimePoint]:
        return [StepTimePoint(tokens=t, seconds=s) for t, s in self.points]


def _sig6(x: float) -> float:
    """Six significant digits: readable YAML, and monotone (never reorders two values)."""
    return float(f"{x:.6g}")


def _isotonic_blocks(y: Sequence[float]) -> list[tuple[int, int, float]]:
    """Pool-adjacent-violators: the least-squares non-decreasing fit to `y`, as (start, stop, mean) blocks."""
    blocks: list[tuple[int, int, float]] = []  # (start, stop, sum)
    for i, v in enumerate(y):
        blocks.append((i, i + 1, v))
        while len(blocks) > 1:
            (a0, a1, sa), (b0, b1, sb) = blocks[-2], blocks[-1]
            if sa / (a1 - a0) <= sb / (b1 - b0):
                break
            blocks[-2:] = [(a0, b1, sa + sb)]
    return [(a, b, s / (b - a)) for a, b, s in blocks]


def _check_samples(samples: Sequence[tuple[float, float]]) -> list[tuple[int, float]]:
    if len(samples) < 2:
        raise ValueError(f"a step-time table needs at least 2 (tokens, seconds) samples, got {len(samples)}")
    out: list[tuple[int, float]] = []
    for tokens, seconds in samples:
        t, s = float(tokens), float(seconds)
        if not math.isfinite(t) or t < 1 or t != int(t):
            raise ValueError(f"sample tokens={tokens!r}: tokens per step must be a whole number >= 1")
        if not math.isfinite(s) or s <= 0:
            raise ValueError(f"sample at tokens={int(t)}: seconds={seconds!r} must be finite and > 0")
        out.append((int(t), s))
    dup = sorted(t for t, n in Counter(t for t, _ in out).items() if n > 1)
    if dup:
        raise ValueError(f"duplicate tokens per step {dup}: give one (aggregated) sample per T")
    return sorted(out)


def fit_step_table(samples: Sequence[tuple[float, float]]) -> StepTableFit:
    """Monotone piecewise-linear t(T) from measured (tokens per step, seconds) samples.

    Isotonic regression (pool-adjacent-violators) makes the seconds non-decreasing in T: samples that
    violate monotonicity are pooled into a block at their mean, which becomes a flat segment from the
    block's smallest to its largest T (so every sample sits on the table at its block's mean, and the
    error at a sample is bounded by the spread of its block). t(0) = t0 is not measurable (a step of 0
    tokens) and is extrapolated along the first segment, floored at half the first knot.
    Raises ValueError on fewer than 2 samples, tokens that are not whole numbers >= 1, seconds that are
    not finite and > 0, or a repeated T.
    """
    from sovereignspec.model.steptime import StepCurve

    data = _check_samples(samples)
    xs = np.asarray([t for t, _ in data], dtype=np.float64)
    ys = np.asarray([s for _, s in data], dtype=np.float64)
    blocks = _isotonic_blocks([float(v) for v in ys])
    knots: list[tuple[int, float]] = []
    for a, b, mean in blocks:  # disjoint T ranges: the knots' T stay strictly increasing
        knots += [(int(xs[a]), mean)] if b - a == 1 else [(int(xs[a]), mean), (int(xs[b - 1]), mean)]
    if len(knots) > MAX_TABLE_POINTS - 1:
        keep = sorted({round(i) for i in np.linspace(0, len(knots) - 1, MAX_TABLE_POINTS - 1)})
        knots = [knots[i] for i in keep]
    (x1, y1) = knots[0]
    slope = (knots[1][1] - y1) / (knots[1][0] - x1) if len(knots) > 1 else 0.0
    t0 = max(y1 - slope * x1, y1 / 2)
    points = tuple([(0, _sig6(t0))] + [(x, _sig6(y)) for x, y in knots])
    pred = StepCurve.from_points([(float(x), y) for x, y in points]).t(xs)
    rel = np.abs(pred - ys) / ys
    loo: float | None = None
    if len(knots) >= 3:
        errs = []
        for j in range(1, len(knots) - 1):
            (xa, ya), (xj, yj), (xb, yb) = knots[j - 1], knots[j], knots[j + 1]
            errs.append(abs(ya + (yb - ya) * (xj - xa) / (xb - xa) - yj) / yj)
        loo = float(np.mean(errs))
    return StepTableFit(points, float(rel.mean()), float(rel.max()), loo, len(data) - len(blocks))
