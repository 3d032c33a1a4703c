"""Pod groups on the real cluster, with the real LeaderWorkerSet controller and Kueue's statefulset,
leaderworkerset and pod integrations: one decision per group, every pod on its tenant's jurisdiction
with one speculative config; Retry (never a split) when the jurisdiction has one suitable node; a
Deployment rollout to another draft checked against allowedPairs; a scale-up that never double-books
an isolated node."""

from __future__ import annotations

import json
import time
from collections import defaultdict
from typing import Any

import pytest
from kubernetes import client

from tests.e2e.conftest import Stack
from tests.e2e.pool import (
    NodeDef,
    Pool,
    decided,
    decisions,
    deployment,
    our_entry,
    pod_template,
    pods,
    running_pods,
    serving_annotations,
    workloads,
)
from tests.harness.wait import wait_until

pytestmark = pytest.mark.e2e

CONFIG = "sovereignspec.io/speculative-config"
HOST = "kubernetes.io/hostname"


def _telemetry(stack: Stack, nodes: list[str]) -> None:
    for n in nodes:
        stack.prometheus.wait_for(
            f'avg_over_time(DCGM_FI_PROF_PIPE_TENSOR_ACTIVE{{Hostname="{n}"}}[30s]) >= 0', timeout=60
        )
    time.sleep(2)  # one operator telemetry refresh


def leaderworkerset(
    name: str, ns: str, annotations: dict[str, str], size: int = 2, gpus: int = 8
) -> dict[str, Any]:
    def tmpl(role: str) -> dict[str, Any]:
        t = pod_template(annotations, gpus, labels={"role": role})
        t["spec"]["restartPolicy"] = "Always"
        return t

    return {
        "apiVersion": "leaderworkerset.x-k8s.io/v1",
        "kind": "LeaderWorkerSet",
        "metadata": {"name": name, "namespace": ns, "labels": {"kueue.x-k8s.io/queue-name": "lq"}},
        "spec": {
            "replicas": 1,
            "leaderWorkerTemplate": {
                "size": size,
                "restartPolicy": "RecreateGroupOnPodRestart",
                "leaderTemplate": tmpl("leader"),
                "workerTemplate": tmpl("worker"),
            },
        },
    }


def statefulset(name: str, ns: str, annotations: dict[str, str], replicas: int) -> dict[str, Any]:
    t = pod_template(annotations, 1, labels={"app": name})
    t["spec"]["restartPolicy"] = "Always"
    return {
        "apiVersion": "apps/v1",
        "kind": "StatefulSet",
        "metadata": {"name": name, "namespace": ns, "labels": {"kueue.x-k8s.io/queue-name": "lq"}},
        "spec": {
            "replicas": replicas,
            "serviceName": name,
            "podManagementPolicy": "Parallel",
            "selector": {"matchLabels": {"app": name}},
            "template": t,
        },
    }


def _config_of(pod: client.V1Pod) -> str | None:
    return (pod.metadata.annotations or {}).get(CONFIG)


def test_lws_of_two_gets_one_decision_and_two_whole_nodes(stack: Stack, pool: Pool) -> None:
    de = pool.add_nodes(NodeDef("de0", "DE"), NodeDef("de1", "DE", base_load=0.3), NodeDef("kr0", "KR"))[:2]
    pool.setup_queue()
    tenant = f"{pool.name}-de"
    ns = pool.tenant("de", tenant_label=tenant)
    pool.sovereignty("de", {"tenants": [tenant], "jurisdictions": ["DE"]})
    _telemetry(stack, de)
    pool.apply(leaderworkerset("llama", ns, serving_annotations()))

    (wl,) = decided(pool, ns)
    assert {ps["name"] for ps in wl["spec"]["podSets"]} == {"leader", "worker"}
    entry = our_entry(wl, pool.name)
    assert entry is not None
    pinned = {u["name"]: u["nodeSelector"][HOST] for u in entry["podSetUpdates"]}
    assert sorted(pinned.values()) == sorted(de), pinned
    (dec,) = decisions(pool, ns)  # one decision for the group
    assert dec["status"]["state"] == "Ready" and dec["status"]["node"] == pinned["leader"]

    placed = running_pods(pool, ns, count=2)
    assert len(placed) == 2
    assert sorted(p.spec.node_name for p in placed) == sorted(de)
    configs = {_config_of(p) for p in placed}
    assert len(configs) == 1, configs  # the identical speculative-config on leader and worker
    cfg = configs.pop()
    assert cfg, dec["status"]["message"]
    assert json.loads(cfg)["method"] == "eagle3"


