"""kube-apiserver restarted in the middle of a stream of admissions: the operator recovers on its own
(same process, no restart), answers every workload, and the final state is consistent.

The cluster is shared: conftest moves this test to the end of the session, and it restarts the API
server exactly once (`deploy/local/cluster.sh restart kube-apiserver`)."""

from __future__ import annotations

import subprocess
import time

import pytest

from tests.chaos.conftest import Chaos
from tests.chaos.harness import (
    add_nodes_bulk,
    check_invariants,
    jobs_docs,
    setup_private_queue,
    wait_queue_active,
)
from tests.e2e.pool import NodeDef, decided, our_entry, serving_annotations, workloads
from tests.harness.cluster import CLUSTER_SH
from tests.harness.wait import wait_until

pytestmark = pytest.mark.chaos

FIRST, SECOND = 40, 10


def test_apiserver_restart_mid_stream_operator_recovers(chaos: Chaos) -> None:
    pool = chaos.pool
    add_nodes_bulk(pool, [NodeDef(f"n{i}", "DE" if i % 2 else "KR") for i in range(8)])
    setup_private_queue(pool, chaos.controller)
    ns = pool.tenant("stream")
    op = chaos.operator()
    op.start()
    op.wait_ready()
    wait_queue_active(pool)

    pool.cluster.kubectl(
        "apply", "-f", "-", input=jobs_docs([f"a{i:02d}" for i in range(FIRST)], ns, serving_annotations())
    )

    def answered() -> int:
        return sum(1 for w in workloads(pool, ns) if (our_entry(w, pool.name) or {}).get("state") == "Ready")

    wait_until(lambda: answered() >= 3, timeout=90, interval=0.2, what="the first answers")
    before = answered()
    t0 = time.monotonic()
    result = subprocess.run(
        [str(CLUSTER_SH), "restart", "kube-apiserver"], capture_output=True, text=True, timeout=300
    )
    assert result.returncode == 0, result.stderr[-2000:]
    downtime = time.monotonic() - t0
    print(f"kube-apiserver restarted after {before}/{FIRST} answers; down for about {downtime:.1f}s")
    assert before < FIRST, "the stream finished before the restart; nothing was proven"

    decided(pool, ns, count=FIRST)
    # Watches resumed: workloads created after the restart are answered too.
    pool.cluster.kubectl(
        "apply", "-f", "-", input=jobs_docs([f"b{i:02d}" for i in range(SECOND)], ns, serving_annotations())
    )
    decided(pool, ns, count=FIRST + SECOND)
    assert op.running and op.starts == 1, "the operator needed a restart"
    violations = check_invariants(pool, [ns])
    assert not violations, "\n".join(violations)
