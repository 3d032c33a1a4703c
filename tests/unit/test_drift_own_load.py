"""Drift must not count the workload's own engine as other tenants' load u (DESIGN.md §2).

A workload admitted on an idle GPU makes that GPU busy by itself; re-evaluating it on the measured
tensor-active (its own load included) used to see less slack than at admission and turn k down.
"""

from __future__ import annotations

from datetime import UTC, datetime

import pytest

from sovereignspec.api import meta
from sovereignspec.api.speculation_decision import SpeculationDecision
from sovereignspec.model.cluster import AdmissionCheckInfo, ClusterSnapshot, NodeInfo, PodInfo
from sovereignspec.model.profiles import DEFAULT_PROFILES
from sovereignspec.model.steptime import StepCurve
from sovereignspec.model.telemetry import EngineSample, GpuSample, PodRef, TelemetrySnapshot
from sovereignspec.model.workload import WorkloadInfo
from sovereignspec.operator.drift import drift_condition
from sovereignspec.policy.decide import decide
from sovereignspec.policy.decision import DRIFT, speculation_decision_object
from sovereignspec.policy.drift import evaluate_drift, k_at, others_load, own_share
from sovereignspec.policy.request import request_for
from tests.support import eagle3_workload

NOW = datetime(2026, 12, 1, 12, 0, 0, tzinfo=UTC)
H100 = "NVIDIA-H100-80GB-HBM3"
BATCH = 64


def _workload() -> WorkloadInfo:
    return eagle3_workload(100, BATCH)


def _snapshot(running: bool, tensor: float, neighbour: bool = False) -> ClusterSnapshot:
    """One H100 node (2 time-slicing replicas); `running`: the workload's pod is there."""
    node = NodeInfo(
        name="n1",
        labels={
            meta.LABEL_HOSTNAME: "n1",
            meta.DEFAULT_JURISDICTION_LABEL: "KR",
            meta.LABEL_GPU_PRODUCT: H100,
        },
        gpu_allocatable=2,
    )
    pods, refs, engines = [], [], []
    if running:
        pods.append(
            PodInfo(namespace="bank-a", name="chat-0", node="n1", phase="Running", gpu_request=1,
                    annotations={meta.ANNOTATION_DECISION: "chat"})
        )  # fmt: skip
        refs.append(PodRef(namespace="bank-a", name="chat-0"))
        engines.append(EngineSample(namespace="bank-a", pod="chat-0", tpot_seconds=0.02, running=BATCH))
    if neighbour:
        pods.append(
            PodInfo(namespace="shop", name="nb", node="n1", phase="Running", gpu_request=1,
                    annotations={meta.ANNOTATION_TPOT_SLO_MS: "1000"})
        )  # fmt: skip
        refs.append(PodRef(namespace="shop", name="nb"))
        engines.append(EngineSample(namespace="shop", pod="nb", tpot_seconds=0.03, running=8))
    return ClusterSnapshot.one_check(
        AdmissionCheckInfo(name="ss", controller_name=meta.CONTROLLER_NAME),
        ["bank-a", "shop"],
        nodes=[node],
        pods=pods,
        telemetry=TelemetrySnapshot(
            time=NOW,
            gpus=[
                GpuSample(
                    node="n1",
                    uuid="GPU-0",
                    tensor_active=tensor,
                    fb_free_mib=500.0 if running else 70000.0,
                    pods=refs,
                )
            ],
            engines=engines,
        ),
    )


def _admitted() -> tuple[WorkloadInfo, SpeculationDecision]:
    wl = _workload()
    snap = _snapshot(running=False, tensor=0.0)
    req, policies = request_for(wl, snap)
    d = decide(req, snap, policies, NOW)
    assert d.state == "Ready" and d.speculative.enabled
    return wl, SpeculationDecision.model_validate(speculation_decision_object(d, None))


def test_own_load_alone_on_its_gpu_is_not_drift() -> None:
    wl, record = _admitted()
    assert record.status is not None
    k0 = k_at(record.status.speculative.config, BATCH)
    assert k0 > 0
    # The GPU is now busy with the workload's own engine alone (tensor-active 0.6, framebuffer taken):
    # other tenants' load is 0, as at admission.
    result = evaluate_drift(wl, "ss", record, _snapshot(running=True, tensor=0.6), NOW)
    assert result is not None
    assert not result.drifted, result.message
    assert k_at(result.current_config, BATCH) == k0


def test_real_load_of_others_still_drifts() -> None:
    wl, record = _admitted()
    result = evaluate_drift(wl, "ss", record, _snapshot(running=True, tensor=0.97, neighbour=True), NOW)
    assert result is not None and result.drifted  # a saturating neighbour arrived: less slack, for real


def test_others_load_inverts_the_own_share() -> None:
    curve = StepCurve.from_profile(next(p for p in DEFAULT_PROFILES if p.product == H100))
    for others, b, k in ((0.0, 8, 3), (0.3, 64, 2), (0.6, 128, 0), (0.9, 32, 1)):
        measured = others + own_share(curve, 0.15, b, k, others)
        assert others_load(measured, [(curve, 0.15, b, k)]) == pytest.approx(others, abs=1e-6)
    assert others_load(0.5, []) == 0.5
    assert others_load(0.01, [(curve, 0.15, 256, 3)]) == 0.0  # never below zero


def test_first_sweep_writes_nothing_while_the_verdict_is_admission() -> None:
    """The record carries Drift=False from admission, worded as the sweep words a stable verdict."""
    wl, record = _admitted()
    assert record.status is not None
    (initial,) = [c.wire() for c in record.status.conditions if c.type == DRIFT]
    assert (initial["status"], initial["reason"]) == ("False", "NoDrift")
    stable = evaluate_drift(wl, "ss", record, _snapshot(running=True, tensor=0.6), NOW)
    assert stable is not None and not stable.drifted
    assert drift_condition(initial, stable, 1, NOW) is None  # nothing to write: one write less
    drifted = evaluate_drift(wl, "ss", record, _snapshot(running=True, tensor=0.97, neighbour=True), NOW)
    assert drifted is not None and drifted.drifted
    cond = drift_condition(initial, drifted, 1, NOW)
    assert cond is not None and cond["status"] == "True"


def test_only_ready_decisions_carry_a_drift_condition() -> None:
    wl = _workload()
    snap = _snapshot(running=False, tensor=0.0)
    snap = snap.model_copy(update={"nodes": []})  # no sovereign node: Retry, never Ready
    req, policies = request_for(wl, snap)
    d = decide(req, snap, policies, NOW)
    assert d.state != "Ready"
    record = SpeculationDecision.model_validate(speculation_decision_object(d, None))
    assert record.status is not None and record.status.conditions == []
