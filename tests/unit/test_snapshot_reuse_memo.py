"""Decisions read from facts memoised on a snapshot equal decisions on a fresh copy of it.

decide() keeps per-node facts as arrays aligned with the static filter's node list (capacity,
isolation against pods, GPU state, per-node evaluation inputs, the evaluation itself per acceptance
curve and expected batch), memoised while the snapshot's nodes, pods and telemetry are the same. A key
that missed something the fact reads would let one request's fact leak into the next decision: here
several requests of different tenants, classes, methods, batches and GPU counts, some with their own old
pods on the nodes, are decided one after another on one snapshot, and with reservations through a
derived snapshot, and each must equal the decision on a snapshot built afresh.
"""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from sovereignspec.api.meta import ObjectMeta
from sovereignspec.api.sovereignty_policy import SovereigntyPolicy, SovereigntyPolicySpec
from sovereignspec.api.speculation_policy import SpeculationPolicySpec
from sovereignspec.model.cluster import ClusterSnapshot, NamespaceInfo, NodeInfo, PodInfo, Reservation
from sovereignspec.model.telemetry import AcceptanceSample, EngineSample, GpuSample, PodRef, TelemetrySnapshot
from sovereignspec.model.workload import CheckEntry, PodSetAssignment, PodSetInfo, WorkloadInfo
from sovereignspec.policy.cache import drop_index, with_reservations
from sovereignspec.policy.decide import decide
from sovereignspec.policy.request import AdmissionRequest, Policies

NOW = datetime(2026, 11, 29, 10, 0, 5, tzinfo=UTC)
TENANTS = ["bank-a", "bank-b", "shop"]
PRODUCTS = ["NVIDIA-H100-80GB-HBM3", "NVIDIA-A100-SXM4-80GB", "NVIDIA-H200", "Unknown-GPU"]


def acceptance(method: str = "eagle3") -> AcceptanceSample:
    """Counters of a healthy draft of target `m`, draft `d`."""
    return AcceptanceSample(
        target_model="m", draft_model="d", method=method, drafts=1000, accepted_per_position=[900, 800]
    )


@st.composite
def snapshots(draw: st.DrawFn) -> ClusterSnapshot:
    nodes, pods, gpus, engines = [], [], [], []
    for i in range(draw(st.integers(1, 10))):
        name = f"n{i}"
        n_gpus, replicas = draw(st.integers(1, 2)), draw(st.integers(1, 3))
        nodes.append(
            NodeInfo(
                name=name,
                labels={
                    "kubernetes.io/hostname": name,
                    "sovereignspec.io/jurisdiction": "KR",
                    "nvidia.com/gpu.product": draw(st.sampled_from(PRODUCTS)),
                },
                gpu_allocatable=n_gpus * replicas,
            )
        )
        for g in range(n_gpus):
            refs = []
            for j in range(draw(st.integers(0, replicas - 1))):
                ns = draw(st.sampled_from(TENANTS))
                pod = draw(
                    st.sampled_from([f"eng-{i}-{g}-{j}", f"chat-{i}-{g}-{j}"])
                )  # chat-*: a re-decision's
                slo = draw(st.sampled_from([None, "40", "80"]))
                pods.append(
                    PodInfo(
                        namespace=ns,
                        name=pod,
                        node=name,
                        phase="Running",
                        gpu_request=1,
                        annotations={} if slo is None else {"sovereignspec.io/tpot-slo-ms": slo},
                    )
                )
                if draw(st.booleans()):
                    engines.append(
                        EngineSample(
                            namespace=ns,
                            pod=pod,
                            tpot_seconds=draw(st.sampled_from([0.01, 0.03, 0.07])),
                            running=draw(st.sampled_from([1.0, 16.0])),
                        )
                    )
                refs.append(PodRef(namespace=ns, name=pod))
            gpus.append(
                GpuSample(
                    node=name,
                    uuid=f"{name}-{g}",
                    tensor_active=draw(st.sampled_from([0.0, 0.1, 0.4, 0.8])),
                    fb_free_mib=draw(st.sampled_from([1000.0, 40000.0, 40000.0])),
                    pods=refs,
                )
            )
    isolated = draw(st.lists(st.sampled_from(TENANTS), unique=True, max_size=2))
    return ClusterSnapshot(
        nodes=nodes,
        pods=pods,
        namespaces=[NamespaceInfo(name=t) for t in TENANTS],
        sovereignty_policies=[
            SovereigntyPolicy(
                metadata=ObjectMeta(name=f"iso-{t}"),
                spec=SovereigntyPolicySpec(tenants=[t], jurisdictions=["KR"], isolation="Node"),
            )
            for t in isolated
        ],
        telemetry=TelemetrySnapshot(
            time=NOW - timedelta(seconds=5),
            gpus=gpus,
            engines=engines,
            acceptance=[acceptance(m) for m in ("eagle3", "ngram")],
        ),
    )


def _request(ns: str, name: str, gpus: int, cls: str, method: str, batch: str) -> AdmissionRequest:
    annotations = {
        "sovereignspec.io/target-model": "m",
        "sovereignspec.io/draft-model": "d",
        "sovereignspec.io/spec-method": method,
        "sovereignspec.io/class": cls,
        "sovereignspec.io/expected-batch": batch,
    }
    return AdmissionRequest(
        workload=WorkloadInfo(
            namespace=ns,
            name=name,
            pod_sets=[PodSetInfo(name="main", gpus_per_pod=gpus, annotations=annotations)],
            quota_reserved=True,
            assignments=[PodSetAssignment(name="main")],
            checks=[CheckEntry(name="c", state="Pending")],
        ),
        check="c",
    )


