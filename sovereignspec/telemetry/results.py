"""One refresh's query results, and the keys that name a GPU, an engine or a pod in them."""

from __future__ import annotations

import math
from collections.abc import Mapping
from typing import TypeVar

from sovereignspec.telemetry.gaps import Gap, GapCode
from sovereignspec.telemetry.parse import VectorSample, checked_value
from sovereignspec.telemetry.queries import Query

QueryResult = list[VectorSample] | Gap
GpuKey = tuple[str, str, str]  # node, UUID, MIG GPU instance id ("" for a whole GPU)
EngineKey = tuple[str, str]  # namespace, pod
PodKey = tuple[str, str]  # namespace, pod

NAN = math.nan
# A last-sample time this far ahead of the reader's clock is out of range (clock skew beyond reason).
FUTURE_SKEW_SECONDS = 300.0

_K = TypeVar("_K")


def rows(results: Mapping[Query, QueryResult], q: Query) -> list[VectorSample]:
    r = results.get(q)
    return r if isinstance(r, list) else []


def failed(results: Mapping[Query, QueryResult], q: Query) -> bool:
    return not isinstance(results.get(q), list)


def errored(results: Mapping[Query, QueryResult], q: Query) -> bool:
    """Failed for a reason other than answering nothing (then each subject gets its own gap)."""
    r = results.get(q)
    return not isinstance(r, list) and not (isinstance(r, Gap) and r.code is GapCode.EMPTY)


def number(text: str) -> float:
    """The sample's value, NaN when it is not a number: every range test then fails, and the slow path
    (`parse.checked_value`) says why. Inlined range tests on it replace `parse.in_range` in the loops
    over every series of a refresh."""
    try:
        return float(text)
    except (TypeError, ValueError):
        return NAN


def gpu_name(key: GpuKey) -> str:
    node, uuid, gi = key
    return f"{node}/{uuid}" + (f"/mig-{gi}" if gi else "")


def engine_name(key: EngineKey) -> str:
    return f"{key[0]}/{key[1]}"


def engine_key(q: Query, m: Mapping[str, str], gaps: list[Gap]) -> EngineKey | None:
    """The engine a series names (namespace, pod), or None with a gap."""
    pod, ns = m.get("pod"), m.get("namespace")
    if not pod or not ns:
        gaps.append(no_engine_labels(q, m))
        return None
    return ns, pod


def keep_latest(
    seen: dict[_K, float], k: _K, name: str, text: str, q: Query, high: float, value_gaps: list[Gap]
) -> None:
    """A freshness series' last-sample time into `seen` when finite, positive and not later than
    `high` (the newest wins), else a value gap naming the subject."""
    v = number(text)
    if 0.0 < v <= high:
        prev = seen.get(k)
        if prev is None or v > prev:
            seen[k] = v
        return
    gap = checked_value(q.value, name, text, 0.0, high, low_open=True)
    if isinstance(gap, Gap):
        value_gaps.append(gap)


def no_gpu_labels(q: Query, metric: Mapping[str, str]) -> Gap:
    return Gap(q.value, GapCode.MISSING_LABEL, f"series without Hostname/hostname or UUID: {metric}")


def no_engine_labels(q: Query, metric: Mapping[str, str]) -> Gap:
    return Gap(q.value, GapCode.MISSING_LABEL, f"series without namespace/pod labels: {metric}")


def freshness_gap(
    q: Query, subject: str, ts: float | None, now: float, staleness: float, failed: bool
) -> Gap | None:
    """Why a subject whose last sample is `ts` (None: absent) is not fresh; None when an erroring
    freshness query already is the one gap (not repeated per subject)."""
    if ts is None:
        if failed:
            return None
        return Gap(q.value, GapCode.NOT_FRESH, f"{subject}: no recent sample (series gone or never scraped)")
    detail = f"{subject}: last sample {now - ts:.0f}s old > staleness {staleness:g}s"
    return Gap(q.value, GapCode.STALE, detail)
