"""The idle scenario with a neighbour forecast (docs/decision.md, "The idle scenario with a neighbour
forecast"): a budget is safe in the conservative scenario or in the idle one, and the idle one prices each
neighbour at the margin it keeps if its batch rises as far as it was seen to dip."""

from __future__ import annotations

from datetime import UTC, datetime

import pytest
from hypothesis import given
from hypothesis import strategies as st

from sovereignspec.api import meta
from sovereignspec.model.acceptance import expected_lengths, iid_curve
from sovereignspec.model.cluster import AdmissionCheckInfo, ClusterSnapshot, NodeInfo, PodInfo
from sovereignspec.model.speedup import margin_at_slack, slo_margin_scalar
from sovereignspec.model.telemetry import EngineSample, GpuSample, PodRef, TelemetrySnapshot
from sovereignspec.policy.decide import decide
from sovereignspec.policy.neighbour_forecast import forecast_batch, forecast_margin
from sovereignspec.policy.node_state import NeighbourInput, Neighbours, NodeInput
from sovereignspec.policy.request import request_for
from tests.support import eagle3_workload, evaluate_nodes
from tests.unit.test_budget import CURVES

NOW = datetime(2026, 12, 8, 8, 0, 0, tzinfo=UTC)
H100 = "NVIDIA-H100-80GB-HBM3"


@given(running=st.floats(0.0, 1e4), dip=st.one_of(st.none(), st.floats(0.0, 1e4)))
def test_the_forecast_batch_rises_as_far_as_the_engine_dipped(running: float, dip: float | None) -> None:
    low = None if dip is None else max(0.0, running - dip)
    peak = forecast_batch(running, low)
    assert peak >= running
    assert peak == pytest.approx(running if low is None else 2.0 * running - low)


@given(
    slo=st.floats(0.005, 1.0),
    tpot=st.floats(0.005, 1.0),
    sigma=st.floats(0.01, 1.0),
    sigma_at=st.floats(0.01, 1.0),
)
def test_the_margin_at_another_batch_is_the_slo_over_the_tpot_scaled_by_the_slack(
    slo: float, tpot: float, sigma: float, sigma_at: float
) -> None:
    """TPOT scales as t_u = t0 / sigma: the margin at the other batch is the SLO over TPOT·sigma/sigma_at;
    the forecast takes it only where it is lower."""
    m = slo_margin_scalar(slo, tpot)
    assert margin_at_slack(m, sigma, sigma_at) == pytest.approx(
        slo_margin_scalar(slo, tpot * sigma / sigma_at)
    )
    assert margin_at_slack(m, sigma, sigma) == pytest.approx(m)
    assert forecast_margin(m, sigma, sigma_at) <= m
    assert forecast_margin(m, sigma, min(sigma, sigma_at)) == pytest.approx(
        margin_at_slack(m, sigma, min(sigma, sigma_at))
    )


def test_the_idle_scenario_keeps_a_budget_the_conservative_check_refuses_unless_the_forecast_lowers_it() -> (
    None
):
    """A GPU at load 0.7 beside a neighbour at margin 1: the conservative scenario (Δu floored at its idle
    value, against the room 1 - u) stops speculating at batch 8-31; the idle scenario allows k = 2 there.
    At a forecast margin of 0.1 it does not, and the budget is the conservative one. The placement key is
    the conservative budget's S_real either way."""
    el = expected_lengths(iid_curve(0.8, 4))
    ends, batch = [1, 7, 31, 1024], 31

    def k_star(forecast: float | None) -> tuple[list[int], float]:
        nb = NeighbourInput("ns", "nb", sigma=0.5, margin=1.0, u_total=0.7, margin_forecast=forecast)
        node = NodeInput(name="n", curve=CURVES[0], c_d=0.03, u=0.7, neighbours=Neighbours.of([nb]))
        ev = evaluate_nodes([node], el, ends, batch, 2, 0.05, 0.1)
        return [int(k) for k in ev.k_star[0]], float(ev.speedup_expected[0])

    conservative = k_star(-1.0)  # over its SLO at the forecast: the idle scenario allows nothing
    assert conservative == ([4, 4, 0, 0], 1.0)
    assert k_star(None) == ([4, 4, 2, 0], 1.0)  # forecast as measured
    assert k_star(0.1) == conservative


def _snapshot(running_min: float) -> ClusterSnapshot:
    """One H100 (two replicas) at load 0.7 with `nb` on it: 25 ms against its 40 ms SLO, 64 sequences now,
    `running_min` at the fewest over the window."""
    labels = {meta.LABEL_HOSTNAME: "n1", meta.DEFAULT_JURISDICTION_LABEL: "KR", meta.LABEL_GPU_PRODUCT: H100}
    pods = [
        PodInfo(namespace="shop", name="nb", node="n1", phase="Running", gpu_request=1,
                annotations={meta.ANNOTATION_TPOT_SLO_MS: "40"})
    ]  # fmt: skip
    engine = EngineSample(namespace="shop", pod="nb", tpot_seconds=0.025, running=64, running_min=running_min)
    gpu = GpuSample(
        node="n1",
        uuid="GPU-0",
        tensor_active=0.7,
        fb_free_mib=40000.0,
        pods=[PodRef(namespace="shop", name="nb")],
    )
    return ClusterSnapshot.one_check(
        AdmissionCheckInfo(name="ss", controller_name=meta.CONTROLLER_NAME),
        ["bank-a", "shop"],
        nodes=[NodeInfo(name="n1", labels=labels, gpu_allocatable=2)],
        pods=pods,
        telemetry=TelemetrySnapshot(time=NOW, gpus=[gpu], engines=[engine]),
    )


def test_a_neighbour_that_dipped_in_the_window_is_priced_at_its_forecast_batch() -> None:
    """The same neighbour, steady at 64 sequences or seen down to 32 in the window (forecast: 96). Beside
    the steady one the budget speculates at batch 8; beside the swinging one it does not."""
    budgets = []
    for low in (64.0, 32.0):
        snap = _snapshot(low)
        req, policies = request_for(eagle3_workload(50, 4), snap)
        d = decide(req, snap, policies, NOW)
        assert d.speculative.enabled and [nb.pod for nb in d.neighbours] == ["nb"]
        budgets.append(next(k for start, end, k in d.speculative.schedule if start <= 8 <= end))
    assert budgets == [1, 0]
