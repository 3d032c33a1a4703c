"""decide() on pod groups: a LeaderWorkerSet over two whole nodes of one jurisdiction with one
speculative config, Retry (never a split) when the jurisdiction has one suitable node, a StatefulSet's
claims read from its pods, claims that differ named; and the sovereignty property for groups of 1-4
pods over random jurisdictions and isolation: no group is ever admitted across a forbidden node."""

from __future__ import annotations

import json
import os
from typing import Any

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from sovereignspec.cli.decide import decide_scenario
from sovereignspec.policy.decision import Decision

NOW = "2026-11-29T10:00:05Z"
TARGET = "meta-llama/Llama-3.3-70B-Instruct"
DRAFT = "yuhuili/EAGLE3-LLaMA3.3-Instruct-70B"
CLAIMS = {
    "sovereignspec.io/class": "interactive",
    "sovereignspec.io/target-model": TARGET,
    "sovereignspec.io/draft-model": DRAFT,
    "sovereignspec.io/spec-method": "eagle3",
    "sovereignspec.io/tpot-slo-ms": "80",
}
H100 = "NVIDIA-H100-80GB-HBM3"
GROUP_LABEL = "kueue.x-k8s.io/pod-group-name"


def node(name: str, jurisdiction: str, gpus: int = 8, load: float = 0.05) -> tuple[dict[str, Any], list[Any]]:
    obj = {
        "apiVersion": "v1",
        "kind": "Node",
        "metadata": {
            "name": name,
            "labels": {
                "kubernetes.io/hostname": name,
                "sovereignspec.io/jurisdiction": jurisdiction,
                "nvidia.com/gpu.product": H100,
            },
        },
        "status": {"allocatable": {"nvidia.com/gpu": str(gpus)}},
    }
    samples = [
        {
            "node": name,
            "uuid": f"GPU-{name}-{i}",
            "modelName": "NVIDIA H100 80GB HBM3",
            "tensorActive": load,
            "fbFreeMiB": 80000,
        }
        for i in range(gpus)
    ]
    return obj, samples


def pod_set(name: str, count: int, gpus: int, annotations: dict[str, str] | None) -> dict[str, Any]:
    tmpl: dict[str, Any] = {
        "spec": {
            "containers": [
                {"name": "vllm", "image": "vllm", "resources": {"limits": {"nvidia.com/gpu": gpus}}}
            ]
        }
    }
    if annotations is not None:
        tmpl["metadata"] = {"annotations": annotations}
    return {"name": name, "count": count, "template": tmpl}


def workload(
    name: str, ns: str, owner: str, pod_sets: list[dict[str, Any]], annotations: dict[str, str] | None = None
) -> dict[str, Any]:
    return {
        "apiVersion": "kueue.x-k8s.io/v1beta2",
        "kind": "Workload",
        "metadata": {
            "name": name,
            "namespace": ns,
            "uid": f"uid-{name}",
            "generation": 1,
            "annotations": {"kueue.x-k8s.io/is-group-workload": "true", **(annotations or {})},
            "ownerReferences": [{"apiVersion": "apps/v1", "kind": owner, "name": "owner", "uid": "o-1"}],
        },
        "spec": {"queueName": "q", "podSets": pod_sets},
        "status": {
            "conditions": [
                {
                    "type": "QuotaReserved",
                    "status": "True",
                    "reason": "QuotaReserved",
                    "message": "ok",
                    "lastTransitionTime": "2026-11-29T09:59:00Z",
                }
            ],
            "admission": {
                "clusterQueue": "q",
                "podSetAssignments": [
                    {"name": ps["name"], "flavors": {"nvidia.com/gpu": "gpu"}, "count": ps["count"]}
                    for ps in pod_sets
                ],
            },
            "admissionChecks": [
                {"name": "sovereignspec", "state": "Pending", "message": "", "lastTransitionTime": NOW}
            ],
        },
    }


def lws(
    ns: str, size: int = 2, leader: dict[str, str] | None = None, worker: dict[str, str] | None = None
) -> Any:
    sets = [pod_set("leader", 1, 8, leader or CLAIMS), pod_set("worker", size - 1, 8, worker or CLAIMS)]
    return workload("leaderworkerset-llama-0-abcde", ns, "LeaderWorkerSet", sets)


def running_pod(
    ns: str, name: str, node_name: str, gpus: int = 1, labels: dict[str, str] | None = None
) -> Any:
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": name, "namespace": ns, "labels": labels or {}},
        "spec": {
            "nodeName": node_name,
            "containers": [{"name": "c", "resources": {"limits": {"nvidia.com/gpu": gpus}}}],
        },
        "status": {"phase": "Running"},
    }


