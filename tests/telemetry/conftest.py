"""Fixtures for the telemetry tests: an in-process simulator served on loopback and a real
Prometheus (Debian's `prometheus`) scraping it every second. Only tests marked `prometheus` use them."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

from sovereignspec.telemetry.sim.scenario import Scenario, load_scenario
from sovereignspec.telemetry.sim.server import SimServer
from sovereignspec.telemetry.sim.simulator import Simulator
from tests.telemetry.promproc import PrometheusProcess

SCENARIOS = Path(__file__).parent / "scenarios"
WARMUP_TICKS = 20  # the load model's fixed point settles in a few ticks


def small_scenario() -> Scenario:
    return load_scenario(SCENARIOS / "small.yaml")


def pod_dicts(scenario: Scenario) -> list[dict[str, Any]]:
    """The scenario's pods as the API server would return them (what the operator's index holds)."""
    return [
        {"metadata": {"namespace": p.namespace, "name": p.name, "annotations": dict(p.annotations)}}
        for p in scenario.pods
    ]


class Stack:
    """Simulator + its /metrics server + a Prometheus scraping it."""

    def __init__(self, scenario: Scenario, scrape_interval: float = 1.0) -> None:
        self.scenario = scenario
        self.sim = Simulator(scenario)
        for _ in range(WARMUP_TICKS):
            self.sim.tick()
        self.server = SimServer(self.sim).start()
        self.prom = PrometheusProcess([f"127.0.0.1:{self.server.port}"], scrape_interval).start()

    def wait_scraped(self, samples: int = 4) -> None:
        """Until every series has a few samples, so rates and averages over the window exist."""
        self.prom.wait_for(f"count_over_time(vllm:num_requests_running[1m]) >= {samples}")
        self.prom.wait_for(f"count_over_time(DCGM_FI_PROF_PIPE_TENSOR_ACTIVE[1m]) >= {samples}")

    def close(self) -> None:
        self.prom.cleanup()
        self.server.stop()


@pytest.fixture(scope="module")
def stack() -> Iterator[Stack]:
    """Shared by the read-only tests of a module: never inject faults into it."""
    s = Stack(small_scenario())
    try:
        s.wait_scraped()
        yield s
    finally:
        s.close()


@pytest.fixture
def make_stack() -> Iterator[Callable[..., Stack]]:
    """A private stack per test, for fault injection (stopping, NaN overrides)."""
    made: list[Stack] = []

    def make(scenario: Scenario | None = None, scrape_interval: float = 1.0) -> Stack:
        s = Stack(scenario or small_scenario(), scrape_interval)
        made.append(s)
        return s

    yield make
    for s in made:
        s.close()


@pytest.fixture
def empty_prometheus() -> Iterator[PrometheusProcess]:
    """A real Prometheus with no scrape targets."""
    p = PrometheusProcess([]).start()
    try:
        yield p
    finally:
        p.cleanup()
