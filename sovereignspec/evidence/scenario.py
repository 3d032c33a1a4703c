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

from sovereignspec.evidence.truth import SHARING_MODES, TIMESLICE_S, DraftTruth

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
        phase = rng.uniform(0, 2 * np.pi)
        shocks = rng.normal(0.0, 0.08, sc.ticks)
        ar = np.empty(sc.ticks)
        acc = 0.0
        for i, s in enumerate(shocks):
            acc = 0.95 * acc + s
            ar[i] = acc
        wave = 1.0 + eng.amplitude * np.sin(2 * np.pi * t / eng.period_s + phase)
        out[:, e] = np.maximum(1.0, np.round(eng.batch * wave * np.exp(0.5 * ar)))
    return out


def _kr_nodes() -> tuple[NodeSpec, ...]:
    return (
        NodeSpec("kr-h100-a", "h100", 2),
        NodeSpec("kr-h100-b", "h100", 1),
        NodeSpec("kr-h200", "h200", 1),
        NodeSpec("kr-a100-a", "a100", 2),
        NodeSpec("kr-a100-b", "a100", 1),
        NodeSpec("kr-rtx4090", "rtx4090", 2),
        NodeSpec("eu-h100", "h100", 1, jurisdiction="EU"),
    )


def mixed() -> Scenario:
    """Partly loaded heterogeneous pool: idle slots next to busy neighbours with tight SLOs."""
    bg = (
        EngineSpec("shop-chat", "shop", 48, 45, node="kr-h100-a", gpu_index=0),
        EngineSpec("shop-rag", "shop", 64, 90, ctx=3000, prefill_ratio=4.0, node="kr-h100-a", gpu_index=1),
        EngineSpec("ins-chat", "insure", 24, 32, node="kr-h100-b"),
        EngineSpec("ins-agent", "insure", 16, 35, node="kr-h200"),
        EngineSpec("tel-batch", "telco", 96, 150, prefill_ratio=3.0, node="kr-a100-a", gpu_index=0),
        EngineSpec("tel-chat", "telco", 12, 45, node="kr-a100-b"),
        EngineSpec("eu-chat", "eu-retail", 32, 50, node="eu-h100"),
    )
    subj = (
        EngineSpec("chat-1", "bank-a", 4, 60, subject=True, arrival_s=10, draft=GOOD_EAGLE3, expected_batch=4),  # noqa: E501
        EngineSpec("chat-2", "bank-a", 8, 60, subject=True, arrival_s=30, draft=GOOD_EAGLE3, expected_batch=8),  # noqa: E501
        EngineSpec("chat-3", "bank-b", 16, 70, subject=True, arrival_s=50, draft=GOOD_EAGLE3, expected_batch=16),  # noqa: E501
        EngineSpec("code-1", "bank-b", 6, 50, subject=True, arrival_s=70, draft=GOOD_EAGLE3, expected_batch=8),  # noqa: E501
        EngineSpec("chat-4", "bank-a", 24, 80, subject=True, arrival_s=90, draft=GOOD_EAGLE3, expected_batch=32),  # noqa: E501
        EngineSpec("weak-1", "bank-b", 8, 80, subject=True, arrival_s=110, draft=WEAK_EAGLE3, expected_batch=8),  # noqa: E501
        EngineSpec("report-1", "bank-a", 48, 200, subject=True, arrival_s=130, draft=GOOD_EAGLE3,
                   workload_class="batch", expected_batch=64),
    )  # fmt: skip
    return Scenario(
        "mixed",
        "heterogeneous KR pool (A100, H100, H200, RTX 4090) half loaded; 7 subjects arrive in 130 s",
        _kr_nodes(),
        bg + subj,
        horizon_s=600.0,
        jurisdictions={"bank-a": ("KR",), "bank-b": ("KR",)},
    )


