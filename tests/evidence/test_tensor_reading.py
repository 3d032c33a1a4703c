"""The evidence simulator reads a GPU's tensor-active as the operator's query does: each pod's series
averaged over its own life in the window, the largest of them; not the window's mean over the GPU (the
mean until session 36)."""

from __future__ import annotations

import numpy as np
import pytest

from sovereignspec.api.telemetry_spec import TelemetrySpec
from sovereignspec.evidence import sovereign
from sovereignspec.evidence.pools import standard_pool
from sovereignspec.evidence.sim import simulate
from sovereignspec.evidence.suite import make_policy
from sovereignspec.evidence.tensor_reading import tensor_as_read

WINDOW = slice(30, 150)


def test_a_pod_that_started_inside_the_window_is_read_over_its_own_life() -> None:
    load = np.where(np.arange(150) >= 120, 0.8, 0.0)  # idle until the pod starts at tick 120
    assert load[WINDOW].mean() == pytest.approx(0.2)
    assert tensor_as_read(load, WINDOW, np.array([120])) == pytest.approx(0.8)


def test_a_gpu_without_pods_reads_the_window_mean() -> None:
    load = np.linspace(0.0, 1.0, 150)
    assert tensor_as_read(load, WINDOW, np.array([], dtype=np.int64)) == pytest.approx(load[WINDOW].mean())


def test_a_time_sliced_gpu_reads_the_largest_of_its_pods_series() -> None:
    """Two pods on one GPU, the same value on both series: the old one's mean over the whole window, the
    young one's since it started. A load that grew with the young pod reads as the young pod's mean; one
    that fell after it started reads as the old pod's mean over the window."""
    grew = np.where(np.arange(150) >= 100, 0.9, 0.3)
    fell = np.where(np.arange(150) >= 100, 0.1, 0.6)
    pods = np.array([0, 100])
    assert tensor_as_read(grew, WINDOW, pods) == pytest.approx(0.9)
    assert tensor_as_read(fell, WINDOW, pods) == pytest.approx(fell[WINDOW].mean())


def test_the_simulator_reads_a_new_engines_gpu_since_the_engine_started() -> None:
    """On the mixed pool every subject arrives after the first refreshes: a reading of its GPU taken less
    than a window after it started averages only the ticks since its pod started, where the GPU's mean
    over the window (the reading until session 36) is diluted by the ticks before."""
    sc = standard_pool("mixed").scenario(("mps", 2e-3))
    sim = simulate(sc, make_policy("always-on"), 1)
    window = round(TelemetrySpec().window_seconds / sc.dt_s)
    diluted = 0
    for e, eng in enumerate(sc.engines):
        if not eng.subject:
            continue
        j, start = int(sim.gpu_of[e]), int(sim.started[-1, e])
        tick = next(t for t in range(start, sim.tensor.shape[0]) if sovereign.data_tick(sim, t) >= start + 5)
        ref = sovereign.data_tick(sim, tick)
        on_gpu = sim.placement[ref] == j
        if sim.started[ref][on_gpu].max() > start:
            continue  # a younger pod's series is the shorter one
        got = sovereign.observe(sim, tick, TelemetrySpec()).gpus[j].tensor_active
        own = float(sim.tensor[start : ref + 1, j].mean())
        whole = float(sim.tensor[max(0, ref - window + 1) : ref + 1, j].mean())
        assert got == pytest.approx(own, abs=4 * sovereign.GPU_NOISE), eng.name
        diluted += abs(own - whole) > 5 * sovereign.GPU_NOISE
    assert diluted >= 2  # the old reading would have failed here


def test_a_gpu_sample_names_the_pods_its_data_saw() -> None:
    """dcgm-exporter labels a GPU's series with a pod from the scrape after the pod starts: a reading of
    data from before a pod started names no such pod on any GPU (and counts no framebuffer for it), while
    the API server already shows the pod bound to its node."""
    sc = standard_pool("mixed").scenario(("mps", 2e-3))
    sim = simulate(sc, make_policy("always-on"), 1)
    checked = 0
    for e, eng in enumerate(sc.engines):
        start = int(sim.started[-1, e])
        if not eng.subject or sovereign.data_tick(sim, start + 1) >= start:
            continue
        tick = start + 1  # placed, not yet in the data the operator holds
        j = int(sim.gpu_of[e])
        snap = sovereign.observe(sim, tick, TelemetrySpec())
        named = {(p.namespace, p.name) for g in snap.gpus for p in g.pods}
        assert (eng.tenant, eng.name) not in named
        later = next(t for t in range(start, sim.tensor.shape[0]) if sovereign.data_tick(sim, t) >= start)
        seen = sovereign.observe(sim, later, TelemetrySpec()).gpus[j]
        assert (eng.tenant, eng.name) in {(p.namespace, p.name) for p in seen.pods}
        assert seen.fb_free_mib is not None and snap.gpus[j].fb_free_mib is not None
        assert seen.fb_free_mib < snap.gpus[j].fb_free_mib
        checked += 1
    assert checked >= 3
