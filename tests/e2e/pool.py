"""A private GPU pool per test: its own KWOK nodes, ResourceFlavor, SpeculationPolicy, AdmissionCheck,
ClusterQueue, tenant namespaces and LocalQueues. Tests never share nodes, so they never see each
other's load or reservations."""

from __future__ import annotations

import json
import uuid
from dataclasses import dataclass, field
from typing import Any

import yaml
from kubernetes import client
from kubernetes.client.exceptions import ApiException

from tests.harness.cluster import LocalCluster
from tests.harness.namespaces import create_namespace, delete_namespace
from tests.harness.queues import (
    admission_check,
    cluster_queue,
    local_queue,
    resource_flavor,
    speculation_policy,
)
from tests.harness.wait import wait_until

POOL_LABEL = "e2e.sovereignspec.io/pool"
CONTROLLER = "sovereignspec.io/admission"
PRODUCTS = {
    "h100": ("NVIDIA-H100-80GB-HBM3", 8),
    "a100": ("NVIDIA-A100-SXM4-80GB", 8),
    "rtx4090": ("NVIDIA-GeForce-RTX-4090", 4),
}


@dataclass
class NodeDef:
    suffix: str
    jurisdiction: str = "DE"
    gpu: str = "h100"
    base_load: float = 0.0
    gpus: int | None = None
    replicas: int = 1  # time-slicing replicas per physical GPU
    noise: float | None = None  # the simulator's tensor-active noise on this node (None: its default)


def node_manifest(name: str, pool: str, d: NodeDef) -> dict[str, Any]:
    product, count = PRODUCTS[d.gpu]
    count = d.gpus or count
    alloc = {"cpu": "128", "memory": "1Ti", "pods": "110", "nvidia.com/gpu": str(count * d.replicas)}
    return {
        "apiVersion": "v1",
        "kind": "Node",
        "metadata": {
            "name": name,
            "annotations": {
                "kwok.x-k8s.io/node": "fake",
                "node.alpha.kubernetes.io/ttl": "0",
                "sovereignspec.io/sim-base-load": str(d.base_load),
                **({"sovereignspec.io/sim-noise": str(d.noise)} if d.noise is not None else {}),
            },
            "labels": {
                "type": "kwok",
                "kubernetes.io/hostname": name,
                "kubernetes.io/os": "linux",
                "kubernetes.io/arch": "amd64",
                "sovereignspec.io/jurisdiction": d.jurisdiction,
                "nvidia.com/gpu.present": "true",
                "nvidia.com/gpu.product": product,
                "nvidia.com/gpu.count": str(count),
                "nvidia.com/gpu.replicas": str(d.replicas),
                POOL_LABEL: pool,
            },
        },
        "spec": {},
        "status": {"allocatable": alloc, "capacity": alloc},
    }


