"""Admission path: a Job and a Deployment (Kueue pod integration) admitted through our check."""

from __future__ import annotations

import json
import time

import pytest
from kubernetes import client

from tests.e2e.conftest import Stack
from tests.e2e.pool import (
    NodeDef,
    Pool,
    decided,
    decisions,
    deployment,
    job,
    our_entry,
    running_pods,
    serving_annotations,
)
from tests.harness.namespaces import create_namespace
from tests.harness.wait import wait_until

pytestmark = pytest.mark.e2e


def _watch_events(stack: Stack) -> dict[str, float]:
    return {
        line.split('resource="')[1].split('"')[0]: float(line.split()[-1])
        for line in stack.operator.metrics().splitlines()
        if line.startswith("sovereignspec_watch_events_total{")
    }


def test_job_admitted_with_decision_on_pods(stack: Stack, pool: Pool) -> None:
    events_before = _watch_events(stack)
    idle, busy = pool.add_nodes(NodeDef("idle", base_load=0.0), NodeDef("busy", base_load=0.9))
    pool.setup_queue()
    ns = pool.tenant("acme")
    pool.apply(job("chat", ns, serving_annotations(cls="interactive")))

    (wl,) = decided(pool, ns)
    entry = our_entry(wl, pool.name)
    assert entry is not None
    (update,) = entry["podSetUpdates"]
    node = update["nodeSelector"]["kubernetes.io/hostname"]
    assert node in (idle, busy)
    # No SovereigntyPolicy binds this tenant: the hostname alone pins the pod (no jurisdiction key).
    assert "sovereignspec.io/jurisdiction" not in update["nodeSelector"]
    assert update["annotations"]["sovereignspec.io/decision"] == wl["metadata"]["name"]

    (dec,) = decisions(pool, ns)
    assert dec["metadata"]["name"] == wl["metadata"]["name"]
    owner = dec["metadata"]["ownerReferences"][0]
    assert (owner["kind"], owner["uid"]) == ("Workload", wl["metadata"]["uid"])
    assert dec["status"]["state"] == "Ready" and dec["status"]["node"] == node

    (pod,) = running_pods(pool, ns)
    assert pod.spec.node_name == node
    assert pod.spec.node_selector["kubernetes.io/hostname"] == node
    assert (
        pod.metadata.labels["sovereignspec.io/speculative"]
        == update["labels"]["sovereignspec.io/speculative"]
    )
    cfg = pod.metadata.annotations["sovereignspec.io/speculative-config"]
    assert cfg == update["annotations"]["sovereignspec.io/speculative-config"]
    if cfg:
        parsed = json.loads(cfg)
        assert parsed["method"] == "eagle3" and parsed["num_speculative_tokens"] >= 1

    # The operator counted the watch events this test caused, per resource (its CPU grows with them).
    events = _watch_events(stack)
    for resource in ("nodes", "pods", "workloads", "speculationdecisions", "namespaces"):
        assert events.get(resource, 0) > events_before.get(resource, 0), (events_before, events)


def test_deployment_through_pod_integration(stack: Stack, pool: Pool) -> None:
    (node,) = pool.add_nodes(NodeDef("d0", jurisdiction="US", gpu="a100"))
    pool.setup_queue()
    stack.prometheus.wait_for(
        f'avg_over_time(DCGM_FI_PROF_PIPE_TENSOR_ACTIVE{{Hostname="{node}"}}[30s]) >= 0', timeout=60
    )
    time.sleep(2)  # one operator telemetry refresh
    ns = pool.tenant("web")
    pool.apply(deployment("svc", ns, serving_annotations()))

    (wl,) = decided(pool, ns)
    (update,) = our_entry(wl, pool.name)["podSetUpdates"]  # type: ignore[index]
    assert update["nodeSelector"]["kubernetes.io/hostname"] == node
    (pod,) = running_pods(pool, ns)
    assert pod.spec.node_name == node
    # Kueue's pod integration copies no annotations into the Workload: the claims come from the Pod.
    assert pod.metadata.labels["sovereignspec.io/speculative"] == "on", pod.metadata.annotations
    assert json.loads(pod.metadata.annotations["sovereignspec.io/speculative-config"])["method"] == "eagle3"
    events = client.CoreV1Api(pool.api).list_namespaced_event(
        ns, field_selector=f"involvedObject.name={wl['metadata']['name']}"
    )
    assert any(e.reason == "SpeculationReady" for e in events.items), [e.reason for e in events.items]


def test_a_finished_pod_frees_its_gpus(stack: Stack, pool: Pool) -> None:
    """The operator's pod watch leaves finished pods out server-side (a field selector): the API server
    sends a pod that finishes as DELETED, and the operator must drop it and free its GPUs."""
    (node,) = pool.add_nodes(NodeDef("f0"))
    pool.setup_queue()
    ns = pool.tenant("fin")
    # A Job outside Kueue (KWOK completes only Jobs' pods) on all 8 GPUs, finishing after a few seconds.
    outside = create_namespace(pool.cluster, "outside", {"sovereignspec.io/test-outside-kueue": "true"})
    pool.namespaces.append(outside)
    gpus = {"nvidia.com/gpu": "8"}
    batch = client.BatchV1Api(pool.api)
    all_gpus = client.V1Job(
        metadata=client.V1ObjectMeta(name="all-gpus"),
        spec=client.V1JobSpec(
            backoff_limit=0,
            template=client.V1PodTemplateSpec(
                metadata=client.V1ObjectMeta(
                    annotations={
                        "pod-complete.stage.kwok.x-k8s.io/delay": "10s",
                        "pod-complete.stage.kwok.x-k8s.io/jitter-delay": "5s",
                    }
                ),
                spec=client.V1PodSpec(
                    node_name=node,
                    restart_policy="Never",
                    containers=[
                        client.V1Container(
                            name="c",
                            image="x",
                            resources=client.V1ResourceRequirements(requests=gpus, limits=gpus),
                        )
                    ],
                ),
            ),
        ),
    )

    def created() -> bool:
        try:
            batch.create_namespaced_job(outside, all_gpus)
        except client.ApiException as exc:
            # Kueue's Job webhook reads namespaces from its informer cache, which may not hold a namespace
            # created a moment ago: it answers 404 "Namespace ... not found" until it does.
            if exc.status == 404 and "not found" in (exc.body or ""):
                return False
            raise
        return True

    wait_until(created, timeout=30, what="Job created once Kueue's webhook sees its namespace")
    core = client.CoreV1Api(pool.api)

    def phase() -> str | None:
        items = core.list_namespaced_pod(outside).items
        return items[0].status.phase if items else None

    wait_until(lambda: phase() == "Running", timeout=60, what="pod running on all 8 GPUs")
    events = _watch_events(stack).get("pods", 0)
    wait_until(lambda: phase() == "Succeeded", timeout=60, what="pod finished")
    # The finish reached the operator (as the watch's DELETED), then the GPUs are free again.
    wait_until(lambda: _watch_events(stack).get("pods", 0) > events, timeout=30, what="pod event handled")
    pool.apply(job("after", ns, serving_annotations()))
    (wl,) = decided(pool, ns)
    (update,) = (our_entry(wl, pool.name) or {})["podSetUpdates"]
    assert update["nodeSelector"]["kubernetes.io/hostname"] == node
