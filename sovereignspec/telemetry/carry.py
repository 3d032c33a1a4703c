"""What one reading hands to the next, so that a refresh rebuilds only what changed.

A GPU or engine whose inputs (its values after validation and freshness, its labels and pods) are
those of the previous reading keeps the previous reading's sample object; a pod keeps its `PodRef`.
Equal inputs give an equal sample, so the reading's contents do not depend on the carry. Building the
pydantic samples is about a quarter of the assembly at 4,000 GPUs, and each one kept is also one fewer
set of objects for the collector to walk (docs/scale.md, session 10, telemetry refresh).
"""

from __future__ import annotations

from dataclasses import dataclass, field

from sovereignspec.model.telemetry import EngineSample, GpuSample, PodRef
from sovereignspec.telemetry.results import EngineKey, GpuKey, PodKey


@dataclass
class Carry:
    """The last reading's samples and pod references by key. Not thread-safe: the reader uses it under
    its lock. A sample is its own record of its inputs (the assembly compares them field by field), so
    keeping it costs no object beyond the sample: what survives a refresh is what the collector walks."""

    pod_refs: dict[PodKey, PodRef] = field(default_factory=dict)
    gpus: dict[GpuKey, GpuSample] = field(default_factory=dict)
    engines: dict[EngineKey, EngineSample] = field(default_factory=dict)
