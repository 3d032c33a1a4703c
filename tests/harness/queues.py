"""Kueue and SovereignSpec queue objects as the tests and benches create them: one place for their shape
(tests/e2e/pool.py, tests/chaos/harness.py and bench/scale_bench.py build on these)."""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any

KUEUE = "kueue.x-k8s.io/v1beta2"
OURS = "sovereignspec.io/v1alpha1"
# A short telemetry window and cache, so that tests see telemetry changes within seconds.
TEST_TELEMETRY = {"window": "30s", "stalenessSeconds": 30, "cacheTtlSeconds": 1}


def speculation_policy(name: str, spec: Mapping[str, Any] | None = None) -> dict[str, Any]:
    """A SpeculationPolicy with the test telemetry settings, `spec` merged over them."""
    return {
        "apiVersion": OURS,
        "kind": "SpeculationPolicy",
        "metadata": {"name": name},
        "spec": {"telemetry": dict(TEST_TELEMETRY), **(spec or {})},
    }


def resource_flavor(name: str, node_labels: Mapping[str, str]) -> dict[str, Any]:
    return {
        "apiVersion": KUEUE,
        "kind": "ResourceFlavor",
        "metadata": {"name": name},
        "spec": {"nodeLabels": dict(node_labels)},
    }


def admission_check(name: str, controller: str, policy: str) -> dict[str, Any]:
    """An AdmissionCheck for `controller`, parameterised by SpeculationPolicy `policy`."""
    return {
        "apiVersion": KUEUE,
        "kind": "AdmissionCheck",
        "metadata": {"name": name},
        "spec": {
            "controllerName": controller,
            "parameters": {"apiGroup": "sovereignspec.io", "kind": "SpeculationPolicy", "name": policy},
        },
    }


def cluster_queue(
    name: str,
    *,
    flavor: str,
    namespace_labels: Mapping[str, str],
    gpu_quota: int,
    checks: Iterable[str] = (),
    cpu: str = "100000",
    memory: str = "1000Ti",
) -> dict[str, Any]:
    """A ClusterQueue over one flavor for the namespaces with `namespace_labels`, with `gpu_quota`
    nvidia.com/gpu (cpu and memory ample unless given) and the AdmissionChecks `checks` (none: Kueue
    alone)."""
    spec: dict[str, Any] = {
        "namespaceSelector": {"matchLabels": dict(namespace_labels)},
        "resourceGroups": [
            {
                "coveredResources": ["cpu", "memory", "nvidia.com/gpu"],
                "flavors": [
                    {
                        "name": flavor,
                        "resources": [
                            {"name": "cpu", "nominalQuota": cpu},
                            {"name": "memory", "nominalQuota": memory},
                            {"name": "nvidia.com/gpu", "nominalQuota": str(gpu_quota)},
                        ],
                    }
                ],
            }
        ],
    }
    names = list(checks)
    if names:
        spec["admissionChecksStrategy"] = {"admissionChecks": [{"name": c} for c in names]}
    return {"apiVersion": KUEUE, "kind": "ClusterQueue", "metadata": {"name": name}, "spec": spec}


def local_queue(name: str, namespace: str, cluster_queue: str) -> dict[str, Any]:
    return {
        "apiVersion": KUEUE,
        "kind": "LocalQueue",
        "metadata": {"name": name, "namespace": namespace},
        "spec": {"clusterQueue": cluster_queue},
    }
