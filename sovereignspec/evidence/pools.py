"""Pools from files: the schema of a simulator pool (`simulate --pool FILE.yaml`) and its loader.

A pool file describes one cluster scenario: nodes (GPU product, count, engines per GPU, jurisdiction),
background engines (fixed placement, SLO, load trace) and the subject workloads a policy decides for
(arrival time, class, SLO, batch, expected-batch annotation, draft quality and k). The standard suite's
pools (`mixed`, `busy`, `stress`) ship as such files in `sovereignspec/evidence/pools/`.
The schema is documented in docs/evidence.md ("Pool files"); `load_pool` raises `PoolError` with one
line per problem (file, field path, what is wrong).
"""

from __future__ import annotations

from pathlib import Path
from typing import Literal

import yaml
from pydantic import Field, ValidationError, model_validator

from sovereignspec.api.base import Model
from sovereignspec.evidence.scenario import (
    GOOD_EAGLE3,
    WEAK_EAGLE3,
    EngineSpec,
    NodeSpec,
    Scenario,
)
from sovereignspec.evidence.truth import GPU_TYPES, SHARING_MODES, DraftTruth

POOL_DIR = Path(__file__).parent / "pools"
STANDARD_POOLS = ("mixed", "busy", "stress")
DRAFT_PRESETS: dict[str, DraftTruth] = {"good": GOOD_EAGLE3, "weak": WEAK_EAGLE3}


class PoolError(ValueError):
    """A pool file that cannot be read or does not match the schema."""


def _gpu_key(value: str) -> str:
    """A GPU type key (`h100`) or a product label (`NVIDIA-H100-80GB-HBM3`) -> the key."""
    if value in GPU_TYPES:
        return value
    for key, g in GPU_TYPES.items():
        if value in (g.product, g.model_name):
            return key
    known = ", ".join(f"{k} ({g.product})" for k, g in GPU_TYPES.items())
    raise ValueError(f"unknown GPU {value!r}; known: {known}")


class PoolNode(Model):
    name: str = Field(min_length=1, max_length=63)
    gpu: str = Field(description="GPU type key (a100, h100, h200, rtx4090) or its product label.")
    count: int = Field(default=1, ge=1, le=64, description="Physical GPUs on the node.")
    replicas: int | None = Field(
        default=None, ge=1, le=16, description="Engines per GPU (time-slicing replicas); default: the type's."
    )
    jurisdiction: str = Field(default="KR", min_length=1)

    @model_validator(mode="after")
    def _known_gpu(self) -> PoolNode:
        _gpu_key(self.gpu)
        return self


class Load(Model):
    """Concurrent sequences over time: mean `batch` x (1 + amplitude sin(2 pi t / periodS + random phase)),
    or a piecewise-linear `trace` of (seconds, batch) points; both times exp(AR(1) noise)."""

    batch: float = Field(default=8.0, ge=1, le=4096, description="Mean concurrent sequences.")
    amplitude: float = Field(default=0.3, ge=0, lt=1)
    period_s: float = Field(default=300.0, gt=0)
    noise: float = Field(default=0.08, ge=0, le=1, description="Sigma of the AR(1) shocks (log batch).")
    trace: list[tuple[float, float]] | None = Field(default=None, min_length=1, max_length=10_000)

    @model_validator(mode="after")
    def _trace_ok(self) -> Load:
        if self.trace:
            xs = [p[0] for p in self.trace]
            if any(b < xs[i] for i, b in enumerate(xs[1:])) or xs[0] < 0:
                raise ValueError("trace times must be >= 0 and non-decreasing")
            if any(p[1] < 1 for p in self.trace):
                raise ValueError("trace batch values must be >= 1")
        return self


class Engine(Model):
    ctx: float = Field(default=1200.0, gt=0, le=1_000_000, description="Mean context, tokens.")
    prefill_ratio: float = Field(default=1.5, ge=0, le=100, description="Prompt tokens per output token.")
    slo_ms: float = Field(gt=0, le=100_000, description="TPOT SLO, milliseconds.")
    load: Load = Load()