requests = st.builds(
    _request,
    st.sampled_from(TENANTS),
    st.sampled_from(["chat", "web"]),
    st.integers(1, 2),
    st.sampled_from(["interactive", "interactive", "batch"]),
    st.sampled_from(["eagle3", "eagle3", "ngram"]),
    st.sampled_from(["1", "8", "64"]),
)
reservations = st.lists(
    st.builds(
        Reservation,
        namespace=st.sampled_from(TENANTS),
        name=st.sampled_from(["r1", "chat"]),
        node=st.sampled_from([f"n{i}" for i in range(10)]),
        gpus=st.integers(0, 2),
    ),
    max_size=4,
)
policies = st.builds(
    SpeculationPolicySpec,
    placement=st.sampled_from(["RelativeSpeedup", "Throughput"]),
    slack_aggregation=st.sampled_from(["min", "mean", "max"]),
    safety=st.sampled_from([0.1, 0.6]),
)


def _other_method(req: AdmissionRequest) -> AdmissionRequest:
    """The same request with the other draft method (other draft cost and memory, same nodes)."""
    ps = req.workload.pod_sets[0]
    method = "ngram" if ps.annotations["sovereignspec.io/spec-method"] == "eagle3" else "eagle3"
    ann = {**ps.annotations, "sovereignspec.io/spec-method": method}
    wl = req.workload.model_copy(update={"pod_sets": [ps.model_copy(update={"annotations": ann})]})
    return req.model_copy(update={"workload": wl})


def _fresh(snap: ClusterSnapshot, res: list[Reservation] | None = None) -> ClusterSnapshot:
    copy = snap.model_copy(update={} if res is None else {"reservations": res})
    drop_index(copy)
    return copy


def assert_decides_like_fresh(
    snap: ClusterSnapshot,
    reqs: list[tuple[AdmissionRequest, int]],
    pols: list[Policies],
    res: list[Reservation],
) -> None:
    """Every request decides on `snap`, and on `snap` with `res` derived from it, as on a snapshot built
    cold (the carried-index tests' check after each step)."""
    derived = with_reservations(snap, res, [])
    for req, p in reqs:
        want = decide(req, _fresh(snap, []), pols[p], NOW).output()
        assert decide(req, snap, pols[p], NOW).output() == want
        want = decide(req, _fresh(snap, res), pols[p], NOW).output()
        assert decide(req, derived, pols[p], NOW).output() == want


@settings(
    max_examples=120, deadline=None, suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large]
)
@given(
    snap=snapshots(),
    reqs=st.lists(st.tuples(requests, st.integers(0, 1)), min_size=2, max_size=6),
    res=reservations,
    specs=st.lists(policies, min_size=2, max_size=2),
)
def test_memoised_facts_decide_like_a_fresh_snapshot(
    snap: ClusterSnapshot,
    reqs: list[tuple[AdmissionRequest, int]],
    res: list[Reservation],
    specs: list[SpeculationPolicySpec],
) -> None:
    pols = [Policies(spec, None, tuple(snap.sovereignty_policies)) for spec in specs]
    reqs = [x for req, p in reqs for x in ((req, p), (_other_method(req), p))]
    for req, p in reqs:  # one snapshot: every decision reads what the ones before memoised
        assert decide(req, snap, pols[p], NOW).output() == decide(req, _fresh(snap), pols[p], NOW).output()
    derived = with_reservations(snap, res, [])
    for req, p in reqs:
        want = decide(req, _fresh(snap, res), pols[p], NOW).output()
        assert decide(req, derived, pols[p], NOW).output() == want


def test_own_old_pods_are_no_neighbours_on_a_warm_snapshot() -> None:
    """A re-decision of bank-a/chat: its old engine chat-0 (over its SLO) on the only node is not a
    neighbour, although the facts memoised for shop's decision before count it as one."""
    gpu = GpuSample(
        node="n0",
        uuid="g0",
        tensor_active=0.1,
        fb_free_mib=40000.0,
        pods=[PodRef(namespace="bank-a", name="chat-0")],
    )
    snap = ClusterSnapshot(
        nodes=[
            NodeInfo(
                name="n0",
                labels={"kubernetes.io/hostname": "n0", "nvidia.com/gpu.product": PRODUCTS[0]},
                gpu_allocatable=4,
            )
        ],
        pods=[
            PodInfo(
                namespace="bank-a",
                name="chat-0",
                node="n0",
                phase="Running",
                gpu_request=1,
                annotations={"sovereignspec.io/tpot-slo-ms": "20"},
            )
        ],
        namespaces=[NamespaceInfo(name=t) for t in TENANTS],
        telemetry=TelemetrySnapshot(
            time=NOW - timedelta(seconds=5),
            gpus=[gpu],
            engines=[EngineSample(namespace="bank-a", pod="chat-0", tpot_seconds=0.05, running=8.0)],
            acceptance=[acceptance()],
        ),
    )
    pol = Policies(SpeculationPolicySpec(), None, ())
    other = decide(_request("shop", "chat", 1, "interactive", "eagle3", "8"), snap, pol, NOW)
    assert other.reason == "NeighbourSlo" and [nb.pod for nb in other.neighbours] == ["chat-0"]
    again = decide(_request("bank-a", "chat", 1, "interactive", "eagle3", "8"), snap, pol, NOW)
    assert again.reason == "SpeculationOn" and again.neighbours == [], again.message