def scenario(
    wl: dict[str, Any],
    nodes: list[tuple[dict[str, Any], list[Any]]],
    policies: list[dict[str, Any]],
    extra: list[dict[str, Any]] = (),  # type: ignore[assignment]
    namespaces: tuple[str, ...] = ("bank-a",),
) -> dict[str, Any]:
    objects: list[dict[str, Any]] = [
        {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": n}} for n in namespaces
    ]
    objects += [
        {
            "apiVersion": "kueue.x-k8s.io/v1beta2",
            "kind": "AdmissionCheck",
            "metadata": {"name": "sovereignspec"},
            "spec": {
                "controllerName": "sovereignspec.io/admission",
                "parameters": {
                    "apiGroup": "sovereignspec.io",
                    "kind": "SpeculationPolicy",
                    "name": "default",
                },
            },
        },
        {
            "apiVersion": "sovereignspec.io/v1alpha1",
            "kind": "SpeculationPolicy",
            "metadata": {"name": "default"},
            "spec": {},
        },
        {
            "apiVersion": "kueue.x-k8s.io/v1beta2",
            "kind": "ResourceFlavor",
            "metadata": {"name": "gpu"},
            "spec": {},
        },
    ]
    for i, spec in enumerate(policies):
        objects.append(
            {
                "apiVersion": "sovereignspec.io/v1alpha1",
                "kind": "SovereigntyPolicy",
                "metadata": {"name": f"p{i}"},
                "spec": spec,
            }
        )
    objects += [n for n, _ in nodes]
    objects += list(extra)
    return {
        "now": NOW,
        "workload": wl,
        "objects": objects,
        "telemetry": {
            "time": "2026-11-29T10:00:00Z",
            "gpus": [s for _, ss in nodes for s in ss],
            "acceptance": [
                {
                    "targetModel": TARGET,
                    "draftModel": DRAFT,
                    "method": "eagle3",
                    "drafts": 1000,
                    "draftTokens": 4000,
                    "acceptedPerPosition": [850, 700, 560, 430],
                }
            ],
        },
    }


def hostnames(d: Decision) -> dict[str, str]:
    return {u.name: u.node_selector.get("kubernetes.io/hostname", "") for u in d.pod_set_updates}


def configs(d: Decision) -> set[str]:
    return {u.annotations.get("sovereignspec.io/speculative-config", "") for u in d.pod_set_updates}


def test_lws_of_two_gets_two_whole_nodes_of_its_jurisdiction_and_one_config() -> None:
    nodes = [node("kr-1", "KR"), node("de-1", "DE", load=0.2), node("de-2", "DE"), node("de-3", "DE", gpus=4)]
    d = decide_scenario(scenario(lws("bank-a"), nodes, [{"tenants": ["bank-a"], "jurisdictions": ["DE"]}]))
    assert d.state == "Ready", d.message
    where = hostnames(d)
    assert set(where) == {"leader", "worker"} and set(where.values()) == {"de-1", "de-2"}
    assert d.node == where["leader"] and d.gpus == 8
    assert d.speculative.enabled and len(configs(d)) == 1 and configs(d) != {""}
    cfg = json.loads(configs(d).pop())
    assert cfg["method"] == "eagle3" and cfg["model"] == DRAFT
    assert "group on leader=" in d.message


def test_lws_schedule_is_the_per_range_minimum_over_its_nodes() -> None:
    """The busier node alone gives a smaller schedule than the idle one; the group gets the busier one's."""
    pol = [{"tenants": ["bank-a"], "jurisdictions": ["DE"]}]
    both = decide_scenario(
        scenario(lws("bank-a"), [node("de-1", "DE", load=0.0), node("de-2", "DE", load=0.6)], pol)
    )
    one_pod = lws("bank-a")
    one_pod["spec"]["podSets"] = one_pod["spec"]["podSets"][:1]
    idle = decide_scenario(scenario(one_pod, [node("de-1", "DE", load=0.0)], pol))
    busy = decide_scenario(scenario(one_pod, [node("de-2", "DE", load=0.6)], pol))
    assert both.state == idle.state == busy.state == "Ready"

    def ks(d: Decision) -> list[int]:
        out: list[int] = []
        for start, end, k in d.speculative.schedule:
            out += [k] * (end - start + 1)
        return out

    k_idle, k_busy, k_both = ks(idle), ks(busy), ks(both)
    assert k_idle != k_busy  # the two nodes disagree, so the rule is tested
    assert k_both == [min(a, b) for a, b in zip(k_idle, k_busy, strict=True)]


def test_single_suitable_node_gets_retry_never_a_split() -> None:
    nodes = [node("kr-1", "KR"), node("kr-2", "KR", gpus=4), node("de-1", "DE"), node("de-2", "DE")]
    d = decide_scenario(scenario(lws("bank-a"), nodes, [{"tenants": ["bank-a"], "jurisdictions": ["KR"]}]))
    assert d.state == "Retry" and d.reason == "GroupDoesNotFit", d.message
    assert d.requeue_after_seconds and not d.pod_set_updates
    # A tenant allowed in two jurisdictions still never spans them: one KR node + one DE node is no fit.
    two = [{"tenants": ["bank-a"], "jurisdictions": ["KR", "DE"]}]
    d2 = decide_scenario(scenario(lws("bank-a"), [node("kr-1", "KR"), node("de-1", "DE")], two))
    assert d2.state == "Retry" and d2.reason == "GroupDoesNotFit"


def test_a_partly_used_node_is_no_whole_node() -> None:
    nodes = [node("de-1", "DE"), node("de-2", "DE")]
    busy = running_pod("other", "p", "de-2", gpus=1)
    d = decide_scenario(
        scenario(
            lws("bank-a"),
            nodes,
            [{"tenants": ["bank-a"], "jurisdictions": ["DE"]}],
            [busy],
            ("bank-a", "other"),
        )
    )
    assert d.state == "Retry" and "1 no free GPU capacity" in d.message
    # A node with more GPUs than the pod asks for is no whole node for it (two pods would share it).
    big = [node("de-1", "DE"), node("de-16", "DE", gpus=16)]
    d2 = decide_scenario(scenario(lws("bank-a"), big, [{"tenants": ["bank-a"], "jurisdictions": ["DE"]}]))
    assert d2.state == "Retry" and "1 not a whole free node for the group's pods" in d2.message


def test_lws_of_three_needs_topology() -> None:
    d = decide_scenario(
        scenario(
            lws("bank-a", size=3),
            [node(f"de-{i}", "DE") for i in range(3)],
            [{"tenants": ["bank-a"], "jurisdictions": ["DE"]}],
        )
    )
    assert d.state == "Rejected" and d.reason == "GroupNeedsTopology"


def test_leader_and_worker_that_disagree_run_plain_with_the_key_named() -> None:
    worker = {**CLAIMS, "sovereignspec.io/draft-model": "some/other-draft"}
    d = decide_scenario(
        scenario(
            lws("bank-a", worker=worker),
            [node("de-1", "DE"), node("de-2", "DE")],
            [{"tenants": ["bank-a"], "jurisdictions": ["DE"]}],
        )
    )
    assert d.state == "Ready" and d.reason == "ClaimsDisagree"
    assert not d.speculative.enabled and configs(d) == {""}
    assert "sovereignspec.io/draft-model" in d.message and "pod set worker" in d.message


def sts_pod(ns: str, i: int, wl_name: str, ann: dict[str, str]) -> dict[str, Any]:
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {
            "name": f"web-{i}",
            "namespace": ns,
            "labels": {GROUP_LABEL: wl_name, "app": "web"},
            "annotations": {"kueue.x-k8s.io/role-hash": "main", **ann},
        },
        "spec": {
            "schedulingGates": [{"name": "kueue.x-k8s.io/admission"}],
            "containers": [{"name": "c", "resources": {"limits": {"nvidia.com/gpu": 1}}}],
        },
        "status": {"phase": "Pending"},
    }