class Background(Engine):
    name: str = Field(min_length=1, max_length=63)
    tenant: str = Field(min_length=1, max_length=63)
    node: str = Field(min_length=1)
    gpu_index: int = Field(default=0, ge=0)


class Draft(Model):
    """The true acceptance of the subject's draft: `preset` (good: a0 0.82 decay 0.96, weak: a0 0.55
    decay 0.90) or explicit a0 (first position) and decay (conditional rate of position i: a0·decay^(i-1))."""

    preset: Literal["good", "weak"] | None = None
    method: str = Field(default="eagle3", min_length=1)
    model: str | None = Field(default=None, min_length=1)
    a0: float | None = Field(default=None, gt=0, lt=1)
    decay: float | None = Field(default=None, gt=0, le=1)

    @model_validator(mode="after")
    def _one_way(self) -> Draft:
        if self.preset is None and (self.a0 is None or self.decay is None):
            raise ValueError("give a preset (good | weak) or both a0 and decay")
        return self

    def truth(self) -> DraftTruth:
        base = DRAFT_PRESETS[self.preset] if self.preset else None
        a0 = self.a0 if self.a0 is not None else (base.a0 if base else 0.0)
        decay = self.decay if self.decay is not None else (base.decay if base else 1.0)
        model = self.model or (base.draft_model if base else f"{self.method}-draft")
        return DraftTruth(self.method, model, a0=a0, decay=decay)


class Subject(Engine):
    name: str = Field(min_length=1, max_length=63)
    tenant: str = Field(min_length=1, max_length=63)
    arrival_s: float = Field(default=0.0, ge=0)
    workload_class: Literal["interactive", "batch"] = Field(default="interactive", alias="class")
    expected_batch: int | None = Field(default=None, ge=1, description="The annotation; absent: not claimed.")
    draft: Draft | None = Field(default=None, description="Absent: no draft model, never speculates.")
    k: int = Field(default=5, ge=1, le=8, description="Draft length a fixed-k user configures (always-on).")


class Sharing(Model):
    mode: Literal["mps", "time-slicing"] = "mps"
    timeslice_ms: float = Field(default=2.0, gt=0, le=1000)


