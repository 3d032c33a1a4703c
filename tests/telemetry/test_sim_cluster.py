"""Mode (b): the simulator watches the local cluster's pods on GPU nodes; the cluster's Prometheus
scrapes it through file_sd; the reader sees the pod's engine, its GPU and its acceptance."""

from __future__ import annotations

import json
import re
import subprocess
import sys
import urllib.request
from typing import Any

import pytest

from sovereignspec.api.telemetry_spec import QueryOverrides, TelemetrySpec
from sovereignspec.model.telemetry import TelemetrySnapshot
from sovereignspec.telemetry.annotations import identities_from_pods
from sovereignspec.telemetry.queries import default_queries
from sovereignspec.telemetry.reader import PrometheusReader
from tests.harness.cluster import LocalCluster
from tests.harness.namespaces import namespace, unique_name
from tests.harness.prometheus import add_scrape_target, remove_scrape_target
from tests.harness.wait import wait_until
from tests.telemetry.promproc import free_port

pytestmark = [pytest.mark.cluster, pytest.mark.timeout(300)]

SPEC_CFG = json.dumps({"method": "eagle3", "model": "eagle3-test", "num_speculative_tokens": 3})
METRIC = re.compile(r"\b(DCGM_FI_[A-Z_]+|vllm:[a-z_:]+)(?=[\[\)])")


def scoped(spec: TelemetrySpec, job: str) -> TelemetrySpec:
    """Every default query restricted to our simulator's job: other tests may run their own."""
    qs = {
        q.value: METRIC.sub(lambda m: f'{m.group(1)}{{job="{job}"}}', promql)
        for q, promql in default_queries(spec).items()
    }
    return spec.model_copy(update={"queries": QueryOverrides(**qs)})


def gpu_node(cluster: LocalCluster) -> str:
    nodes = [n for n in cluster.fake_nodes() if "nvidia.com/gpu.product" in n["metadata"].get("labels", {})]
    assert nodes, "the local cluster has no fake GPU nodes"
    return str(nodes[0]["metadata"]["name"])


def test_simulator_follows_cluster_pods(local_cluster: LocalCluster) -> None:
    from kubernetes import client

    core = client.CoreV1Api(local_cluster.api_client)
    node = gpu_node(local_cluster)
    port = free_port()
    job = unique_name("telemetry-sim").replace("-", "_")
    sim = subprocess.Popen(
        [sys.executable, "-m", "sovereignspec", "telemetry-sim",
         "--kubeconfig", str(local_cluster.kubeconfig), "--port", str(port), "--log-level", "WARNING"],
        stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
    )  # fmt: skip
    target = add_scrape_target(local_cluster, job, [f"127.0.0.1:{port}"])
    try:
        # Infrastructure of the test (a pod pinned by nodeName, outside Kueue): a system namespace, which
        # neither Kueue nor the chart's admission policy manage.
        with namespace(local_cluster, "telemetry-sim", {"sovereignspec.io/system": "true"}) as ns:
            annotations = {
                "sovereignspec.io/target-model": "meta-llama/Llama-3.1-8B-Instruct",
                "sovereignspec.io/draft-model": "eagle3-test",
                "sovereignspec.io/spec-method": "eagle3",
                "sovereignspec.io/speculative-config": SPEC_CFG,
                "sovereignspec.io/sim-request-rate": "4",
            }
            pod: dict[str, Any] = {
                "apiVersion": "v1",
                "kind": "Pod",
                "metadata": {"name": "engine-0", "namespace": ns, "annotations": annotations},
                "spec": {
                    "nodeName": node,
                    "tolerations": [{"operator": "Exists"}],
                    "containers": [
                        {"name": "vllm", "image": "vllm/vllm-openai",
                         "resources": {"limits": {"nvidia.com/gpu": "1"},
                                       "requests": {"nvidia.com/gpu": "1"}}}
                    ],
                },
            }  # fmt: skip
            core.create_namespaced_pod(ns, pod)

            def exported() -> bool:
                try:
                    body = (
                        urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=2).read().decode()
                    )
                except OSError:
                    return False
                return f'namespace="{ns}",pod="engine-0"' in body

            wait_until(exported, timeout=60, what="the simulator to export the new pod")

            spec = scoped(TelemetrySpec(window="30s", cache_ttl_seconds=0, query_timeout_seconds=5), job)
            reader = PrometheusReader(local_cluster.prometheus_url, spec)
            ids = identities_from_pods([pod])

            def complete() -> TelemetrySnapshot | None:
                snap = reader.snapshot(ids)
                engine = next((e for e in snap.engines if e.namespace == ns), None)
                if engine is None or engine.tpot_seconds is None or not snap.acceptance:
                    return None
                return snap

            snap = wait_until(
                complete, timeout=120, interval=2, what="the engine in Prometheus, with TPOT and drafts"
            )
            engine = next(e for e in snap.engines if e.namespace == ns)
            assert engine.running is not None and engine.tpot_seconds is not None
            gpus = [g for g in snap.gpus if any(p.namespace == ns for p in g.pods)]
            assert len(gpus) == 1 and gpus[0].node == node and gpus[0].tensor_active is not None
            (acc,) = [a for a in snap.acceptance if a.draft_model == "eagle3-test"]
            assert acc.method == "eagle3" and len(acc.accepted_per_position) == 3 and acc.drafts > 0

            core.delete_namespaced_pod("engine-0", ns, grace_period_seconds=0)
            wait_until(lambda: not exported(), timeout=60, what="the simulator to drop the deleted pod")
    finally:
        remove_scrape_target(local_cluster, job)
        assert not target.exists()
        sim.terminate()
        out = sim.communicate(timeout=10)[0]
        assert sim.returncode == 0, out
