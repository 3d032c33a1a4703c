"""Sovereignty: tenant identity, policy intersection, and the per-node rules of I1-I3 (DESIGN.md §3).

Public functions: `tenant_of`, `rules_for_namespace` (raises `PolicyConflict`),
`TenantRules.allows_node_labels` (I1 and the policy nodeSelector), `isolation_allows` (I2, I3) and
`taints_tolerated`. The filter that chains them over the cluster's nodes is
`sovereignspec.policy.candidates`.

Choices where DESIGN.md is silent:
- A tenant bound by no SovereigntyPolicy is unconstrained (any jurisdiction, Shared) but still
  respects other tenants' isolation (I3).
- Several policies intersect: jurisdictions per jurisdiction label intersect; an isolated (Node)
  policy makes the tenant isolated and its trusted set is the intersection of the trusted sets of
  all Node policies; nodeSelectors merge (same key, different value = conflict); tolerations add up;
  limits take the strictest (max minTpotSloMs, intersection of classes).
- Every active pod of another tenant occupies its node for isolation, DaemonSet pods included (a tenant
  can run a GPU DaemonSet in its own namespace). Only the system namespaces an administrator lists are
  exempt: the SpeculationPolicy's `systemNamespaces` (default kube-system, kube-public,
  kube-node-lease) and namespaces labelled `sovereignspec.io/system=true`.
- Another tenant whose own policies contradict is treated as isolated and trusting nobody.
"""

from __future__ import annotations

from collections.abc import Callable, Collection, Iterable, Mapping, Sequence
from dataclasses import dataclass, field

from sovereignspec.api.meta import LABEL_SYSTEM_NAMESPACE, LABEL_TENANT, Toleration
from sovereignspec.api.sovereignty_policy import SovereigntyPolicy
from sovereignspec.model.cluster import NodeInfo, Taint
from sovereignspec.model.workload import NodeSelectorRequirement, NodeSelectorTerm

SYSTEM_NAMESPACES = frozenset({"kube-system", "kube-public", "kube-node-lease"})
"""The default of SpeculationPolicy `systemNamespaces`."""


class PolicyConflict(ValueError):
    """The SovereigntyPolicies binding one tenant cannot all hold at once."""


@dataclass(frozen=True)
class TenantRules:
    tenant: str
    policies: tuple[str, ...] = ()
    jurisdictions: Mapping[str, frozenset[str]] = field(default_factory=dict)
    isolated: bool = False
    trusted: frozenset[str] = frozenset()
    node_selector: Mapping[str, str] = field(default_factory=dict)
    tolerations: tuple[Toleration, ...] = ()
    min_tpot_slo_ms: float | None = None
    classes: frozenset[str] | None = None

    def allows_node_labels(self, labels: Mapping[str, str]) -> bool:
        """I1 and the policy nodeSelector: static, telemetry-independent."""
        for key, allowed in self.jurisdictions.items():
            if labels.get(key) not in allowed:
                return False
        return all(labels.get(k) == v for k, v in self.node_selector.items())


def is_system_namespace(
    namespace: str,
    ns_labels: Mapping[str, Mapping[str, str]],
    listed: Collection[str] = SYSTEM_NAMESPACES,
) -> bool:
    """A namespace an administrator exempts from isolation: listed in the policy, or labelled
    `sovereignspec.io/system=true` (only administrators set namespace labels)."""
    return namespace in listed or ns_labels.get(namespace, {}).get(LABEL_SYSTEM_NAMESPACE) == "true"


def tenant_of(namespace: str, ns_labels: Mapping[str, Mapping[str, str]]) -> str:
    """Tenant = the namespace's `sovereignspec.io/tenant` label (set by administrators), else its name."""
    return ns_labels.get(namespace, {}).get(LABEL_TENANT) or namespace


def policies_binding(
    tenant: str, labels: Mapping[str, str], policies: Sequence[SovereigntyPolicy]
) -> list[SovereigntyPolicy]:
    out = []
    for p in policies:
        sel = p.spec.namespace_selector
        if tenant in p.spec.tenants or (sel is not None and sel.matches(dict(labels))):
            out.append(p)
    return sorted(out, key=lambda p: p.metadata.name)


