"""The telemetry assembly as it was before issue 18's incremental refresh (main at 9ee1081), kept
verbatim as an oracle: `test_assemble_equivalence.py` checks that `telemetry.assemble` gives exactly the
same reading, and `bench/telemetry_refresh_ab.py` times both side by side. Not used by the operator.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Callable, Hashable, Mapping
from datetime import UTC, datetime
from functools import partial
from typing import TypeVar

from sovereignspec.model.telemetry import EngineSample, GpuSample, PodRef
from sovereignspec.telemetry.gaps import Gap, GapCode
from sovereignspec.telemetry.parse import VectorSample, checked_lazily, checked_value, in_range
from sovereignspec.telemetry.queries import Query
from sovereignspec.telemetry.reading import PodAcceptance, TelemetryReading

HOST_LABELS = ("Hostname", "hostname", "node")
TENSOR, FB = Query.TENSOR_ACTIVE.value, Query.FB_FREE.value
MAX_FB_MIB = 1e7
MAX_TPOT_SECONDS = 3600.0
MAX_REQUESTS = 1e6
MAX_COUNTER = 1e15
FUTURE_SKEW_SECONDS = 300.0
# increase() extrapolates each counter on its own: allow this much accepted-above-drafts noise.
ACCEPT_TOLERANCE = 0.05

QueryResult = list[VectorSample] | Gap
GpuKey = tuple[str, str, str]  # node, UUID, MIG GPU instance id ("" for a whole GPU)
EngineKey = tuple[str, str]  # namespace, pod
K = TypeVar("K", bound=Hashable)


def assemble(
    results: Mapping[Query, QueryResult],
    now: float,
    staleness_seconds: float,
    pod_refs: dict[tuple[str, str], PodRef] | None = None,
) -> TelemetryReading:
    """One reading from one refresh's results; every doubtful value is None with a Gap. `pod_refs`: the
    PodRefs of the previous reading by (namespace, name), reused for the pods still named (and replaced
    in place by this reading's), so that a pod's reference is one object from refresh to refresh."""
    results = {q: [] if _empty_ok(q, r) else r for q, r in results.items()}
    gaps: list[Gap] = [r for r in results.values() if isinstance(r, Gap)]
    refs: dict[tuple[str, str], PodRef] = {}
    gpus, newest_gpu = _gpus(results, now, staleness_seconds, gaps, refs, pod_refs or {})
    if pod_refs is not None:
        pod_refs.clear()
        pod_refs.update(refs)
    engines, fresh, newest_engine = _engines(results, now, staleness_seconds, gaps)
    acceptance = _acceptance(results, fresh, gaps)
    newest = max((t for t in (newest_gpu, newest_engine) if t is not None), default=None)
    return TelemetryReading(
        time=datetime.fromtimestamp(now, tz=UTC),
        gpus=gpus,
        engines=engines,
        pod_acceptance=acceptance,
        gaps=gaps,
        newest_sample=newest,
        queries=len(results),
    )


# No speculating engine in the window is normal, not a fault: the core then uses its priors.
EMPTY_OK = frozenset({Query.SPEC_DRAFTS, Query.SPEC_DRAFT_TOKENS, Query.SPEC_ACCEPTED_PER_POSITION})


def _empty_ok(q: Query, r: QueryResult) -> bool:
    return q in EMPTY_OK and isinstance(r, Gap) and r.code is GapCode.EMPTY


def _rows(results: Mapping[Query, QueryResult], q: Query) -> list[VectorSample]:
    r = results.get(q)
    return r if isinstance(r, list) else []


def _failed(results: Mapping[Query, QueryResult], q: Query) -> bool:
    return not isinstance(results.get(q), list)


def _errored(results: Mapping[Query, QueryResult], q: Query) -> bool:
    """Failed for a reason other than answering nothing (then each subject gets its own gap)."""
    r = results.get(q)
    return not isinstance(r, list) and not (isinstance(r, Gap) and r.code is GapCode.EMPTY)


def _last_samples(
    q: Query, keyed: list[tuple[K, VectorSample]], name: Callable[[K], str], now: float, gaps: list[Gap]
) -> dict[K, float]:
    """Last sample time per subject, validated: finite, positive, not far in the future."""
    out: dict[K, float] = {}
    high = now + FUTURE_SKEW_SECONDS
    for key, s in keyed:
        text = s["value"][1]
        v = in_range(text, 0.0, high, low_open=True)
        if v is None:  # the subject's name only for the gap
            gap = checked_value(q.value, name(key), text, 0.0, high, low_open=True)
            if isinstance(gap, Gap):
                gaps.append(gap)
            continue
        prev = out.get(key)
        out[key] = v if prev is None or v > prev else prev
    return out


def _is_fresh(
    q: Query,
    key: K,
    name: Callable[[K], str],
    seen: Mapping[K, float],
    now: float,
    staleness: float,
    failed: bool,
    gaps: list[Gap],
) -> bool:
    ts = seen.get(key)
    if ts is not None and now - ts <= staleness:
        return True
    subject = name(key)
    if ts is None:
        if not failed:  # an erroring freshness query is already one gap; don't repeat it per subject
            gaps.append(
                Gap(q.value, GapCode.NOT_FRESH, f"{subject}: no recent sample (series gone or never scraped)")
            )
        return False
    age = now - ts
    detail = f"{subject}: last sample {age:.0f}s old > staleness {staleness:g}s"
    gaps.append(Gap(q.value, GapCode.STALE, detail))
    return False


def _engine_name(key: EngineKey) -> str:
    return f"{key[0]}/{key[1]}"


# ---- GPUs -------------------------------------------------------------------------------------


def _gpu_key(q: Query, s: VectorSample, gaps: list[Gap]) -> GpuKey | None:
    m = s["metric"]
    # first_label(m, HOST_LABELS), unrolled: this runs three times per GPU and refresh.
    node = m.get("Hostname") or m.get("hostname") or m.get("node")
    uuid = m.get("UUID")
    if not node or not uuid:
        gaps.append(Gap(q.value, GapCode.MISSING_LABEL, f"series without Hostname/hostname or UUID: {m}"))
        return None
    return node, uuid, m.get("GPU_I_ID", "")


def _gpu_name(key: GpuKey) -> str:
    node, uuid, gi = key
    return f"{node}/{uuid}" + (f"/mig-{gi}" if gi else "")


def _pod_ref(key: tuple[str, str]) -> PodRef:
    return PodRef(namespace=key[0], name=key[1])


def _gpus(
    results: Mapping[Query, QueryResult],
    now: float,
    staleness: float,
    gaps: list[Gap],
    refs: dict[tuple[str, str], PodRef],
    previous: Mapping[tuple[str, str], PodRef],
) -> tuple[list[GpuSample], float | None]:
    labels: dict[GpuKey, Mapping[str, str]] = {}
    pods: dict[GpuKey, set[tuple[str, str]]] = defaultdict(set)
    tensor: dict[GpuKey, float | None] = {}
    fb: dict[GpuKey, float | None] = {}

    keyed: list[tuple[GpuKey, VectorSample]] = []
    for s in _rows(results, Query.GPU_FRESHNESS):
        k = _gpu_key(Query.GPU_FRESHNESS, s, gaps)
        if k is not None:
            labels.setdefault(k, s["metric"])
            keyed.append((k, s))
    seen = _last_samples(Query.GPU_FRESHNESS, keyed, _gpu_name, now, gaps)

    # Several series per GPU (one per pod with time-slicing): one value, the union of pods.
    for s in _rows(results, Query.TENSOR_ACTIVE):
        k = _gpu_key(Query.TENSOR_ACTIVE, s, gaps)
        if k is None:
            continue
        labels.setdefault(k, s["metric"])
        pod = s["metric"].get("pod", "")
        if pod:
            pods[k].add((s["metric"].get("namespace", ""), pod))
        v = checked_lazily(TENSOR, partial(_gpu_name, k), s["value"][1], 0.0, 1.0)
        if isinstance(v, Gap):
            if k not in tensor or tensor[k] is not None:
                gaps.append(v)
            tensor[k] = None  # one bad series spoils the GPU's value
        elif k not in tensor:
            tensor[k] = v
        elif (prev := tensor[k]) is not None:
            tensor[k] = max(prev, v)

    for s in _rows(results, Query.FB_FREE):
        k = _gpu_key(Query.FB_FREE, s, gaps)
        if k is None:
            continue
        labels.setdefault(k, s["metric"])
        if k in fb:
            gaps.append(Gap(Query.FB_FREE.value, GapCode.DUPLICATE, f"{_gpu_name(k)}: several series"))
            fb[k] = None
            continue
        v = checked_lazily(FB, partial(_gpu_name, k), s["value"][1], 0.0, MAX_FB_MIB)
        if isinstance(v, Gap):
            gaps.append(v)
        fb[k] = None if isinstance(v, Gap) else v

    def ref_of(key: tuple[str, str]) -> PodRef:
        ref = refs.get(key)
        if ref is None:
            ref = refs[key] = previous.get(key) or _pod_ref(key)
        return ref

    failed = _errored(results, Query.GPU_FRESHNESS)
    out: list[GpuSample] = []
    for k in sorted(labels):
        m = labels[k]
        ok = _is_fresh(Query.GPU_FRESHNESS, k, _gpu_name, seen, now, staleness, failed, gaps)
        out.append(
            GpuSample(
                node=k[0],
                uuid=k[1],
                model_name=m.get("modelName") or None,
                tensor_active=tensor.get(k) if ok else None,
                fb_free_mib=fb.get(k) if ok else None,
                mig_profile=m.get("GPU_I_PROFILE") or None,
                gpu_instance_id=k[2] or None,
                pods=[ref_of(ref) for ref in sorted(pods.get(k, ()))],
            )
        )
    return out, max(seen.values(), default=None)


# ---- engines ----------------------------------------------------------------------------------


def _engine_key(q: Query, s: VectorSample, gaps: list[Gap]) -> EngineKey | None:
    pod, ns = s["metric"].get("pod"), s["metric"].get("namespace")
    if not pod or not ns:
        detail = f"series without namespace/pod labels: {s['metric']}"
        gaps.append(Gap(q.value, GapCode.MISSING_LABEL, detail))
        return None
    return ns, pod


def _engine_values(
    results: Mapping[Query, QueryResult],
    q: Query,
    low: float,
    high: float,
    gaps: list[Gap],
    models: dict[EngineKey, str],
    *,
    low_open: bool = False,
) -> dict[EngineKey, float | None]:
    out: dict[EngineKey, float | None] = {}
    for s in _rows(results, q):
        k = _engine_key(q, s, gaps)
        if k is None:
            continue
        if s["metric"].get("model_name"):
            models.setdefault(k, s["metric"]["model_name"])
        if k in out:
            gaps.append(Gap(q.value, GapCode.DUPLICATE, f"{k[0]}/{k[1]}: several series"))
            out[k] = None
            continue
        v = checked_lazily(q.value, partial(_engine_name, k), s["value"][1], low, high, low_open=low_open)
        if isinstance(v, Gap):
            gaps.append(v)
        out[k] = None if isinstance(v, Gap) else v
    return out


def _engines(
    results: Mapping[Query, QueryResult], now: float, staleness: float, gaps: list[Gap]
) -> tuple[list[EngineSample], set[EngineKey], float | None]:
    keyed: list[tuple[EngineKey, VectorSample]] = []
    keys: set[EngineKey] = set()
    for s in _rows(results, Query.ENGINE_FRESHNESS):
        k = _engine_key(Query.ENGINE_FRESHNESS, s, gaps)
        if k is not None:
            keys.add(k)
            keyed.append((k, s))
    seen = _last_samples(Query.ENGINE_FRESHNESS, keyed, _engine_name, now, gaps)

    models: dict[EngineKey, str] = {}
    tpot = _engine_values(results, Query.TPOT, 0.0, MAX_TPOT_SECONDS, gaps, models, low_open=True)
    running = _engine_values(results, Query.RUNNING, 0.0, MAX_REQUESTS, gaps, models)
    running_min = _engine_values(results, Query.RUNNING_MIN, 0.0, MAX_REQUESTS, gaps, models)
    waiting = _engine_values(results, Query.WAITING, 0.0, MAX_REQUESTS, gaps, models)
    keys |= tpot.keys() | running.keys() | running_min.keys() | waiting.keys()

    failed = _errored(results, Query.ENGINE_FRESHNESS)
    out: list[EngineSample] = []
    fresh: set[EngineKey] = set()
    for k in sorted(keys):
        ok = _is_fresh(Query.ENGINE_FRESHNESS, k, _engine_name, seen, now, staleness, failed, gaps)
        if ok:
            fresh.add(k)
        out.append(
            EngineSample(
                namespace=k[0],
                pod=k[1],
                tpot_seconds=tpot.get(k) if ok else None,
                running=running.get(k) if ok else None,
                running_min=running_min.get(k) if ok else None,
                waiting=waiting.get(k) if ok else None,
                model_name=models.get(k),
            )
        )
    return out, fresh, max(seen.values(), default=None)


# ---- acceptance -------------------------------------------------------------------------------


def _acceptance(
    results: Mapping[Query, QueryResult], fresh: set[EngineKey], gaps: list[Gap]
) -> list[PodAcceptance]:
    """Per-pod counter increases; a pod whose counters are doubtful is dropped with a Gap."""
    if _failed(results, Query.SPEC_DRAFTS) or _failed(results, Query.SPEC_ACCEPTED_PER_POSITION):
        return []  # without both, no acceptance estimate; the query gap says why
    models: dict[EngineKey, str] = {}
    drafts = _engine_values(results, Query.SPEC_DRAFTS, 0.0, MAX_COUNTER, gaps, models)
    tokens = _engine_values(results, Query.SPEC_DRAFT_TOKENS, 0.0, MAX_COUNTER, gaps, models)

    q = Query.SPEC_ACCEPTED_PER_POSITION
    positions: dict[EngineKey, dict[int, float]] = defaultdict(dict)
    bad: set[EngineKey] = set()
    for s in _rows(results, q):
        k = _engine_key(q, s, gaps)
        if k is None:
            continue
        subject = f"{k[0]}/{k[1]}"
        pos_text = s["metric"].get("position", "")
        if not pos_text.isdigit():
            gaps.append(
                Gap(q.value, GapCode.MISSING_LABEL, f"{subject}: position label {pos_text!r} not an index")
            )
            bad.add(k)
            continue
        v = checked_value(q.value, f"{subject} position {pos_text}", s["value"][1], 0.0, MAX_COUNTER)
        if isinstance(v, Gap):
            gaps.append(v)
            bad.add(k)
            continue
        positions[k][int(pos_text)] = v

    out: list[PodAcceptance] = []
    for k in sorted(drafts.keys() | positions.keys()):
        subject = f"{k[0]}/{k[1]}"
        d = drafts.get(k)
        if k in bad or d is None or k not in fresh:
            if k not in fresh and d is not None and k not in bad:
                gaps.append(Gap(q.value, GapCode.NOT_FRESH, f"{subject}: engine telemetry not fresh"))
            elif k not in drafts:
                gaps.append(
                    Gap(Query.SPEC_DRAFTS.value, GapCode.INCONSISTENT, f"{subject}: positions, no drafts")
                )
            continue
        per_pos = positions.get(k, {})
        if not per_pos:
            if d > 0:
                gaps.append(
                    Gap(q.value, GapCode.INCONSISTENT, f"{subject}: drafts but no per-position counts")
                )
            continue
        k_len = max(per_pos) + 1
        if len(per_pos) != k_len:
            gaps.append(
                Gap(
                    q.value,
                    GapCode.INCONSISTENT,
                    f"{subject}: positions {sorted(per_pos)} not 0..{k_len - 1}",
                )
            )
            continue
        accepted = [per_pos[i] for i in range(k_len)]
        if any(a > d * (1 + ACCEPT_TOLERANCE) + 1 for a in accepted):
            gaps.append(
                Gap(q.value, GapCode.OUT_OF_RANGE, f"{subject}: accepted {max(accepted):g} > drafts {d:g}")
            )
            continue
        out.append(
            PodAcceptance(
                namespace=k[0],
                pod=k[1],
                drafts=d,
                draft_tokens=tokens.get(k),
                accepted_per_position=tuple(min(a, d) for a in accepted),
                model_name=models.get(k),
            )
        )
    return out
