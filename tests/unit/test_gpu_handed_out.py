"""The neighbour condition judges the engines of the GPU the pod will run on (docs/decision.md, "The GPU
the device plugin hands out"): on a time-sliced node the NVIDIA device plugin's default allocation gives
a one-GPU pod a replica of the GPU with the fewest pods; a re-decision judges the GPU its pods hold; and
every free GPU is judged where that choice cannot be read from the samples.

The node: two H100s with two replicas each. GPU-0 carries `nb`, a neighbour 0.25 % inside its SLO
(39.9 ms against 40) at tensor-active 0.8, so any load we add there breaks it; GPU-1 is empty.
"""

from __future__ import annotations

from datetime import UTC, datetime

from sovereignspec.api import meta
from sovereignspec.api.speculation_decision import SpeculationDecision
from sovereignspec.model.cluster import AdmissionCheckInfo, ClusterSnapshot, NodeInfo, PodInfo, Reservation
from sovereignspec.model.telemetry import EngineSample, GpuSample, PodRef, TelemetrySnapshot
from sovereignspec.model.workload import WorkloadInfo
from sovereignspec.policy.cache.index import carry_index, with_reservations
from sovereignspec.policy.decide import decide
from sovereignspec.policy.decision import speculation_decision_object
from sovereignspec.policy.drift import evaluate_drift
from sovereignspec.policy.node_state import handed_out
from sovereignspec.policy.request import Policies, request_for
from tests.support import eagle3_workload

NOW = datetime(2026, 12, 3, 8, 0, 0, tzinfo=UTC)
H100 = "NVIDIA-H100-80GB-HBM3"


def _node(gpus: int = 4) -> NodeInfo:
    labels = {meta.LABEL_HOSTNAME: "n1", meta.DEFAULT_JURISDICTION_LABEL: "KR", meta.LABEL_GPU_PRODUCT: H100}
    return NodeInfo(name="n1", labels=labels, gpu_allocatable=gpus)


def _gpu(uuid: str, tensor: float, *pods: str, mig: str | None = None) -> GpuSample:
    refs = [PodRef(namespace=p.split("/")[0], name=p.split("/")[1]) for p in pods]
    return GpuSample(
        node="n1", uuid=uuid, tensor_active=tensor, fb_free_mib=40000.0, pods=refs, mig_profile=mig
    )


def _workload(gpus_per_pod: int = 1) -> WorkloadInfo:
    return eagle3_workload(50, 4, gpus_per_pod)


def _snapshot(nb_tpot: float = 0.0399, ours_on_gpu0: bool = False) -> ClusterSnapshot:
    """`ours_on_gpu0`: the workload's own pod runs on GPU-0 beside `nb` (the drift sweep's view)."""
    pods = [
        PodInfo(namespace="shop", name="nb", node="n1", phase="Running", gpu_request=1,
                annotations={meta.ANNOTATION_TPOT_SLO_MS: "40"})
    ]  # fmt: skip
    engines = [EngineSample(namespace="shop", pod="nb", tpot_seconds=nb_tpot, running=16)]
    on_gpu0 = ["shop/nb"]
    if ours_on_gpu0:
        pods.append(
            PodInfo(namespace="bank-a", name="chat-0", node="n1", phase="Running", gpu_request=1,
                    annotations={meta.ANNOTATION_DECISION: "chat"})
        )  # fmt: skip
        engines.append(EngineSample(namespace="bank-a", pod="chat-0", tpot_seconds=0.02, running=4))
        on_gpu0.append("bank-a/chat-0")
    return ClusterSnapshot.one_check(
        AdmissionCheckInfo(name="ss", controller_name=meta.CONTROLLER_NAME),
        ["bank-a", "shop"],
        nodes=[_node()],
        pods=pods,
        telemetry=TelemetrySnapshot(
            time=NOW, gpus=[_gpu("GPU-0", 0.8, *on_gpu0), _gpu("GPU-1", 0.0)], engines=engines
        ),
    )


def _with_allocation(policies: Policies, allocation: str) -> Policies:
    spec = policies.speculation.model_copy(update={"shared_gpu_allocation": allocation})
    return Policies(spec, policies.speculation_name, policies.sovereignty)


def test_the_plugin_hands_out_the_free_gpus_with_the_fewest_pods_or_any_when_that_is_unknown() -> None:
    busy, empty, other = _gpu("GPU-0", 0.8, "shop/nb"), _gpu("GPU-1", 0.0), _gpu("GPU-2", 0.5, "x/y")
    node, samples = _node(6), [busy, empty, other]
    known, unknown = (lambda: False), (lambda: True)
    assert handed_out(node, samples, samples, known, "Distributed") == [empty]
    assert handed_out(node, samples, [busy, other], known, "Distributed") == [busy, other]  # a tie: both
    assert handed_out(node, samples, samples, unknown, "Distributed") == samples  # a pod no sample names
    assert handed_out(node, samples, samples, known, "Unknown") == samples
    assert handed_out(_node(3), samples, samples, known, "Distributed") == samples  # whole GPUs
    mig = [_gpu("MIG-0", 0.8, "shop/nb", mig="3g.40gb"), _gpu("MIG-1", 0.0, mig="3g.40gb")]
    assert handed_out(_node(2), mig, mig, known, "Distributed") == mig


