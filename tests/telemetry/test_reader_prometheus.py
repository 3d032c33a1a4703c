"""The reader against a real Prometheus scraping the simulator: a known state, then each fault."""

from __future__ import annotations

import math
import time
from collections.abc import Callable

import pytest

from sovereignspec.api.telemetry_spec import QueryOverrides, TelemetrySpec
from sovereignspec.model.telemetry import TelemetrySnapshot
from sovereignspec.model.tpot_histogram import TPOT_BUCKETS
from sovereignspec.telemetry.annotations import identities_from_pods
from sovereignspec.telemetry.queries import Query, effective_queries
from sovereignspec.telemetry.reader import PrometheusReader
from sovereignspec.telemetry.sim.scenario import Override
from tests.support import set_overrides
from tests.telemetry.conftest import Stack, pod_dicts
from tests.telemetry.promproc import PrometheusProcess
from tests.telemetry.slowproxy import SlowProxy

pytestmark = [pytest.mark.prometheus, pytest.mark.timeout(180)]

SPEC = TelemetrySpec(window="15s", staleness_seconds=30, query_timeout_seconds=2.0, cache_ttl_seconds=5)
N_QUERIES = len(Query)


def reasons(snap: TelemetrySnapshot, source: str | None = None) -> list[str]:
    return [g.reason for g in snap.missing if source is None or g.source == source]


def assert_all_missing(snap: TelemetrySnapshot) -> None:
    """Telemetry missing: no value survives, and gaps say why."""
    assert snap.missing, "no reason given"
    assert all(g.tensor_active is None and g.fb_free_mib is None for g in snap.gpus)
    assert all(e.tpot_seconds is None and e.running is None for e in snap.engines)
    assert snap.acceptance == []


def test_reader_returns_the_simulator_state(stack: Stack) -> None:
    now = time.time
    reader = PrometheusReader(stack.prom.url, SPEC, clock=now)
    snap = reader.snapshot(identities_from_pods(pod_dicts(stack.scenario)))
    sim = stack.sim
    assert reader.reading().queries == N_QUERIES

    # GPUs: every device (MIG instances apart), values equal to the simulator's (no noise, steady).
    got = {(g.node, g.uuid, g.gpu_instance_id): g for g in snap.gpus}
    want = {(d.node, d.uuid, d.gi_id): d for d in sim.devices}
    assert got.keys() == want.keys()
    for key, d in want.items():
        g = got[key]
        assert g.tensor_active is not None and math.isclose(g.tensor_active, d.tensor_active, abs_tol=1e-9), (
            key
        )
        assert g.fb_free_mib is not None and g.fb_free_mib > 0
        assert g.model_name == d.product.replace("-", " ")
        assert sorted((p.namespace, p.name) for p in g.pods) == sorted(d.pods)
        assert g.mig_profile == d.mig_profile
    # hostname (lower-case) label read too; time-sliced GPU lists both of its pods.
    l40 = next(g for g in snap.gpus if g.node == "gpu-b")
    assert [p.name for p in l40.pods] == ["batch-0", "batch-1"]
    assert l40.tensor_active is not None and l40.tensor_active > 0.5  # base 0.5 + two engines

    # Engines: running as exported (steady here, so the window's fewest too); TPOT quantile inside the
    # bucket holding the engine's TPOT.
    engines = {(e.namespace, e.pod): e for e in snap.engines}
    assert engines.keys() == set(sim.engines)
    for key, e in sim.engines.items():
        got_e = engines[key]
        assert got_e.running == got_e.running_min == float(round(e.batch))
        assert got_e.model_name == "meta-llama/Llama-3.1-8B-Instruct"
        if e.spec.request_rate == 0:
            assert got_e.tpot_seconds is None  # no request finished: NaN quantile, not 0
            assert any("idle-0" in r and r.startswith("nan") for r in reasons(snap, "tpot"))
            continue
        hi = next(b for b in TPOT_BUCKETS if b >= e.tpot)
        lo = max([0.0, *(b for b in TPOT_BUCKETS if b < e.tpot)])
        assert got_e.tpot_seconds is not None and lo < got_e.tpot_seconds <= hi, (
            key,
            e.tpot,
            got_e.tpot_seconds,
        )

    # Acceptance: chat-0 (k=4) and chat-1 (k=2) share one identity: joined on their common 2 positions.
    assert len(snap.acceptance) == 1
    a = snap.acceptance[0]
    assert (a.target_model, a.draft_model, a.method) == (
        "meta-llama/Llama-3.1-8B-Instruct",
        "eagle3-llama-8b",
        "eagle3",
    )
    assert len(a.accepted_per_position) == 2
    assert a.drafts > 100
    p1, p2 = (x / a.drafts for x in a.accepted_per_position)
    assert p1 == pytest.approx(0.85, abs=0.04)
    assert p2 == pytest.approx(0.70, abs=0.04)
    # Nothing else is missing than the idle pod's TPOT.
    assert [g.source for g in snap.missing] == ["tpot"], snap.missing


