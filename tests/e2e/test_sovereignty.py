"""Sovereignty on the real cluster: no sovereign node means Retry; isolated tenants never share."""

from __future__ import annotations

from collections import defaultdict

import pytest
import yaml

from tests.e2e.conftest import Stack
from tests.e2e.pool import (
    NodeDef,
    Pool,
    decided,
    decisions,
    job,
    running_pods,
    serving_annotations,
)
from tests.harness.wait import wait_until

pytestmark = pytest.mark.e2e


def test_no_sovereign_node_gives_retry_with_message(stack: Stack, pool: Pool) -> None:
    pool.add_nodes(NodeDef("de0", jurisdiction="DE"), NodeDef("us0", jurisdiction="US"))
    pool.setup_queue()
    tenant = f"{pool.name}-kr"
    ns = pool.tenant("kr", tenant_label=tenant)
    pool.sovereignty("kr", {"tenants": [tenant], "jurisdictions": ["KR"]})
    pool.apply(job("chat", ns, serving_annotations()))

    def retried() -> dict[str, object] | None:
        ds = decisions(pool, ns)
        return ds[0] if ds and ds[0]["status"]["state"] in ("Retry", "Rejected") else None

    dec = wait_until(retried, timeout=60, what="a Retry decision")
    status = dec["status"]
    assert status["state"] == "Retry", status
    assert status["node"] is None if "node" in status else True
    assert "KR" in status["message"] or "jurisdiction" in status["message"].lower(), status["message"]
    # Never admitted onto a foreign node.
    from tests.e2e.pool import workloads

    for w in workloads(pool, ns):
        conds = {c["type"]: c["status"] for c in (w.get("status") or {}).get("conditions", [])}
        assert conds.get("Admitted") != "True", conds


def test_isolated_tenants_never_share_a_node_even_at_the_same_instant(stack: Stack, pool: Pool) -> None:
    pool.add_nodes(NodeDef("n0"), NodeDef("n1"), NodeDef("n2"))
    pool.setup_queue()
    tenants = {}
    for t in ("alpha", "beta"):
        label = f"{pool.name}-{t}"
        tenants[t] = pool.tenant(t, tenant_label=label)
        pool.sovereignty(t, {"tenants": [label], "jurisdictions": ["DE"], "isolation": "Node"})
    # Both tenants' jobs in one request: the operator sees them within milliseconds of each other.
    docs = [job(f"j{i}", ns, serving_annotations()) for i in range(3) for ns in tenants.values()]
    pool.cluster.kubectl("apply", "-f", "-", input=yaml.safe_dump_all(docs))

    for ns in tenants.values():
        decided(pool, ns, count=3)
    nodes: dict[str, set[str]] = defaultdict(set)
    for t, ns in tenants.items():
        for pod in running_pods(pool, ns, count=3):
            nodes[t].add(pod.spec.node_name)
        for d in decisions(pool, ns):
            assert d["status"]["node"] in nodes[t]
    assert nodes["alpha"] and nodes["beta"]
    assert not (nodes["alpha"] & nodes["beta"]), dict(nodes)
