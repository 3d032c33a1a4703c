"""Sovereignty (DESIGN.md §3): who a tenant is, how its policies intersect, and the per-node rules of
the sovereign filter (I1 labels, the template's selector, taints, I2/I3 isolation), each by its name.
Whole decisions under hostile tenants are in test_hostile_tenant.py, generated clusters in
test_properties.py."""

from __future__ import annotations

import pytest

from sovereignspec.api.meta import ObjectMeta, Toleration
from sovereignspec.api.sovereignty_policy import SovereigntyPolicy, SovereigntyPolicySpec, TenantLimits
from sovereignspec.model.cluster import NodeInfo, Taint
from sovereignspec.model.workload import PodSetAssignment, PodSetInfo, WorkloadInfo
from sovereignspec.policy import candidates as chain
from sovereignspec.policy.candidates import Constraints, constraints_of, exclusion
from sovereignspec.policy.record import ReasonType, Refusal
from sovereignspec.policy.sovereignty import (
    PolicyConflict,
    TenantRules,
    combine,
    isolation_allows,
    rules_or_strict,
    tenant_of,
    tolerates,
)


def _pol(name: str, **spec: object) -> SovereigntyPolicy:
    return SovereigntyPolicy(metadata=ObjectMeta(name=name), spec=SovereigntyPolicySpec(**spec))  # type: ignore[arg-type]


def test_policies_intersect() -> None:
    rules = combine(
        "t",
        [
            _pol("a", tenants=["t"], jurisdictions=["KR", "JP"], isolation="Node",
                 trusted_tenants=["x", "y"]),
            _pol("b", tenants=["t"], jurisdictions=["KR"], isolation="Node", trusted_tenants=["y"],
                 limits=TenantLimits(min_tpot_slo_ms=20, classes=["batch"])),
        ],
    )  # fmt: skip
    assert rules.jurisdictions == {"sovereignspec.io/jurisdiction": frozenset({"KR"})}
    assert rules.isolated and rules.trusted == frozenset({"y"})
    assert rules.min_tpot_slo_ms == 20 and rules.classes == frozenset({"batch"})
    with pytest.raises(PolicyConflict, match="no jurisdiction"):
        combine(
            "t",
            [_pol("a", tenants=["t"], jurisdictions=["KR"]), _pol("b", tenants=["t"], jurisdictions=["EU"])],
        )
    with pytest.raises(PolicyConflict):
        combine(
            "t",
            [
                _pol("a", tenants=["t"], node_selector={"p": "1"}),
                _pol("b", tenants=["t"], node_selector={"p": "2"}),
            ],
        )
    assert not combine("t", []).isolated


def test_tenant_identity_from_namespace_label_not_pods() -> None:
    assert tenant_of("ns1", {"ns1": {"sovereignspec.io/tenant": "bank"}}) == "bank"
    assert tenant_of("ns2", {}) == "ns2"


def test_tolerations() -> None:
    taint = Taint(key="dedicated", value="kr", effect="NoSchedule")
    assert tolerates([Toleration(key="dedicated", operator="Equal", value="kr")], taint)
    assert tolerates([Toleration(operator="Exists")], taint)
    assert not tolerates([Toleration(key="dedicated", value="eu")], taint)
    assert not tolerates([Toleration(key="dedicated", operator="Exists", effect="NoExecute")], taint)


def _node(name: str = "n1", **kw: object) -> NodeInfo:
    labels = {"kubernetes.io/hostname": name, "sovereignspec.io/jurisdiction": "KR"}
    return NodeInfo(name=name, labels={**labels, **kw.pop("labels", {})}, gpu_allocatable=4, **kw)  # type: ignore[arg-type]


def _constraints(**kw: object) -> Constraints:
    base: dict[str, object] = dict(
        need=1, template_selector={}, affinities=(), tolerations=(), flavor_labels={},
        flavor_labels_by_set={}, tas=None,
    )  # fmt: skip
    base.update(kw)
    return Constraints(**base)  # type: ignore[arg-type]


KR = TenantRules(tenant="t", jurisdictions={"sovereignspec.io/jurisdiction": frozenset({"KR"})})