def test_statefulset_claims_come_from_its_pods() -> None:
    small = {
        **CLAIMS,
        "sovereignspec.io/target-model": "llama-3.1-8b",
        "sovereignspec.io/draft-model": "eagle3-8b",
    }
    wl = workload("statefulset-web-abc", "bank-a", "StatefulSet", [pod_set("main", 3, 1, None)])
    pods = [sts_pod("bank-a", i, "statefulset-web-abc", small) for i in range(3)]
    pol = [{"tenants": ["bank-a"], "jurisdictions": ["DE"]}]
    d = decide_scenario(scenario(wl, [node("de-1", "DE")], pol, pods))
    assert d.state == "Ready" and d.node == "de-1" and d.gpus == 3
    assert d.inputs is not None and d.inputs.draft_model == "eagle3-8b"
    assert d.reason != "NotRequested"
    # No pod seen yet: nothing is decided (the claims are on the pods).
    d0 = decide_scenario(scenario(wl, [node("de-1", "DE")], pol))
    assert d0.state == "Pending" and d0.reason == "WaitingForPods"
    # One pod differs: speculation off, the pod and key named.
    pods[2] = sts_pod("bank-a", 2, "statefulset-web-abc", {**small, "sovereignspec.io/spec-method": "ngram"})
    d2 = decide_scenario(scenario(wl, [node("de-1", "DE")], pol, pods))
    assert d2.state == "Ready" and d2.reason == "ClaimsDisagree" and "pod web-2" in d2.message


