"""Two replicas with Lease election: exactly one acts; kill -9 it and the other takes over in bounded
time (the lease duration plus a retry period, plus kopf's start)."""

from __future__ import annotations

import time
from collections.abc import Callable

import pytest

from tests.chaos.conftest import Chaos
from tests.chaos.harness import (
    add_nodes_bulk,
    check_invariants,
    jobs_docs,
    log_records,
    setup_private_queue,
    wait_queue_active,
)
from tests.e2e.pool import NodeDef, decided, serving_annotations
from tests.harness.wait import wait_until

pytestmark = pytest.mark.chaos

LEASE_S = 6  # OperatorProcess: lease 6 s, renew deadline 4 s, retry 1 s
TAKEOVER_BOUND_S = 25.0


def test_two_replicas_exactly_one_acts_and_the_standby_takes_over(
    chaos: Chaos, record_property: Callable[[str, object], None]
) -> None:
    pool = chaos.pool
    add_nodes_bulk(pool, [NodeDef(f"n{i}", "DE") for i in range(3)])
    setup_private_queue(pool, chaos.controller)
    ns = pool.tenant("ha")
    env = {"SOVEREIGNSPEC_LEASE_NAME": f"{pool.name}-leader"}
    a = chaos.operator(leader_election=True, identity=f"{pool.name}-a", extra_env=env)
    b = chaos.operator(leader_election=True, identity=f"{pool.name}-b", extra_env=env)
    a.start()
    b.start()
    a.wait_ready(leading=False)
    b.wait_ready(leading=False)

    def leaders() -> list[object]:
        return [op for op in (a, b) if (op.readyz() or {}).get("leading")]

    wait_until(lambda: len(leaders()) == 1, timeout=60, what="exactly one leader")
    (leader,) = leaders()
    standby = b if leader is a else a
    wait_queue_active(pool)

    pool.cluster.kubectl(
        "apply", "-f", "-", input=jobs_docs([f"a{i}" for i in range(6)], ns, serving_annotations())
    )
    decided(pool, ns, count=6)
    time.sleep(2)  # a standby that acted would have logged by now
    assert len(leaders()) == 1
    acted = {r["workload"] for r in log_records(leader, "decided") if r["workload"].startswith(f"{ns}/")}  # type: ignore[arg-type]
    assert len(acted) == 6
    assert not log_records(standby, "decided"), "the standby decided while another replica led"

    t_kill = time.monotonic()
    leader.kill()  # type: ignore[attr-defined]
    pool.cluster.kubectl(
        "apply", "-f", "-", input=jobs_docs([f"b{i}" for i in range(3)], ns, serving_annotations())
    )
    wait_until(
        lambda: (standby.readyz() or {}).get("leading"), timeout=60, interval=0.2, what="standby leading"
    )
    takeover = time.monotonic() - t_kill
    decided(pool, ns, count=9)
    first_answer = time.monotonic() - t_kill
    record_property("takeover_seconds", round(takeover, 2))
    record_property("first_answer_after_kill_seconds", round(first_answer, 2))
    print(
        f"leader killed: standby leading after {takeover:.1f}s, "
        f"pending workloads answered after {first_answer:.1f}s"
    )
    assert takeover <= TAKEOVER_BOUND_S, f"takeover took {takeover:.1f}s (lease {LEASE_S}s)"
    assert first_answer <= TAKEOVER_BOUND_S + 15
    assert (
        len({r["workload"] for r in log_records(standby, "decided") if r["workload"].startswith(f"{ns}/")})
        == 3
    )  # type: ignore[arg-type]
    violations = check_invariants(pool, [ns])
    assert not violations, "\n".join(violations)
