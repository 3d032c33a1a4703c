"""Chaos tests: a session-wide simulator + private Prometheus; each test gets a private pool with its
own AdmissionCheck controller name and starts (and breaks) its own operator processes.

The test that restarts kube-apiserver is moved to the very end of the session: the cluster is shared
with other engineers' runs, and it should disturb them once, as late as possible.
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass

import pytest

from tests.chaos.harness import ProfiledOperator, operator, unique_controller
from tests.e2e.conftest import install_crds
from tests.e2e.pool import Pool, new_pool
from tests.e2e.processes import SimulatorProcess
from tests.harness.cluster import LocalCluster
from tests.telemetry.promproc import PrometheusProcess

LAST = "apiserver_restart"


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    items.sort(key=lambda it: LAST in it.name)  # stable: only the apiserver restart moves to the end


@dataclass
class ChaosStack:
    cluster: LocalCluster
    prometheus: PrometheusProcess
    simulator: SimulatorProcess


@pytest.fixture(scope="session")
def chaos_stack(local_cluster: LocalCluster) -> Iterator[ChaosStack]:
    install_crds(local_cluster)
    sim = SimulatorProcess(local_cluster)
    sim.start()
    prom: PrometheusProcess | None = None
    try:
        sim.wait_ready()
        prom = PrometheusProcess([f"127.0.0.1:{sim.port}"], scrape_interval=1.0).start()
        yield ChaosStack(local_cluster, prom, sim)
    finally:
        if prom is not None:
            prom.cleanup()
        sim.stop()


@dataclass
class Chaos:
    stack: ChaosStack
    pool: Pool
    controller: str
    operators: list[ProfiledOperator]

    def operator(self, **kw: object) -> ProfiledOperator:
        op = operator(self.stack.cluster, self.stack.prometheus.url, self.controller, **kw)  # type: ignore[arg-type]
        self.operators.append(op)
        return op


@pytest.fixture
def chaos(chaos_stack: ChaosStack, request: pytest.FixtureRequest) -> Iterator[Chaos]:
    prefix = request.node.name.replace("_", "-")[5:22].strip("-") or "chaos"
    c = Chaos(chaos_stack, new_pool(chaos_stack.cluster, prefix), unique_controller("chaos"), [])
    try:
        yield c
    finally:
        for op in c.operators:
            op.kill()
        c.pool.close()
