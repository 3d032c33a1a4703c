"""Pause Python's cyclic garbage collector around a burst of short-lived allocations.

A refresh at 4,000 GPUs decodes ~18,000 series into ~60,000 containers that all die when the reading is
assembled, a few tens of milliseconds later. With the collector running, they pass through its young
generations and set off full collections of the whole heap, and a larger heap makes every full
collection longer (figures: docs/scale.md, "Session 10, telemetry refresh"). Paused, they are freed by
reference counting and never scanned; what survives (the reading) is scanned once, later. Nothing else
changes: the collector only reclaims cycles, and a few tens of milliseconds of cycles wait.
"""

from __future__ import annotations

import gc
from collections.abc import Iterator
from contextlib import contextmanager


@contextmanager
def collector_paused() -> Iterator[None]:
    """No cyclic collection in the block (process-wide: keep the block short and CPU-bound, never
    around I/O). Left as it was found: a collector already disabled by someone else stays disabled."""
    was_enabled = gc.isenabled()
    gc.disable()
    try:
        yield
    finally:
        if was_enabled:
            gc.enable()