class Pool(Model):
    name: str = Field(min_length=1, max_length=63)
    description: str = ""
    horizon_s: float = Field(default=600.0, gt=0, le=86_400)
    sharing: Sharing | None = Field(default=None, description="Absent: the CLI's --sharing.")
    jurisdictions: dict[str, list[str]] = Field(
        default={}, description="Tenant -> jurisdictions it may run in (absent tenant: anywhere)."
    )
    nodes: list[PoolNode] = Field(min_length=1, max_length=256)
    background: list[Background] = Field(default=[], max_length=1024)
    subjects: list[Subject] = Field(min_length=1, max_length=256)

    @model_validator(mode="after")
    def _consistent(self) -> Pool:
        errors: list[str] = []
        names = [n.name for n in self.nodes]
        if len(set(names)) != len(names):
            errors.append(f"node names repeat: {sorted({n for n in names if names.count(n) > 1})}")
        engines = [b.name for b in self.background] + [s.name for s in self.subjects]
        if len(set(engines)) != len(engines):
            errors.append(f"engine names repeat: {sorted({n for n in engines if engines.count(n) > 1})}")
        nodes = {n.name: n for n in self.nodes}
        used: dict[tuple[str, int], int] = {}
        for i, b in enumerate(self.background):
            node = nodes.get(b.node)
            if node is None:
                errors.append(f"background[{i}] ({b.name}): node {b.node!r} is not in nodes")
                continue
            if b.gpu_index >= node.count:
                errors.append(f"background[{i}] ({b.name}): gpuIndex {b.gpu_index} but {b.node} has "
                              f"{node.count} GPU(s)")  # fmt: skip
            used[(b.node, b.gpu_index)] = used.get((b.node, b.gpu_index), 0) + 1
            slots = node.replicas or GPU_TYPES[_gpu_key(node.gpu)].replicas
            if used[(b.node, b.gpu_index)] > slots:
                errors.append(f"background[{i}] ({b.name}): GPU {b.gpu_index} of {b.node} takes {slots} "
                              f"engine(s)")  # fmt: skip
        for i, s in enumerate(self.subjects):
            if s.arrival_s >= self.horizon_s:
                errors.append(
                    f"subjects[{i}] ({s.name}): arrivalS {s.arrival_s} >= horizonS {self.horizon_s}"
                )
        for tenant, where in self.jurisdictions.items():
            if not where:
                errors.append(f"jurisdictions.{tenant}: empty list")
        if errors:
            raise ValueError("; ".join(errors))
        return self

    def scenario(self, default_sharing: tuple[str, float] | None = None) -> Scenario:
        """The simulator's scenario; `default_sharing` (mode, slice seconds) when the file has none."""
        from sovereignspec.evidence.scenario import SHARING

        mode, q = (
            (self.sharing.mode, self.sharing.timeslice_ms / 1000.0)
            if self.sharing is not None
            else (default_sharing or SHARING.get())
        )
        assert mode in SHARING_MODES
        nodes = tuple(
            NodeSpec(n.name, _gpu_key(n.gpu), n.count, n.jurisdiction, replicas=n.replicas)
            for n in self.nodes
        )

        def trace(load: Load) -> tuple[tuple[float, float], ...] | None:
            return tuple((float(t), float(b)) for t, b in load.trace) if load.trace else None

        bg = tuple(
            EngineSpec(b.name, b.tenant, b.load.batch, b.slo_ms, ctx=b.ctx, prefill_ratio=b.prefill_ratio,
                       amplitude=b.load.amplitude, period_s=b.load.period_s, node=b.node,
                       gpu_index=b.gpu_index, noise=b.load.noise, trace=trace(b.load))
            for b in self.background
        )  # fmt: skip
        subj = tuple(
            EngineSpec(s.name, s.tenant, s.load.batch, s.slo_ms, ctx=s.ctx, prefill_ratio=s.prefill_ratio,
                       amplitude=s.load.amplitude, period_s=s.load.period_s, subject=True,
                       arrival_s=s.arrival_s, draft=s.draft.truth() if s.draft else None,
                       workload_class=s.workload_class, expected_batch=s.expected_batch, k=s.k,
                       noise=s.load.noise, trace=trace(s.load))
            for s in self.subjects
        )  # fmt: skip
        return Scenario(
            self.name,
            self.description,
            nodes,
            bg + subj,
            horizon_s=self.horizon_s,
            jurisdictions={t: tuple(j) for t, j in self.jurisdictions.items()},
            sharing=mode,
            timeslice_s=q,
        )


def _where(loc: tuple[int | str, ...]) -> str:
    out = ""
    for part in loc:
        out += f"[{part}]" if isinstance(part, int) else (f".{part}" if out else str(part))
    return out or "(top level)"


def parse_pool(doc: object, source: str = "<pool>") -> Pool:
    """Validate a parsed YAML/JSON document as a pool; PoolError lists every problem, one per line."""
    try:
        return Pool.model_validate(doc)
    except ValidationError as exc:
        lines = []
        for err in exc.errors():
            msg = str(err["msg"]).removeprefix("Value error, ")
            lines.append(f"{source}: {_where(tuple(err['loc']))}: {msg}")
        raise PoolError("\n".join(lines)) from None


def load_pool(path: str | Path) -> Pool:
    p = Path(path)
    try:
        doc = yaml.safe_load(p.read_text())
    except OSError as exc:
        raise PoolError(f"{p}: cannot read: {exc.strerror or exc}") from None
    except yaml.YAMLError as exc:
        raise PoolError(f"{p}: not valid YAML: {exc}") from None
    return parse_pool(doc, str(p))


def standard_pool(name: str) -> Pool:
    """One of the standard suite's pools (mixed, busy, stress), from its shipped file."""
    return load_pool(POOL_DIR / f"{name}.yaml")


def pool_named(ref: str) -> Pool:
    """A standard pool by its name (`STANDARD_POOLS`), else the pool file at path `ref`: how the bench
    scripts name the pools they run."""
    return standard_pool(ref) if ref in STANDARD_POOLS else load_pool(ref)
