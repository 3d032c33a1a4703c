"""What one node offers a speculating engine: its GPUs with free capacity and their load, the engines
already there (neighbours, with their SLO margin and slack), and the evaluation's input for the node
or the reason speculation is off there. Request-independent but for the method and target model, so
the cache keeps these per node (`sovereignspec.policy.cache`).

Choices where DESIGN.md is silent:
- A node's u aggregates its GPUs with free capacity by `slackAggregation` (min slack ⇔ max u; mean
  averages u); GPUs with free capacity are those with fewer pods than the node's replicas per GPU.
- A neighbour with a vLLM engine sample but no TPOT, or with an SLO annotation but no engine sample,
  counts with the policy's `unknownNeighbourMargin` (default 0.5): margin 0 let any pod that claims an
  SLO and exposes no metrics switch off every neighbour's speculation. A pod with neither is not
  SLO-bound and does not constrain us. A neighbour's SLO claim is clamped like the workload's own (its
  tenant's minTpotSloMs, else the policy's global floor `minTpotSloMs`).
- A neighbour's claims (SLO, target model) are those its SpeculationDecision recorded when it was
  admitted (`PodInfo.recorded`): a running pod re-annotated later changes nothing. A pod without such a
  record (outside Kueue, in a system namespace, or decided by another controller) is read from its
  annotations.
- On a time-sliced node, a GPU pod bound there that no GPU sample names yet (dcgm-exporter's pod
  labels lag) is placed as the device plugin placed it under `Distributed` allocation
  (`placed_as_distributed`, applied in `Facts.samples`), and counts as a neighbour on every shared GPU
  at their highest load otherwise. Where the plugin chose among several GPUs for it (`tied_gpus`), a new
  pod is judged on all of them: which one the pod took is unknown.
- Draft memory: the minimum free framebuffer over the node's free GPUs must hold the draft; unknown
  free memory turns speculation off on that node.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from functools import cached_property
from typing import NamedTuple

import numpy as np
import numpy.typing as npt

from sovereignspec.api.meta import LABEL_GPU_PRODUCT, PREFIX
from sovereignspec.api.speculation_decision import Reason
from sovereignspec.api.speculation_policy import AcceleratorProfile, SpeculationPolicySpec
from sovereignspec.model.cluster import NodeInfo, PodInfo
from sovereignspec.model.profiles import ProfileBook
from sovereignspec.model.speedup import memory_share_scalar, slack_scalar, slo_margin_scalar
from sovereignspec.model.steptime import StepCurve
from sovereignspec.model.telemetry import EngineSample, GpuSample, PodRef
from sovereignspec.policy.neighbour_forecast import forecast_batch, forecast_margin
from sovereignspec.policy.record import ReasonType, fmt

FloatArray = npt.NDArray[np.float64]

GpuInfo = tuple[list[GpuSample], float | None, float | None]
"""A node's GPUs with free capacity, their aggregated background load u, their min free framebuffer."""

NO_GPU_INFO: GpuInfo = ([], None, None)

CurveOf = Callable[[AcceleratorProfile], StepCurve]
"""The step curve of a profile (one object per profile: groups of nodes are told apart by curve)."""

SLO_KEY = PREFIX + "tpot-slo-ms"
TARGET_KEY = PREFIX + "target-model"


@dataclass(frozen=True)
class NeighbourInput:
    namespace: str
    pod: str
    sigma: float
    margin: float | None  # None: not SLO-bound (no engine, no SLO claim): not constrained
    u_total: float
    memory: float = 0.0
    """The share of its step that reads its weights, as measured (`speedup.memory_share_scalar`)."""
    margin_forecast: float | None = None
    """Its margin at its forecast batch (`neighbour_forecast`); None: the same as `margin`."""

    @property
    def forecast_or_measured_margin(self) -> float | None:
        """The margin the idle scenario reads: the forecast where there is one (None: not SLO-bound)."""
        return self.margin if self.margin is None or self.margin_forecast is None else self.margin_forecast


@dataclass(frozen=True, eq=False)
class Neighbours:
    """A node's co-located engines; their columns as arrays are made on first use (most nodes' are only
    ever read through `conditions.neighbour_table`, which reads the items of many nodes at once)."""

    items: Sequence[NeighbourInput]
    namespaces: frozenset[str] = frozenset()

    @classmethod
    def of(cls, items: Sequence[NeighbourInput]) -> Neighbours:
        return cls(items=tuple(items), namespaces=frozenset(nb.namespace for nb in items))

    def without_workload(self, namespace: str, name: str) -> Neighbours:
        """Without the workload's own old pods (a re-decision is no neighbour of itself)."""
        if namespace in self.namespaces and any(_is_own(nb, namespace, name) for nb in self.items):
            return Neighbours.of([nb for nb in self.items if not _is_own(nb, namespace, name)])
        return self

    @cached_property
    def sigma(self) -> FloatArray:
        return np.asarray([nb.sigma for nb in self.items], dtype=np.float64)

    @cached_property
    def margin(self) -> FloatArray:
        """NaN: not SLO-bound."""
        return np.asarray([np.nan if nb.margin is None else nb.margin for nb in self.items], dtype=np.float64)

    @cached_property
    def u_total(self) -> FloatArray:
        return np.asarray([nb.u_total for nb in self.items], dtype=np.float64)

    @cached_property
    def memory(self) -> FloatArray:
        return np.asarray([nb.memory for nb in self.items], dtype=np.float64)


