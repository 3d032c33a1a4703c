"""Cluster scenarios: nodes, GPUs, background engines (plain, SLO-bound) and arriving subject workloads.

A scenario is plain data; the load of every engine is a closed loop of concurrent users whose number
follows a slow sinusoid plus AR(1) noise (pre-drawn from the seed, so every policy sees the same
demand). Subjects are the workloads a policy decides for; background engines never speculate.
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from contextvars import ContextVar
from dataclasses import dataclass, field

import numpy as np
import numpy.typing as npt

from sovereignspec.evidence.truth import GPU_TYPES, SHARING_MODES, TIMESLICE_S, DraftTruth

SHARING: ContextVar[tuple[str, float]] = ContextVar("sharing", default=("mps", TIMESLICE_S))
"""Sharing model of the scenarios built in this context (the suite's scenarios are built deep inside it)."""


@contextmanager
def sharing_model(mode: str, timeslice_s: float = TIMESLICE_S) -> Iterator[None]:
    """Build every scenario in the block with this GPU sharing model (`simulate --sharing`)."""
    if mode not in SHARING_MODES:
        raise ValueError(f"sharing must be one of {SHARING_MODES}, got {mode!r}")
    if not timeslice_s > 0:
        raise ValueError(f"timeslice must be > 0 s, got {timeslice_s}")
    token = SHARING.set((mode, timeslice_s))
    try:
        yield
    finally:
        SHARING.reset(token)


GOOD_EAGLE3 = DraftTruth("eagle3", "eagle3-llama-3.1-8b", a0=0.82, decay=0.96)
WEAK_EAGLE3 = DraftTruth("eagle3", "eagle3-llama-3.1-8b-distilled-4bit", a0=0.55, decay=0.90)


@dataclass(frozen=True)
class NodeSpec:
    name: str
    gpu: str  # key of GPU_TYPES
    gpus: int
    jurisdiction: str = "KR"
    replicas: int | None = None  # engines per GPU (time-slicing replicas / MPS clients); None: the type's

    @property
    def slots(self) -> int:
        """Engines one GPU of this node takes."""
        return self.replicas if self.replicas is not None else GPU_TYPES[self.gpu].replicas


@dataclass(frozen=True)
class EngineSpec:
    name: str
    tenant: str
    batch: float  # mean concurrent sequences
    slo_ms: float
    ctx: float = 1200.0  # mean context (prompt + generated so far), tokens
    prefill_ratio: float = 1.5  # prompt tokens per output token (chunked prefill load)
    amplitude: float = 0.3  # relative sinusoidal swing of the batch
    period_s: float = 300.0
    subject: bool = False
    arrival_s: float = 0.0
    draft: DraftTruth | None = None
    workload_class: str = "interactive"
    expected_batch: int | None = None  # the annotation; None = not claimed
    node: str | None = None  # background engines: fixed placement
    gpu_index: int = 0
    k: int = 5  # the draft length a fixed-k user configures (always-on runs it)
    noise: float = 0.08  # sigma of the AR(1) shocks on the log batch
    trace: tuple[tuple[float, float], ...] | None = None  # (seconds, batch) points replacing the sinusoid


@dataclass(frozen=True)
class Scenario:
    name: str
    description: str
    nodes: tuple[NodeSpec, ...]
    engines: tuple[EngineSpec, ...]
    horizon_s: float = 600.0
    dt_s: float = 1.0
    jurisdictions: dict[str, tuple[str, ...]] = field(default_factory=dict)  # tenant -> allowed
    sharing: str = field(default_factory=lambda: SHARING.get()[0])  # truth.SHARING_MODES
    timeslice_s: float = field(default_factory=lambda: SHARING.get()[1])

    @property
    def ticks(self) -> int:
        return round(self.horizon_s / self.dt_s)


def batch_paths(sc: Scenario, rng: np.random.Generator) -> npt.NDArray[np.float64]:
    """[ticks, engines] concurrent sequences, >= 1, deterministic for the generator state."""
    t = np.arange(sc.ticks, dtype=np.float64) * sc.dt_s
    out = np.empty((sc.ticks, len(sc.engines)))
    for e, eng in enumerate(sc.engines):
        phase = rng.uniform(0, 2 * np.pi)  # drawn for every engine: the streams stay aligned
        shocks = rng.normal(0.0, 1.0, sc.ticks) * eng.noise
        ar = np.empty(sc.ticks)
        acc = 0.0
        for i, s in enumerate(shocks):
            acc = 0.95 * acc + s
            ar[i] = acc
        if eng.trace:
            xs = np.array([p[0] for p in eng.trace])
            level = np.interp(t, xs, np.array([p[1] for p in eng.trace]))
        else:
            level = eng.batch * (1.0 + eng.amplitude * np.sin(2 * np.pi * t / eng.period_s + phase))
        out[:, e] = np.maximum(1.0, np.round(level * np.exp(0.5 * ar)))
    return out


def pool(name: str) -> Scenario:
    """A standard pool (mixed, busy, stress) from its shipped file (sovereignspec/evidence/pools/),
    in this context's sharing model."""
    from sovereignspec.evidence.pools import standard_pool

    return standard_pool(name).scenario()


def mixed() -> Scenario:
    """Partly loaded heterogeneous pool: idle slots next to busy neighbours with tight SLOs."""
    return pool("mixed")


def busy() -> Scenario:
    """Every GPU carries a busy neighbour; subjects arrive with large batches (the old "saturated")."""
    return pool("busy")


def stress() -> Scenario:
    """The paper's saturation: every KR datacenter GPU carries a compute-heavy neighbour (batch 128,
    long prompts) running close to its SLO (SLOs = 1.12 x each neighbour's p95 TPOT in the run with
    every subject placed and speculation off, seed 7), and the subjects arrive with batches of 128-256,
    so that tensor-active is ~0.95 and the subjects' own compute slack is ~0.3."""
    return pool("stress")


def single_gpu(
    name: str,
    subject: EngineSpec,
    background: tuple[EngineSpec, ...],
    gpu: str = "h100",
    horizon_s: float = 120,
    arrival_s: float = 0.0,
) -> Scenario:
    """One GPU, one subject placed at `arrival_s` and fixed background engines: for the micro claims.
    A subject that SovereignSpec decides for must arrive after the telemetry window has filled."""
    # room for every engine: a subject that decide() judges must find a free slot on the GPU
    node = NodeSpec("lab", gpu, 1, replicas=max(GPU_TYPES[gpu].replicas, len(background) + 1))
    bgs = tuple(
        EngineSpec(b.name, b.tenant, b.batch, b.slo_ms, ctx=b.ctx, prefill_ratio=b.prefill_ratio,
                   amplitude=0.0, node="lab") for b in background
    )  # fmt: skip
    subj = EngineSpec(subject.name, subject.tenant, subject.batch, subject.slo_ms, ctx=subject.ctx,
                      prefill_ratio=subject.prefill_ratio, amplitude=0.0, subject=True, arrival_s=arrival_s,
                      draft=subject.draft, expected_batch=subject.expected_batch, node="lab")  # fmt: skip
    return Scenario(
        name, name, (node,), (*bgs, subj), horizon_s=horizon_s, jurisdictions={subj.tenant: ("KR",)}
    )
