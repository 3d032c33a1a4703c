"""Drift: would we still decide the same speculation for an admitted workload, on its node, today?

"The same" is judged where it matters and is robust to telemetry noise: speculation on/off, and the
draft budget k at the workload's expected batch. A change deeper in the schedule (a batch range the
engine rarely reaches) is not drift.

The admitted decision is re-evaluated with the same `decide()` on a snapshot restricted to the node
it runs on, without the workload's own reservation and pods (it is not its own neighbour). The
workload's own engine is still inside the node's measured tensor load, so drift leans towards "less
slack than at admission": a conservative bias, acceptable for a signal that at most requeues.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any

from sovereignspec.api.meta import ANNOTATION_DECISION, CONTROLLER_NAME
from sovereignspec.api.speculation_decision import SpeculationDecision
from sovereignspec.model.cluster import ClusterSnapshot
from sovereignspec.model.workload import WorkloadInfo
from sovereignspec.policy.claims import read_claims
from sovereignspec.policy.decide import decide
from sovereignspec.policy.request import request_for
from sovereignspec.policy.sovereignty import TenantRules

DRIFT = "Drift"


# Reasons that mean "cannot tell today", not "would decide otherwise": no drift verdict on them, so a
# telemetry gap never evicts a running workload (I6: missing telemetry changes only new decisions).
UNKNOWN = frozenset({"NodeTelemetryMissing", "TelemetryMissing", "TelemetryStale"})


@dataclass(frozen=True)
class DriftResult:
    drifted: bool
    admitted_config: str
    current_config: str
    message: str
    reconfigure: bool
    grace_seconds: int


def evaluate_drift(
    wl: WorkloadInfo,
    check: str,
    decision: SpeculationDecision,
    snap: ClusterSnapshot,
    now: datetime,
    controller_name: str = CONTROLLER_NAME,
) -> DriftResult | None:
    """None when there is nothing to compare (no node or status on record)."""
    st = decision.status
    if st is None or st.node is None or st.state != "Ready":
        return None
    node = st.node
    own = (wl.namespace, wl.name)
    idx = snap.index
    # What a one-node decision reads: the node's pods and those its GPU samples name (a sweep over
    # every admitted decision must not scan every pod of the cluster for each).
    near = {(p.namespace, p.name): p for p in idx.pods_by_node.get(node, ())}
    for g in idx.gpus_by_node.get(node, ()):
        for ref in g.pods:
            named = idx.pod_by_key.get((ref.namespace, ref.name))
            if named is not None:
                near.setdefault((named.namespace, named.name), named)
    node_info = idx.node_by_name.get(node)
    tel = snap.telemetry
    if tel is not None:  # the node's GPU samples and its pods' engines, not the cluster's thousands
        tel = tel.model_copy(
            update={
                "gpus": idx.gpus_by_node.get(node, []),
                "engines": [e for k in near if (e := idx.engine_by_pod.get(k)) is not None],
            }
        )
    restricted = ClusterSnapshot(
        nodes=[node_info] if node_info is not None else [],
        pods=[
            p
            for p in near.values()
            if not (p.namespace == own[0] and p.annotations.get(ANNOTATION_DECISION) == own[1])
        ],
        namespaces=snap.namespaces,
        flavors=snap.flavors,
        admission_checks=snap.admission_checks,
        speculation_policies=snap.speculation_policies,
        sovereignty_policies=snap.sovereignty_policies,
        reservations=[r for r, _ in idx.reservations_by_node.get(node, ()) if (r.namespace, r.name) != own],
        workloads=snap.workloads,
        telemetry=tel,
    )
    as_pending = wl.model_copy(
        update={
            "checks": [c.model_copy(update={"state": "Pending"}) if c.name == check else c for c in wl.checks]
        }
    )
    req, policies = request_for(as_pending, restricted, controller_name)
    fresh = decide(req, restricted, policies, now)
    if any(r.type in UNKNOWN for r in fresh.reasons):
        return None
    admitted = st.speculative.config
    if fresh.state != "Ready":
        current, why = "", f"node {node} would no longer be chosen now ({fresh.reason}: {fresh.message})"
    else:
        current = fresh.speculative.config
        # Configs only, no live figures: the condition is rewritten only when the verdict changes.
        why = f"admitted with {_describe(admitted)}; today's decision on {node}: {_describe(current)}"
    batch = read_claims(
        wl.pod_sets[0].annotations if wl.pod_sets else {},
        policies.speculation,
        TenantRules(tenant=wl.namespace),
    ).expected_batch
    before, after = k_at(admitted, batch), k_at(current, batch)
    if before != after:
        why = f"k at expected batch {batch}: {before} -> {after}; {why}"
    return DriftResult(
        drifted=before != after,
        admitted_config=admitted,
        current_config=current,
        message=why,
        reconfigure=policies.speculation.reconfigure_on_drift,
        grace_seconds=policies.speculation.drift_grace_seconds,
    )


def k_at(config: str, batch: int) -> int:
    """The draft budget a `--speculative-config` gives at `batch` (0 when off)."""
    if not config:
        return 0
    cfg = json.loads(config)
    for start, end, k in cfg.get("num_speculative_tokens_per_batch_size") or []:
        if start <= batch <= end:
            return int(k)
    return int(cfg.get("num_speculative_tokens", 0))


def grace_over(condition: Mapping[str, Any] | None, result: DriftResult, now: datetime) -> bool:
    """Drift=True has lasted at least the policy's grace period (hysteresis against flapping)."""
    if condition is None or condition.get("status") != "True" or not condition.get("lastTransitionTime"):
        return False
    since = datetime.fromisoformat(str(condition["lastTransitionTime"]).replace("Z", "+00:00"))
    return (now - since).total_seconds() >= result.grace_seconds


def _describe(config: str) -> str:
    return f"speculative-config {config}" if config else "speculation off"


def drift_condition(
    previous: Mapping[str, Any] | None, result: DriftResult, generation: int | None, now: datetime
) -> dict[str, Any] | None:
    """The Drift condition to apply, or None when the one on record already says the same."""
    status = "True" if result.drifted else "False"
    reason = "SpeculationDrifted" if result.drifted else "NoDrift"
    if (
        previous is not None
        and previous.get("status") == status
        and previous.get("reason") == reason
        and previous.get("message") == result.message
    ):
        return None
    keep = previous is not None and previous.get("status") == status and previous.get("lastTransitionTime")
    cond: dict[str, Any] = {
        "type": DRIFT,
        "status": status,
        "reason": reason,
        "message": result.message[:32768],
        "lastTransitionTime": previous["lastTransitionTime"]  # type: ignore[index]
        if keep
        else now.astimezone(UTC).strftime("%Y-%m-%dT%H:%M:%SZ"),
    }
    if generation is not None:
        cond["observedGeneration"] = generation
    return cond
