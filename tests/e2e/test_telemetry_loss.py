"""Prometheus stopped: workloads are still admitted, plain, on a legal node (I6)."""

from __future__ import annotations

import re

import pytest

from tests.e2e.conftest import Stack
from tests.e2e.pool import (
    NodeDef,
    Pool,
    decided,
    decisions,
    job,
    our_entry,
    running_pods,
    serving_annotations,
)
from tests.harness.wait import wait_until

pytestmark = pytest.mark.e2e


def _unreachable(metrics: str) -> float:
    """Queries the operator counted as failed because Prometheus could not be reached."""
    pattern = r'^sovereignspec_prometheus_errors_total\{[^}]*reason="connection"[^}]*\} (\S+)$'
    return sum(float(v) for v in re.findall(pattern, metrics, re.M))


def test_prometheus_down_admits_plain_on_a_sovereign_node(stack: Stack, pool: Pool) -> None:
    kr, de = pool.add_nodes(NodeDef("kr", jurisdiction="KR"), NodeDef("de", jurisdiction="DE"))
    pool.setup_queue()
    ns = pool.tenant("bank", tenant_label=f"{pool.name}-bank")
    pool.sovereignty("kr-only", {"tenants": [f"{pool.name}-bank"], "jurisdictions": ["KR"]})

    base = _unreachable(stack.operator.metrics())
    stack.prometheus.stop()
    try:
        # The operator notices on its next refresh: its count of unreachable-Prometheus errors grows.
        # (Any error series at all was not proof: the shared stack may have counted others before.)
        wait_until(
            lambda: _unreachable(stack.operator.metrics()) > base,
            timeout=30,
            what="operator counting Prometheus as unreachable",
        )
        pool.apply(job("chat", ns, serving_annotations()))
        (wl,) = decided(pool, ns)
        (update,) = our_entry(wl, pool.name)["podSetUpdates"]  # type: ignore[index]
        assert update["labels"]["sovereignspec.io/speculative"] == "off"
        assert update["annotations"]["sovereignspec.io/speculative-config"] == ""
        assert update["nodeSelector"]["kubernetes.io/hostname"] == kr
        assert update["nodeSelector"]["sovereignspec.io/jurisdiction"] == "KR"
        (dec,) = decisions(pool, ns)
        assert any("Telemetry" in r["type"] for r in dec["status"]["reasons"]), dec["status"]["reasons"]
        (pod,) = running_pods(pool, ns)
        assert pod.spec.node_name == kr != de
    finally:
        stack.prometheus.start()
