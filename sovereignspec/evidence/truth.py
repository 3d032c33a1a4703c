"""Ground truth of the simulator: step time of a vLLM engine on a shared GPU, and draft acceptance.

What makes it richer than the decision core's model (DESIGN.md §2):
- step time is a smooth roofline *hinge* max(memory, compute) (an L^p norm, p = 3), not t0 + g(T);
  verification is nearly free until compute catches up with the memory-bound part;
- a KV-cache read term grows with batch x context, and attention FLOPs grow with tokens x context;
- the draft's cost per draft token depends on batch and GPU (launch overhead + head weights + FLOPs);
- co-located engines overlap (MPS-like, the default): others' compute share u stretches our compute
  by 1/(1 - u) *and* bandwidth share v our memory by 1/(1 - gamma·v); the solution is a fixed point over
  all engines of a GPU (`solve_mps`). Strict time-slicing (one context at a time, round-robin slices of
  `TIMESLICE_S`, `solve_timesliced`) is the alternative truth: under it co-located load takes our *time*,
  not our compute slack, so the paper's C2/C3 do not hold (docs/evidence.md, "Sharing model");
- chunked prefill of new prompts rides in every step, in proportion to the tokens the step emits;
- acceptance is per position with conditional rates that decay with depth (not i.i.d.).
Everything is vectorised over any leading shape.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import numpy.typing as npt

FloatArray = npt.NDArray[np.float64]
IntArray = npt.NDArray[np.int64]

HINGE_P = 3.0
"""Sharpness of the roofline hinge: (m^p + c^p)^(1/p); p → ∞ is the plain max."""
BANDWIDTH_SHARING = 0.5
"""Fraction of co-located engines' bandwidth share that slows our memory part (kernels overlap)."""
U_CAP = 0.97
"""Contention is capped so that the fixed point stays finite on an over-subscribed GPU."""
TIMESLICE_S = 2e-3
"""Round-robin time slice of a time-sliced GPU: nvidia-smi compute-policy --set-timeslice offers short
2 ms, medium 10 ms and long 30 ms; the driver's default is undocumented, and its documented behaviour,
an equal share of GPU time per workload, is what a short slice gives. docs/evidence.md shows all three."""
SHARING_MODES = ("mps", "time-slicing")


@dataclass(frozen=True)
class GpuType:
    """One accelerator as the ground truth sees it (public peak figures, *achieved* fractions)."""

    key: str
    product: str  # node label nvidia.com/gpu.product (matches the built-in profiles)
    model_name: str  # dcgm modelName
    tflops: float  # dense BF16 tensor TFLOP/s
    bandwidth_gbs: float
    mfu: float  # achieved fraction for decode/verification GEMMs (small M: well below peak)
    mbu: float
    overhead_s: float  # per-step CPU/launch/sampling time, not stretched by GPU contention
    memory_mib: float
    replicas: int  # time-slicing replicas per physical GPU


GPU_TYPES: dict[str, GpuType] = {
    g.key: g
    for g in (
        GpuType("a100", "NVIDIA-A100-SXM4-80GB", "NVIDIA A100-SXM4-80GB", 312.0, 2039.0, 0.45, 0.80, 3.5e-3,
                81920, 2),
        GpuType("h100", "NVIDIA-H100-80GB-HBM3", "NVIDIA H100 80GB HBM3", 989.0, 3350.0, 0.30, 0.80, 3.0e-3,
                81920, 2),
        GpuType("h200", "NVIDIA-H200", "NVIDIA H200", 989.0, 4800.0, 0.30, 0.78, 3.0e-3, 144384, 2),
        GpuType("rtx4090", "NVIDIA-GeForce-RTX-4090", "NVIDIA GeForce RTX 4090", 165.2, 1008.0, 0.50, 0.85,
                4.0e-3, 24564, 1),
    )
}  # fmt: skip


@dataclass(frozen=True)
class TargetModel:
    """Llama-3.1-8B-class target in BF16, with an EAGLE-3-class draft head."""

    name: str = "llama-3.1-8b"
    params_b: float = 8.03
    bytes_per_param: float = 2.0
    kv_bytes_per_token: float = 131072.0  # 32 layers x 8 KV heads x 128 dims x (K, V) x 2 bytes
    attn_flops_per_token_ctx: float = 4.0 * 32 * 4096  # QK^T and PV over the context, all layers
    draft_params_b: float = 0.8  # one decoder layer + LM head, FLOPs per draft token
    draft_bytes: float = 1.2e9
    draft_overhead_s: float = 0.6e-3  # launch + sampling per draft position


