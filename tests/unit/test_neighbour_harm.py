"""Neighbour harm after admission (docs/decision.md, "Neighbour harm after admission"): a drift that cuts
the admitted budget while an SLO-bound engine on the workload's GPUs runs within the policy's `safety` of
its SLO is re-admitted by default; a cut beside neighbours far from their SLOs is not (that is
`reconfigureOnDrift`, off by default).

The node: two H100s with two replicas each. The workload was admitted beside `nb` on GPU-0 while `nb`
ran far inside its 40 ms SLO; now `nb` runs 0.25 % inside it.
"""

from __future__ import annotations

from dataclasses import replace
from datetime import UTC, datetime, timedelta

from sovereignspec.api import meta
from sovereignspec.api.speculation_decision import SpeculationDecision
from sovereignspec.api.speculation_policy import SpeculationPolicySpec
from sovereignspec.evidence.sovereign import DRIFT_PERIOD_S
from sovereignspec.model.cluster import AdmissionCheckInfo, ClusterSnapshot, NodeInfo, PodInfo
from sovereignspec.model.telemetry import EngineSample, GpuSample, PodRef, TelemetrySnapshot
from sovereignspec.model.workload import WorkloadInfo
from sovereignspec.operator.drift import NEIGHBOUR_HARM, drift_condition, grace_over
from sovereignspec.operator.settings import OperatorSettings
from sovereignspec.policy.decide import decide
from sovereignspec.policy.decision import speculation_decision_object
from sovereignspec.policy.drift import DriftResult, evaluate_drift, k_at
from sovereignspec.policy.request import Policies, request_for
from tests.support import eagle3_workload

NOW = datetime(2026, 12, 5, 8, 0, 0, tzinfo=UTC)
H100 = "NVIDIA-H100-80GB-HBM3"


def _snapshot(
    nb_tpot: float,
    nb_slo_ms: str = "40",
    ours: bool = True,
    our_batch: float = 4,
    our_min: float | None = None,
) -> ClusterSnapshot:
    labels = {meta.LABEL_HOSTNAME: "n1", meta.DEFAULT_JURISDICTION_LABEL: "KR", meta.LABEL_GPU_PRODUCT: H100}
    pods = [
        PodInfo(namespace="shop", name="nb", node="n1", phase="Running", gpu_request=1,
                annotations={meta.ANNOTATION_TPOT_SLO_MS: nb_slo_ms})
    ]  # fmt: skip
    engines = [EngineSample(namespace="shop", pod="nb", tpot_seconds=nb_tpot, running=16)]
    on_gpu0 = [PodRef(namespace="shop", name="nb")]
    if ours:
        pods.append(
            PodInfo(namespace="bank-a", name="chat-0", node="n1", phase="Running", gpu_request=1,
                    annotations={meta.ANNOTATION_DECISION: "chat"})
        )  # fmt: skip
        engines.append(
            EngineSample(
                namespace="bank-a", pod="chat-0", tpot_seconds=0.02, running=our_batch, running_min=our_min
            )
        )
        on_gpu0.append(PodRef(namespace="bank-a", name="chat-0"))
    gpus = [
        GpuSample(node="n1", uuid="GPU-0", tensor_active=0.8, fb_free_mib=40000.0, pods=on_gpu0),
        GpuSample(node="n1", uuid="GPU-1", tensor_active=0.0, fb_free_mib=40000.0),
    ]
    return ClusterSnapshot.one_check(
        AdmissionCheckInfo(name="ss", controller_name=meta.CONTROLLER_NAME),
        ["bank-a", "shop"],
        nodes=[NodeInfo(name="n1", labels=labels, gpu_allocatable=4)],
        pods=pods,
        telemetry=TelemetrySnapshot(time=NOW, gpus=gpus, engines=engines),
    )


def _admitted_beside_nb() -> SpeculationDecision:
    """Admitted judged beside `nb` (every free GPU judged), while `nb` was far inside its SLO: k > 0."""
    calm = _snapshot(nb_tpot=0.01, ours=False)
    req, policies = request_for(eagle3_workload(50, 4), calm)
    spec = policies.speculation.model_copy(update={"shared_gpu_allocation": "Unknown"})
    d = decide(req, calm, Policies(spec, policies.speculation_name, policies.sovereignty), NOW)
    assert d.speculative.enabled and [nb.pod for nb in d.neighbours] == ["nb"]
    return SpeculationDecision.model_validate(speculation_decision_object(d, None))


