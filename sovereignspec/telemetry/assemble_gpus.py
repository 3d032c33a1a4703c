"""GPU samples of one refresh: the tensor-active, FB-free and freshness answers joined per GPU.

One pass per answer with the range tests inlined (`results.number`): the subject's name and the gap
are built only for a value that fails (`parse.checked_value` says why). The gaps come in the order of
the answers' series, as they always did, so a reading is the same whatever the speed-ups.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Mapping, Sequence

from sovereignspec.model.telemetry import GpuSample, PodRef
from sovereignspec.telemetry.carry import Carry
from sovereignspec.telemetry.gaps import Gap, GapCode
from sovereignspec.telemetry.parse import VectorSample, checked_value
from sovereignspec.telemetry.queries import Query
from sovereignspec.telemetry.results import (
    FUTURE_SKEW_SECONDS,
    GpuKey,
    PodKey,
    QueryResult,
    errored,
    freshness_gap,
    gpu_name,
    keep_latest,
    no_gpu_labels,
    number,
    rows,
)

MAX_FB_MIB = 1e7
FRESHNESS, TENSOR, FB = Query.GPU_FRESHNESS, Query.TENSOR_ACTIVE, Query.FB_FREE


def gpus(
    results: Mapping[Query, QueryResult], now: float, staleness: float, gaps: list[Gap], carry: Carry
) -> tuple[list[GpuSample], float | None]:
    """The GPUs named by any of the three answers, sorted by key, and the newest sample time seen.
    `carry` is read for the previous reading's samples and PodRefs and refilled with this one's."""
    labels: dict[GpuKey, Mapping[str, str]] = {}
    seen = _freshness(rows(results, FRESHNESS), now, labels, gaps)
    tensor, pods = _tensor(rows(results, TENSOR), labels, gaps)
    fb = _fb_free(rows(results, FB), labels, gaps)

    failed = errored(results, FRESHNESS)
    previous, prev_refs = carry.gpus, carry.pod_refs
    kept: dict[GpuKey, GpuSample] = {}
    refs: dict[PodKey, PodRef] = {}
    out: list[GpuSample] = []
    for k in sorted(labels):
        ts = seen.get(k)
        ok = ts is not None and now - ts <= staleness
        if not ok:
            gap = freshness_gap(FRESHNESS, gpu_name(k), ts, now, staleness, failed)
            if gap is not None:
                gaps.append(gap)
        m = labels[k]
        model, profile = m.get("modelName") or None, m.get("GPU_I_PROFILE") or None
        tensor_active, fb_free = (tensor.get(k), fb.get(k)) if ok else (None, None)
        on_gpu = pods.get(k)
        pod_keys = sorted(on_gpu) if on_gpu else ()
        sample = previous.get(k)
        if (
            sample is not None
            and sample.tensor_active == tensor_active
            and sample.fb_free_mib == fb_free
            and sample.model_name == model
            and sample.mig_profile == profile
            and _same_pods(sample.pods, pod_keys)
        ):
            for pk, ref in zip(pod_keys, sample.pods, strict=True):
                refs[pk] = ref
        else:
            pod_refs: list[PodRef] = []
            for pk in pod_keys:
                known = refs.get(pk)
                if known is None:
                    known = refs[pk] = prev_refs.get(pk) or PodRef(namespace=pk[0], name=pk[1])
                pod_refs.append(known)
            sample = GpuSample(
                node=k[0],
                uuid=k[1],
                model_name=model,
                tensor_active=tensor_active,
                fb_free_mib=fb_free,
                mig_profile=profile,
                gpu_instance_id=k[2] or None,
                pods=pod_refs,
            )
        kept[k] = sample
        out.append(sample)
    carry.gpus, carry.pod_refs = kept, refs
    return out, max(seen.values(), default=None)


def _same_pods(refs: list[PodRef], keys: Sequence[PodKey]) -> bool:
    if len(refs) != len(keys):
        return False
    return all(r.namespace == k[0] and r.name == k[1] for r, k in zip(refs, keys, strict=True))


def _key(q: Query, m: Mapping[str, str], gaps: list[Gap]) -> GpuKey | None:
    node = m.get("Hostname") or m.get("hostname") or m.get("node")  # dcgm-exporter spells it two ways
    uuid = m.get("UUID")
    if not node or not uuid:
        gaps.append(no_gpu_labels(q, m))
        return None
    return node, uuid, m.get("GPU_I_ID", "")


def _freshness(
    samples: list[VectorSample], now: float, labels: dict[GpuKey, Mapping[str, str]], gaps: list[Gap]
) -> dict[GpuKey, float]:
    """Last sample time per GPU: finite, positive, not far in the future. Label gaps first, then value
    gaps (two passes once; one pass now, the same order)."""
    seen: dict[GpuKey, float] = {}
    value_gaps: list[Gap] = []
    high = now + FUTURE_SKEW_SECONDS
    for s in samples:
        m = s["metric"]
        k = _key(FRESHNESS, m, gaps)
        if k is None:
            continue
        if k not in labels:
            labels[k] = m
        keep_latest(seen, k, gpu_name(k), s["value"][1], FRESHNESS, high, value_gaps)
    gaps.extend(value_gaps)
    return seen


def _tensor(
    samples: list[VectorSample], labels: dict[GpuKey, Mapping[str, str]], gaps: list[Gap]
) -> tuple[dict[GpuKey, float | None], dict[GpuKey, set[PodKey]]]:
    """Several series per GPU (one per pod with time-slicing): one value (the largest), the union of
    pods; one bad series spoils the GPU's value, with one gap."""
    tensor: dict[GpuKey, float | None] = {}
    pods: dict[GpuKey, set[PodKey]] = defaultdict(set)
    for s in samples:
        m = s["metric"]
        k = _key(TENSOR, m, gaps)
        if k is None:
            continue
        if k not in labels:
            labels[k] = m
        pod = m.get("pod", "")
        if pod:
            pods[k].add((m.get("namespace", ""), pod))
        text = s["value"][1]
        v = number(text)
        if not 0.0 <= v <= 1.0:
            checked = checked_value(TENSOR.value, gpu_name(k), text, 0.0, 1.0)
            if isinstance(checked, Gap):
                if k not in tensor or tensor[k] is not None:
                    gaps.append(checked)
                tensor[k] = None
                continue
            v = checked
        if k not in tensor or ((prev := tensor[k]) is not None and v > prev):
            tensor[k] = v
    return tensor, pods


def _fb_free(
    samples: list[VectorSample], labels: dict[GpuKey, Mapping[str, str]], gaps: list[Gap]
) -> dict[GpuKey, float | None]:
    """One series per GPU; a second is a duplicate and spoils the value."""
    fb: dict[GpuKey, float | None] = {}
    for s in samples:
        m = s["metric"]
        k = _key(FB, m, gaps)
        if k is None:
            continue
        if k not in labels:
            labels[k] = m
        if k in fb:
            gaps.append(Gap(FB.value, GapCode.DUPLICATE, f"{gpu_name(k)}: several series"))
            fb[k] = None
            continue
        text = s["value"][1]
        v = number(text)
        if 0.0 <= v <= MAX_FB_MIB:
            fb[k] = v
            continue
        checked = checked_value(FB.value, gpu_name(k), text, 0.0, MAX_FB_MIB)
        if isinstance(checked, Gap):
            gaps.append(checked)
            fb[k] = None
        else:
            fb[k] = checked
    return fb