# ---- the sovereignty property for groups ---------------------------------------------------------------

JURIS = ["KR", "DE", "US"]


@st.composite
def group_cases(draw: st.DrawFn) -> tuple[dict[str, Any], dict[str, Any]]:
    n_nodes = draw(st.integers(1, 6))
    nodes = []
    for i in range(n_nodes):
        nodes.append(node(f"n{i}", draw(st.sampled_from(JURIS)), gpus=draw(st.sampled_from([4, 8]))))
    allowed = draw(st.lists(st.sampled_from(JURIS), min_size=1, max_size=2, unique=True))
    me_iso = draw(st.sampled_from(["Node", "Shared"]))
    other_iso = draw(st.sampled_from(["Node", "Shared"]))
    policies = [
        {"tenants": ["me"], "jurisdictions": allowed, "isolation": me_iso},
        {"tenants": ["other"], "jurisdictions": JURIS, "isolation": other_iso},
    ]
    extra = []
    for i in range(n_nodes):  # the other tenant's running GPU pods
        if draw(st.booleans()):
            extra.append(running_pod("other", f"o{i}", f"n{i}", gpus=1))
    size = draw(st.integers(1, 4))
    kind = draw(st.sampled_from(["LeaderWorkerSet", "StatefulSet"]))
    if kind == "LeaderWorkerSet":
        gpus = draw(st.sampled_from([4, 8]))
        sets = [pod_set("leader", 1, gpus, CLAIMS)]
        if size > 1:
            sets.append(pod_set("worker", size - 1, gpus, CLAIMS))
        wl = workload("lws-0", "me", kind, sets)
    else:
        wl = workload("sts", "me", kind, [pod_set("main", size, 1, None)])
        extra += [sts_pod("me", i, "sts", CLAIMS) for i in range(size)]
    data = scenario(wl, nodes, policies, extra, ("me", "other"))
    facts = {
        "jurisdiction": {
            n["metadata"]["name"]: n["metadata"]["labels"]["sovereignspec.io/jurisdiction"] for n, _ in nodes
        },
        "allowed": allowed,
        "me_iso": me_iso,
        "other_iso": other_iso,
        "other_on": {p["spec"]["nodeName"] for p in extra if p["metadata"]["namespace"] == "other"},
        "alloc": {n["metadata"]["name"]: int(n["status"]["allocatable"]["nvidia.com/gpu"]) for n, _ in nodes},
        "size": size,
        "kind": kind,
    }
    return data, facts


@settings(
    max_examples=int(os.environ.get("SOVEREIGNSPEC_HYPOTHESIS_EXAMPLES", "150")),
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large],
)
@given(group_cases())
def test_no_group_is_ever_admitted_across_a_forbidden_node(
    case: tuple[dict[str, Any], dict[str, Any]],
) -> None:
    data, f = case
    d = decide_scenario(data)
    if d.state != "Ready":
        assert not d.pod_set_updates or d.state == "Pending"
        return
    used = set(hostnames(d).values())
    assert used and "" not in used
    isolated = f["me_iso"] == "Node" or f["other_iso"] == "Node"
    juris = set()
    for n in used:
        assert f["jurisdiction"][n] in f["allowed"], (n, d.message)  # I1
        if isolated:
            assert n not in f["other_on"], (n, d.message)  # I2, I3
        juris.add(f["jurisdiction"][n])
    assert len(juris) == 1  # a group never spans jurisdictions
    if f["kind"] == "LeaderWorkerSet" and f["size"] > 1:
        assert len(used) == f["size"] == 2  # one whole node per pod
        assert all(n not in f["other_on"] for n in used)
    assert len(configs(d)) == 1  # one speculative config for the whole group