def test_a_cut_beside_a_neighbour_at_its_slo_is_harm_and_is_readmitted_by_default() -> None:
    record = _admitted_beside_nb()
    result = evaluate_drift(eagle3_workload(50, 4), "ss", record, _snapshot(nb_tpot=0.0399), NOW)
    assert result is not None and result.drifted and result.cut, result and result.message
    assert result.neighbour_harm and result.readmit, result.message
    assert not result.reconfigure  # reconfigureOnDrift stays off: it is the harm that re-admits
    assert result.message.startswith("a co-located engine runs within the policy's safety"), result.message
    assert not replace(result, reconfigure_on_harm=False).readmit  # reconfigureOnNeighbourHarm: false


def test_a_cut_beside_neighbours_far_from_their_slo_is_drift_only() -> None:
    """The same neighbour with a 1 s SLO: a loaded GPU cuts our own gain, and the neighbour is far inside
    its SLO; the verdict is drift, and only reconfigureOnDrift re-admits it."""
    record = _admitted_beside_nb()
    snap = _snapshot(nb_tpot=0.0399, nb_slo_ms="1000")
    snap = snap.model_copy(
        update={
            "telemetry": snap.telemetry.model_copy(  # type: ignore[union-attr]
                update={"gpus": [g.model_copy(update={"tensor_active": 0.99}) for g in snap.telemetry.gpus]}  # type: ignore[union-attr]
            )
        }
    )
    result = evaluate_drift(eagle3_workload(50, 4), "ss", record, snap, NOW)
    assert result is not None and result.drifted and result.cut, result and result.message
    assert not result.neighbour_harm and not result.readmit, result.message
    assert replace(result, reconfigure=True).readmit


def test_the_threshold_is_the_policy_safety() -> None:
    """Cut in both (2 -> 0 and 2 -> 1): `nb` 5 % inside its SLO is harm at the default safety 0.1, 12 %
    inside it is not."""
    record = _admitted_beside_nb()
    near = evaluate_drift(eagle3_workload(50, 4), "ss", record, _snapshot(nb_tpot=0.040 / 1.05), NOW)
    far = evaluate_drift(eagle3_workload(50, 4), "ss", record, _snapshot(nb_tpot=0.040 / 1.12), NOW)
    assert near is not None and far is not None and near.cut and far.cut, (near, far)
    assert near.neighbour_harm and not far.neighbour_harm


def _admitted_claiming_where_it_is_off() -> tuple[SpeculationDecision, str, int, WorkloadInfo]:
    """The record admitted beside `nb` (drafting at batch 4), its config, the first batch where that
    config is off, and the workload claiming that batch (a batch job at its mean batch)."""
    record = _admitted_beside_nb()
    assert record.status is not None
    config = record.status.speculative.config
    off_at = next(b for b in range(1, 1025) if k_at(config, b) == 0)
    assert k_at(config, 4) > 0, config
    return record, config, off_at, eagle3_workload(50, off_at)


def test_a_cut_at_the_batch_the_engine_runs_at_is_harm() -> None:
    """A workload claiming a batch where its schedule is already off (a batch job at its mean batch)
    drafts whenever its batch dips. Beside a neighbour at its SLO, today's budget cut at the batch it
    runs at is harm, though k at the claimed batch is 0 either way; at its claimed batch, or beside a
    neighbour far from its SLO, it is no drift."""
    record, config, off_at, claims_off = _admitted_claiming_where_it_is_off()
    near = evaluate_drift(claims_off, "ss", record, _snapshot(nb_tpot=0.0399, our_batch=4), NOW)
    assert near is not None and near.drifted and near.cut and near.neighbour_harm and near.readmit, near
    assert k_at(near.current_config, 4) < k_at(config, 4)
    assert "k smaller at the batch the engine runs at; " in near.message
    at_claim = evaluate_drift(claims_off, "ss", record, _snapshot(nb_tpot=0.0399, our_batch=off_at), NOW)
    far = evaluate_drift(claims_off, "ss", record, _snapshot(nb_tpot=0.01, our_batch=4), NOW)
    for result in (at_claim, far):
        assert result is not None and not result.drifted and not result.readmit, result


