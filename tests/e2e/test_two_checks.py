"""Two admission checks on one ClusterQueue, answered by different field managers: no clobbering."""

from __future__ import annotations

import pytest
from kubernetes import client

from tests.e2e.conftest import Stack
from tests.e2e.pool import (
    NodeDef,
    Pool,
    decided,
    job,
    our_entry,
    running_pods,
    serving_annotations,
    workloads,
)
from tests.harness.ssa import apply_status
from tests.harness.wait import wait_until

pytestmark = pytest.mark.e2e

OTHER = "example.com/other-check"


def test_two_checks_do_not_clobber_each_other(stack: Stack, pool: Pool) -> None:
    pool.add_nodes(NodeDef("n0"))
    other = f"{pool.name}-other"
    pool.apply(
        {
            "apiVersion": "kueue.x-k8s.io/v1beta2",
            "kind": "AdmissionCheck",
            "metadata": {"name": other},
            "spec": {"controllerName": OTHER},
        }
    )
    pool.cluster_objects.append(("admissionchecks.kueue.x-k8s.io", other))
    apply_status(
        pool.api,
        group="kueue.x-k8s.io",
        version="v1beta2",
        plural="admissionchecks",
        name=other,
        field_manager="other-controller",
        body={
            "apiVersion": "kueue.x-k8s.io/v1beta2",
            "kind": "AdmissionCheck",
            "metadata": {"name": other},
            "status": {
                "conditions": [
                    {
                        "type": "Active",
                        "status": "True",
                        "reason": "Active",
                        "message": "test controller",
                        "lastTransitionTime": "2026-01-01T00:00:00Z",
                    }
                ]
            },
        },
    )
    pool.setup_queue(extra_checks=[other])
    ns = pool.tenant("two")
    pool.apply(job("chat", ns, serving_annotations()))

    # Ours answers by itself; the other check is still Pending beside it.
    (wl,) = decided(pool, ns)
    name = wl["metadata"]["name"]
    assert (our_entry(wl, other) or {}).get("state") == "Pending"

    apply_status(
        pool.api,
        group="kueue.x-k8s.io",
        version="v1beta2",
        plural="workloads",
        name=name,
        namespace=ns,
        field_manager="other-controller",
        body={
            "apiVersion": "kueue.x-k8s.io/v1beta2",
            "kind": "Workload",
            "metadata": {"name": name, "namespace": ns},
            "status": {
                "admissionChecks": [
                    {
                        "name": other,
                        "state": "Ready",
                        "message": "other says yes",
                        "lastTransitionTime": "2026-11-29T00:00:00Z",
                        "podSetUpdates": [{"name": "main", "labels": {"example.com/other": "yes"}}],
                    }
                ]
            },
        },
    )

    def both_ready() -> dict[str, object] | None:
        (w,) = workloads(pool, ns)
        mine, theirs = our_entry(w, pool.name), our_entry(w, other)
        if (mine or {}).get("state") == "Ready" and (theirs or {}).get("state") == "Ready":
            return w
        return None

    w = wait_until(both_ready, timeout=60, what="both checks Ready")
    mine, theirs = our_entry(w, pool.name), our_entry(w, other)  # type: ignore[arg-type]
    assert mine is not None and theirs is not None
    assert mine["podSetUpdates"][0]["annotations"]["sovereignspec.io/decision"] == name
    assert theirs["message"] == "other says yes"
    managers = {m["manager"] for m in w["metadata"]["managedFields"] if m.get("subresource") == "status"}  # type: ignore[index]
    assert {"sovereignspec", "other-controller"} <= managers

    (pod,) = running_pods(pool, ns)
    assert pod.metadata.labels["example.com/other"] == "yes"
    assert pod.metadata.annotations["sovereignspec.io/decision"] == name
    core = client.CoreV1Api(pool.api)
    assert core.read_namespaced_pod(pod.metadata.name, ns).spec.node_name == pool.nodes[0]