def combine(tenant: str, bound: Sequence[SovereigntyPolicy]) -> TenantRules:
    """Intersect the policies binding one tenant (see module docstring); raise PolicyConflict if empty."""
    if not bound:
        return TenantRules(tenant=tenant)
    names = tuple(p.metadata.name for p in bound)
    juris: dict[str, frozenset[str]] = {}
    selector: dict[str, str] = {}
    tolerations: list[Toleration] = []
    trusted: frozenset[str] | None = None
    min_slo: float | None = None
    classes: frozenset[str] | None = None
    for p in bound:
        s = p.spec
        if s.jurisdictions:
            allowed = frozenset(s.jurisdictions)
            prev = juris.get(s.jurisdiction_label)
            juris[s.jurisdiction_label] = allowed if prev is None else prev & allowed
            if not juris[s.jurisdiction_label]:
                raise PolicyConflict(
                    f"SovereigntyPolicies {', '.join(names)} leave tenant {tenant} no jurisdiction "
                    f"on label {s.jurisdiction_label}"
                )
        for k, v in s.node_selector.items():
            if selector.get(k, v) != v:
                raise PolicyConflict(
                    f"SovereigntyPolicies {', '.join(names)} require {k}={selector[k]} and {k}={v} "
                    f"for tenant {tenant}"
                )
            selector[k] = v
        for t in s.tolerations:
            if t not in tolerations:
                tolerations.append(t)
        if s.isolation == "Node":
            mine = frozenset(s.trusted_tenants)
            trusted = mine if trusted is None else trusted & mine
        if s.limits.min_tpot_slo_ms is not None:
            min_slo = max(min_slo or 0.0, s.limits.min_tpot_slo_ms)
        if s.limits.classes is not None:
            mine_c = frozenset(s.limits.classes)
            classes = mine_c if classes is None else classes & mine_c
            if not classes:
                raise PolicyConflict(f"SovereigntyPolicies {', '.join(names)} leave tenant {tenant} no class")
    for key, allowed in juris.items():
        if key in selector and selector[key] not in allowed:
            raise PolicyConflict(
                f"SovereigntyPolicies {', '.join(names)}: nodeSelector {key}={selector[key]} is not an "
                f"allowed jurisdiction of tenant {tenant}"
            )
    return TenantRules(
        tenant=tenant,
        policies=names,
        jurisdictions=juris,
        isolated=trusted is not None,
        trusted=trusted or frozenset(),
        node_selector=selector,
        tolerations=tuple(tolerations),
        min_tpot_slo_ms=min_slo,
        classes=classes,
    )


def rules_for_namespace(
    namespace: str, ns_labels: Mapping[str, Mapping[str, str]], policies: Sequence[SovereigntyPolicy]
) -> TenantRules:
    tenant = tenant_of(namespace, ns_labels)
    return combine(tenant, policies_binding(tenant, ns_labels.get(namespace, {}), policies))


def rules_or_strict(
    namespace: str, ns_labels: Mapping[str, Mapping[str, str]], policies: Sequence[SovereigntyPolicy]
) -> TenantRules:
    """Another tenant's rules; a contradiction there makes it isolated and trusting nobody."""
    try:
        return rules_for_namespace(namespace, ns_labels, policies)
    except PolicyConflict:
        return TenantRules(tenant=tenant_of(namespace, ns_labels), isolated=True)


def isolation_allows(
    rules: TenantRules,
    occupants: Iterable[str],
    ns_labels: Mapping[str, Mapping[str, str]],
    rules_of: Callable[[str], TenantRules],
) -> bool:
    """I2 and I3: our tenant (`rules`) may share a node with the tenants of the `occupants` namespaces
    (`rules_of(namespace)`: another tenant's rules, strict when its policies contradict)."""
    me = rules.tenant
    for ns in occupants:
        other = tenant_of(ns, ns_labels)
        if other == me:
            continue
        if rules.isolated and other not in rules.trusted:
            return False  # I2
        o = rules_of(ns)
        if o.isolated and me not in o.trusted:
            return False  # I3
    return True


def tolerates(tolerations: Sequence[Toleration], taint: Taint) -> bool:
    for t in tolerations:
        if t.effect is not None and t.effect != taint.effect:
            continue
        if t.operator == "Exists":
            if t.key in (None, "") or t.key == taint.key:
                return True
        elif t.key == taint.key and (t.value or "") == (taint.value or ""):
            return True
    return False


def taints_tolerated(node: NodeInfo, tolerations: Sequence[Toleration]) -> bool:
    return all(
        tolerates(tolerations, taint) for taint in node.taints if taint.effect in ("NoSchedule", "NoExecute")
    )


def _requirement_holds(req: NodeSelectorRequirement, value: str | None) -> bool:
    values = req.values or ()
    op = req.operator
    if op == "In":
        return value is not None and value in values
    if op == "NotIn":
        return value is None or value not in values
    if op == "Exists":
        return value is not None
    if op == "DoesNotExist":
        return value is None
    if value is None or len(values) != 1:  # Gt, Lt: one integer value
        return False
    try:
        have, bound = int(value), int(values[0])
    except ValueError:
        return False
    return have > bound if op == "Gt" else have < bound


def affinity_allows(node: NodeInfo, terms: Sequence[NodeSelectorTerm]) -> bool:
    """A pod's required node affinity (terms ORed, requirements ANDed) admits `node`, as the scheduler
    reads it: an empty term matches nothing; matchFields know only metadata.name."""
    for term in terms:
        exprs, fields = term.match_expressions or (), term.match_fields or ()
        if not exprs and not fields:
            continue
        if all(_requirement_holds(r, node.labels.get(r.key)) for r in exprs) and all(
            r.key == "metadata.name" and r.operator in ("In", "NotIn") and _requirement_holds(r, node.name)
            for r in fields
        ):
            return True
    return False
