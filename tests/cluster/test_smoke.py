"""End-to-end smoke test of the local test bed, on real parts: kube-apiserver, the Job controller,
kube-scheduler, KWOK nodes and the Kueue manager with its webhooks.

It plays the part of an AdmissionCheck controller by hand: the Workload waits with our check
`Pending`; we set it `Ready` by server-side apply on `/status` with a podSetUpdate (annotation +
nodeSelector), exactly as the operator will; Kueue admits, the Job's pods land on the chosen node.
"""

from __future__ import annotations

import datetime as dt
from collections.abc import Iterator
from typing import Any

import pytest
from kubernetes import client
from kubernetes.client.exceptions import ApiException

from tests.harness import (
    LocalCluster,
    apply_status,
    condition_status,
    get_custom,
    get_job,
    list_custom,
    list_pods,
    namespace,
    unique_name,
    wait_until,
)

GROUP, VERSION = "kueue.x-k8s.io", "v1beta2"
CONTROLLER_NAME = "sovereignspec.io/smoke-stub"
FIELD_MANAGER = "sovereignspec-smoke-test"
GPU_PRODUCT = "NVIDIA-A100-SXM4-80GB"
CHOSEN_NODE = "de-a100-0"  # one of the A100 nodes the flavor selects (deploy/local/nodes.yaml)
ANNOTATION = ("sovereignspec.io/smoke", "placed-by-admission-check")
PODS = 2