@dataclass
class Pool:
    cluster: LocalCluster
    name: str
    nodes: list[str] = field(default_factory=list)
    namespaces: list[str] = field(default_factory=list)
    cluster_objects: list[tuple[str, str]] = field(default_factory=list)  # (kind/plural, name)

    @property
    def api(self) -> client.ApiClient:
        return self.cluster.api_client

    def apply(self, *objs: dict[str, Any]) -> None:
        self.cluster.kubectl(
            "apply",
            "--server-side",
            "--force-conflicts",
            "--field-manager=e2e",
            "-f",
            "-",
            input=yaml.safe_dump_all(objs),
        )

    # ---- setup ---------------------------------------------------------------------------------

    def add_nodes(self, *defs: NodeDef) -> list[str]:
        names = []
        for d in defs:
            name = f"{self.name}-{d.suffix}"
            self.apply(node_manifest(name, self.name, d))
            self.nodes.append(name)
            names.append(name)
        core = client.CoreV1Api(self.api)

        def ready() -> bool:
            for n in names:
                node = core.read_node(n)
                conds = {c.type: c.status for c in (node.status.conditions or [])}
                if conds.get("Ready") != "True":
                    return False
            return True

        wait_until(ready, timeout=60, what=f"KWOK nodes {names} Ready")
        return names

    def setup_queue(
        self,
        *,
        policy_spec: dict[str, Any] | None = None,
        extra_checks: list[str] = (),  # type: ignore[assignment]
        gpu_quota: int = 64,
        controller: str = CONTROLLER,
        wait: bool = True,
        cpu: str = "1000",
        memory: str = "10Ti",
    ) -> None:
        """ResourceFlavor over this pool's nodes, our AdmissionCheck + SpeculationPolicy, ClusterQueue.
        `wait`: until the ClusterQueue is Active (that needs an operator answering for `controller`)."""
        n = self.name
        self.apply(
            speculation_policy(n, policy_spec),
            resource_flavor(n, {POOL_LABEL: n}),
            admission_check(n, controller, n),
        )
        self.cluster_objects += [
            ("speculationpolicies.sovereignspec.io", n),
            ("resourceflavors.kueue.x-k8s.io", n),
            ("admissionchecks.kueue.x-k8s.io", n),
        ]
        self.apply(
            cluster_queue(
                n,
                flavor=n,
                namespace_labels={POOL_LABEL: n},
                gpu_quota=gpu_quota,
                checks=[n, *extra_checks],
                cpu=cpu,
                memory=memory,
            )
        )
        self.cluster_objects.append(("clusterqueues.kueue.x-k8s.io", n))
        if wait:
            wait_until(self._cq_active, timeout=60, what=f"ClusterQueue {n} Active", describe=self._cq_state)

    def _cq(self) -> dict[str, Any]:
        return client.CustomObjectsApi(self.api).get_cluster_custom_object(  # type: ignore[no-any-return]
            "kueue.x-k8s.io", "v1beta2", "clusterqueues", self.name
        )

    def _cq_active(self) -> bool:
        conds = (self._cq().get("status") or {}).get("conditions") or []
        return any(c["type"] == "Active" and c["status"] == "True" for c in conds)

    def _cq_state(self) -> str:
        return json.dumps((self._cq().get("status") or {}).get("conditions"))

    def tenant(self, prefix: str, tenant_label: str | None = None, outside_kueue: bool = False) -> str:
        """A namespace of this pool (selected by the ClusterQueue) with a LocalQueue named `lq`.

        `outside_kueue`: Kueue manages nothing there (the local Kueue config skips namespaces labelled
        sovereignspec.io/test-outside-kueue=true), for pods that must run without admission (a neighbour
        engine, a tenant DaemonSet): everywhere else Kueue gates every pod, queue name or not."""
        labels = {POOL_LABEL: self.name}
        if tenant_label:
            labels["sovereignspec.io/tenant"] = tenant_label
        if outside_kueue:
            labels[OUTSIDE_KUEUE] = "true"
        ns = create_namespace(self.cluster, prefix, labels)
        self.namespaces.append(ns)
        self.apply(local_queue("lq", ns, self.name))
        return ns

    def sovereignty(self, name: str, spec: dict[str, Any]) -> None:
        full = f"{self.name}-{name}"
        self.apply(
            {
                "apiVersion": "sovereignspec.io/v1alpha1",
                "kind": "SovereigntyPolicy",
                "metadata": {"name": full},
                "spec": spec,
            }
        )
        self.cluster_objects.append(("sovereigntypolicies.sovereignspec.io", full))

    # ---- teardown ----------------------------------------------------------------------------------

    def close(self) -> None:
        for ns in self.namespaces:
            delete_namespace(self.cluster, ns)
        for kind, name in reversed(self.cluster_objects):
            self.cluster.kubectl("delete", kind, name, "--ignore-not-found", "--wait=false", check=False)
        core = client.CoreV1Api(self.api)
        for n in self.nodes:
            try:
                core.delete_node(n)
            except ApiException as exc:
                if exc.status != 404:
                    raise


def new_pool(cluster: LocalCluster, prefix: str) -> Pool:
    return Pool(cluster=cluster, name=f"{prefix}-{uuid.uuid4().hex[:5]}")


# ---- workloads ---------------------------------------------------------------------------------------


def serving_annotations(
    *,
    cls: str = "interactive",
    draft: str = "eagle3-llama-3.1-8b",
    method: str = "eagle3",
    slo_ms: int | None = None,
    batch: int | None = None,
) -> dict[str, str]:
    ann = {
        "sovereignspec.io/class": cls,
        "sovereignspec.io/target-model": "meta-llama/Llama-3.1-8B-Instruct",
        "sovereignspec.io/draft-model": draft,
        "sovereignspec.io/spec-method": method,
    }
    if slo_ms is not None:
        ann["sovereignspec.io/tpot-slo-ms"] = str(slo_ms)
    if batch is not None:
        ann["sovereignspec.io/expected-batch"] = str(batch)
    return ann


# KWOK completes Job pods after a few seconds by default; serving engines keep running. KWOK draws the
# delay between `delay` and `jitter-delay`, so both must be long.
KEEP_RUNNING = {
    "pod-complete.stage.kwok.x-k8s.io/delay": "3600s",
    "pod-complete.stage.kwok.x-k8s.io/jitter-delay": "3600s",
}


def pod_template(
    annotations: dict[str, str], gpus: int = 1, labels: dict[str, str] | None = None
) -> dict[str, Any]:
    return {
        "metadata": {"annotations": {**KEEP_RUNNING, **annotations}, "labels": labels or {}},
        "spec": {
            "restartPolicy": "Never",
            "containers": [
                {
                    "name": "vllm",
                    "image": "vllm/vllm-openai:v0.33.0",
                    "resources": {
                        "requests": {"cpu": "1", "memory": "1Gi", "nvidia.com/gpu": str(gpus)},
                        "limits": {"nvidia.com/gpu": str(gpus)},
                    },
                }
            ],
        },
    }


OUTSIDE_KUEUE = "sovereignspec.io/test-outside-kueue"
"""Namespaces the local test bed's Kueue leaves alone (deploy/local/cluster.sh, kueue_config)."""


