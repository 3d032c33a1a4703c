"""Claims, parse functions, reservations read from decisions, and the decision builders."""

from __future__ import annotations

from datetime import UTC, datetime

import pytest

from sovereignspec.api.meta import ObjectMeta
from sovereignspec.api.sovereignty_policy import SovereigntyPolicy, SovereigntyPolicySpec, TenantLimits
from sovereignspec.api.speculation_decision import SpeculationDecisionStatus
from sovereignspec.api.speculation_policy import SpeculationPolicySpec
from sovereignspec.model.cluster import WorkloadRef
from sovereignspec.policy.cache import index_of
from sovereignspec.policy.claims import read_claims
from sovereignspec.policy.decision import Decision, check_entry, decision_status, speculation_decision_object
from sovereignspec.policy.parse import (
    ParseError,
    build_snapshot,
    parse_node,
    parse_quantity,
    parse_reservation,
    parse_workload,
)
from sovereignspec.policy.sovereignty import combine


def _pol(name: str, **spec: object) -> SovereigntyPolicy:
    return SovereigntyPolicy(metadata=ObjectMeta(name=name), spec=SovereigntyPolicySpec(**spec))  # type: ignore[arg-type]


def test_claims_are_clamped_by_tenant_limits() -> None:
    rules = combine(
        "t", [_pol("a", tenants=["t"], limits=TenantLimits(min_tpot_slo_ms=30, classes=["batch"]))]
    )
    c = read_claims(
        {"sovereignspec.io/class": "interactive", "sovereignspec.io/tpot-slo-ms": "1"},
        SpeculationPolicySpec(),
        rules,
    )
    assert c.workload_class == "batch" and c.tpot_slo_ms == 30
    assert {r.type for r in c.notes} == {"ClassClamped", "SloClamped"}
    bad = read_claims({"sovereignspec.io/expected-batch": "-3", "sovereignspec.io/spec-method": "magic"},
                      SpeculationPolicySpec(), rules)  # fmt: skip
    assert [r.message.split("=")[0] for r in bad.malformed] == [
        "sovereignspec.io/expected-batch", "sovereignspec.io/spec-method"
    ]  # fmt: skip


def test_parse_quantity_and_node() -> None:
    assert parse_quantity("2") == 2 and parse_quantity("500m") == 0.5 and parse_quantity("1Gi") == 2**30
    with pytest.raises(ParseError, match="not a quantity"):
        parse_quantity("lots")
    n = parse_node({"kind": "Node", "metadata": {"name": "n", "labels": {"a": "b"}},
                    "spec": {"taints": [{"key": "k", "effect": "NoSchedule"}], "unschedulable": True},
                    "status": {"allocatable": {"nvidia.com/gpu": "4"},
                               "conditions": [{"type": "Ready", "status": "False"}]}})  # fmt: skip
    assert n.gpu_allocatable == 4 and n.unschedulable and not n.ready and n.taints[0].key == "k"
    with pytest.raises(ParseError, match=r"metadata\.name"):
        parse_node({"kind": "Node", "metadata": {}})


def test_parse_workload_with_v1beta2_topology_slices() -> None:
    wl = parse_workload(
        {"kind": "Workload", "metadata": {"name": "w", "namespace": "ns"},
         "spec": {"podSets": [{"name": "main", "count": 3, "template": {"spec": {"containers": [
             {"name": "c", "resources": {"requests": {"nvidia.com/gpu": "2"}}}]}}}]},
         "status": {"conditions": [{"type": "QuotaReserved", "status": "True"}],
                    "admission": {"clusterQueue": "cq", "podSetAssignments": [{
                        "name": "main", "flavors": {"nvidia.com/gpu": "f"},
                        "topologyAssignment": {"levels": ["kubernetes.io/hostname"], "slices": [
                            {"domainCount": 2,
                             "valuesPerLevel": [{"individual": {"prefix": "node-", "roots": ["1", "2"]}}],
                             "podCounts": {"individual": [2, 1]}}]}}]},
                    "admissionChecks": [{"name": "c", "state": "Pending"}]}}
    )  # fmt: skip
    assert wl.quota_reserved and wl.pod_sets[0].gpus_per_pod == 2 and wl.pod_sets[0].count == 3
    domains = wl.assignments[0].topology_domains
    assert domains is not None and [(d.values, d.count) for d in domains] == [
        (["node-1"], 2),
        (["node-2"], 1),
    ]
    with pytest.raises(ParseError, match="podSets is empty"):
        parse_workload({"kind": "Workload", "metadata": {"name": "w"}, "spec": {}})


