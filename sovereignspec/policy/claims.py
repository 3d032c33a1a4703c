"""The workload's own claims (pod-template annotations), validated and clamped by its tenant's limits.

A malformed value never fails the decision: it turns speculation off with a reason naming the key
and the value (DESIGN.md §4). Claims are clamped (§3 trust boundaries): an SLO below the tenant's
`minTpotSloMs` counts as that minimum, and where the tenant's policies set none, an SLO below the
SpeculationPolicy's global floor `minTpotSloMs` (default 20 ms) counts as the floor; a class the tenant
may not claim counts as `batch` (or, if batch is not allowed either, the first allowed class in
alphabetical order).

A workload's claims take effect when it is decided (admission): re-annotating its running pods
changes nothing about its own placement or speculation until its next decision, nor what later decisions
see of it as a neighbour: the neighbour rule reads the claims its SpeculationDecision recorded
(`PodInfo.recorded`, `policy.parse.recorded_claims`), clamped again by its tenant's current limits.

Values are bounded before anything else reads them: a model name longer than `MAX_MODEL_CHARS`, or any
other claim longer than `MAX_VALUE_CHARS`, is malformed, and a message quotes at most `SHOWN_CHARS` of
a value (annotation values may be up to 256 KiB; a record must stay within the API's limits).
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
    PREFIX,
)
from sovereignspec.api.speculation_decision import Reason
from sovereignspec.api.speculation_policy import METHODS, SpeculationPolicySpec
from sovereignspec.model.workload import WorkloadInfo
from sovereignspec.policy.record import ReasonType
from sovereignspec.policy.sovereignty import TenantRules

MAX_MODEL_CHARS = 1024
"""Longest target or draft model name accepted (Hugging Face ids are at most 96 characters; a local
path may be longer)."""
MAX_VALUE_CHARS = 64
"""Longest class, spec-method, tpot-slo-ms or expected-batch value accepted."""
SHOWN_CHARS = 64
"""Most characters of a claimed value quoted in a message."""

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
    tpot_slo_claimed: bool = False
    """The SLO annotation is present (well-formed or not): as a neighbour, the workload is SLO-bound even
    without engine metrics."""
    malformed: tuple[Reason, ...] = ()
    notes: tuple[Reason, ...] = field(default=())


def clamp_class(claimed: WorkloadClass, rules: TenantRules) -> WorkloadClass:
    if rules.classes is None or claimed in rules.classes:
        return claimed
    return "batch" if "batch" in rules.classes else sorted(rules.classes)[0]  # type: ignore[return-value]


def shown(value: str) -> str:
    """A claimed value as a message quotes it: its repr, cut to SHOWN_CHARS characters."""
    if len(value) <= SHOWN_CHARS:
        return repr(value)
    return f"{value[:SHOWN_CHARS]!r}... ({len(value)} characters)"


def slo_floor_ms(rules: TenantRules, floor_ms: float) -> float:
    """The least SLO a tenant may claim: its policies' minTpotSloMs, else the global floor."""
    return rules.min_tpot_slo_ms if rules.min_tpot_slo_ms is not None else floor_ms


def clamp_slo(slo_ms: float, rules: TenantRules, floor_ms: float = 0.0) -> float:
    return max(slo_ms, slo_floor_ms(rules, floor_ms))


def parse_slo_ms(
    raw: str | None, default_ms: float, rules: TenantRules, floor_ms: float = 0.0
) -> tuple[float, bool]:
    """(clamped SLO in ms, well-formed?) from an annotation value; a bad value gives the default."""
    if raw is None:
        return clamp_slo(default_ms, rules, floor_ms), True
    if len(raw) > MAX_VALUE_CHARS:
        return clamp_slo(default_ms, rules, floor_ms), False
    try:
        v = float(raw)
    except ValueError:
        return clamp_slo(default_ms, rules, floor_ms), False
    if not math.isfinite(v) or v <= 0:
        return clamp_slo(default_ms, rules, floor_ms), False
    return clamp_slo(v, rules, floor_ms), True


