"""Calibration: fit an AcceleratorProfile step-time curve (and the draft cost c_d) so that the decision
core's own S_real(k, B) = E[L(k)] / (t(B(k+1))/t(B) + k·c_d) reproduces a published speed-up curve.

Only ratios of t enter S_real, so the shape is fitted with t0 = 1 (t(T) = 1 + a·T + b·max(0, T - T_k),
a hinge-shaped piecewise-linear table) by an exhaustive grid on MAPE; the absolute t0 comes from the
product's roofline (weights / bandwidth), which the speed-ups cannot identify.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from sovereignspec.api.speculation_policy import AcceleratorProfile, StepTimePoint
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


def gpu_present() -> str | None:
    """Name of an NVIDIA GPU on this machine, or None (nvidia-smi missing or listing nothing)."""
    import shutil
    import subprocess

    exe = shutil.which("nvidia-smi")
    if exe is None:
        return None
    try:
        out = subprocess.run([exe, "--query-gpu=name", "--format=csv,noheader"], capture_output=True,
                             text=True, timeout=10, check=False)  # fmt: skip
    except (OSError, subprocess.TimeoutExpired):
        return None
    names = [x.strip() for x in out.stdout.splitlines() if x.strip()]
    return names[0] if out.returncode == 0 and names else None
