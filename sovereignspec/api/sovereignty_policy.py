"""SovereigntyPolicy (cluster-scoped): hard data-residency and isolation rules for tenants.

Which tenants it binds: `tenants` (tenant names: the namespace's `sovereignspec.io/tenant` label, or
the namespace name) and/or `namespaceSelector` (matched against namespace labels, which only
administrators set). A policy with neither binds nobody. An empty `jurisdictions` list leaves
jurisdiction unconstrained by this policy (use it for isolation-only policies).
"""

from __future__ import annotations

from typing import Literal

from pydantic import Field

from sovereignspec.api.base import Model, cel_rules
from sovereignspec.api.meta import DEFAULT_JURISDICTION_LABEL, LabelSelector, ObjectMeta, Toleration


class TenantLimits(Model):
    """Clamps on what a tenant may claim in its own pod annotations."""

    model_config = cel_rules(
        ("!has(self.minTpotSloMs) || self.minTpotSloMs > 0.0", "minTpotSloMs must be > 0"),
    )

    min_tpot_slo_ms: float | None = Field(
        default=None, gt=0, description="An SLO annotation below this counts as this."
    )
    classes: list[Literal["interactive", "batch"]] | None = Field(
        default=None, min_length=1, description="Classes the tenant may claim; others count as batch."
    )


class SovereigntyPolicySpec(Model):
    model_config = cel_rules(
        (
            "(has(self.tenants) && size(self.tenants) > 0) || has(self.namespaceSelector)",
            "set tenants and/or namespaceSelector",
        ),
        ("!has(self.isolation) || self.isolation in ['Shared', 'Node']", "isolation must be Shared or Node"),
    )

    tenants: list[str] = Field(default=[], max_length=1024)
    namespace_selector: LabelSelector | None = None
    jurisdictions: list[str] = Field(default=[], max_length=256)
    jurisdiction_label: str = Field(default=DEFAULT_JURISDICTION_LABEL, min_length=1, max_length=317)
    isolation: Literal["Shared", "Node"] = "Shared"
    trusted_tenants: list[str] = Field(default=[], max_length=1024)
    node_selector: dict[str, str] = {}
    tolerations: list[Toleration] = Field(default=[], max_length=64)
    limits: TenantLimits = TenantLimits()


class SovereigntyPolicy(Model):
    api_version: Literal["sovereignspec.io/v1alpha1"] = "sovereignspec.io/v1alpha1"
    kind: Literal["SovereigntyPolicy"] = "SovereigntyPolicy"
    metadata: ObjectMeta = ObjectMeta()
    spec: SovereigntyPolicySpec