def _decision_obj(labels: dict[str, str], owner_uid: str | None) -> dict[str, object]:
    meta: dict[str, object] = {"name": "w", "namespace": "ns", "labels": labels}
    if owner_uid:
        meta["ownerReferences"] = [{"apiVersion": "kueue.x-k8s.io/v1beta2", "kind": "Workload", "name": "w",
                                    "uid": owner_uid, "controller": True}]  # fmt: skip
    return {"kind": "SpeculationDecision", "metadata": meta, "spec": {"workload": "w"},
            "status": {"state": "Ready", "node": "n1", "gpus": 2}}  # fmt: skip


def test_reservations_trust_only_operator_decisions_of_live_workloads() -> None:
    live = [WorkloadRef(namespace="ns", name="w", uid="u1")]
    ok = parse_reservation(_decision_obj({"app.kubernetes.io/managed-by": "sovereignspec"}, "u1"), live)
    assert ok is not None and ok.trusted and ok.gpus == 2 and ok.node == "n1"
    mine = {"app.kubernetes.io/managed-by": "sovereignspec"}
    for obj in (_decision_obj({}, "u1"), _decision_obj(mine, None), _decision_obj(mine, "stale-uid")):
        r = parse_reservation(obj, live)
        assert r is not None and not r.trusted
    snap = build_snapshot([_decision_obj({}, None)], None)
    assert snap.reservations and not index_of(snap).reservations_by_node


def test_a_reservation_reads_only_what_it_needs() -> None:
    """A status field this version does not know (a newer operator's) keeps the GPUs reserved; the
    fields a reservation reads are still checked."""
    live = [WorkloadRef(namespace="ns", name="w", uid="u1")]
    obj = _decision_obj({"app.kubernetes.io/managed-by": "sovereignspec"}, "u1")
    newer = {**obj, "status": {**obj["status"], "fieldOfANewerOperator": {"x": 1}}}  # type: ignore[dict-item]
    r = parse_reservation(newer, live)
    assert r is not None and r.trusted and r.gpus == 2
    for bad, why in (({"gpus": -1}, "gpus"), ({"state": "Maybe"}, "state")):
        with pytest.raises(ParseError, match=why):
            parse_reservation({**obj, "status": {**obj["status"], **bad}}, live)  # type: ignore[dict-item]
    with pytest.raises(ParseError, match="kind"):
        parse_reservation({**obj, "kind": "Workload"}, live)
    assert parse_reservation({**obj, "status": {"state": "Pending", "node": "n1"}}, live) is None


def test_decision_builders() -> None:
    now = datetime(2026, 11, 29, 10, tzinfo=UTC)
    d = Decision(namespace="ns", workload="w", admission_check="c", state="Ready", reason="SpeculationOn",
                 message="m", node="n1", gpus=1, decided_at=now)  # fmt: skip
    status = decision_status(d)
    assert isinstance(status, SpeculationDecisionStatus) and status.gpus == 1 and status.node == "n1"
    obj = speculation_decision_object(d, "uid-1")
    assert obj["metadata"]["ownerReferences"][0]["uid"] == "uid-1"  # type: ignore[index]
    assert obj["metadata"]["labels"] == {"app.kubernetes.io/managed-by": "sovereignspec"}  # type: ignore[index]
    assert parse_reservation(obj, [WorkloadRef(namespace="ns", name="w", uid="uid-1")]) is not None
    entry = check_entry(d.model_copy(update={"state": "Retry", "requeue_after_seconds": 60}))
    assert entry.state == "Retry" and entry.pod_set_updates == [] and entry.requeue_after_seconds == 60
