"""A pod template that pins its own speculation: read what its pods will run, and refuse what the policy
does not allow.

A template pins speculation by setting the label `sovereignspec.io/speculative` or the annotation
`sovereignspec.io/speculative-config` itself. The decision never overrides it (podSetUpdates are
additive), so the record must say what the pods really run: the pinned config with its own k. A pinned
config whose k (its `num_speculative_tokens`, or the largest k of its per-batch-size schedule) exceeds
the policy's `kMax`, or that cannot be read, is refused: the workload is `Rejected` with a reason naming
the pod set, since its pods would otherwise run a draft budget the policy forbids.
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field

from sovereignspec.api.meta import ANNOTATION_SPECULATIVE_CONFIG, LABEL_SPECULATIVE
from sovereignspec.api.speculation_decision import Reason
from sovereignspec.api.speculation_policy import SpeculationPolicySpec
from sovereignspec.model.workload import PodSetInfo
from sovereignspec.policy.claims import MAX_MODEL_CHARS, MAX_VALUE_CHARS, shown
from sovereignspec.policy.record import ReasonType

MAX_PINNED_CHARS = 8192
"""Longest pinned speculative-config read (vLLM's are a few hundred characters)."""
MAX_SCHEDULE_ROWS = 64


@dataclass(frozen=True)
class Pin:
    """What one pod set's template pins: its k, its config ("" = plain), or why it is refused."""

    pod_set: str
    k: int = 0
    config: str = ""
    method: str | None = None
    draft_model: str | None = None
    schedule: list[list[int]] | None = None
    refused: Reason | None = None

    def describe(self) -> str:
        if self.k == 0:
            return "plain decoding"
        return f"{self.method or 'unknown method'}, k≤{self.k}"


def _invalid(ps: str, raw: str, why: str) -> Pin:
    return Pin(
        pod_set=ps,
        refused=Reason(
            type=ReasonType.PINNED_CONFIG_INVALID,
            message=f"pod set {ps}: {ANNOTATION_SPECULATIVE_CONFIG}={shown(raw)} in the template {why}; "
            "its pods cannot be admitted with it",
        ),
    )


def _k(value: object) -> int | None:
    return value if isinstance(value, int) and not isinstance(value, bool) and value >= 0 else None


def read_pin(ps: PodSetInfo, policy: SpeculationPolicySpec) -> Pin | None:
    """None when the template pins nothing."""
    raw = ps.annotations.get(ANNOTATION_SPECULATIVE_CONFIG)
    if raw is None:
        return Pin(pod_set=ps.name) if LABEL_SPECULATIVE in ps.labels else None
    if not raw.strip():
        return Pin(pod_set=ps.name)
    if len(raw) > MAX_PINNED_CHARS:
        return _invalid(ps.name, raw, f"is longer than {MAX_PINNED_CHARS} characters")
    try:
        cfg = json.loads(raw)
    except ValueError:
        return _invalid(ps.name, raw, "is not JSON")
    if not isinstance(cfg, dict):
        return _invalid(ps.name, raw, "is not a JSON object")
    num = _k(cfg.get("num_speculative_tokens"))
    if num is None:
        return _invalid(ps.name, raw, "needs num_speculative_tokens, a non-negative integer")
    schedule: list[list[int]] | None = None
    per_batch = cfg.get("num_speculative_tokens_per_batch_size")
    if per_batch is not None:
        rows = per_batch if isinstance(per_batch, list) and len(per_batch) <= MAX_SCHEDULE_ROWS else None
        parsed = [[_k(x) for x in r] for r in rows or () if isinstance(r, list) and len(r) == 3]
        if rows is None or len(parsed) != len(rows) or any(x is None for r in parsed for x in r):
            return _invalid(
                ps.name, raw, "has a num_speculative_tokens_per_batch_size that is not [[start, end, k], ...]"
            )
        schedule = [[int(x) for x in r if x is not None] for r in parsed]
    k = max([num, *(r[2] for r in schedule or ())])
    if k > policy.k_max:
        return Pin(
            pod_set=ps.name,
            k=k,
            refused=Reason(
                type=ReasonType.PINNED_SPECULATION_OVER_K_MAX,
                message=f"pod set {ps.name}: the template pins {ANNOTATION_SPECULATIVE_CONFIG} with k={k}, "
                f"above the policy's kMax {policy.k_max}; lower num_speculative_tokens to {policy.k_max} "
                "or less, or leave the config to SovereignSpec",
            ),
        )
    method, model = cfg.get("method"), cfg.get("model")
    return Pin(
        pod_set=ps.name,
        k=k,
        config=raw,
        method=method if isinstance(method, str) and len(method) <= MAX_VALUE_CHARS else None,
        draft_model=model if isinstance(model, str) and len(model) <= MAX_MODEL_CHARS else None,
        schedule=schedule if k > 0 else None,
    )


@dataclass(frozen=True)
class Pins:
    """The pins of a workload's GPU pod sets, by pod set."""

    by_set: Mapping[str, Pin] = field(default_factory=dict)

    @property
    def refused(self) -> Reason | None:
        """Why the workload cannot be admitted with what its templates pin (None: it can)."""
        return next((p.refused for p in self.by_set.values() if p.refused is not None), None)

    @property
    def largest(self) -> Pin | None:
        """The pin with the largest k (the record names it); None when nothing is pinned."""
        return max(self.by_set.values(), key=lambda p: p.k, default=None)


def read_pins(pod_sets: Sequence[PodSetInfo], policy: SpeculationPolicySpec) -> Pins:
    """What the GPU pod sets' templates pin."""
    gpu_sets = [ps for ps in pod_sets if ps.gpus_per_pod > 0]
    return Pins({ps.name: pin for ps in gpu_sets if (pin := read_pin(ps, policy)) is not None})
