"""Slack decides the mode: idle GPUs get speculation, saturated ones or an SLO-bound neighbour do not."""

from __future__ import annotations

import json
import time

import pytest

from tests.e2e.conftest import Stack
from tests.e2e.pool import (
    NodeDef,
    Pool,
    decided,
    decisions,
    job,
    neighbour_engine,
    our_entry,
    serving_annotations,
)

pytestmark = pytest.mark.e2e


def _telemetry_for(stack: Stack, node: str, settled: str = ">= 0") -> None:
    """Prometheus holds the node's GPU load, smoothed over the policy's 30 s window, at its settled level
    (the simulator's load starts at zero and converges over a few ticks)."""
    stack.prometheus.wait_for(
        f'avg_over_time(DCGM_FI_PROF_PIPE_TENSOR_ACTIVE{{Hostname="{node}"}}[30s]) {settled}', timeout=90
    )
    time.sleep(1.5)  # one operator telemetry refresh


def _mode(pool: Pool, ns: str) -> tuple[str, dict[str, object]]:
    (wl,) = decided(pool, ns)
    (update,) = our_entry(wl, pool.name)["podSetUpdates"]  # type: ignore[index]
    (dec,) = decisions(pool, ns)
    return update["labels"]["sovereignspec.io/speculative"], dec["status"]


def test_idle_gpu_gets_speculation(stack: Stack, pool: Pool) -> None:
    (node,) = pool.add_nodes(NodeDef("idle", base_load=0.0))
    pool.setup_queue()
    _telemetry_for(stack, node)
    ns = pool.tenant("idle")
    pool.apply(job("chat", ns, serving_annotations(batch=4)))
    mode, status = _mode(pool, ns)
    assert mode == "on", status
    spec = status["speculative"]
    assert isinstance(spec, dict)
    cfg = json.loads(str(spec["config"]))
    assert cfg["num_speculative_tokens"] >= 1
    assert float(status["predictedSpeedup"]) > 1.05  # type: ignore[arg-type]


def test_saturated_gpu_runs_plain(stack: Stack, pool: Pool) -> None:
    # Saturated: other tenants keep the tensor cores busy all the time (u -> 1). Even at u = 0.995 the
    # model still finds slack at batch 1, where the memory-bound part of a step dominates.
    # (No simulator noise here: noise clipped at 1.0 would pull the mean below saturation.)
    (node,) = pool.add_nodes(NodeDef("hot", base_load=0.9999, noise=0.0))
    pool.setup_queue()
    _telemetry_for(stack, node, settled="> 0.999")
    ns = pool.tenant("hot")
    pool.apply(job("chat", ns, serving_annotations(batch=4)))
    mode, status = _mode(pool, ns)
    assert mode == "off", status
    assert status["speculative"]["config"] == ""  # type: ignore[index]


def test_neighbour_at_its_slo_blocks_speculation(stack: Stack, pool: Pool) -> None:
    (node,) = pool.add_nodes(NodeDef("shared", base_load=0.3, gpus=1, replicas=2))
    pool.setup_queue()
    # A neighbour engine already serving on the node's one GPU (time-sliced in two), outside Kueue. Its
    # administrator allows it a 1 ms SLO (limits.minTpotSloMs): without that, the SpeculationPolicy's
    # 20 ms floor applies to its claim (issue 14: a tenant's own claim cannot switch neighbours off).
    other = pool.tenant("neighbour", outside_kueue=True)
    pool.sovereignty("tight-slo", {"tenants": [other], "limits": {"minTpotSloMs": 0.5}})
    # Already over its SLO from the start: 1 ms per token is far below what any engine gets, so there is
    # no margin for anybody's verification tokens, whatever TPOT window the operator reads.
    neighbour_engine(pool, other, node, serving_annotations(cls="interactive", slo_ms=1))
    series = stack.prometheus.wait_for(
        f"histogram_quantile(0.9, sum by (le) (rate(vllm:request_time_per_output_token_seconds_bucket"
        f'{{namespace="{other}",pod="engine"}}[30s]))) > 0.001',  # seconds: over the 1 ms SLO
        timeout=60,
    )
    assert series, series
    time.sleep(1.5)  # one operator telemetry refresh (a pod dcgm has not named yet counts anyway)
    ns = pool.tenant("newcomer")
    pool.apply(job("chat", ns, serving_annotations(batch=4)))
    mode, status = _mode(pool, ns)
    assert mode == "off", status
    reasons = " ".join(str(r) for r in status["reasons"])  # type: ignore[attr-defined]
    assert "neighbour" in reasons.lower() or "slo" in reasons.lower(), status
