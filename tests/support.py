"""Helpers only tests use: reference forms of what the product computes another way, and test-side
setters. They live here, not in the product, so that product code holds only what it runs."""

from __future__ import annotations

from collections.abc import Iterable, Sequence

import numpy as np
import numpy.typing as npt

from sovereignspec.api import meta
from sovereignspec.model.workload import CheckEntry, PodSetAssignment, PodSetInfo, WorkloadInfo
from sovereignspec.policy.budget import Evaluation, Groups, evaluate_groups, tables
from sovereignspec.policy.conditions import neighbour_table
from sovereignspec.policy.node_state import Neighbours, NodeInput
from sovereignspec.telemetry.sim.scenario import Override
from sovereignspec.telemetry.sim.simulator import Simulator

FloatArray = npt.NDArray[np.float64]


def evaluate_nodes(
    nodes: Sequence[NodeInput],
    expected_length: FloatArray,
    range_ends: Sequence[int],
    expected_batch: int,
    expected_range: int,
    min_gain: float,
    safety: float,
    arriving: bool = True,
) -> Evaluation:
    """k* and the figures at the expected batch for `nodes`, in one call (the product goes through
    cached groups and rows instead); `arriving=False`: the workload already runs there."""
    groups, gid = Groups.of_nodes(nodes)
    return evaluate_groups(
        tables(groups, expected_length, range_ends, expected_batch, min_gain),
        gid,
        neighbour_table([nd.neighbours for nd in nodes], safety),
        expected_range,
        arriving,
    )


def neighbour_bounds(
    neighbours: Sequence[Neighbours], safety: float, memory_share: FloatArray | None = None
) -> FloatArray:
    """The largest Δu each node's neighbours tolerate ([N, R+1]; one column, no bandwidth taken, when
    `memory_share` is None): what `evaluate_groups` reads from `neighbour_table(...).bounds`."""
    share = np.zeros((len(neighbours), 1)) if memory_share is None else memory_share
    return neighbour_table(neighbours, safety).bounds(share)


def schedule_errors(schedule: Sequence[Sequence[int]], num_speculative_tokens: int) -> list[str]:
    """vLLM's rules for num_speculative_tokens_per_batch_size; empty list when valid."""
    errs = []
    if not schedule:
        return ["empty schedule"]
    if schedule[0][0] != 1:
        errs.append("first range must start at 1")
    for i, row in enumerate(schedule):
        if len(row) != 3:
            errs.append(f"row {i} is not [start, end, k]")
            continue
        start, end, k = row
        if end < start:
            errs.append(f"row {i}: end < start")
        if not 0 <= k <= num_speculative_tokens:
            errs.append(f"row {i}: k={k} outside [0, {num_speculative_tokens}]")
        if i and start <= schedule[i - 1][1]:
            errs.append(f"row {i} overlaps the previous range")
    return errs


def per_position_acceptance(accepted_per_position: list[float], drafts: float) -> FloatArray:
    """Observed p_i = accepted_per_pos[i-1] / drafts, clipped to [0, 1] and made non-increasing
    (acceptance stops at the first rejection)."""
    if drafts <= 0:
        raise ValueError("drafts must be > 0 to form acceptance rates")
    p = np.clip(np.asarray(accepted_per_position, dtype=np.float64) / drafts, 0.0, 1.0)
    return np.minimum.accumulate(p) if p.size else p


def set_overrides(sim: Simulator, overrides: Iterable[Override]) -> None:
    """Replace the simulator's metric overrides (what a scenario file's `overrides` sets)."""
    with sim.lock:
        sim.overrides = list(overrides)


def eagle3_workload(slo_ms: int, expected_batch: int, gpus_per_pod: int = 1) -> WorkloadInfo:
    """`bank-a/chat`: one interactive pod of llama-3.1-8b with an EAGLE-3 draft, quota reserved, our
    check `ss` Pending (what the drift and neighbour unit tests decide for)."""
    ann = {
        meta.ANNOTATION_CLASS: "interactive",
        meta.ANNOTATION_TARGET_MODEL: "llama-3.1-8b",
        meta.ANNOTATION_DRAFT_MODEL: "eagle3-llama-3.1-8b",
        meta.ANNOTATION_SPEC_METHOD: "eagle3",
        meta.ANNOTATION_TPOT_SLO_MS: str(slo_ms),
        meta.ANNOTATION_EXPECTED_BATCH: str(expected_batch),
    }
    return WorkloadInfo(
        namespace="bank-a",
        name="chat",
        generation=1,
        queue_name="lq",
        quota_reserved=True,
        pod_sets=[PodSetInfo(name="main", count=1, gpus_per_pod=gpus_per_pod, annotations=ann)],
        assignments=[PodSetAssignment(name="main", flavors={"nvidia.com/gpu": "gpu"}, count=1)],
        checks=[CheckEntry(name="ss", state="Pending")],
    )
