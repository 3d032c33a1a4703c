"""Operator killed in the middle of a burst: every workload ends with exactly one decision."""

from __future__ import annotations

from collections import Counter

import pytest
import yaml

from tests.e2e.conftest import Stack
from tests.e2e.pool import NodeDef, Pool, decided, decisions, job, our_entry, serving_annotations, workloads
from tests.harness.wait import wait_until

pytestmark = pytest.mark.e2e

BURST = 50


def test_restart_mid_burst_loses_and_duplicates_nothing(stack: Stack, pool: Pool) -> None:
    names = pool.add_nodes(*(NodeDef(f"n{i}") for i in range(7)))  # 56 GPUs for 50 one-GPU jobs
    pool.setup_queue(gpu_quota=56)
    ns = pool.tenant("burst")
    docs = [
        job(f"j{i:02d}", ns, serving_annotations(cls="batch" if i % 2 else "interactive"))
        for i in range(BURST)
    ]
    pool.cluster.kubectl("apply", "-f", "-", input=yaml.safe_dump_all(docs))

    # Kill -9 once some, but not all, decisions are out.
    wait_until(lambda: len(decisions(pool, ns)) >= 5, timeout=90, what="the first decisions", interval=0.1)
    stack.operator.kill()
    seen_at_kill = len(decisions(pool, ns))
    stack.operator.start()
    stack.operator.wait_ready()

    wls = decided(pool, ns, count=BURST)
    decs = decisions(pool, ns)
    assert seen_at_kill < BURST, "the burst finished before the kill; the test proved nothing"
    assert len(wls) == BURST
    assert Counter(d["metadata"]["name"] for d in decs) == Counter(w["metadata"]["name"] for w in wls)
    by_name = {d["metadata"]["name"]: d for d in decs}
    per_node: Counter[str] = Counter()
    for w in workloads(pool, ns):
        entry = our_entry(w, pool.name)
        assert entry is not None and entry["state"] == "Ready"
        (update,) = entry["podSetUpdates"]
        node = update["nodeSelector"]["kubernetes.io/hostname"]
        dec = by_name[w["metadata"]["name"]]
        assert dec["status"]["node"] == node
        assert dec["spec"]["workloadUid"] == w["metadata"]["uid"]
        per_node[node] += 1
    assert set(per_node) <= set(names)
    over = {n: c for n, c in per_node.items() if c > 8}  # never more jobs than GPUs on a node
    assert not over, sorted(
        (d["status"]["node"], d["status"].get("decidedAt"), d["metadata"]["name"])
        for d in decs
        if d["status"]["node"] in over
    )
