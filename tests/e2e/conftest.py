"""End-to-end stack on the local cluster: our CRDs, a dedicated Prometheus scraping the telemetry
simulator (which watches the cluster's GPU pods), and the operator as a real process.

The Prometheus is private to these tests so that a test can stop it (telemetry loss) without
touching the cluster's own.
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest

from tests.e2e.pool import Pool, new_pool
from tests.e2e.processes import OperatorProcess, SimulatorProcess
from tests.harness.cluster import LocalCluster
from tests.telemetry.promproc import PrometheusProcess

ROOT = Path(__file__).resolve().parents[2]


@dataclass
class Stack:
    cluster: LocalCluster
    prometheus: PrometheusProcess
    simulator: SimulatorProcess
    operator: OperatorProcess

    def restart_operator(self) -> None:
        self.operator.stop()
        self.operator.start()
        self.operator.wait_ready()


def install_crds(cluster: LocalCluster) -> None:
    cluster.kubectl("apply", "--server-side", "--force-conflicts", "-f", str(ROOT / "crds"))
    cluster.wait_established(ROOT / "crds")


@pytest.fixture(scope="session")
def stack(local_cluster: LocalCluster) -> Iterator[Stack]:
    install_crds(local_cluster)
    sim = SimulatorProcess(local_cluster)
    sim.start()
    prom: PrometheusProcess | None = None
    op: OperatorProcess | None = None
    try:
        sim.wait_ready()
        prom = PrometheusProcess([f"127.0.0.1:{sim.port}"], scrape_interval=1.0).start()
        op = OperatorProcess(local_cluster, prom.url)
        op.start()
        op.wait_ready()
        yield Stack(local_cluster, prom, sim, op)
    finally:
        if op is not None:
            op.stop()
        if prom is not None:
            prom.cleanup()
        sim.stop()


@pytest.fixture
def pool(stack: Stack, request: pytest.FixtureRequest) -> Iterator[Pool]:
    p = new_pool(stack.cluster, request.node.name.replace("_", "-")[5:25].strip("-") or "pool")
    try:
        yield p
    finally:
        p.close()


@pytest.fixture(autouse=True)
def _operator_alive(request: pytest.FixtureRequest) -> Iterator[None]:
    """After each e2e test the operator must still run; its log tail explains a failure."""
    yield
    if "stack" in request.fixturenames:
        st: Stack = request.getfixturevalue("stack")
        if not st.operator.running:
            pytest.fail(f"operator died during the test:\n{st.operator.log_tail()}", pytrace=False)
