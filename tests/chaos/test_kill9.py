"""kill -9 of the operator at random moments during 200 admissions, restarted each time: every
workload ends with exactly one decision, its Kueue entry matches its SpeculationDecision, and the
sovereignty invariants hold over the final state."""

from __future__ import annotations

import os
import random
import time
from collections import Counter, defaultdict

import pytest
from kubernetes import client

from tests.chaos.conftest import Chaos
from tests.chaos.harness import (
    add_nodes_bulk,
    check_invariants,
    jobs_docs,
    setup_private_queue,
    wait_queue_active,
)
from tests.e2e.pool import NodeDef, decisions, our_entry, serving_annotations, workloads
from tests.harness.wait import wait_until

pytestmark = pytest.mark.chaos

TOTAL = 200
WAVES = 5


def test_kill9_at_random_moments_during_200_admissions(chaos: Chaos) -> None:
    pool = chaos.pool
    add_nodes_bulk(
        pool,
        [NodeDef(f"de{i}", "DE", base_load=0.1 * (i % 5)) for i in range(12)]
        + [NodeDef(f"kr{i}", "KR", gpu="a100") for i in range(12)]
        + [NodeDef(f"us{i}", "US") for i in range(6)],
    )
    setup_private_queue(pool, chaos.controller, gpu_quota=1000)
    de = pool.tenant("de", tenant_label=f"{pool.name}-de")
    kr = pool.tenant("kr", tenant_label=f"{pool.name}-kr")
    free = pool.tenant("free")
    nowhere = pool.tenant("xx", tenant_label=f"{pool.name}-xx")
    pool.sovereignty("de", {"tenants": [f"{pool.name}-de"], "jurisdictions": ["DE"]})
    pool.sovereignty("kr", {"tenants": [f"{pool.name}-kr"], "jurisdictions": ["KR"], "isolation": "Node"})
    pool.sovereignty("xx", {"tenants": [f"{pool.name}-xx"], "jurisdictions": [f"XX-{pool.name}"]})
    op = chaos.operator()
    op.start()
    op.wait_ready()
    wait_queue_active(pool)

    plan = {de: 80, kr: 70, free: 40, nowhere: 10}
    assert sum(plan.values()) == TOTAL
    batches: list[tuple[str, list[str], dict[str, str]]] = []
    for ns, n in plan.items():
        half = n // 2
        batches.append((ns, [f"i{i:03d}" for i in range(half)], serving_annotations()))
        batches.append((ns, [f"b{i:03d}" for i in range(n - half)], serving_annotations(cls="batch")))
    # Consecutive waves in tenant order: the isolated KR tenant's jobs come before the unconstrained
    # tenant's, which could otherwise take KR nodes first and leave KR jobs no sovereign node (Retry).
    docs: list[tuple[str, str, dict[str, str]]] = [
        (ns, name, ann) for ns, names, ann in batches for name in names
    ]
    seed = int(os.environ.get("SOVEREIGNSPEC_CHAOS_SEED", time.time_ns() % 100000))
    rng = random.Random(seed)
    size = -(-len(docs) // WAVES)
    waves = [docs[i : i + size] for i in range(0, len(docs), size)]

    def answered() -> int:
        return sum(
            1
            for ns in plan
            for w in workloads(pool, ns)
            if (our_entry(w, pool.name) or {}).get("state") in ("Ready", "Retry", "Rejected")
        )

    # Each wave is submitted, then the operator is killed -9 at a random moment while it works on it
    # (however fast the machine is, later waves are still to come), and restarted.
    kills_mid_stream = 0
    for wave in waves:
        groups: dict[tuple[str, str], list[str]] = defaultdict(list)
        for ns, name, ann in wave:
            groups[(ns, ann["sovereignspec.io/class"])].append(name)
        for (ns, cls), names in groups.items():
            pool.cluster.kubectl("apply", "-f", "-", input=jobs_docs(names, ns, serving_annotations(cls=cls)))
        time.sleep(rng.uniform(0.05, 1.0))
        done = answered()
        op.kill()
        if 0 < done < TOTAL - plan[nowhere]:
            kills_mid_stream += 1
        op.start()
        op.wait_ready()
    assert kills_mid_stream >= 2, (
        f"the operator was never killed while admissions were in flight (seed {seed}); nothing was proven"
    )

    def all_ready() -> bool:
        ready = 0
        for ns in (de, kr, free):
            ready += sum(
                1 for w in workloads(pool, ns) if (our_entry(w, pool.name) or {}).get("state") == "Ready"
            )
        return ready == TOTAL - plan[nowhere]

    wait_until(
        all_ready, timeout=240, interval=1, what=f"{TOTAL - plan[nowhere]} workloads Ready (seed {seed})"
    )

    for ns in plan:
        wls = workloads(pool, ns)
        decs = decisions(pool, ns)
        names = Counter(d["metadata"]["name"] for d in decs)
        assert all(c == 1 for c in names.values())
        by_name = {d["metadata"]["name"]: d for d in decs}
        for w in wls:
            entry = our_entry(w, pool.name) or {}
            if ns == nowhere:
                assert entry.get("state") != "Ready", (
                    f"I5: {w['metadata']['name']} Ready with no sovereign node"
                )
                continue
            assert entry.get("state") == "Ready"
            d = by_name[w["metadata"]["name"]]
            assert d["status"]["state"] == "Ready"
            assert d["spec"]["workloadUid"] == w["metadata"]["uid"]
        # Pods that started run where their decision says.
        for p in client.CoreV1Api(pool.api).list_namespaced_pod(ns).items:
            if p.spec.node_name:
                wl_name = next(
                    (
                        w["metadata"]["name"]
                        for w in wls
                        if w["metadata"].get("ownerReferences", [{}])[0].get("name")
                        == p.metadata.labels.get("job-name")
                    ),
                    None,
                )
                if wl_name in by_name:
                    assert p.spec.node_name == by_name[wl_name]["status"]["node"]
    violations = check_invariants(pool, list(plan))
    assert not violations, f"seed {seed}:\n" + "\n".join(violations[:20])
    print(f"kill -9 x{kills_mid_stream} during {TOTAL} admissions (seed {seed}): all consistent")