def saturated() -> Scenario:
    """Every GPU carries a busy neighbour; subjects arrive with large batches."""
    bg = (
        EngineSpec("shop-chat", "shop", 96, 70, node="kr-h100-a", gpu_index=0),
        EngineSpec("shop-rag", "shop", 96, 120, ctx=3000, prefill_ratio=4.0, node="kr-h100-a", gpu_index=1),
        EngineSpec("ins-chat", "insure", 64, 60, node="kr-h100-b"),
        EngineSpec("ins-agent", "insure", 64, 70, prefill_ratio=3.0, node="kr-h200"),
        EngineSpec("tel-batch", "telco", 128, 200, prefill_ratio=3.0, node="kr-a100-a", gpu_index=0),
        EngineSpec("tel-chat", "telco", 64, 90, node="kr-a100-a", gpu_index=1),
        EngineSpec("tel-chat-2", "telco", 48, 90, node="kr-a100-b"),
        EngineSpec("gam-chat", "games", 12, 100, node="kr-rtx4090", gpu_index=0),
        EngineSpec("gam-chat-2", "games", 12, 100, node="kr-rtx4090", gpu_index=1),
        EngineSpec("eu-chat", "eu-retail", 64, 80, node="eu-h100"),
    )
    subj = tuple(
        EngineSpec(f"sat-{i}", "bank-a" if i % 2 else "bank-b", b, 120, subject=True, arrival_s=10 + 15 * i,
                   draft=GOOD_EAGLE3, expected_batch=int(b))
        for i, b in enumerate((48, 64, 96, 48, 64))
    )  # fmt: skip
    return Scenario(
        "saturated",
        "every GPU carries a busy neighbour; 5 subjects with batch 48-96 arrive",
        _kr_nodes(),
        bg + subj,
        horizon_s=400.0,
        jurisdictions={"bank-a": ("KR",), "bank-b": ("KR",)},
    )


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
    node = NodeSpec("lab", gpu, 1)
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


STRESS_NEIGHBOUR_SLO_MS = (75, 67, 81, 87, 160, 168, 166)
"""Neighbour SLOs of the stress pool: 1.12 x each neighbour's p95 TPOT in the run with every subject
placed and speculation off (seed 7), rounded: every neighbour sits about 10 % below its SLO at its
peaks, so any extra load from a co-located speculating engine shows up as violations."""


def stress() -> Scenario:
    """The paper's saturation: every KR datacenter GPU carries a compute-heavy neighbour (batch 128,
    long prompts) running close to its SLO, and the subjects arrive with batches of 128-256, so that
    tensor-active is ~0.95 and the subjects' own compute slack is ~0.3."""
    slots = (("kr-h100-a", 0), ("kr-h100-a", 1), ("kr-h100-b", 0), ("kr-h200", 0), ("kr-a100-a", 0),
             ("kr-a100-a", 1), ("kr-a100-b", 0))  # fmt: skip
    bg = (
        *(EngineSpec(f"nb-{i}", ("shop", "insure", "telco")[i % 3], 128, slo, ctx=2000, prefill_ratio=3.0,
                     amplitude=0.1, node=node, gpu_index=g)
          for i, ((node, g), slo) in enumerate(zip(slots, STRESS_NEIGHBOUR_SLO_MS, strict=True))),
        EngineSpec("gam-chat", "games", 12, 100, node="kr-rtx4090", gpu_index=0),
        EngineSpec("gam-chat-2", "games", 12, 100, node="kr-rtx4090", gpu_index=1),
        EngineSpec("eu-chat", "eu-retail", 64, 80, node="eu-h100"),
    )  # fmt: skip
    subj = tuple(
        EngineSpec(f"st-{i}", "bank-a" if i % 2 else "bank-b", b, 150, subject=True, arrival_s=10 + 10 * i,
                   draft=GOOD_EAGLE3, expected_batch=b, amplitude=0.15)
        for i, b in enumerate((192, 256, 160, 224, 192, 256, 128))
    )  # fmt: skip
    return Scenario(
        "stress",
        "saturated pool: every KR GPU shared with a compute-heavy neighbour 10 % below its SLO; "
        "7 subjects with batch 128-256",
        _kr_nodes(),
        bg + subj,
        horizon_s=300.0,
        jurisdictions={"bank-a": ("KR",), "bank-b": ("KR",)},
    )
