"""Property tests (hypothesis): the science holds for any profile, and I1-I6 hold on any cluster."""

from __future__ import annotations

import os
import random
from datetime import UTC, datetime, timedelta

import numpy as np
from hypothesis import HealthCheck, assume, given, settings
from hypothesis import strategies as st

from sovereignspec.api.meta import ObjectMeta
from sovereignspec.api.sovereignty_policy import SovereigntyPolicy, SovereigntyPolicySpec
from sovereignspec.api.speculation_policy import Roofline, SpeculationPolicySpec
from sovereignspec.model.acceptance import expected_lengths, iid_curve
from sovereignspec.model.cluster import ClusterSnapshot, FlavorInfo, NamespaceInfo, NodeInfo, PodInfo
from sovereignspec.model.speedup import real_speedup, step_ratio
from sovereignspec.model.steptime import StepCurve
from sovereignspec.model.telemetry import (
    AcceptanceSample,
    EngineSample,
    GpuSample,
    PodRef,
    TelemetrySnapshot,
)
from sovereignspec.model.workload import CheckEntry, PodSetAssignment, PodSetInfo, WorkloadInfo
from sovereignspec.policy.budget import batch_ranges, merge_schedule
from sovereignspec.policy.decide import decide
from sovereignspec.policy.decision import Decision
from sovereignspec.policy.node_state import NeighbourInput, Neighbours, NodeInput
from sovereignspec.policy.request import AdmissionRequest, Policies
from sovereignspec.policy.sovereignty import PolicyConflict, rules_for_namespace
from tests.support import evaluate_nodes, schedule_errors

FAST = settings(
    max_examples=int(os.environ.get("SOVEREIGNSPEC_HYPOTHESIS_EXAMPLES", "60")),
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow],
)
NOW = datetime(2026, 11, 29, 10, 0, 5, tzinfo=UTC)

rooflines = st.tuples(
    st.floats(50, 2000), st.floats(500, 8000), st.floats(1, 80), st.floats(0.2, 0.8), st.floats(0.4, 0.9)
).map(lambda t: Roofline(peak_tflops=t[0], memory_bandwidth_gbs=t[1], params_b=t[2], mfu=t[3], mbu=t[4]))


@FAST
@given(rooflines, st.floats(0.0, 0.95), st.floats(0.0, 0.5), st.integers(1, 16), st.integers(1, 1024))
def test_speedup_below_one_as_slack_vanishes(r: Roofline, alpha: float, c_d: float, k: int, b: int) -> None:
    c = StepCurve.from_roofline(r)
    el = expected_lengths(iid_curve(alpha, k))[k]
    tau = step_ratio(c.t0, c.g(b), c.g(b * (k + 1)), 1.0, k, c_d)  # u = 1: saturated, slack → 0
    assert float(real_speedup(el, tau)) < 1.0


@FAST
@given(rooflines, st.floats(0.7, 0.95), st.floats(0.0, 0.05))
def test_speedup_above_two_at_full_slack_with_healthy_eagle(r: Roofline, alpha: float, c_d: float) -> None:
    c = StepCurve.from_points([(0, c_r := StepCurve.from_roofline(r).t0), (1, c_r)])  # g ≡ 0: slack exactly 1
    ks = np.arange(9)
    el = expected_lengths(iid_curve(alpha, 8))
    s = real_speedup(el, step_ratio(c.t0, c.g(1), c.g(ks + 1), 0.0, ks, c_d))
    assert float(s.max()) > 2.0


def _curve_from(r: Roofline, convex: float) -> StepCurve:
    """A roofline, optionally made convex (slope grows past 2048 tokens): both shapes are physical."""
    base = StepCurve.from_roofline(r)
    slope = float(base.g(1))
    if convex == 0:
        return base
    return StepCurve.from_points(
        [
            (0, base.t0),
            (2048, base.t0 + 2048 * slope),
            (8192, base.t0 + 2048 * slope + 6144 * slope * (1 + convex)),
        ]
    )


@FAST
@given(
    rooflines,
    st.floats(0.0, 2.0),
    st.floats(0.3, 0.95),
    st.floats(0.0, 0.2),
    st.lists(st.floats(0.0, 0.99), min_size=2, max_size=5),
    st.one_of(st.none(), st.tuples(st.floats(0.05, 1.0), st.floats(0.0, 2.0))),
)
def test_k_star_never_increases_with_background_load(
    r: Roofline, convex: float, alpha: float, c_d: float, loads: list[float], nb: tuple[float, float] | None
) -> None:
    curve = _curve_from(r, convex)
    el = expected_lengths(iid_curve(alpha, 8))
    ranges = batch_ranges([1, 2, 4, 8, 16, 32, 64, 128, 256], 1024)
    nodes = []
    for i, u in enumerate(sorted(loads)):
        neighbours = Neighbours.of([] if nb is None else [NeighbourInput("ns", "p", nb[0], nb[1], u)])
        nodes.append(NodeInput(name=f"n{i}", curve=curve, c_d=c_d, u=u, neighbours=neighbours))
    ev = evaluate_nodes(nodes, el, [e for _, e in ranges], 8, 3, 0.05, 0.1)
    assert np.all(np.diff(ev.k_star, axis=0) <= 0), ev.k_star