def test_peak_mean_reads_a_steady_engine_at_its_tpot(stack: Stack) -> None:
    """`PeakMean` reads the histogram's _sum over _count: a steady engine at its TPOT (the per-request
    jitter averages out), where `Quantile` only lands somewhere in the bucket that holds it."""
    spec = SPEC.model_copy(update={"tpot_statistic": "PeakMean"})
    busy = {key: e for key, e in stack.sim.engines.items() if e.spec.request_rate > 0}
    assert busy
    # The subquery's steps are aligned to its resolution: wait for one with a rate behind it. Its earliest
    # span reaches back the window plus a span: until the scrapes cover that, a span holds a request or two
    # and the highest of them reads one request's jitter (0.08), not the engine's TPOT.
    reach = int(spec.window_seconds + spec.tpot_peak_seconds)
    stack.prom.wait_for(
        f"count_over_time(vllm:request_time_per_output_token_seconds_count[{reach}s]) >= {reach - 2}",
        min_series=len(busy),
        timeout=reach + 30,
    )
    stack.prom.wait_for(effective_queries(spec)[Query.TPOT], min_series=len(busy))
    snap = PrometheusReader(stack.prom.url, spec).snapshot(identities_from_pods(pod_dicts(stack.scenario)))
    engines = {(e.namespace, e.pod): e for e in snap.engines}
    for key, e in busy.items():
        assert engines[key].tpot_seconds == pytest.approx(e.tpot, rel=0.1), key
    assert all(engines[key].tpot_seconds is None for key in stack.sim.engines.keys() - busy.keys())


def test_queries_per_refresh_are_fixed_and_cached(stack: Stack) -> None:
    t = [1000.0]
    reader = PrometheusReader(stack.prom.url, SPEC, clock=lambda: time.time() + t[0] - 1000.0)
    sent = reader.metrics.queries
    total = lambda: sum(sent.labels(query=q.value)._value.get() for q in Query)  # noqa: E731
    reader.reading()
    assert total() == N_QUERIES
    reader.snapshot({})
    reader.reading()
    assert total() == N_QUERIES, "served from the cache within the TTL"
    t[0] += SPEC.cache_ttl_seconds + 0.1
    reader.reading()
    assert total() == 2 * N_QUERIES


def test_prometheus_stopped(empty_prometheus: PrometheusProcess) -> None:
    reader = PrometheusReader(empty_prometheus.url, SPEC.model_copy(update={"cache_ttl_seconds": 0}))
    empty = reader.reading()
    assert {g.code.value for g in empty.gaps} == {"empty"}, "an empty Prometheus: every query empty"
    empty_prometheus.stop()
    started = time.monotonic()
    snap = reader.snapshot({})
    assert time.monotonic() - started <= 2 * (SPEC.query_timeout_seconds + 0.5)
    assert_all_missing(snap)
    assert {g.source for g in snap.missing} == {q.value for q in Query}
    assert all(r.startswith("connection: cannot reach") for r in reasons(snap)), reasons(snap)
    errors = reader.metrics.errors
    assert errors.labels(query="tensor_active", reason="empty")._value.get() == 1


def test_prometheus_slower_than_the_timeout(stack: Stack) -> None:
    proxy = SlowProxy(stack.prom.port, delay=SPEC.query_timeout_seconds + 3).start()
    try:
        reader = PrometheusReader(proxy.url, SPEC)
        started = time.monotonic()
        snap = reader.snapshot(identities_from_pods(pod_dicts(stack.scenario)))
        elapsed = time.monotonic() - started
    finally:
        proxy.stop()
    assert elapsed <= SPEC.query_timeout_seconds + 0.5, elapsed
    assert_all_missing(snap)
    assert snap.gpus == [] and snap.engines == []
    assert {g.source for g in snap.missing} == {q.value for q in Query}
    assert all(r.startswith("timeout") for r in reasons(snap)), reasons(snap)
    assert reader.metrics.errors.labels(query="tpot", reason="timeout")._value.get() == 1


def test_slow_proxy_within_the_timeout_still_reads(stack: Stack) -> None:
    """The proxy itself is sound: a delay under the timeout gives data (so the test above can fail)."""
    proxy = SlowProxy(stack.prom.port, delay=0.3).start()
    try:
        snap = PrometheusReader(proxy.url, SPEC).snapshot({})
    finally:
        proxy.stop()
    assert snap.gpus and all(g.tensor_active is not None for g in snap.gpus)