def parse_expected_batch(raw: str | None, default: int, max_batch: int) -> tuple[int, bool]:
    """(expected batch, well-formed?) from an annotation value: a positive integer, capped at
    `max_batch`; a bad value gives the default."""
    if raw is None:
        return default, True
    if len(raw) > MAX_VALUE_CHARS:
        return default, False
    try:
        b = int(raw)
    except ValueError:
        return default, False
    if b < 1:
        return default, False
    return min(b, max_batch), True


def claim_annotations(wl: WorkloadInfo) -> Mapping[str, str]:
    """The annotations the workload claims through: those of its first GPU pod set that sets any."""
    gpu_sets = [ps for ps in wl.pod_sets if ps.gpus_per_pod > 0]
    src = next((ps for ps in gpu_sets if any(k.startswith(PREFIX) for k in ps.annotations)), None)
    return src.annotations if src else {}


def read_claims(annotations: Mapping[str, str], policy: SpeculationPolicySpec, rules: TenantRules) -> Claims:
    bad: list[Reason] = []
    notes: list[Reason] = []

    def malformed(key: str, value: str, why: str) -> None:
        bad.append(Reason(type=ReasonType.MALFORMED_ANNOTATION, message=f"{key}={shown(value)}: {why}"))

    def too_long(key: str, limit: int) -> str | None:
        """The claim under `key`, or None (and malformed) when longer than `limit` characters."""
        value = annotations.get(key)
        if value is not None and len(value) > limit:
            malformed(key, value, f"longer than {limit} characters")
            return None
        return value

    raw_class = too_long(ANNOTATION_CLASS, MAX_VALUE_CHARS)
    claimed: WorkloadClass = policy.default_class
    if raw_class is not None:
        if raw_class in ("interactive", "batch"):
            claimed = raw_class  # type: ignore[assignment]
        else:
            malformed(ANNOTATION_CLASS, raw_class, "must be interactive or batch")
    wclass = clamp_class(claimed, rules)
    if wclass != claimed:
        msg = f"class {claimed} is not allowed for tenant {rules.tenant}; treated as {wclass}"
        notes.append(Reason(type=ReasonType.CLASS_CLAMPED, message=msg))

    raw_slo = too_long(ANNOTATION_TPOT_SLO_MS, MAX_VALUE_CHARS)
    slo, ok = parse_slo_ms(raw_slo, policy.default_tpot_slo_ms, rules, policy.min_tpot_slo_ms)
    if not ok and raw_slo is not None:
        malformed(ANNOTATION_TPOT_SLO_MS, raw_slo, "must be a positive number of milliseconds")
    elif raw_slo is not None and slo != float(raw_slo):
        whose = "the tenant minimum" if rules.min_tpot_slo_ms is not None else "the SpeculationPolicy floor"
        message = f"TPOT SLO {shown(raw_slo)} ms raised to {whose} {slo} ms"
        notes.append(Reason(type=ReasonType.SLO_CLAMPED, message=message))

    raw_batch = too_long(ANNOTATION_EXPECTED_BATCH, MAX_VALUE_CHARS)
    batch, ok = parse_expected_batch(raw_batch, policy.default_expected_batch, policy.max_batch)
    if not ok and raw_batch is not None:
        malformed(ANNOTATION_EXPECTED_BATCH, raw_batch, "must be a positive integer")

    method = too_long(ANNOTATION_SPEC_METHOD, MAX_VALUE_CHARS)
    draft = too_long(ANNOTATION_DRAFT_MODEL, MAX_MODEL_CHARS) or None
    target = too_long(ANNOTATION_TARGET_MODEL, MAX_MODEL_CHARS) or None
    if method is not None and method not in METHODS and method not in policy.priors:
        malformed(ANNOTATION_SPEC_METHOD, method, f"unknown method (known: {', '.join(sorted(METHODS))})")
        method = None
    elif method is None and draft is not None:
        method = "draft_model"
        notes.append(
            Reason(
                type=ReasonType.METHOD_DEFAULTED, message="draft-model without spec-method: using draft_model"
            )
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
        tpot_slo_claimed=ANNOTATION_TPOT_SLO_MS in annotations,
        malformed=tuple(bad),
        notes=tuple(notes),
    )