@FAST
@given(
    st.lists(st.integers(2, 500), min_size=0, max_size=10, unique=True),
    st.integers(0, 1000),
    st.data(),
)
def test_schedule_always_valid_for_vllm(extra: list[int], headroom: int, data: st.DataObject) -> None:
    breakpoints = [1, *sorted(extra)]
    ranges = batch_ranges(breakpoints, breakpoints[-1] + headroom)
    ks = data.draw(st.lists(st.integers(0, 8), min_size=len(ranges), max_size=len(ranges)))
    sched = merge_schedule(ranges, ks)
    assert schedule_errors(sched, max(ks)) == []
    assert sched[-1][1] == breakpoints[-1] + headroom


# ------------------------------------------------------------------------------------------------
# Generated clusters: I1-I6

TENANTS = ["bank-a", "bank-b", "shop", "lab"]
JURIS = ["KR", "EU", "JP"]


@st.composite
def clusters(draw: st.DrawFn) -> tuple[AdmissionRequest, ClusterSnapshot, Policies]:
    n_nodes = draw(st.integers(1, 8))
    nodes, pods, gpus, engines = [], [], [], []
    for i in range(n_nodes):
        name = f"n{i}"
        alloc = draw(st.integers(0, 4))
        labels = {"kubernetes.io/hostname": name, "nvidia.com/gpu.product": "NVIDIA-H100-80GB-HBM3"}
        if draw(st.booleans()) or i == 0:
            labels["sovereignspec.io/jurisdiction"] = draw(st.sampled_from(JURIS))
        if draw(st.booleans()):
            labels["pool"] = draw(st.sampled_from(["a", "b"]))
        nodes.append(
            NodeInfo(
                name=name,
                labels=labels,
                gpu_allocatable=alloc,
                unschedulable=draw(st.booleans()) and draw(st.booleans()),
            )
        )
        refs = []
        for j in range(draw(st.integers(0, 3))):
            ns = draw(st.sampled_from(TENANTS))
            pod = f"p{i}-{j}"
            pods.append(
                PodInfo(
                    namespace=ns,
                    name=pod,
                    node=name,
                    phase="Running",
                    gpu_request=draw(st.integers(0, 1)),
                    annotations={"sovereignspec.io/tpot-slo-ms": "60"},
                )
            )
            engines.append(
                EngineSample(namespace=ns, pod=pod, tpot_seconds=draw(st.floats(0.01, 0.1)), running=8)
            )
            refs.append(PodRef(namespace=ns, name=pod))
        gpus.append(
            GpuSample(
                node=name,
                uuid=f"g{i}",
                tensor_active=draw(st.floats(0, 1)),
                fb_free_mib=draw(st.floats(0, 80000)),
                pods=refs,
            )
        )
    policies = []
    for t in TENANTS:
        if draw(st.booleans()):
            policies.append(
                SovereigntyPolicy(
                    metadata=ObjectMeta(name=f"pol-{t}"),
                    spec=SovereigntyPolicySpec(
                        tenants=[t],
                        jurisdictions=draw(st.lists(st.sampled_from(JURIS), max_size=2, unique=True)),
                        isolation=draw(st.sampled_from(["Shared", "Node"])),
                        trusted_tenants=draw(st.lists(st.sampled_from(TENANTS), max_size=2, unique=True)),
                        node_selector={"pool": "a"} if draw(st.booleans()) and draw(st.booleans()) else {},
                    ),
                )
            )
    telemetry = None
    if draw(st.booleans()):
        telemetry = TelemetrySnapshot(
            time=NOW - timedelta(seconds=draw(st.sampled_from([5, 500]))),
            gpus=gpus,
            engines=engines,
            acceptance=[
                AcceptanceSample(
                    target_model="m",
                    draft_model="d",
                    method="eagle3",
                    drafts=100,
                    accepted_per_position=[80, 60, 45],
                )
            ],
        )
    flavor_labels = {"pool": "a"} if draw(st.booleans()) and draw(st.booleans()) else {}
    tmpl_sel = {"pool": "b"} if draw(st.booleans()) and draw(st.booleans()) else {}
    snapshot = ClusterSnapshot(
        nodes=nodes,
        pods=pods,
        namespaces=[NamespaceInfo(name=t) for t in TENANTS],
        flavors=[FlavorInfo(name="f", node_labels=flavor_labels)],
        sovereignty_policies=policies,
        telemetry=telemetry,
    )
    me = draw(st.sampled_from(TENANTS))
    wl = WorkloadInfo(
        namespace=me,
        name="w",
        pod_sets=[
            PodSetInfo(
                name="main",
                count=1,
                gpus_per_pod=draw(st.integers(0, 2)),
                node_selector=tmpl_sel,
                annotations={
                    "sovereignspec.io/spec-method": "eagle3",
                    "sovereignspec.io/draft-model": "d",
                    "sovereignspec.io/target-model": "m",
                    "sovereignspec.io/class": draw(st.sampled_from(["interactive", "batch"])),
                },
            )
        ],
        quota_reserved=True,
        assignments=[PodSetAssignment(name="main", flavors={"nvidia.com/gpu": "f"})],
        checks=[CheckEntry(name="c", state="Pending")],
    )
    return (
        AdmissionRequest(workload=wl, check="c"),
        snapshot,
        Policies(SpeculationPolicySpec(), None, tuple(policies)),
    )