def job(name: str, namespace: str, annotations: dict[str, str], gpus: int = 1) -> dict[str, Any]:
    return {
        "apiVersion": "batch/v1",
        "kind": "Job",
        "metadata": {
            "name": name,
            "namespace": namespace,
            "labels": {"kueue.x-k8s.io/queue-name": "lq"},
        },
        "spec": {
            "parallelism": 1,
            "completions": 1,
            "suspend": True,
            "template": pod_template(annotations, gpus),
        },
    }


def deployment(name: str, namespace: str, annotations: dict[str, str], gpus: int = 1) -> dict[str, Any]:
    tmpl = pod_template(annotations, gpus, labels={"app": name})
    tmpl["spec"]["restartPolicy"] = "Always"
    return {
        "apiVersion": "apps/v1",
        "kind": "Deployment",
        "metadata": {
            "name": name,
            "namespace": namespace,
            "labels": {"kueue.x-k8s.io/queue-name": "lq"},
        },
        "spec": {"replicas": 1, "selector": {"matchLabels": {"app": name}}, "template": tmpl},
    }


def workloads(pool: Pool, namespace: str) -> list[dict[str, Any]]:
    res = client.CustomObjectsApi(pool.api).list_namespaced_custom_object(
        "kueue.x-k8s.io", "v1beta2", namespace, "workloads"
    )
    return list(res.get("items", []))


def decisions(pool: Pool, namespace: str) -> list[dict[str, Any]]:
    res = client.CustomObjectsApi(pool.api).list_namespaced_custom_object(
        "sovereignspec.io", "v1alpha1", namespace, "speculationdecisions"
    )
    return list(res.get("items", []))


def our_entry(wl: dict[str, Any], check: str) -> dict[str, Any] | None:
    for e in (wl.get("status") or {}).get("admissionChecks") or []:
        if e.get("name") == check:
            return e  # type: ignore[no-any-return]
    return None


def decided(
    pool: Pool, namespace: str, count: int = 1, states: tuple[str, ...] = ("Ready",)
) -> list[dict[str, Any]]:
    """Wait until `count` workloads of the namespace carry our entry in one of `states`."""

    # Kueue resets a Rejected or Retry entry to Pending when it deactivates or requeues the workload
    # ("Reset to Pending after eviction"), so those answers are also read from the durable record the
    # operator writes first. A Ready answer is read from the entry only: its podSetUpdates are there.
    resettable = {"Rejected", "Retry"} & set(states)

    def probe() -> list[dict[str, Any]] | None:
        wls = workloads(pool, namespace)
        recorded: set[str] = set()
        if resettable:
            recorded = {
                d["metadata"]["name"]
                for d in decisions(pool, namespace)
                if (d.get("status") or {}).get("state") in resettable
            }
        done = [
            w
            for w in wls
            if (our_entry(w, pool.name) or {}).get("state") in states or w["metadata"]["name"] in recorded
        ]
        return done if len(done) >= count else None

    def describe() -> str:
        return json.dumps(
            [
                {
                    "name": w["metadata"]["name"],
                    "checks": (w.get("status") or {}).get("admissionChecks"),
                    "conditions": [
                        (c["type"], c["status"], c.get("reason"))
                        for c in (w.get("status") or {}).get("conditions", [])
                    ],
                }
                for w in workloads(pool, namespace)
            ]
        )[:3000]

    return wait_until(
        probe, timeout=90, what=f"{count} workload(s) in {namespace} {states}", describe=describe
    )


def pods(pool: Pool, namespace: str) -> list[client.V1Pod]:
    return list(client.CoreV1Api(pool.api).list_namespaced_pod(namespace).items)


def neighbour_engine(pool: Pool, namespace: str, node: str, annotations: dict[str, str]) -> None:
    """A one-GPU serving engine pinned to `node`, in a namespace outside Kueue (`Pool.tenant(...,
    outside_kueue=True)`): a neighbour already serving when the workload under test arrives."""
    client.CoreV1Api(pool.api).create_namespaced_pod(
        namespace,
        {
            "apiVersion": "v1",
            "kind": "Pod",
            "metadata": {"name": "engine", "annotations": annotations},
            "spec": {
                "nodeSelector": {"kubernetes.io/hostname": node},
                "containers": [
                    {
                        "name": "vllm",
                        "image": "vllm/vllm-openai:v0.33.0",
                        "resources": {"limits": {"nvidia.com/gpu": "1"}},
                    }
                ],
            },
        },
    )
    running_pods(pool, namespace)


def running_pods(pool: Pool, namespace: str, count: int = 1) -> list[client.V1Pod]:
    """Pods bound and started (Running, or already Succeeded if KWOK completed them)."""

    def probe() -> list[client.V1Pod] | None:
        ps = [
            p
            for p in pods(pool, namespace)
            if p.status.phase in ("Running", "Succeeded") and p.spec.node_name
        ]
        return ps if len(ps) >= count else None

    def describe() -> str:
        return str([(p.metadata.name, p.status.phase, p.spec.node_name) for p in pods(pool, namespace)])

    return wait_until(probe, timeout=90, what=f"{count} Running pod(s) in {namespace}", describe=describe)