def test_a_group_decision_reserves_every_node_it_placed() -> None:
    """Until its pods bind, a Ready group decision holds the worker's node too: an isolated tenant's
    next workload may not take it."""
    pol = [
        {"tenants": ["bank-a"], "jurisdictions": ["DE"]},
        {"tenants": ["iso"], "jurisdictions": ["DE"], "isolation": "Node"},
    ]
    nodes = [node("de-1", "DE"), node("de-2", "DE"), node("de-3", "DE", load=0.9)]
    first = decide_scenario(scenario(lws("bank-a"), nodes, pol, namespaces=("bank-a", "iso")))
    assert first.state == "Ready" and len(first.placements) == 2
    held = {p.node for p in first.placements}
    assert held == {"de-1", "de-2"}
    group_wl = lws("bank-a")
    record = {
        "apiVersion": "sovereignspec.io/v1alpha1",
        "kind": "SpeculationDecision",
        "metadata": {
            "name": group_wl["metadata"]["name"],
            "namespace": "bank-a",
            "labels": {"app.kubernetes.io/managed-by": "sovereignspec"},
            "ownerReferences": [
                {
                    "apiVersion": "kueue.x-k8s.io/v1beta2",
                    "kind": "Workload",
                    "name": group_wl["metadata"]["name"],
                    "uid": group_wl["metadata"]["uid"],
                    "controller": True,
                }
            ],
        },
        "spec": {"workload": group_wl["metadata"]["name"]},
        "status": {
            "state": "Ready",
            "node": first.node,
            "gpus": first.gpus,
            "placements": [p.model_dump(by_alias=True) for p in first.placements],
        },
    }
    job = workload("job-chat", "iso", "Job", [pod_set("main", 1, 1, CLAIMS)])
    nxt = decide_scenario(scenario(job, nodes, pol, [group_wl, record], ("bank-a", "iso")))
    assert nxt.state == "Ready" and nxt.node == "de-3", nxt.message
    # Without the worker's placement only the leader's node would be held, and the idle de-2 would win.
    record["status"].pop("placements")
    leak = decide_scenario(scenario(job, nodes, pol, [group_wl, record], ("bank-a", "iso")))
    assert leak.node in held - {first.node}


def _snapshot_of(data: dict[str, Any]) -> Any:
    from sovereignspec.model.cluster import WorkloadRef
    from sovereignspec.policy.parse import build_snapshot, parse_telemetry, parse_workload

    wl = parse_workload(data["workload"])
    ref = WorkloadRef(namespace=wl.namespace, name=wl.name, uid=wl.uid)
    return wl, build_snapshot(data["objects"], parse_telemetry(data["telemetry"]), extra_workloads=[ref])


def test_drift_sweep_reads_a_statefulsets_claims_from_its_pods_and_skips_multi_node_groups() -> None:
    """The drift sweep re-decides on the admitted node without the workload's own pods: a StatefulSet's
    claims must still come from them (else it would read as 'no longer chosen', drifted, every sweep);
    a group over several nodes is not re-decided on one node."""
    from datetime import UTC, datetime

    from sovereignspec.api.speculation_decision import SpeculationDecision
    from sovereignspec.policy.decision import speculation_decision_object
    from sovereignspec.policy.drift import evaluate_drift

    now = datetime(2026, 11, 29, 10, 0, 5, tzinfo=UTC)
    small = {
        **CLAIMS,
        "sovereignspec.io/target-model": "llama-3.1-8b",
        "sovereignspec.io/draft-model": "e3-8b",
    }
    wl_obj = workload("statefulset-web-abc", "bank-a", "StatefulSet", [pod_set("main", 3, 1, None)])
    pods = [sts_pod("bank-a", i, "statefulset-web-abc", small) for i in range(3)]
    pol = [{"tenants": ["bank-a"], "jurisdictions": ["DE"]}]
    d = decide_scenario(scenario(wl_obj, [node("de-1", "DE")], pol, pods))
    assert d.state == "Ready" and d.speculative.enabled
    record = SpeculationDecision.model_validate(speculation_decision_object(d, None))
    for p in pods:  # admitted: bound on the node with the decision's annotations
        p["spec"] = {**p["spec"], "nodeName": "de-1", "schedulingGates": []}
        p["status"] = {"phase": "Running"}
        p["metadata"]["annotations"].update(
            {
                "sovereignspec.io/decision": d.workload,
                "sovereignspec.io/speculative-config": d.speculative.config,
            }
        )
    wl, snap = _snapshot_of(scenario(wl_obj, [node("de-1", "DE")], pol, pods))
    result = evaluate_drift(wl, "sovereignspec", record, snap, now)
    assert result is not None and not result.drifted, result

    both = [node("de-1", "DE"), node("de-2", "DE")]
    g = decide_scenario(scenario(lws("bank-a"), both, pol))
    assert g.state == "Ready" and g.placements
    grecord = SpeculationDecision.model_validate(speculation_decision_object(g, None))
    gwl, gsnap = _snapshot_of(scenario(lws("bank-a"), both, pol))
    assert evaluate_drift(gwl, "sovereignspec", grecord, gsnap, now) is None