def _legal_nodes(req: AdmissionRequest, snap: ClusterSnapshot, pol: Policies) -> list[str]:
    """Brute-force oracle of I1-I4 + capacity, written independently of decide()."""
    ns_labels = {n.name: n.labels for n in snap.namespaces}
    me = req.workload.namespace
    rules = rules_for_namespace(me, ns_labels, pol.sovereignty)
    ps = req.workload.pod_sets[0]
    need = ps.count * ps.gpus_per_pod
    flavor = snap.flavors[0].node_labels
    out = []
    for n in snap.nodes:
        lab = n.labels
        if any(lab.get(k) not in v for k, v in rules.jurisdictions.items()):
            continue
        if any(
            lab.get(k) != v for sel in (rules.node_selector, flavor, ps.node_selector) for k, v in sel.items()
        ):
            continue
        used = sum(p.gpu_request for p in snap.pods if p.node == n.name)
        if n.unschedulable or n.gpu_allocatable - used < need:
            continue
        others = {p.namespace for p in snap.pods if p.node == n.name} - {me}
        if rules.isolated and others - rules.trusted:
            continue
        if any(
            (o := rules_for_namespace(t, ns_labels, pol.sovereignty)).isolated and me not in o.trusted
            for t in others
        ):
            continue
        out.append(n.name)
    return out


def _check_invariants(d: Decision, req: AdmissionRequest, snap: ClusterSnapshot, pol: Policies) -> None:
    try:
        legal = _legal_nodes(req, snap, pol)
    except PolicyConflict:
        assert d.state == "Rejected"
        return
    if legal:
        assert d.state == "Ready", d.message
        assert d.node in legal  # I1-I4
        ps = req.workload.pod_sets[0]
        upd = d.pod_set_updates[0]
        for k, v in upd.node_selector.items():  # I4: additive only
            assert ps.node_selector.get(k, v) == v and snap.flavors[0].node_labels.get(k, v) == v
        node = next(n for n in snap.nodes if n.name == d.node)
        assert all(
            node.labels.get(k) == v for k, v in upd.node_selector.items() if k != "kubernetes.io/hostname"
        )
        assert schedule_errors(d.speculative.schedule, d.speculative.num_speculative_tokens) == []
    else:
        assert d.state in ("Retry", "Rejected") and d.node is None and not d.pod_set_updates  # I5


@settings(
    max_examples=int(os.environ.get("SOVEREIGNSPEC_HYPOTHESIS_EXAMPLES", "150")),
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow],
)
@given(clusters())
def test_invariants_on_generated_clusters(case: tuple[AdmissionRequest, ClusterSnapshot, Policies]) -> None:
    req, snap, pol = case
    d = decide(req, snap, pol, NOW)
    _check_invariants(d, req, snap, pol)
    # I6: without telemetry only the speculation mode may change, never legality or the state
    blind = snap.model_copy(update={"telemetry": None})
    b = decide(req, blind, pol, NOW)
    _check_invariants(b, req, blind, pol)
    assert b.state == d.state and not b.speculative.enabled
    if snap.telemetry is None or (NOW - snap.telemetry.time).total_seconds() > 120:  # type: ignore[operator]
        assert not d.speculative.enabled


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(clusters(), st.randoms())
def test_same_input_same_decision(
    case: tuple[AdmissionRequest, ClusterSnapshot, Policies], rnd: random.Random
) -> None:
    req, snap, pol = case
    first = decide(req, snap, pol, NOW).output()
    assert decide(req, snap, pol, NOW).output() == first
    nodes = list(snap.nodes)
    rnd.shuffle(nodes)
    shuffled = snap.model_copy(update={"nodes": nodes})
    assert decide(req, shuffled, pol, NOW).output() == first


@settings(max_examples=300, deadline=None)
@given(
    st.floats(0.0, 1.0),
    st.one_of(st.floats(-0.5, 3.0), st.just(float("inf"))),
    st.floats(0.0, 0.999),
    st.floats(-0.5, 1.5),
)
def test_reduced_neighbour_check_equals_direct_slowdown(
    sigma: float, thr: float, u: float, du: float
) -> None:
    from sovereignspec.model.speedup import max_load_increase, neighbour_slowdown

    bound = max_load_increase(np.array([[sigma]]), np.array([[thr]]), np.array([[u]]))[0]
    direct = float(neighbour_slowdown(sigma, du, u)) <= thr
    # Exactly on the boundary the two forms round differently (e.g. 0.99999 vs 0.99999 + 1 ulp).
    assume(not np.isfinite(bound) or abs(du - bound) > 1e-9 * max(1.0, abs(bound)))
    assert (du <= bound) == direct
