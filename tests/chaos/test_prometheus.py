"""Prometheus stopped and started again: decisions never stop; speculation is off while telemetry is
missing (with a telemetry reason) and comes back on afterwards; placement stays legal throughout."""

from __future__ import annotations

import re
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
from tests.e2e.pool import NodeDef, decided, decisions, serving_annotations
from tests.harness.wait import wait_until

pytestmark = pytest.mark.chaos


def _errors(metrics: str) -> float:
    return sum(
        float(v) for v in re.findall(r"^sovereignspec_prometheus_errors_total\{[^}]*\} (\S+)$", metrics, re.M)
    )


def test_prometheus_outage_turns_speculation_off_then_back_on(chaos: Chaos) -> None:
    pool, prom = chaos.pool, chaos.stack.prometheus
    add_nodes_bulk(
        pool, [NodeDef(f"de{i}", "DE") for i in range(2)] + [NodeDef(f"kr{i}", "KR") for i in range(2)]
    )
    setup_private_queue(pool, chaos.controller)
    ns = pool.tenant("bank", tenant_label=f"{pool.name}-bank")
    pool.sovereignty("kr", {"tenants": [f"{pool.name}-bank"], "jurisdictions": ["KR"]})
    # Every node scraped, not just one: the KR-only tenant's jobs need the KR nodes in the operator's first
    # reading (CI once saw NodeTelemetryMissing on both "before" jobs when only some hosts were in).
    prom.wait_for(
        f'count by (Hostname) (DCGM_FI_PROF_PIPE_TENSOR_ACTIVE{{Hostname=~"{pool.name}-.*"}})',
        min_series=4,
        timeout=60,
    )
    op = chaos.operator()
    op.start()
    op.wait_ready()
    wait_queue_active(pool)

    def submit(prefix: str, n: int) -> None:
        pool.cluster.kubectl(
            "apply", "-f", "-", input=jobs_docs([f"{prefix}{i}" for i in range(n)], ns, serving_annotations())
        )

    def modes(prefix: str) -> dict[str, tuple[str, list[str]]]:
        return {
            d["metadata"]["name"]: (d["status"]["mode"], [r["type"] for r in d["status"].get("reasons", [])])
            for d in decisions(pool, ns)
            if d["metadata"]["name"].startswith(f"job-{prefix}")
        }

    submit("before", 2)
    decided(pool, ns, count=2)
    assert {m for m, _ in modes("before").values()} == {"on"}, modes("before")

    prom.stop()
    try:
        base = _errors(op.metrics())
        wait_until(
            lambda: _errors(op.metrics()) > base, timeout=30, what="operator counting Prometheus errors"
        )
        submit("during", 3)
        decided(pool, ns, count=5)
        during = modes("during")
        assert len(during) == 3
        for name, (mode, reasons) in during.items():
            assert mode == "off", (name, mode, reasons)
            assert any("Telemetry" in r for r in reasons), (name, reasons)
    finally:
        prom.start()

    # Speculation comes back once telemetry is fresh again: one new workload at a time until one is on.
    t0 = time.monotonic()
    back: dict[str, tuple[str, list[str]]] = {}
    for i in range(30):
        submit(f"after{i}-", 1)
        decided(pool, ns, count=6 + i)
        back = modes(f"after{i}-")
        if any(m == "on" for m, _ in back.values()):
            break
        time.sleep(2)
    assert any(m == "on" for m, _ in back.values()), (
        f"speculation still off after Prometheus returned: {back}"
    )
    print(f"speculation back on {time.monotonic() - t0:.1f}s after Prometheus restarted")
    violations = check_invariants(pool, [ns])
    assert not violations, "\n".join(violations)