TARGET = TargetModel()


@dataclass(frozen=True)
class StepParts:
    """Uncontended pieces of one engine step (seconds), per element of the batch of configurations."""

    fixed: FloatArray  # CPU/launch overhead, target and draft
    mem: FloatArray  # target memory part (weights + KV)
    comp: FloatArray  # target compute part
    d_mem: FloatArray  # draft memory part, all k positions
    d_comp: FloatArray  # draft compute part, all k positions


def step_parts(
    tflops: npt.ArrayLike,
    bandwidth_gbs: npt.ArrayLike,
    mfu: npt.ArrayLike,
    mbu: npt.ArrayLike,
    overhead_s: npt.ArrayLike,
    batch: npt.ArrayLike,
    k: npt.ArrayLike,
    ctx: npt.ArrayLike,
    prefill_per_step: npt.ArrayLike = 0.0,
    model: TargetModel = TARGET,
) -> StepParts:
    b = np.asarray(batch, dtype=np.float64)
    kk = np.asarray(k, dtype=np.float64)
    c = np.asarray(ctx, dtype=np.float64)
    flops = np.asarray(tflops, dtype=np.float64) * 1e12 * np.asarray(mfu, dtype=np.float64)
    bw = np.asarray(bandwidth_gbs, dtype=np.float64) * 1e9 * np.asarray(mbu, dtype=np.float64)
    # Chunked prefill rides in the decode step (vLLM V1): the new prompts of finished requests.
    tokens = b * (kk + 1.0) + np.asarray(prefill_per_step, dtype=np.float64)
    active = b > 0
    mem = np.where(
        active, (model.params_b * 1e9 * model.bytes_per_param + b * c * model.kv_bytes_per_token) / bw, 0
    )
    comp = tokens * (2.0 * model.params_b * 1e9 + c * model.attn_flops_per_token_ctx) / flops
    fixed = np.where(active, np.asarray(overhead_s, dtype=np.float64) + kk * model.draft_overhead_s, 0.0)
    d_mem = np.where(active, kk * model.draft_bytes / bw, 0.0)
    d_comp = kk * b * 2.0 * model.draft_params_b * 1e9 / flops
    return StepParts(*(np.asarray(x, dtype=np.float64) for x in (fixed, mem, comp, d_mem, d_comp)))


def hinge(m: FloatArray, c: FloatArray) -> FloatArray:
    out: FloatArray = (m**HINGE_P + c**HINGE_P) ** (1.0 / HINGE_P)
    return out


def step_time(p: StepParts, u: npt.ArrayLike, v: npt.ArrayLike) -> FloatArray:
    """Wall time of one step under others' compute share u and bandwidth share v."""
    uu = np.minimum(np.asarray(u, dtype=np.float64), U_CAP)
    vv = np.minimum(BANDWIDTH_SHARING * np.asarray(v, dtype=np.float64), U_CAP)
    mem_s, comp_s = 1.0 / (1.0 - vv), 1.0 / (1.0 - uu)
    t = p.fixed + hinge(p.mem * mem_s, p.comp * comp_s) + p.d_mem * mem_s + p.d_comp * comp_s
    return np.asarray(t, dtype=np.float64)


@dataclass(frozen=True)
class Contention:
    """Solved shared-GPU state: step time and each engine's compute and bandwidth share of the GPU."""

    t: FloatArray
    compute_share: FloatArray
    memory_share: FloatArray

    def gpu_sum(self, onehot: FloatArray) -> FloatArray:
        """Tensor-active ratio per GPU: the sum of its engines' compute shares."""
        out: FloatArray = self.compute_share @ onehot
        return out


def solve_mps(p: StepParts, onehot: FloatArray, iters: int = 40) -> Contention:
    """MPS-like sharing (kernels of all engines overlap): fixed point t_e = step_time(parts_e, u_e(t),
    v_e(t)), u_e = sum over others on e's GPU of their compute shares (comp + d_comp)/t. `onehot` is
    [E, G]; parts are [..., E]; damped iteration."""
    comp = p.comp + p.d_comp
    mem = p.mem + p.d_mem
    t = step_time(p, 0.0, 0.0)
    safe = np.where(t > 0, t, 1.0)
    for _ in range(iters):
        cs = np.where(t > 0, comp / safe, 0.0)
        ms = np.where(t > 0, mem / safe, 0.0)
        u = (cs @ onehot) @ onehot.T - cs
        v = (ms @ onehot) @ onehot.T - ms
        t_new = step_time(p, u, v)
        t = 0.5 * t + 0.5 * t_new
        safe = np.where(t > 0, t, 1.0)
    cs = np.where(t > 0, comp / safe, 0.0)
    ms = np.where(t > 0, mem / safe, 0.0)
    return Contention(t, cs, ms)


