"""Drift conditions for the operator's sweep. The verdict itself (`evaluate_drift`: would we still
decide the same speculation for an admitted workload, on its node, today, with the workload's own load
taken out of its GPUs' measured tensor-active) is pure and lives in sovereignspec/policy/drift.py, so
that the evidence simulator runs the same rule; this module turns verdicts into the `Drift` condition
and the grace period (hysteresis) before reconfigureOnDrift re-admits a workload.
"""

from __future__ import annotations

from collections.abc import Mapping
from datetime import datetime
from typing import Any

from sovereignspec.api.meta import rfc3339
from sovereignspec.api.speculation_decision import MESSAGE_CHARS
from sovereignspec.policy.decision import DRIFT
from sovereignspec.policy.drift import UNKNOWN, DriftResult, evaluate_drift, k_at

__all__ = ["DRIFT", "UNKNOWN", "DriftResult", "drift_condition", "evaluate_drift", "grace_over", "k_at"]


def grace_over(condition: Mapping[str, Any] | None, result: DriftResult, now: datetime) -> bool:
    """Drift=True has lasted at least the policy's grace period (hysteresis against flapping)."""
    if condition is None or condition.get("status") != "True" or not condition.get("lastTransitionTime"):
        return False
    since = datetime.fromisoformat(str(condition["lastTransitionTime"]).replace("Z", "+00:00"))
    return (now - since).total_seconds() >= result.grace_seconds


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
        "message": result.message[:MESSAGE_CHARS],
        "lastTransitionTime": previous["lastTransitionTime"]  # type: ignore[index]
        if keep
        else rfc3339(now),
    }
    if generation is not None:
        cond["observedGeneration"] = generation
    return cond
