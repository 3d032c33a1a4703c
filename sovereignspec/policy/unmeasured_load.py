"""Load that runs on a GPU but is not measured yet.

dcgm-exporter's tensor-active reaches the decision a scrape and a telemetry refresh late, and an engine's
own vLLM metrics appear once it serves. Until a new pod's series is in the reading, its GPU reads as it did
before the pod, (nearly) idle: the next workload of a burst was placed and budgeted as if the GPU were
empty (docs/decision.md, "Load not measured yet").

The rule: a GPU's load is at least what the LLM engines on it compute alone, g(B) / t(B) each by the
GPU's profile (the compute share of a plain step), summed and capped at 1. B is the engine's running
sequences when it reports them, else its claimed expected batch (on its decision's record or its pod),
else the policy's defaultExpectedBatch. A pod counts as an LLM engine when it claims a target model; one
that claims none, or whose profile is unknown, cannot be priced and adds nothing (its load shows in the
measurement after the window, as before). A measured load above the floor stands: prefill, speculation
and other tenants' work are in the measurement, not in the floor.

A pod reaches a GPU sample's pod labels a collection after it starts. Until then, on a time-sliced node,
it is priced on the GPU the device plugin gave it (`Facts.samples` places it first), or, where the
allocation is unknown, on every GPU with a free replica (`unattributed`).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence

from sovereignspec.api.meta import ANNOTATION_EXPECTED_BATCH
from sovereignspec.model.cluster import PodInfo
from sovereignspec.model.profiles import ProfileBook
from sovereignspec.model.telemetry import EngineSample, GpuSample
from sovereignspec.policy.claims import parse_expected_batch
from sovereignspec.policy.node_state import TARGET_KEY, CurveOf

BusyFraction = Callable[[PodInfo, float | None], float | None]
"""A pod's predicted busy fraction alone on its GPU at `running` sequences (None: at its claimed batch),
or None when it cannot be priced (`busy_alone` on the pod's claims)."""


def with_unmeasured_load(
    samples: Sequence[GpuSample],
    pod_by_key: Mapping[tuple[str, str], PodInfo],
    engine_by_pod: Mapping[tuple[str, str], EngineSample],
    busy: BusyFraction,
    unattributed: Sequence[tuple[str, str]] = (),
    per_gpu: int = 1,
) -> Sequence[GpuSample]:
    """The samples, each GPU's tensor-active raised to the floor its engines predict (the same list when
    no GPU is below it; a GPU of unknown load stays unknown). `unattributed`: the node's GPU pods that no
    sample names yet (`node_state.unattributed_gpu_pods`), each counted on every GPU with fewer than
    `per_gpu` pods, any of which it may hold."""
    out: list[GpuSample] | None = None
    for i, g in enumerate(samples):
        extra = unattributed if len(g.pods) < per_gpu else ()
        if g.tensor_active is None or not (g.pods or extra):
            continue
        floor = 0.0
        for key in (*((p.namespace, p.name) for p in g.pods), *extra):
            pod = pod_by_key.get(key)
            if pod is None:
                continue
            engine = engine_by_pod.get(key)
            running = None if engine is None or engine.running is None else max(float(engine.running), 1.0)
            floor += busy(pod, running) or 0.0
        floor = min(1.0, floor)
        if floor > g.tensor_active:
            if out is None:
                out = list(samples)
            out[i] = g.model_copy(update={"tensor_active": floor})
    return samples if out is None else out


def busy_alone(
    claims: Mapping[str, str],
    product: str | None,
    book: ProfileBook,
    curve_of: CurveOf,
    default_batch: int,
    max_batch: int,
    running: float | None = None,
) -> float | None:
    """g(B) / t(B): the share of its GPU's time an engine alone computes at `running` sequences, or at its
    claimed expected batch (else `default_batch`) before it reports; None for an engine whose claims
    (`node_state.claims_of`) name no target model, or whose profile is unknown."""
    target = claims.get(TARGET_KEY)
    if not target:
        return None
    prof = book.find(product, target)
    if prof is None:
        return None
    # as the engine's own decision read its claim (a malformed one: the default)
    batch, _ = parse_expected_batch(claims.get(ANNOTATION_EXPECTED_BATCH), default_batch, max_batch)
    curve = curve_of(prof)
    t = curve.t_scalar(float(batch) if running is None else running)
    return (t - curve.t0) / t