def _is_own(nb: NeighbourInput, namespace: str, name: str) -> bool:
    return nb.namespace == namespace and nb.pod.startswith(name)


NO_NEIGHBOURS = Neighbours.of(())


@dataclass(frozen=True)
class NodeInput:
    name: str
    curve: StepCurve
    c_d: float
    u: float
    neighbours: Neighbours = NO_NEIGHBOURS


def replicas(node: NodeInfo, samples: Sequence[GpuSample]) -> int:
    """Pods per GPU the node advertises (time-slicing replicas; 1 for whole GPUs, and 1 when no GPU
    sample names the node: without telemetry the GPUs per node are unknown)."""
    return max(1, node.gpu_allocatable // len(samples)) if node.gpu_allocatable and samples else 1


def gpu_state(
    node: NodeInfo,
    samples: Sequence[GpuSample],
    aggregation: str,
    judged: Callable[[list[GpuSample]], Sequence[GpuSample]] | None = None,
) -> GpuInfo:
    """The node's GPUs with free capacity (all of them when none has), the load u of those the pod will
    run on (`judged(free)`, every free one without it) aggregated by `aggregation` (None when one is
    unknown) and their least free framebuffer (None when unknown)."""
    if not samples:
        return NO_GPU_INFO
    per_gpu = replicas(node, samples)
    free = [g for g in samples if len(g.pods) < per_gpu] or list(samples)
    on = judged(free) if judged is not None else free
    loads = [g.tensor_active for g in on]
    u: float | None
    if any(x is None for x in loads):
        u = None
    else:
        vals = [float(x) for x in loads if x is not None]
        u = (
            max(vals)
            if aggregation == "min"
            else min(vals)
            if aggregation == "max"
            else sum(vals) / len(vals)
        )
    fbs = [g.fb_free_mib for g in on]
    fb = None if any(x is None for x in fbs) else min(float(x) for x in fbs if x is not None)
    return free, u, fb


def gpu_product(node: NodeInfo, gpus: Sequence[GpuSample]) -> str | None:
    """The node's GPU product: its label, else the first model name its GPU samples report."""
    return node.labels.get(LABEL_GPU_PRODUCT) or next((g.model_name for g in gpus if g.model_name), None)


def handed_out(
    node: NodeInfo,
    samples: Sequence[GpuSample],
    free: Sequence[GpuSample],
    unattributed: Callable[[], bool],
    allocation: str,
    tied: Sequence[GpuSample] = (),
) -> Sequence[GpuSample]:
    """The GPUs a new one-GPU pod may run on: under `Distributed` allocation (the NVIDIA device plugin's
    default for time-slicing and MPS replicas) those among `free` with the fewest pods, all of them when
    several tie (the plugin breaks ties), and the GPUs of `tied` as they read there (`tied_gpus`: the
    pod no sample names yet placed last on each was placed there in a tie, and may hold another GPU of
    it). Every free GPU (`free` itself, and `tied` in place of theirs) where the samples do not tell:
    `Unknown` allocation, whole GPUs (a free one carries no pod anyway), MIG instances, a GPU pod on the
    node that no sample names yet (`unattributed()`, asked only when the choice would narrow)."""
    if allocation != "Distributed" or replicas(node, samples) <= 1:
        return free
    ids = {g.uuid for g in tied}
    rest = [g for g in free if g.uuid not in ids] if ids else free
    least = min((len(g.pods) for g in rest), default=0)
    on = [g for g in rest if len(g.pods) == least]
    if len(on) < len(rest) and (any(g.mig_profile for g in samples) or unattributed()):
        on = list(rest)
    return [*tied, *on]


def unattributed_gpu_pods(
    node: NodeInfo, samples: Sequence[GpuSample], pods: Sequence[PodInfo]
) -> list[tuple[str, str]]:
    """GPU pods bound to a time-sliced node that no GPU sample names yet: dcgm-exporter's pod labels
    lag a pod's start by a collection interval, and such a pod may share any of the node's GPUs. In key
    order: `placed_as_distributed` places them in turn, and the order a snapshot lists its pods in (an
    informer's, or a patched index's) must not move them."""
    if not samples or replicas(node, samples) <= 1:
        return []  # whole GPUs: an unattributed pod holds one of its own
    named = {(p.namespace, p.name) for g in samples for p in g.pods}
    return sorted(
        (p.namespace, p.name)
        for p in pods
        if p.gpu_request > 0 and not p.daemonset and (p.namespace, p.name) not in named
    )


def _distributed(
    samples: Sequence[GpuSample], unattributed: Sequence[tuple[str, str]], per_gpu: int
) -> tuple[list[list[PodRef]], set[int]]:
    """Each pod no sample names yet, in turn, on a GPU with the fewest pods, the least loaded of those;
    and the GPUs whose last pod so placed was placed there in a choice among several."""
    pods = [list(g.pods) for g in samples]
    last_tied: set[int] = set()
    for ns, name in unattributed:
        room = [i for i, got in enumerate(pods) if len(got) < per_gpu]
        if not room:
            break
        least = min(len(pods[i]) for i in room)
        fewest = [i for i in room if len(pods[i]) == least]
        j = min(fewest, key=lambda i: float(samples[i].tensor_active or 0.0))
        pods[j].append(PodRef(namespace=ns, name=name))
        if len(fewest) > 1:
            last_tied.add(j)
        else:
            last_tied.discard(j)
    return pods, last_tied


def placed_as_distributed(
    samples: Sequence[GpuSample], unattributed: Sequence[tuple[str, str]], per_gpu: int
) -> list[GpuSample]:
    """The samples with each pod that no sample names yet placed as a `Distributed` device plugin placed
    it: on a GPU with the fewest pods, the least loaded of those (the plugin's tie-break is unknown, and
    so the GPUs left to the next pod are judged at their highest load, and those of the tie as well:
    `tied_gpus`). A pod that finds every GPU full is left unplaced (the samples are older than the
    binding)."""
    return placed_and_tied(samples, unattributed, per_gpu)[0]


def tied_gpus(
    samples: Sequence[GpuSample], unattributed: Sequence[tuple[str, str]], per_gpu: int
) -> list[GpuSample]:
    """The GPUs a next pod may get besides those `placed_as_distributed` leaves with the fewest pods: each
    GPU whose last pod no sample names was placed there in a choice among several GPUs with the fewest,
    as it reads without that pod. The plugin's tie-break is unknown (Go map order in NVIDIA's), so that
    pod may hold another GPU of the tie and leave this one to the next pod; the number of pods on the
    GPUs with room is the same whichever way ties went (docs/decision.md, "Pods no sample names yet,
    placed in a tie")."""
    return placed_and_tied(samples, unattributed, per_gpu)[1]


def placed_and_tied(
    samples: Sequence[GpuSample], unattributed: Sequence[tuple[str, str]], per_gpu: int
) -> tuple[list[GpuSample], list[GpuSample]]:
    """`placed_as_distributed` and `tied_gpus` from one pass of the placement."""
    pods, last_tied = _distributed(samples, unattributed, per_gpu)
    placed = _with_pods(samples, dict(enumerate(pods)))
    room = [len(got) for got in pods if len(got) < per_gpu]
    if not last_tied or not room:
        return placed, []
    level = min(room)
    alt = {i: pods[i][:-1] for i in sorted(last_tied) if len(pods[i]) == level + 1}
    return placed, [g for i, g in enumerate(_with_pods(samples, alt)) if i in alt]


def _with_pods(samples: Sequence[GpuSample], pods: Mapping[int, list[PodRef]]) -> list[GpuSample]:
    """The samples with the pods given by index, each list the sample's own pods and maybe more after
    them (the same object where it holds no more)."""
    return [
        g if (got := pods.get(i)) is None or len(got) == len(g.pods) else g.model_copy(update={"pods": got})
        for i, g in enumerate(samples)
    ]


def neighbour_sigma(curve: StepCurve, running: float, u_total: float) -> float:
    """A neighbour's slack from its curve, its running sequences and its GPU's load."""
    return slack_scalar(curve.t0, curve.t_scalar(max(running, 1.0)) - curve.t0, u_total)


class NeighbourSlack(NamedTuple):
    """What `sigma_of` tells of a neighbour: its slack and its curve's t0 (its weights' read time)."""

    sigma: float
    t0: float


class NodeView(NamedTuple):
    """What the neighbour rule reads about one node besides its GPUs."""

    node: NodeInfo
    samples: Sequence[GpuSample]
    """All the node's GPU samples."""
    pods: Sequence[PodInfo]
    """The pods bound to the node."""
    pod_by_key: Mapping[tuple[str, str], PodInfo]
    engine_by_pod: Mapping[tuple[str, str], EngineSample]


def claims_of(pod: PodInfo | None) -> Mapping[str, str]:
    """A neighbour's claims: what its decision recorded at admission, else its pod's annotations (claims
    take effect at admission: a running pod re-annotated later changes nothing)."""
    if pod is None:
        return {}
    return pod.annotations if pod.recorded is None else pod.recorded


def neighbour_inputs(
    view: NodeView,
    gpus: Sequence[GpuSample],
    book: ProfileBook,
    policy: SpeculationPolicySpec,
    slo_ms: Callable[[str, str | None, float], float],
    sigma_of: Callable[[AcceleratorProfile, float, float], NeighbourSlack],
) -> list[NeighbourInput]:
    """The engines on the node's GPUs `gpus`, each at the highest load of the GPUs it is seen on, with
    its SLO margin (`slo_ms`: its tenant-clamped SLO claim), its slack (`sigma_of`: by its profile's
    curve, its running sequences and its load; `neighbour_sigma`) and its measured memory share (its
    curve's t0 over its TPOT: `speedup.memory_share_scalar`)."""
    seen: dict[tuple[str, str], float] = {}
    for g in gpus:
        for p in g.pods:
            key = (p.namespace, p.name)
            seen[key] = max(seen.get(key, 0.0), float(g.tensor_active or 0.0))
    unattributed = unattributed_gpu_pods(view.node, view.samples, view.pods) if gpus else []
    if unattributed:
        u_shared = max(float(g.tensor_active or 0.0) for g in gpus)
        for key in unattributed:
            seen[key] = max(seen.get(key, 0.0), u_shared)
    out = []
    product = gpu_product(view.node, gpus)
    default_slo, unknown_sigma = policy.default_tpot_slo_ms, policy.unknown_neighbour_slack
    unknown_margin = policy.unknown_neighbour_margin
    for key, u_tot in sorted(seen.items()):
        pod = view.pod_by_key.get(key)
        ann = claims_of(pod)
        engine = view.engine_by_pod.get(key)
        raw_slo = ann.get(SLO_KEY)
        ns = key[0]
        margin: float | None
        if engine is not None and engine.tpot_seconds is not None:
            margin = slo_margin_scalar(slo_ms(ns, raw_slo, default_slo) / 1000.0, engine.tpot_seconds)
        elif engine is not None or raw_slo is not None:
            margin = unknown_margin  # SLO-bound, TPOT not measured: the policy's assumption
        else:
            margin = None
        sigma, memory, forecast = unknown_sigma, 0.0, None
        if engine is not None and engine.running is not None:
            prof = book.find(product, ann.get(TARGET_KEY))
            if prof is not None:
                sigma, t0 = sigma_of(prof, engine.running, u_tot)
                memory = memory_share_scalar(t0, sigma, engine.tpot_seconds)
                peak = forecast_batch(engine.running, engine.running_min)
                if margin is not None and engine.tpot_seconds is not None and peak > engine.running:
                    forecast = forecast_margin(margin, sigma, sigma_of(prof, peak, u_tot).sigma)
        out.append(
            NeighbourInput(
                ns, key[1], sigma=sigma, margin=margin, u_total=u_tot, memory=memory, margin_forecast=forecast
            )
        )
    return out


def node_input(
    node: NodeInfo,
    info: GpuInfo,
    book: ProfileBook,
    method: str,
    target_model: str | None,
    neighbours: Callable[[], Neighbours],
    curve_of: CurveOf,
) -> NodeInput | Reason:
    """What the vectorised evaluation needs about one node, or why speculation is off there."""
    free_gpus, u, fb = info
    product = gpu_product(node, free_gpus)
    prof = book.find(product, target_model)
    if prof is None:
        return Reason(
            type=ReasonType.NO_ACCELERATOR_PROFILE, message=f"no profile for GPU {product} / {target_model}"
        )
    if u is None:
        return Reason(type=ReasonType.NODE_TELEMETRY_MISSING, message=f"no GPU load for {node.name}")
    mem = prof.draft_memory_mib.get(method, 0.0)
    if fb is None or fb < mem:
        return Reason(
            type=ReasonType.INSUFFICIENT_DRAFT_MEMORY,
            message=f"draft needs {mem:.0f} MiB, free {fmt(fb)} MiB on {node.name}",
        )
    return NodeInput(
        name=node.name,
        curve=curve_of(prof),
        c_d=prof.draft_cost.get(method, 0.0),
        u=u,
        neighbours=neighbours(),
    )


def plain_inputs(
    node: NodeInfo, info: GpuInfo, book: ProfileBook, target_model: str | None, batch: int, curve_of: CurveOf
) -> tuple[float, float, float] | None:
    """(t0, g(B), u) at the expected batch on a node that was not evaluated, when its profile and load
    are known (placement Throughput's rate and the record's slack read them)."""
    if info[1] is None:
        return None
    prof = book.find(gpu_product(node, info[0]), target_model)
    if prof is None:
        return None
    c = curve_of(prof)
    return c.t0, float(c.g(batch)), info[1]