def test_empty_results(stack: Stack) -> None:
    """Queries that select nothing (e.g. a renamed metric): each is missing with a reason, nothing is 0."""
    absent = "absent_metric_for_test"
    spec = SPEC.model_copy(
        update={"queries": QueryOverrides(**{q.value: f"{absent}_{q.value}" for q in Query})}
    )
    reader = PrometheusReader(stack.prom.url, spec)
    assert all(absent in promql for promql in reader.queries.values())
    snap = reader.snapshot({})
    assert snap.gpus == [] and snap.engines == [] and snap.acceptance == []
    sources = {g.source for g in snap.missing}
    # No speculating engine is normal (priors apply); all the others are missing telemetry.
    assert sources == {q.value for q in Query} - {
        "spec_drafts",
        "spec_draft_tokens",
        "spec_accepted_per_position",
    }
    assert all(r.startswith("empty: query returned no series") for r in reasons(snap))


def test_nan_values(make_stack: Callable[..., Stack]) -> None:
    s = make_stack()
    victim = next(d for d in s.sim.devices if d.node == "gpu-a")
    set_overrides(
        s.sim,
        [
            Override(metric="DCGM_FI_PROF_PIPE_TENSOR_ACTIVE", match={"UUID": victim.uuid}, value=math.nan),
            Override(metric="DCGM_FI_DEV_FB_FREE", match={"UUID": victim.uuid}, value=math.inf),
            Override(metric="vllm:num_requests_running", match={"pod": "batch-0"}, value=-3.0),
        ],
    )
    s.wait_scraped()
    reader = PrometheusReader(s.prom.url, SPEC)
    started = time.monotonic()
    snap = reader.snapshot(identities_from_pods(pod_dicts(s.scenario)))
    assert time.monotonic() - started <= SPEC.query_timeout_seconds + 0.5
    gpu = next(g for g in snap.gpus if g.uuid == victim.uuid)
    assert gpu.tensor_active is None and gpu.fb_free_mib is None
    assert any(victim.uuid in r and r.startswith("nan") for r in reasons(snap, "tensor_active"))
    assert any(victim.uuid in r and r.startswith("inf") for r in reasons(snap, "fb_free"))
    batch0 = next(e for e in snap.engines if e.pod == "batch-0")
    assert batch0.running is None
    assert any("batch-0" in r and r.startswith("negative") for r in reasons(snap, "running"))
    # The other GPUs and engines are unaffected.
    others = [g for g in snap.gpus if g.uuid != victim.uuid]
    assert others and all(g.tensor_active is not None for g in others)
    assert reader.metrics.errors.labels(query="tensor_active", reason="nan")._value.get() == 1


def test_stale_samples_by_clock(stack: Stack) -> None:
    """Samples older than the staleness bound on the reader's clock count as missing."""
    reader = PrometheusReader(stack.prom.url, SPEC, clock=lambda: time.time() + SPEC.staleness_seconds + 60)
    snap = reader.snapshot(identities_from_pods(pod_dicts(stack.scenario)))
    assert snap.gpus and snap.engines
    assert_all_missing(snap)
    assert all(r.startswith("stale: ") for r in reasons(snap, "gpu_freshness"))
    assert len(reasons(snap, "gpu_freshness")) == len(snap.gpus)
    assert len(reasons(snap, "engine_freshness")) == len(snap.engines)
    assert reader.metrics.age._value.get() > SPEC.staleness_seconds


def test_stale_samples_when_the_exporter_stops(make_stack: Callable[..., Stack]) -> None:
    """A smoothed value outlives its source by a window: the freshness query catches it."""
    s = make_stack()
    s.wait_scraped()
    reader = PrometheusReader(s.prom.url, SPEC.model_copy(update={"cache_ttl_seconds": 0}))
    assert all(g.tensor_active is not None for g in reader.snapshot({}).gpus)
    s.server.stop()
    s.prom.wait_for("up == 0")
    time.sleep(2 * s.prom.scrape_interval)
    # avg_over_time still answers for the window ...
    assert s.prom.query("avg_over_time(DCGM_FI_PROF_PIPE_TENSOR_ACTIVE[15s])")
    snap = reader.snapshot({})
    # ... but the GPUs and engines are missing, each with a reason.
    assert_all_missing(snap)
    fresh_gaps = reasons(snap, "gpu_freshness")
    for g in snap.gpus:
        assert any(r.startswith("not_fresh: ") and g.uuid in r for r in fresh_gaps), (g.uuid, fresh_gaps)
    for e in snap.engines:
        assert any(r.startswith("not_fresh: ") and e.pod in r for r in reasons(snap, "engine_freshness"))