def test_a_new_pod_is_judged_beside_the_engines_of_the_gpu_it_gets() -> None:
    """Distributed: the pod gets the empty GPU-1, where no engine can be harmed, and speculates. Judging
    every free GPU (`Unknown`, and every decision before session 18) refuses any budget for the sake of
    `nb`, which the pod never shares a GPU with."""
    snap = _snapshot()
    req, policies = request_for(_workload(), snap)
    got = decide(req, snap, policies, NOW)
    assert (got.state, got.node, got.neighbours) == ("Ready", "n1", [])
    assert got.speculative.enabled and got.speculative.num_speculative_tokens > 0, got.message
    unknown = decide(req, snap, _with_allocation(policies, "Unknown"), NOW)
    assert (unknown.state, unknown.reason, unknown.speculative.enabled) == ("Ready", "NeighbourSlo", False)
    assert [nb.pod for nb in unknown.neighbours] == ["nb"]


def test_every_free_gpu_is_judged_where_the_plugin_choice_is_not_known() -> None:
    """A workload admitted on the node whose pod has not started may take GPU-1 first; a pod that asks for
    two GPUs takes one replica of each. Both are judged beside `nb`, and decided after the plain request
    on the same snapshot (one memo), each gets its own answer."""
    snap = _snapshot()
    req, policies = request_for(_workload(), snap)
    reserved = with_reservations(snap, [Reservation(namespace="other", name="r", node="n1", gpus=1)], [])
    wide, _ = request_for(_workload(gpus_per_pod=2), snap)
    order = ((req, snap), (req, reserved), (wide, snap), (req, snap))
    answers = [decide(r, s, policies, NOW) for r, s in order]
    assert [a.speculative.enabled for a in answers] == [True, False, False, True]
    assert [a.reason for a in answers[1:3]] == ["NeighbourSlo", "NeighbourSlo"]
    assert [[nb.pod for nb in a.neighbours] for a in answers] == [[], ["nb"], ["nb"], []]


def test_drift_judges_the_gpu_the_workload_holds_not_the_one_a_new_pod_would_get() -> None:
    """Admitted while `nb` was far inside its SLO, the workload runs on GPU-0 beside it; now `nb` runs
    0.25 % inside its SLO. Without the workload's own pod GPU-1 has fewer pods, so a new pod would get
    it; but the running one shares GPU-0 with `nb`, and its verdict must be drift (k → 0)."""
    wl = _workload()
    calm = _snapshot(nb_tpot=0.01)
    req, policies = request_for(wl, calm)
    admitted = decide(req, calm, _with_allocation(policies, "Unknown"), NOW)  # judged beside nb: k > 0
    assert admitted.speculative.enabled and [nb.pod for nb in admitted.neighbours] == ["nb"]
    record = SpeculationDecision.model_validate(speculation_decision_object(admitted, None))
    result = evaluate_drift(wl, "ss", record, _snapshot(nb_tpot=0.0399, ours_on_gpu0=True), NOW)
    assert result is not None and result.drifted, result and result.message
    assert result.current_config == "" and "2 -> 0" in result.message, result.message  # speculation off


def _three_gpus(nb_namespace: str) -> ClusterSnapshot:
    """Three H100s with three replicas each: `nb` alone on GPU-0 (the GPU a new pod gets), two other
    engines on GPU-1 (a free replica left), GPU-2 full."""
    names = {"nb": nb_namespace, "p1": "shop", "p2": "shop", "f1": "shop", "f2": "shop", "f3": "shop"}
    pods = [
        PodInfo(namespace=ns, name=n, node="n1", phase="Running", gpu_request=1,
                annotations={meta.ANNOTATION_TPOT_SLO_MS: "100"})
        for n, ns in names.items()
    ]  # fmt: skip
    engines = [EngineSample(namespace=ns, pod=n, tpot_seconds=0.05, running=16) for n, ns in names.items()]
    gpus = [
        _gpu("GPU-0", 0.3, f"{nb_namespace}/nb"),
        _gpu("GPU-1", 0.3, "shop/p1", "shop/p2"),
        _gpu("GPU-2", 0.3, "shop/f1", "shop/f2", "shop/f3"),
    ]
    return ClusterSnapshot.one_check(
        AdmissionCheckInfo(name="ss", controller_name=meta.CONTROLLER_NAME),
        ["bank-a", "shop"],
        nodes=[_node(9)],
        pods=pods,
        telemetry=TelemetrySnapshot(time=NOW, gpus=gpus, engines=engines),
    )