def now() -> str:
    return dt.datetime.now(dt.UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


def check_state(workload: dict[str, Any], check: str) -> str | None:
    for entry in workload.get("status", {}).get("admissionChecks", []):
        if entry.get("name") == check:
            return str(entry.get("state"))
    return None


@pytest.fixture
def queue_setup(local_cluster: LocalCluster) -> Iterator[dict[str, str]]:
    """AdmissionCheck (Active), ResourceFlavor for the A100 nodes, ClusterQueue, LocalQueue."""
    names = {
        "check": unique_name("smoke-check"),
        "flavor": unique_name("smoke-a100"),
        "cq": unique_name("smoke-cq"),
    }
    objects = client.CustomObjectsApi(local_cluster.api_client)
    with namespace(local_cluster, "smoke") as ns:
        names["ns"] = ns
        objects.create_cluster_custom_object(
            GROUP,
            VERSION,
            "admissionchecks",
            {
                "apiVersion": f"{GROUP}/{VERSION}",
                "kind": "AdmissionCheck",
                "metadata": {"name": names["check"]},
                "spec": {"controllerName": CONTROLLER_NAME},
            },
        )
        # The check's controller must keep Active=True, or every ClusterQueue using it is inactive.
        check = get_custom(local_cluster.api_client, GROUP, VERSION, "admissionchecks", names["check"])
        apply_status(
            local_cluster.api_client,
            group=GROUP,
            version=VERSION,
            plural="admissionchecks",
            name=names["check"],
            field_manager=FIELD_MANAGER,
            body={
                "apiVersion": f"{GROUP}/{VERSION}",
                "kind": "AdmissionCheck",
                "metadata": {"name": names["check"]},
                "status": {
                    "conditions": [
                        {
                            "type": "Active",
                            "status": "True",
                            "reason": "Active",
                            "message": "smoke-test stub controller",
                            "lastTransitionTime": now(),
                            "observedGeneration": check["metadata"]["generation"],
                        }
                    ]
                },
            },
        )
        objects.create_cluster_custom_object(
            GROUP,
            VERSION,
            "resourceflavors",
            {
                "apiVersion": f"{GROUP}/{VERSION}",
                "kind": "ResourceFlavor",
                "metadata": {"name": names["flavor"]},
                "spec": {"nodeLabels": {"nvidia.com/gpu.product": GPU_PRODUCT}},
            },
        )
        quotas = [("cpu", "16"), ("memory", "64Gi"), ("nvidia.com/gpu", "8")]
        objects.create_cluster_custom_object(
            GROUP,
            VERSION,
            "clusterqueues",
            {
                "apiVersion": f"{GROUP}/{VERSION}",
                "kind": "ClusterQueue",
                "metadata": {"name": names["cq"]},
                "spec": {
                    "namespaceSelector": {"matchLabels": {"kubernetes.io/metadata.name": ns}},
                    "resourceGroups": [
                        {
                            "coveredResources": [r for r, _ in quotas],
                            "flavors": [
                                {
                                    "name": names["flavor"],
                                    "resources": [{"name": r, "nominalQuota": q} for r, q in quotas],
                                }
                            ],
                        }
                    ],
                    "admissionChecksStrategy": {"admissionChecks": [{"name": names["check"]}]},
                },
            },
        )
        objects.create_namespaced_custom_object(
            GROUP,
            VERSION,
            ns,
            "localqueues",
            {
                "apiVersion": f"{GROUP}/{VERSION}",
                "kind": "LocalQueue",
                "metadata": {"name": "smoke", "namespace": ns},
                "spec": {"clusterQueue": names["cq"]},
            },
        )
        api = local_cluster.api_client
        wait_until(
            lambda: (
                condition_status(get_custom(api, GROUP, VERSION, "clusterqueues", names["cq"]), "Active")
                == "True"
            ),
            timeout=60,
            what=f"ClusterQueue {names['cq']} Active",
            describe=lambda: str(get_custom(api, GROUP, VERSION, "clusterqueues", names["cq"]).get("status")),
        )
        yield names
        client.BatchV1Api(api).delete_collection_namespaced_job(ns, propagation_policy="Background")
    for plural, name in (
        ("clusterqueues", names["cq"]),
        ("resourceflavors", names["flavor"]),
        ("admissionchecks", names["check"]),
    ):
        try:
            objects.delete_cluster_custom_object(GROUP, VERSION, plural, name)
        except ApiException as exc:
            if exc.status != 404:
                raise


def submit_job(api: client.ApiClient, ns: str, queue: str) -> str:
    """A batch/v1 Job in the queue: PODS pods of one GPU each; Kueue creates it suspended."""
    keep_running = {
        # KWOK's "general" pod stages complete a Job's pod after a short delay; keep them Running.
        "pod-complete.stage.kwok.x-k8s.io/delay": "1h",
        "pod-complete.stage.kwok.x-k8s.io/jitter-delay": "1h",
    }
    job = client.V1Job(
        metadata=client.V1ObjectMeta(name="smoke", labels={"kueue.x-k8s.io/queue-name": queue}),
        spec=client.V1JobSpec(
            parallelism=PODS,
            completions=PODS,
            backoff_limit=0,
            template=client.V1PodTemplateSpec(
                metadata=client.V1ObjectMeta(annotations=keep_running),
                spec=client.V1PodSpec(
                    restart_policy="Never",
                    containers=[
                        client.V1Container(
                            name="main",
                            image="registry.invalid/sovereignspec/fake:1",
                            resources=client.V1ResourceRequirements(
                                requests={"cpu": "1", "memory": "1Gi", "nvidia.com/gpu": "1"},
                                limits={"nvidia.com/gpu": "1"},
                            ),
                        )
                    ],
                ),
            ),
        ),
    )
    client.BatchV1Api(api).create_namespaced_job(ns, job)
    return "smoke"


@pytest.mark.cluster
def test_smoke_admission_check_ready_places_job_pods_on_chosen_kwok_node(
    local_cluster: LocalCluster, queue_setup: dict[str, str]
) -> None:
    ns, check = queue_setup["ns"], queue_setup["check"]
    api = local_cluster.api_client
    job_name = submit_job(api, ns, "smoke")

    def workloads() -> list[dict[str, Any]]:
        return list_custom(api, GROUP, VERSION, "workloads", ns)

    def pending_workload() -> dict[str, Any] | None:
        for wl in workloads():
            owners = wl["metadata"].get("ownerReferences", [])
            if any(o["kind"] == "Job" and o["name"] == job_name for o in owners) and (
                condition_status(wl, "QuotaReserved") == "True" and check_state(wl, check) == "Pending"
            ):
                return wl
        return None

    workload = wait_until(
        pending_workload,
        timeout=90,
        what="a Workload with quota reserved and the check Pending",
        describe=lambda: str([wl.get("status") for wl in workloads()]),
    )
    wl_name = workload["metadata"]["name"]
    assert condition_status(workload, "Admitted") != "True"
    assert get_job(api, ns, job_name)["spec"]["suspend"] is True
    podset = workload["spec"]["podSets"][0]["name"]

    apply_status(
        api,
        group=GROUP,
        version=VERSION,
        plural="workloads",
        namespace=ns,
        name=wl_name,
        field_manager=FIELD_MANAGER,
        body={
            "apiVersion": f"{GROUP}/{VERSION}",
            "kind": "Workload",
            "metadata": {"name": wl_name, "namespace": ns},
            "status": {
                "admissionChecks": [
                    {
                        "name": check,
                        "state": "Ready",
                        "message": f"placed on {CHOSEN_NODE}",
                        "lastTransitionTime": now(),
                        "podSetUpdates": [
                            {
                                "name": podset,
                                "annotations": dict([ANNOTATION]),
                                "nodeSelector": {"kubernetes.io/hostname": CHOSEN_NODE},
                            }
                        ],
                    }
                ]
            },
        },
    )

    def job_pods() -> list[dict[str, Any]]:
        return list_pods(api, ns, label_selector=f"job-name={job_name}")

    def running_pods() -> list[dict[str, Any]] | None:
        pods = job_pods()
        if len(pods) == PODS and all(p["status"].get("phase") == "Running" for p in pods):
            return pods
        return None

    pods = wait_until(
        running_pods,
        timeout=120,
        what=f"{PODS} Running pods of Job {job_name}",
        describe=lambda: str(
            [(p["metadata"]["name"], p["status"].get("phase"), p["spec"].get("nodeName")) for p in job_pods()]
        ),
    )
    assert condition_status(get_custom(api, GROUP, VERSION, "workloads", wl_name, ns), "Admitted") == "True"
    assert get_job(api, ns, job_name)["spec"]["suspend"] is False
    for pod in pods:
        assert pod["metadata"].get("annotations", {}).get(ANNOTATION[0]) == ANNOTATION[1]
        selector = pod["spec"].get("nodeSelector", {})
        assert selector.get("kubernetes.io/hostname") == CHOSEN_NODE
        # Kueue also injects the flavor's nodeLabels.
        assert selector.get("nvidia.com/gpu.product") == GPU_PRODUCT
        assert pod["spec"].get("nodeName") == CHOSEN_NODE
        assert pod["status"].get("podIP"), f"KWOK gave pod {pod['metadata']['name']} no IP"

    # The same Workload read through the deprecated v1beta1 API goes through Kueue's conversion
    # webhook on loopback: proves the CRD's clientConfig.url and caBundle work too.
    old = get_custom(api, GROUP, "v1beta1", "workloads", wl_name, ns)
    assert old["apiVersion"] == f"{GROUP}/v1beta1"
    assert old["metadata"]["uid"] == workload["metadata"]["uid"]
