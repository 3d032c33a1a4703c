"""Engine samples of one refresh: TPOT, running (now and fewest in the window) and waiting requests and
freshness joined per pod.

One pass per answer with the range tests inlined, as in `assemble_gpus`; gaps in the answers' order.
"""

from __future__ import annotations

from collections.abc import Mapping

from sovereignspec.model.telemetry import EngineSample
from sovereignspec.telemetry.carry import Carry
from sovereignspec.telemetry.gaps import Gap, GapCode
from sovereignspec.telemetry.parse import checked_value
from sovereignspec.telemetry.queries import Query
from sovereignspec.telemetry.results import (
    FUTURE_SKEW_SECONDS,
    EngineKey,
    QueryResult,
    engine_key,
    engine_name,
    errored,
    freshness_gap,
    keep_latest,
    number,
    rows,
)

MAX_TPOT_SECONDS = 3600.0
MAX_REQUESTS = 1e6
FRESHNESS = Query.ENGINE_FRESHNESS


def engines(
    results: Mapping[Query, QueryResult], now: float, staleness: float, gaps: list[Gap], carry: Carry
) -> tuple[list[EngineSample], set[EngineKey], float | None]:
    """The engines named by any engine answer, sorted by key; the fresh ones; the newest sample time.
    `carry` is read for the previous reading's samples and refilled with this one's."""
    keys: set[EngineKey] = set()
    seen: dict[EngineKey, float] = {}
    value_gaps: list[Gap] = []
    high = now + FUTURE_SKEW_SECONDS
    for s in rows(results, FRESHNESS):
        k = engine_key(FRESHNESS, s["metric"], gaps)
        if k is None:
            continue
        keys.add(k)
        keep_latest(seen, k, engine_name(k), s["value"][1], FRESHNESS, high, value_gaps)
    gaps.extend(value_gaps)  # label gaps first, then value gaps, as when these were two passes

    models: dict[EngineKey, str] = {}
    tpot = engine_values(results, Query.TPOT, 0.0, MAX_TPOT_SECONDS, gaps, models, low_open=True)
    running = engine_values(results, Query.RUNNING, 0.0, MAX_REQUESTS, gaps, models)
    running_min = engine_values(results, Query.RUNNING_MIN, 0.0, MAX_REQUESTS, gaps, models)
    waiting = engine_values(results, Query.WAITING, 0.0, MAX_REQUESTS, gaps, models)
    keys |= tpot.keys() | running.keys() | running_min.keys() | waiting.keys()

    failed = errored(results, FRESHNESS)
    previous = carry.engines
    kept: dict[EngineKey, EngineSample] = {}
    out: list[EngineSample] = []
    fresh: set[EngineKey] = set()
    for k in sorted(keys):
        ts = seen.get(k)
        ok = ts is not None and now - ts <= staleness
        if ok:
            fresh.add(k)
        else:
            stale = freshness_gap(FRESHNESS, engine_name(k), ts, now, staleness, failed)
            if stale is not None:
                gaps.append(stale)
        t, r, lo, w = (
            (tpot.get(k), running.get(k), running_min.get(k), waiting.get(k))
            if ok
            else (None, None, None, None)
        )
        model = models.get(k)
        sample = previous.get(k)
        if (
            sample is None
            or sample.tpot_seconds != t
            or sample.running != r
            or sample.running_min != lo
            or sample.waiting != w
            or sample.model_name != model
        ):
            sample = EngineSample(
                namespace=k[0],
                pod=k[1],
                tpot_seconds=t,
                running=r,
                running_min=lo,
                waiting=w,
                model_name=model,
            )
        kept[k] = sample
        out.append(sample)
    carry.engines = kept
    return out, fresh, max(seen.values(), default=None)


def engine_values(
    results: Mapping[Query, QueryResult],
    q: Query,
    low: float,
    high: float,
    gaps: list[Gap],
    models: dict[EngineKey, str],
    *,
    low_open: bool = False,
) -> dict[EngineKey, float | None]:
    """One value per engine (None with a gap when doubtful; a second series is a duplicate), and the
    first `model_name` label seen per engine into `models`."""
    out: dict[EngineKey, float | None] = {}
    for s in rows(results, q):
        m = s["metric"]
        k = engine_key(q, m, gaps)
        if k is None:
            continue
        model = m.get("model_name")
        if model and k not in models:
            models[k] = model
        if k in out:
            gaps.append(Gap(q.value, GapCode.DUPLICATE, f"{engine_name(k)}: several series"))
            out[k] = None
            continue
        text = s["value"][1]
        v = number(text)
        if (low < v or (v == low and not low_open)) and v <= high:
            out[k] = v
            continue
        checked = checked_value(q.value, engine_name(k), text, low, high, low_open=low_open)
        if isinstance(checked, Gap):
            gaps.append(checked)
            out[k] = None
        else:
            out[k] = checked
    return out