def test_another_workload_of_the_same_namespace_is_a_neighbour_not_a_redecision() -> None:
    """`nb` in the workload's own namespace is judged exactly as in another tenant's: on GPU-0, our arrival
    charged. Treating a same-namespace engine as the workload's own old pod (as a first version of this
    rule did, by object identity) re-evaluated the node on every free GPU without the arrival."""
    answers = []
    for ns in ("shop", "bank-a"):
        snap = _three_gpus(ns)
        req, policies = request_for(_workload(), snap)
        answers.append(decide(req, snap, policies, NOW))
    other, same = answers
    assert [nb.pod for nb in other.neighbours] == [nb.pod for nb in same.neighbours] == ["nb"]
    assert same.speculative.schedule == other.speculative.schedule
    assert [nb.slowdown for nb in same.neighbours] == [nb.slowdown for nb in other.neighbours]


def test_the_speed_up_is_judged_at_the_load_of_the_gpu_the_pod_gets() -> None:
    """Distributed: the pod gets the empty GPU-1, so its S_real is predicted at GPU-1's load (0), not at
    GPU-0's 0.8 beside `nb` (docs/decision.md, "Our own load on the GPU we get"); `Unknown` judges every
    free GPU, the most loaded (slackAggregation min) first; a GPU pod no sample names yet may sit on
    GPU-1, so the same holds for it."""
    snap = _snapshot(nb_tpot=0.01)
    req, policies = request_for(_workload(), snap)
    got = decide(req, snap, policies, NOW)
    unknown = decide(req, snap, _with_allocation(policies, "Unknown"), NOW)
    (ours,), (every,) = got.candidates, unknown.candidates
    assert (ours.load, every.load) == (0.0, 0.8)
    assert ours.predicted_speedup is not None and every.predicted_speedup is not None
    assert ours.predicted_speedup > every.predicted_speedup
    late = PodInfo(namespace="shop", name="late", node="n1", phase="Running", gpu_request=1)
    unnamed = snap.model_copy(update={"pods": [*snap.pods, late]})
    carry_index(unnamed, snap)  # as the operator's next snapshot: the node's facts are dropped
    (still,) = decide(req, unnamed, policies, NOW).candidates
    assert still.load == 0.8


def test_a_pod_no_sample_names_yet_takes_a_gpu_as_the_plugin_gave_it_and_leaves_the_others() -> None:
    """GPU-0 carries `nb` at 0.8, GPU-1 and GPU-2 are empty, and `late` is bound but on no sample yet. The
    plugin gave `late` one of the empty GPUs, so the next pod gets the other one, idle: judging every
    free GPU (the rule before session 37) read the node at 0.8, and a burst's next workload went to a
    slower card (docs/decision.md, "Load not measured yet"). `Unknown` allocation still judges them all."""
    snap = _snapshot(nb_tpot=0.01)
    tel = snap.telemetry
    assert tel is not None
    late = PodInfo(namespace="shop", name="late", node="n1", phase="Running", gpu_request=1)
    three = snap.model_copy(
        update={
            "nodes": [_node(6)],
            "pods": [*snap.pods, late],
            "telemetry": tel.model_copy(update={"gpus": [*tel.gpus, _gpu("GPU-2", 0.0)]}),
        }
    )
    req, policies = request_for(_workload(), three)
    (got,) = decide(req, three, policies, NOW).candidates
    (every,) = decide(req, three, _with_allocation(policies, "Unknown"), NOW).candidates
    assert (got.load, every.load) == (0.0, 0.8)


def test_the_neighbours_one_allocation_reads_are_not_served_to_another() -> None:
    """The samples depend on `sharedGpuAllocation` (a pod no sample names is placed under `Distributed`
    only), so the neighbours read from them are kept per allocation: `Unknown` after `Distributed` on the
    same snapshot decides as `Unknown` alone."""
    snap = _snapshot(nb_tpot=0.01)
    late = PodInfo(namespace="shop", name="late", node="n1", phase="Running", gpu_request=1,
                   annotations={meta.ANNOTATION_TPOT_SLO_MS: "40"})  # fmt: skip
    alone, shared = (snap.model_copy(update={"pods": [*snap.pods, late]}) for _ in range(2))
    req, policies = request_for(_workload(), shared)
    unknown = _with_allocation(policies, "Unknown")
    expected = decide(req, alone, unknown, NOW)
    decide(req, shared, policies, NOW)
    after = decide(req, shared, unknown, NOW)
    assert [(nb.pod, nb.slowdown) for nb in after.neighbours] == [
        (nb.pod, nb.slowdown) for nb in expected.neighbours
    ]
    assert after.speculative.schedule == expected.speculative.schedule
