"""The workload's own claims (pod-template annotations), validated and clamped by its tenant's limits.

A malformed value never fails the decision: it turns speculation off with a reason naming the key
and the value (DESIGN.md §4). Claims are clamped (§3 trust boundaries): an SLO below the tenant's
`minTpotSloMs` counts as that minimum; a class the tenant may not claim counts as `batch` (or, if
batch is not allowed either, the first allowed class in alphabetical order).
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Literal

from sovereignspec.api.meta import (
    ANNOTATION_CLASS,
    ANNOTATION_DRAFT_MODEL,
    ANNOTATION_EXPECTED_BATCH,
    ANNOTATION_SPEC_METHOD,
    ANNOTATION_TARGET_MODEL,
    ANNOTATION_TPOT_SLO_MS,
)
from sovereignspec.api.speculation_decision import Reason
from sovereignspec.api.speculation_policy import METHODS, SpeculationPolicySpec
from sovereignspec.policy.sovereignty import TenantRules

NEEDS_DRAFT_MODEL = frozenset({"eagle", "eagle3", "draft_model", "medusa", "mlp_speculator"})

WorkloadClass = Literal["interactive", "batch"]


@dataclass(frozen=True)
class Claims:
    workload_class: WorkloadClass
    target_model: str | None
    draft_model: str | None
    method: str | None
    tpot_slo_ms: float
    expected_batch: int
    malformed: tuple[Reason, ...] = ()
    notes: tuple[Reason, ...] = field(default=())


def clamp_class(claimed: WorkloadClass, rules: TenantRules) -> WorkloadClass:
    if rules.classes is None or claimed in rules.classes:
        return claimed
    return "batch" if "batch" in rules.classes else sorted(rules.classes)[0]  # type: ignore[return-value]


def clamp_slo(slo_ms: float, rules: TenantRules) -> float:
    return max(slo_ms, rules.min_tpot_slo_ms) if rules.min_tpot_slo_ms is not None else slo_ms


def parse_slo_ms(raw: str | None, default_ms: float, rules: TenantRules) -> tuple[float, bool]:
    """(clamped SLO in ms, well-formed?) from an annotation value; a bad value gives the default."""
    if raw is None:
        return clamp_slo(default_ms, rules), True
    try:
        v = float(raw)
    except ValueError:
        return clamp_slo(default_ms, rules), False
    if not math.isfinite(v) or v <= 0:
        return clamp_slo(default_ms, rules), False
    return clamp_slo(v, rules), True


def read_claims(annotations: Mapping[str, str], policy: SpeculationPolicySpec, rules: TenantRules) -> Claims:
    bad: list[Reason] = []
    notes: list[Reason] = []

    def malformed(key: str, value: str, why: str) -> None:
        bad.append(Reason(type="MalformedAnnotation", message=f"{key}={value!r}: {why}"))

    raw_class = annotations.get(ANNOTATION_CLASS)
    claimed: WorkloadClass = policy.default_class
    if raw_class is not None:
        if raw_class in ("interactive", "batch"):
            claimed = raw_class  # type: ignore[assignment]
        else:
            malformed(ANNOTATION_CLASS, raw_class, "must be interactive or batch")
    wclass = clamp_class(claimed, rules)
    if wclass != claimed:
        notes.append(
            Reason(type="ClassClamped", message=f"class {claimed} is not allowed for tenant {rules.tenant}; "
                   f"treated as {wclass}")
        )  # fmt: skip

    raw_slo = annotations.get(ANNOTATION_TPOT_SLO_MS)
    slo, ok = parse_slo_ms(raw_slo, policy.default_tpot_slo_ms, rules)
    if not ok and raw_slo is not None:
        malformed(ANNOTATION_TPOT_SLO_MS, raw_slo, "must be a positive number of milliseconds")
    elif raw_slo is not None and slo != float(raw_slo):
        notes.append(
            Reason(type="SloClamped", message=f"TPOT SLO {raw_slo} ms raised to the tenant minimum {slo} ms")
        )

    batch = policy.default_expected_batch
    raw_batch = annotations.get(ANNOTATION_EXPECTED_BATCH)
    if raw_batch is not None:
        try:
            b = int(raw_batch)
            if b < 1:
                raise ValueError
            batch = min(b, policy.max_batch)
        except ValueError:
            malformed(ANNOTATION_EXPECTED_BATCH, raw_batch, "must be a positive integer")

    method = annotations.get(ANNOTATION_SPEC_METHOD)
    draft = annotations.get(ANNOTATION_DRAFT_MODEL) or None
    target = annotations.get(ANNOTATION_TARGET_MODEL) or None
    if method is not None and method not in METHODS and method not in policy.priors:
        malformed(ANNOTATION_SPEC_METHOD, method, f"unknown method (known: {', '.join(sorted(METHODS))})")
        method = None
    elif method is None and draft is not None:
        method = "draft_model"
        notes.append(
            Reason(type="MethodDefaulted", message="draft-model without spec-method: using draft_model")
        )
    if method in NEEDS_DRAFT_MODEL and draft is None:
        malformed(ANNOTATION_DRAFT_MODEL, "", f"method {method} needs a draft model")
    return Claims(
        workload_class=wclass,
        target_model=target,
        draft_model=draft,
        method=method,
        tpot_slo_ms=slo,
        expected_batch=batch,
        malformed=tuple(bad),
        notes=tuple(notes),
    )