def solve_timesliced(
    p: StepParts, onehot: FloatArray, iters: int = 40, timeslice_s: float = TIMESLICE_S
) -> Contention:
    """Time-sliced sharing: a step is CPU time `fixed` plus GPU work w run at full speed, one context
    at a time. Round-robin with slice Q: e's GPU work takes max(1, w_e/Q) rounds, and in each round
    every other engine j that is ready (probability q_j = R_j/t_j, the share of its step it spends on
    the GPU) runs min(w_j, Q) first, so R_e = w_e + max(1, w_e/Q)·sum_j q_j·min(w_j, Q) (mean-value
    approximation). Q → 0 is processor sharing (equal shares), Q → ∞ whole steps in turn."""
    w = hinge(p.mem, p.comp) + p.d_mem + p.d_comp
    f = p.fixed
    per_round = np.minimum(w, timeslice_s)
    rounds = np.maximum(1.0, w / timeslice_s)
    r = w
    for _ in range(iters):
        t = f + r
        q = np.where(t > 0, r / np.where(t > 0, t, 1.0), 0.0)
        load = q * per_round
        others = (load @ onehot) @ onehot.T - load
        r = 0.5 * r + 0.5 * (w + rounds * others)
    t = f + r
    safe = np.where(t > 0, t, 1.0)
    cs = np.where(t > 0, (p.comp + p.d_comp) / safe, 0.0)
    ms = np.where(t > 0, (p.mem + p.d_mem) / safe, 0.0)
    return Contention(np.asarray(t, dtype=np.float64), cs, ms)


def solve(
    p: StepParts, onehot: FloatArray, iters: int = 40, sharing: str = "mps",
    timeslice_s: float = TIMESLICE_S,
) -> Contention:  # fmt: skip
    """Shared-GPU step times for the scenario's sharing mode."""
    if sharing == "mps":
        return solve_mps(p, onehot, iters)
    if sharing == "time-slicing":
        return solve_timesliced(p, onehot, iters, timeslice_s)
    raise ValueError(f"sharing must be one of {SHARING_MODES}, got {sharing!r}")


@dataclass(frozen=True)
class DraftTruth:
    """True acceptance of one (target, draft, method) pair: conditional rate of position i is
    a0·decay^(i-1), and a0 drifts over time (prompt mix) around its mean."""

    method: str
    draft_model: str
    a0: float
    decay: float

    def conditional(self, a0: npt.ArrayLike, k_max: int) -> FloatArray:
        a = np.asarray(a0, dtype=np.float64)[..., None]
        out: FloatArray = np.clip(a * self.decay ** np.arange(k_max, dtype=np.float64), 0.0, 0.995)
        return out


def expected_length(conditional: FloatArray, k: npt.ArrayLike) -> FloatArray:
    """E[L(k)] = 1 + sum_{i<=k} prod_{j<=i} q_j, for k per element (conditional is [..., K])."""
    p = np.cumprod(conditional, axis=-1)
    cum = np.concatenate([np.zeros((*p.shape[:-1], 1)), np.cumsum(p, axis=-1)], axis=-1)
    kk = np.asarray(k, dtype=np.int64)
    out: FloatArray = 1.0 + np.take_along_axis(cum, kk[..., None], axis=-1)[..., 0]
    return out


def sample_accepted(
    rng: np.random.Generator, drafts: IntArray, conditional: FloatArray, k: IntArray
) -> IntArray:
    """Per-position accepted counts [E, K]: position i is reached by the drafts whose positions
    1..i-1 were all accepted (a binomial chain), only for i <= k of each engine."""
    n_e, k_max = conditional.shape
    out = np.zeros((n_e, k_max), dtype=np.int64)
    n = drafts.astype(np.int64)
    for i in range(k_max):
        n = np.where(k > i, rng.binomial(n, conditional[:, i]), 0)
        out[:, i] = n
    return out