def test_the_chain_names_the_first_rule_a_node_breaks() -> None:
    c = _constraints()
    assert exclusion(_node(), KR, c) is None
    assert exclusion(_node(labels={"sovereignspec.io/jurisdiction": "EU"}), KR, c) == chain.JURISDICTION
    assert exclusion(_node(), KR, _constraints(template_selector=None)) == chain.TEMPLATE
    assert exclusion(_node(), KR, _constraints(template_selector={"pool": "a"})) == chain.TEMPLATE
    tainted = _node(taints=[Taint(key="dedicated", value="x", effect="NoSchedule")])
    assert exclusion(tainted, KR, c) == chain.TAINTS
    assert exclusion(_node(), KR, _constraints(need=5)) == chain.TOO_FEW_GPUS
    assert exclusion(_node(), KR, _constraints(flavor_labels={"pool": "a"})) == chain.FLAVOR
    assert exclusion(_node(ready=False), KR, c) == chain.NOT_READY
    assert exclusion(_node(unschedulable=True), KR, c) == chain.NOT_READY
    # jurisdiction before everything else: a foreign node with every other fault still counts as foreign
    worst = _node(labels={"sovereignspec.io/jurisdiction": "EU"}, ready=False)
    assert exclusion(worst, KR, _constraints(need=5)) == chain.JURISDICTION


def test_under_tas_the_assignment_replaces_the_gpu_count() -> None:
    tas = _constraints(need=99, tas=frozenset({"n1"}))
    assert exclusion(_node("n1"), KR, tas) is None  # Kueue placed the pods: no GPU count check
    assert exclusion(_node("n2"), KR, tas) == chain.OUTSIDE_TAS
    assert chain.OUTSIDE_TAS in chain.LATE and chain.TOO_FEW_GPUS not in chain.LATE


def test_only_exclusions_that_can_lift_are_late() -> None:
    assert set(chain.LATE) == {chain.FLAVOR, chain.OUTSIDE_TAS, chain.NOT_READY}


def test_unknown_or_disagreeing_flavors_retry() -> None:
    wl = WorkloadInfo(
        namespace="t", name="w", pod_sets=[PodSetInfo(name="main", gpus_per_pod=1)],
        assignments=[PodSetAssignment(name="main", flavors={"nvidia.com/gpu": "missing"})],
    )  # fmt: skip
    got = constraints_of(wl, [], [], KR, 30)
    assert isinstance(got, Refusal) and got.state == "Retry" and got.reason == ReasonType.FLAVOR_UNKNOWN
    assert got.retry_after == 30


def test_isolation_i2_keeps_an_isolated_tenant_from_untrusted_neighbours() -> None:
    iso = TenantRules(tenant="bank", isolated=True, trusted=frozenset({"partner"}))
    open_rules = {ns: TenantRules(tenant=ns) for ns in ("bank", "partner", "shop")}
    assert isolation_allows(iso, ["bank", "partner"], {}, open_rules.__getitem__)
    assert not isolation_allows(iso, ["shop"], {}, open_rules.__getitem__)


def test_isolation_i3_respects_the_other_tenants_isolation() -> None:
    me = TenantRules(tenant="shop")
    others = {"bank": TenantRules(tenant="bank", isolated=True, trusted=frozenset({"partner"}))}
    assert not isolation_allows(me, ["bank"], {}, others.__getitem__)
    assert isolation_allows(TenantRules(tenant="partner"), ["bank"], {}, others.__getitem__)


def test_isolation_is_by_tenant_not_namespace() -> None:
    labels = {"bank-a": {"sovereignspec.io/tenant": "bank"}, "bank-b": {"sovereignspec.io/tenant": "bank"}}
    iso = TenantRules(tenant="bank", isolated=True)
    assert isolation_allows(iso, ["bank-a", "bank-b"], labels, lambda ns: TenantRules(tenant="bank"))


def test_a_tenant_with_contradictory_policies_counts_as_isolated_and_trusting_nobody() -> None:
    pols = [_pol("a", tenants=["x"], jurisdictions=["KR"]), _pol("b", tenants=["x"], jurisdictions=["EU"])]
    strict = rules_or_strict("x", {}, pols)
    assert strict.isolated and strict.trusted == frozenset()
    with pytest.raises(PolicyConflict):
        combine("x", pols)
