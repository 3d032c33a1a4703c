"""How often Python's cyclic garbage collector runs in the operator, and what it costs.

CPython starts a young collection every 700 net container allocations. The operator decodes a watch
event's body into a few hundred containers, most of which die by reference counting within
milliseconds. At 700, a young collection ran every few events, promoted whatever was alive at that
instant, and those promotions set off full collections of a heap of indexes, bodies and snapshots
(100-280 ms each at 500 nodes and 200 workloads, more as the heap grows). A larger young threshold lets
short-lived objects die before any collection sees them. Collections of every generation still run, so
cycles are still reclaimed, only less often. Figures: docs/scale.md ("Session 12").

The objects alive once the operator is imported (modules, classes, pydantic and kopf machinery) live as
long as the process. `gc.freeze()` moves them out of every later collection's scan; reference counting
still frees any of them that is released.
"""

from __future__ import annotations

import gc
import time
from typing import Any

from prometheus_client import REGISTRY, Counter

GC_SECONDS = Counter(
    "sovereignspec_gc_seconds_total",
    "CPU seconds spent in Python's cyclic garbage collector, by generation (0, 1, 2 = full).",
    ["generation"],
    registry=REGISTRY,
)
GC_COLLECTIONS = Counter(
    "sovereignspec_gc_collections_total",
    "Collections run by Python's cyclic garbage collector, by generation (0, 1, 2 = full).",
    ["generation"],
    registry=REGISTRY,
)
_BY_GENERATION = [GC_SECONDS.labels(generation=str(g)) for g in range(3)]
_COUNT_BY_GENERATION = [GC_COLLECTIONS.labels(generation=str(g)) for g in range(3)]


class _Timer:
    """A `gc.callbacks` entry that counts each collection and charges its CPU to its generation."""

    def __init__(self) -> None:
        self._started = 0.0

    def __call__(self, phase: str, info: dict[str, Any]) -> None:
        if phase == "start":
            self._started = time.thread_time()
        else:
            generation = min(int(info["generation"]), 2)
            _BY_GENERATION[generation].inc(time.thread_time() - self._started)
            _COUNT_BY_GENERATION[generation].inc()


def timed() -> None:
    """Count the collector's runs and CPU in `sovereignspec_gc_collections_total` and
    `sovereignspec_gc_seconds_total` (once per process)."""
    if not any(isinstance(cb, _Timer) for cb in gc.callbacks):
        gc.callbacks.append(_Timer())


def tune_collector(young_threshold: int) -> None:
    """Set the young generation's threshold (0 leaves CPython's pace, and freezes nothing) and freeze
    what is alive now. Call once, after the imports and before the operator's work starts."""
    timed()
    if young_threshold <= 0:
        return
    _, older, oldest = gc.get_threshold()
    gc.set_threshold(young_threshold, older, oldest)
    gc.collect()
    gc.freeze()
