"""The operator's garbage-collector pace (operator/collector.py): what it sets, and that its CPU is
counted. Process-wide state: every test puts the collector back as it found it."""

from __future__ import annotations

import gc
from collections.abc import Iterator

import pytest
from prometheus_client import REGISTRY
from pydantic import ValidationError

from sovereignspec.operator import collector
from sovereignspec.operator.settings import OperatorSettings


@pytest.fixture
def restored() -> Iterator[None]:
    threshold, callbacks = gc.get_threshold(), list(gc.callbacks)
    try:
        yield
    finally:
        gc.unfreeze()
        gc.set_threshold(*threshold)
        gc.callbacks[:] = callbacks


def _spent(generation: int) -> float:
    return REGISTRY.get_sample_value("sovereignspec_gc_seconds_total", {"generation": str(generation)}) or 0.0


def _runs(generation: int) -> float:
    runs = REGISTRY.get_sample_value("sovereignspec_gc_collections_total", {"generation": str(generation)})
    return runs or 0.0


def test_threshold_set_and_alive_objects_frozen(restored: None) -> None:
    gc.unfreeze()
    _, older, oldest = gc.get_threshold()
    collector.tune_collector(25_000)
    assert gc.get_threshold() == (25_000, older, oldest)
    assert gc.get_freeze_count() > 1_000  # this test process's imports, at least


def test_zero_keeps_cpython_pace(restored: None) -> None:
    gc.unfreeze()
    before = gc.get_threshold()
    collector.tune_collector(0)
    assert gc.get_threshold() == before
    assert gc.get_freeze_count() == 0


def test_collections_are_timed_once_per_process(restored: None) -> None:
    collector.timed()
    collector.timed()
    assert sum(isinstance(cb, collector._Timer) for cb in gc.callbacks) == 1
    before, runs = _spent(2), _runs(2)
    garbage: list[object] = []
    for _ in range(20_000):  # cycles, so that the full collection has something to do
        a: list[object] = []
        a.append(a)
        garbage.append(a)
    del garbage, a
    assert gc.collect() >= 20_000
    assert _spent(2) > before
    assert _runs(2) >= runs + 1


def test_setting_from_environment(monkeypatch: pytest.MonkeyPatch) -> None:
    assert OperatorSettings().gc_young_threshold == 10_000
    monkeypatch.setenv("SOVEREIGNSPEC_GC_YOUNG_THRESHOLD", "0")
    assert OperatorSettings().gc_young_threshold == 0
    monkeypatch.setenv("SOVEREIGNSPEC_GC_YOUNG_THRESHOLD", "-1")
    with pytest.raises(ValidationError, match="greater than or equal to 0"):
        OperatorSettings()
