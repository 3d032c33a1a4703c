"""The Decision: everything `sovereignspec decide` prints and the operator writes, plus pure builders.

Builders the operator calls:
- `decision_status(decision)` → SpeculationDecisionStatus (the CR's status),
- `speculation_decision_object(decision, workload_uid)` → the whole SpeculationDecision, owned by
  its Workload and labelled as written by the operator (what makes it a trusted reservation),
- `check_entry(decision)` → the new `status.admissionChecks[]` entry (feed it, with the previous
  entry and the clock, to `admission_check.set_admission_check_state`).
"""

from __future__ import annotations

from datetime import datetime
from typing import Any

from sovereignspec.api.meta import API_VERSION, LABEL_MANAGED_BY, MANAGED_BY_VALUE
from sovereignspec.api.speculation_decision import (
    Candidate,
    CheckState,
    Condition,
    Reason,
    SpeculationDecisionStatus,
)
from sovereignspec.model.workload import CheckEntry
from sovereignspec.policy.record import Decision

__all__ = [
    "DRIFT",
    "Candidate",
    "Decision",
    "check_entry",
    "configs_message",
    "decision_status",
    "failed",
    "speculation_decision_object",
]

DRIFT = "Drift"
"""The SpeculationDecision condition saying whether the admitted speculation is still today's."""


def _describe_config(config: str) -> str:
    return f"speculative-config {config}" if config else "speculation off"


def configs_message(node: str, admitted: str, current: str) -> str:
    """The Drift condition's message, admitted config against today's (a drifted verdict prefixes why):
    configs only, no live figures, so the condition is rewritten only when the verdict changes."""
    today = _describe_config(current)
    return f"admitted with {_describe_config(admitted)}; today's decision on {node}: {today}"


def failed(
    namespace: str,
    workload: str,
    check: str,
    now: datetime,
    reason: str,
    message: str,
    *,
    rejected: bool = False,
    requeue_after_seconds: int = 60,
) -> Decision:
    """The answer for a workload the operator could not decide or record: `Retry` (Kueue releases its
    quota and requeues it after `requeue_after_seconds`) or `Rejected`, reserving nothing, with a message
    that says why. Only the names and the given text go into it (nothing else of the workload), so it can
    always be written."""
    state: CheckState = "Rejected" if rejected else "Retry"
    return Decision(
        namespace=namespace,
        workload=workload,
        admission_check=check,
        state=state,
        reason=reason,
        message=message,
        reasons=[Reason(type=reason, message=message)],
        requeue_after_seconds=None if rejected else requeue_after_seconds,
        decided_at=now,
    )


def decision_status(d: Decision) -> SpeculationDecisionStatus:
    """The record. A Ready decision carries `Drift=False` from the start (at admission the admitted
    speculation is today's decision by definition), worded as the drift sweep words a stable verdict:
    the first sweep then has nothing to write, one write and one watch event less per decision."""
    conditions: list[Condition] = []
    if d.state == "Ready" and d.node:
        cfg = d.speculative.config
        conditions.append(
            Condition(
                type=DRIFT,
                status="False",
                reason="NoDrift",
                message=configs_message(d.node, cfg, cfg),
                last_transition_time=d.decided_at,
            )
        )
    return SpeculationDecisionStatus(
        **{f: getattr(d, f) for f in _AS_RECORDED},
        mode="on" if d.speculative.enabled else "off",
        gpus=d.gpus if d.state == "Ready" else 0,
        placements=d.placements if d.state == "Ready" and d.placements else None,
        conditions=conditions,
    )


_AS_RECORDED = (
    *("state", "reason", "message", "node", "tenant", "speculative", "predicted_speedup", "slack"),
    *("acceptance", "neighbours", "reasons", "pod_set_updates", "inputs", "speedup_by_k", "candidates"),
    *("telemetry_time", "decided_at", "observed_generation"),
)
"""The Decision's fields the status records as they are."""


def speculation_decision_object(d: Decision, workload_uid: str | None) -> dict[str, Any]:
    """The full SpeculationDecision (named after the workload, controller-owned by it)."""
    meta: dict[str, Any] = {
        "name": d.workload,
        "namespace": d.namespace,
        "labels": {LABEL_MANAGED_BY: MANAGED_BY_VALUE},
    }
    if workload_uid:
        meta["ownerReferences"] = [
            {
                "apiVersion": "kueue.x-k8s.io/v1beta2",
                "kind": "Workload",
                "name": d.workload,
                "uid": workload_uid,
                "controller": True,
                "blockOwnerDeletion": True,
            }
        ]
    spec: dict[str, Any] = {"workload": d.workload}
    if workload_uid:
        spec["workloadUid"] = workload_uid
    if d.admission_check:
        spec["admissionCheck"] = d.admission_check
    return {
        "apiVersion": API_VERSION,
        "kind": "SpeculationDecision",
        "metadata": meta,
        "spec": spec,
        "status": decision_status(d).wire(),
    }


def check_entry(d: Decision) -> CheckEntry:
    """Our admission-check entry; podSetUpdates only on Ready (Kueue drops them on Retry anyway)."""
    if d.admission_check is None:
        raise ValueError("decision has no admission check to answer")
    return CheckEntry(
        name=d.admission_check,
        state=d.state,
        message=d.message,
        pod_set_updates=d.pod_set_updates if d.state == "Ready" else [],
        requeue_after_seconds=d.requeue_after_seconds if d.state == "Retry" else None,
    )