def test_lws_with_one_suitable_node_gets_retry_never_a_split(stack: Stack, pool: Pool) -> None:
    pool.add_nodes(NodeDef("kr0", "KR"), NodeDef("de0", "DE"), NodeDef("de1", "DE"))
    pool.setup_queue()
    tenant = f"{pool.name}-kr"
    ns = pool.tenant("kr", tenant_label=tenant)
    pool.sovereignty("kr", {"tenants": [tenant], "jurisdictions": ["KR"]})
    pool.apply(leaderworkerset("llama", ns, serving_annotations()))

    def retried() -> dict[str, Any] | None:
        ds = decisions(pool, ns)
        return ds[0] if ds and ds[0]["status"]["state"] == "Retry" else None

    dec = wait_until(retried, timeout=90, what="a Retry decision for the group")
    assert dec["status"]["reason"] == "GroupDoesNotFit", dec["status"]
    assert "never spans jurisdictions" in dec["status"]["message"]
    time.sleep(3)
    for w in workloads(pool, ns):
        conds = {c["type"]: c["status"] for c in (w.get("status") or {}).get("conditions", [])}
        assert conds.get("Admitted") != "True", conds
    assert all(not p.spec.node_name for p in pods(pool, ns))  # nothing bound anywhere


def test_statefulset_of_three_gets_one_decision(stack: Stack, pool: Pool) -> None:
    (node,) = pool.add_nodes(NodeDef("s0", "DE"))
    pool.setup_queue()
    _telemetry(stack, [node])
    ns = pool.tenant("sts")
    pool.apply(statefulset("web", ns, serving_annotations(), replicas=3))

    (wl,) = decided(pool, ns)
    assert [(ps["name"], ps["count"]) for ps in wl["spec"]["podSets"]] == [("main", 3)]
    (dec,) = decisions(pool, ns)
    assert dec["status"]["reason"] != "NotRequested", dec["status"]  # the claims came from the pods
    placed = running_pods(pool, ns, count=3)
    assert {p.spec.node_name for p in placed} == {node}
    configs = {_config_of(p) for p in placed}
    assert len(configs) == 1 and configs.pop(), dec["status"]["message"]


def test_deployment_rollout_to_another_draft_is_checked_against_allowed_pairs(
    stack: Stack, pool: Pool
) -> None:
    (node,) = pool.add_nodes(NodeDef("r0", "DE"))
    target = serving_annotations()["sovereignspec.io/target-model"]
    pool.setup_queue(
        policy_spec={"allowedPairs": [{"targetModel": target, "draftModel": "eagle3-llama-3.1-8b"}]}
    )
    _telemetry(stack, [node])
    ns = pool.tenant("roll")
    dep = deployment("svc", ns, serving_annotations(draft="eagle3-llama-3.1-8b"))
    dep["spec"]["strategy"] = {"type": "Recreate"}
    pool.apply(dep)
    (first,) = decided(pool, ns)
    (p1,) = running_pods(pool, ns)
    assert json.loads(_config_of(p1) or "{}")["model"] == "eagle3-llama-3.1-8b"

    # Roll out the other draft: a new pod, a new Workload, its own decision.
    dep2 = deployment("svc", ns, serving_annotations(draft="some-org/other-draft"))
    dep2["spec"]["strategy"] = {"type": "Recreate"}
    pool.apply(dep2)

    def new_decision() -> dict[str, Any] | None:
        for d in decisions(pool, ns):
            if d["metadata"]["name"] != first["metadata"]["name"] and d["status"]["state"] == "Ready":
                return d
        return None

    dec = wait_until(new_decision, timeout=90, what="the rolled-out pod's decision")
    assert dec["status"]["reason"] == "PairNotAllowed", dec["status"]
    assert dec["status"]["mode"] == "off"

    def rolled() -> client.V1Pod | None:
        for p in running_pods(pool, ns):
            if (p.metadata.annotations or {}).get("sovereignspec.io/draft-model") == "some-org/other-draft":
                return p
        return None

    p2 = wait_until(rolled, timeout=90, what="the new pod running")
    assert _config_of(p2) == "" and p2.metadata.labels["sovereignspec.io/speculative"] == "off"


def test_scale_up_never_double_books_an_isolated_node(stack: Stack, pool: Pool) -> None:
    # Six 8-GPU nodes: each tenant's four pods take at most four, so neither can starve the other;
    # a double booking would show as a node holding both tenants' pods.
    pool.add_nodes(*(NodeDef(f"i{i}", "DE") for i in range(6)))
    pool.setup_queue()
    nss = {}
    for t in ("iso", "other"):
        label = f"{pool.name}-{t}"
        nss[t] = pool.tenant(t, tenant_label=label)
        isolation = "Node" if t == "iso" else "Shared"
        pool.sovereignty(t, {"tenants": [label], "jurisdictions": ["DE"], "isolation": isolation})
    pool.apply(*(deployment("svc", ns, serving_annotations()) for ns in nss.values()))
    for ns in nss.values():
        decided(pool, ns, 1)
    apps = client.AppsV1Api(pool.api)
    for ns in nss.values():  # both scale 1 -> 4 at once
        apps.patch_namespaced_deployment_scale("svc", ns, {"spec": {"replicas": 4}})
    for ns in nss.values():
        decided(pool, ns, 4)  # every new pod's Workload decided (our entry Ready)
    by_node: dict[str, set[str]] = defaultdict(set)
    for t, ns in nss.items():
        for p in running_pods(pool, ns, count=4):
            by_node[p.spec.node_name].add(t)
    assert all(len(ts) == 1 for ts in by_node.values()), dict(by_node)  # I2/I3: never shared
    assert sum(len(ts) for ts in by_node.values()) >= 2