def test_a_cut_at_the_batch_the_engine_dipped_to_in_the_window_is_harm() -> None:
    """The dips fall between refreshes: the engine reads its claimed batch (where k is 0 either way) at
    every refresh, but dipped to 4 within the telemetry window (`min_over_time`), where it drafted. Beside
    a neighbour at its SLO that cut is harm; a window whose fewest stayed at the claim is not."""
    record, _, off_at, claims_off = _admitted_claiming_where_it_is_off()
    dipped = _snapshot(nb_tpot=0.0399, our_batch=off_at, our_min=4)
    near = evaluate_drift(claims_off, "ss", record, dipped, NOW)
    assert near is not None and near.neighbour_harm and near.readmit, near
    steady = evaluate_drift(
        claims_off, "ss", record, _snapshot(nb_tpot=0.0399, our_batch=off_at, our_min=off_at), NOW
    )
    assert steady is not None and not steady.drifted and not steady.readmit, steady


def _result(**kw: object) -> DriftResult:
    base = dict(drifted=True, admitted_config="a", current_config="", message="m", reconfigure=False,
                drift_grace_seconds=120, cut=True, neighbour_harm=False,
                reconfigure_on_harm=True)  # fmt: skip
    base.update(kw)
    return DriftResult(**base)  # type: ignore[arg-type]


def test_harm_on_record_lasts_while_the_cut_lasts() -> None:
    """Where the neighbour's growth also takes our own gain below minGain, the condition-off re-decision
    cuts too: the verdict after a harm verdict stays harm while k stays cut, and only then."""
    assert _result().on_record(True).neighbour_harm and _result().on_record(True).readmit
    assert not _result().on_record(False).neighbour_harm
    assert not _result(cut=False).on_record(True).neighbour_harm  # k went up: no harm to carry
    assert not _result(drifted=False, cut=False).on_record(True).readmit


def test_the_condition_reads_neighbour_harm_and_keeps_the_grace_clock() -> None:
    """Drift=True since the first drifted verdict; its reason turns NeighbourHarm without resetting the
    clock the grace period counts from (the operator and the simulator count alike)."""
    first = drift_condition(None, _result(), 3, NOW)
    assert first is not None and (first["status"], first["reason"]) == ("True", "SpeculationDrifted")
    later = NOW + timedelta(seconds=150)
    harm = _result(neighbour_harm=True, message="h", harm_grace_seconds=120)
    cond = drift_condition(first, harm, 3, later)
    assert cond is not None and cond["reason"] == NEIGHBOUR_HARM
    assert cond["lastTransitionTime"] == first["lastTransitionTime"]
    assert grace_over(cond, harm, later) and not grace_over(cond, harm, NOW + timedelta(seconds=60))


def test_harm_waits_its_own_grace_and_other_drift_the_drift_grace() -> None:
    """A neighbour over its margin is re-admitted after neighbourHarmGraceSeconds, not after the longer
    driftGraceSeconds that guards against restarting on a mere change of gain."""
    drift = _result(reconfigure=True, harm_grace_seconds=0)
    harm = _result(neighbour_harm=True, harm_grace_seconds=0)
    assert (drift.grace_seconds, harm.grace_seconds) == (120, 0)
    first = drift_condition(None, harm, 3, NOW)
    assert grace_over(first, harm, NOW) and not grace_over(first, drift, NOW + timedelta(seconds=119))
    # Harm that reconfigureOnNeighbourHarm does not re-admit waits for reconfigureOnDrift's grace.
    ignored = _result(neighbour_harm=True, reconfigure=True, reconfigure_on_harm=False, harm_grace_seconds=0)
    assert ignored.readmit and ignored.grace_seconds == 120
    # The carried verdict (harm while the cut lasts) keeps the harm grace.
    assert _result(harm_grace_seconds=30).on_record(True).grace_seconds == 30


def test_evaluate_drift_carries_the_policy_graces() -> None:
    record = _admitted_beside_nb()
    result = evaluate_drift(eagle3_workload(50, 4), "ss", record, _snapshot(nb_tpot=0.0399), NOW)
    assert result is not None and result.neighbour_harm, result and result.message
    assert (result.drift_grace_seconds, result.harm_grace_seconds, result.grace_seconds) == (120, 0, 0)


def test_the_policy_defaults() -> None:
    spec = SpeculationPolicySpec()
    assert spec.reconfigure_on_neighbour_harm and not spec.reconfigure_on_drift
    assert (spec.drift_grace_seconds, spec.neighbour_harm_grace_seconds) == (120, 0)
    assert not SpeculationPolicySpec.model_validate(
        {"reconfigureOnNeighbourHarm": False}
    ).reconfigure_on_neighbour_harm


def test_the_simulator_sweeps_at_the_operators_default_interval() -> None:
    """The evidence for the sweep's pace is only evidence for the operator when both sweep alike."""
    default = OperatorSettings.model_fields["drift_interval_seconds"].default
    assert default == DRIFT_PERIOD_S
