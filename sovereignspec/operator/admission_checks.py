"""The `Active` condition of our AdmissionChecks (without it every ClusterQueue using them goes inactive).

Active=True only when `spec.parameters` references an existing, valid SpeculationPolicy. Level-based:
returns the condition to apply, or None when the current one already says the same.
"""

from __future__ import annotations

from collections.abc import Mapping
from datetime import datetime
from typing import Any

from sovereignspec.api.meta import GROUP, rfc3339
from sovereignspec.api.speculation_decision import MESSAGE_CHARS
from sovereignspec.api.speculation_policy import SpeculationPolicy


def desired_active(
    spec: Mapping[str, Any], policies: Mapping[str, SpeculationPolicy | str]
) -> tuple[str, str, str]:
    """(status, reason, message) for the Active condition."""
    params = spec.get("parameters")
    if not isinstance(params, Mapping) or not params.get("name"):
        return (
            "False",
            "ParametersMissing",
            f"spec.parameters must reference a {GROUP} SpeculationPolicy",
        )
    group, kind, name = params.get("apiGroup"), params.get("kind"), str(params["name"])
    if group != GROUP or kind != "SpeculationPolicy":
        return (
            "False",
            "ParametersInvalid",
            f"spec.parameters must reference apiGroup {GROUP} kind SpeculationPolicy, got {group}/{kind}",
        )
    policy = policies.get(name)
    if policy is None:
        return "False", "PolicyNotFound", f"SpeculationPolicy {name!r} does not exist"
    if isinstance(policy, str):
        return "False", "PolicyInvalid", f"SpeculationPolicy {name!r} is invalid: {policy}"[:MESSAGE_CHARS]
    return "True", "Active", f"SovereignSpec answers this check with SpeculationPolicy {name!r}"


def active_condition(
    body: Mapping[str, Any], policies: Mapping[str, SpeculationPolicy | str], now: datetime
) -> dict[str, Any] | None:
    spec = body.get("spec") or {}
    generation = (body.get("metadata") or {}).get("generation")
    status, reason, message = desired_active(spec, policies)
    current = next(
        (
            c
            for c in (body.get("status") or {}).get("conditions") or []
            if isinstance(c, Mapping) and c.get("type") == "Active"
        ),
        None,
    )
    if (
        current is not None
        and current.get("status") == status
        and current.get("reason") == reason
        and current.get("message") == message
        and current.get("observedGeneration") == generation
    ):
        return None
    keep = current is not None and current.get("status") == status and current.get("lastTransitionTime")
    since = None if keep else now
    cond: dict[str, Any] = {
        "type": "Active",
        "status": status,
        "reason": reason,
        "message": message,
        "lastTransitionTime": rfc3339(since) if since is not None else current["lastTransitionTime"],  # type: ignore[index]  # keep implies current
    }
    if generation is not None:
        cond["observedGeneration"] = generation
    return cond
