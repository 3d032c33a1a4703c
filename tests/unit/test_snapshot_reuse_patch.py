"""Decisions on a patched snapshot equal decisions on a fresh snapshot of the same objects.

After a pod or node event the operator builds a new snapshot that carries the previous one's index
(`policy.cache.carry_index`, with the pods it saw change); decide() then patches its per-row facts (capacity,
isolation against pods, GPU state, evaluation inputs, the evaluation) on the touched nodes only, from
the facts of up to a few snapshots back. A touched node that a patch missed would keep a stale row:
here random sequences of pod, node and reservation edits go through that path, the facts being warm
before each edit, and every decision must equal the one on a snapshot built cold.
"""

from __future__ import annotations

from datetime import timedelta
from types import SimpleNamespace
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from sovereignspec.api.speculation_policy import SpeculationPolicySpec
from sovereignspec.model.cluster import ClusterSnapshot, NamespaceInfo, NodeInfo, PodInfo, Reservation
from sovereignspec.model.telemetry import EngineSample, GpuSample, PodRef, TelemetrySnapshot
from sovereignspec.policy.cache import carry_index, drop_index, index_of
from sovereignspec.policy.cache import facts as core
from sovereignspec.policy.cache.index import Carried
from sovereignspec.policy.decide import decide
from sovereignspec.policy.request import AdmissionRequest, Policies
from tests.unit.test_snapshot_reuse_memo import (
    NOW,
    PRODUCTS,
    TENANTS,
    _fresh,
    _request,
    acceptance,
    assert_decides_like_fresh,
    policies,
    requests,
    snapshots,
)

NODES = [f"n{i}" for i in range(10)]
PodEdit = tuple[str, str, str, str | None, str | None, str, int]
ExistingEdit = tuple[str, int, str, str | None, str]
NodeEdit = tuple[str, int, str]
Edit = PodEdit | ExistingEdit | NodeEdit

pod_edits = st.tuples(
    st.just("pod"),
    st.sampled_from(TENANTS),
    # names the GPU samples may carry (eng-/chat-: their neighbours change) and new ones
    st.sampled_from(["eng-0-0-0", "chat-0-0-0", "eng-1-0-0", "chat-2-1-0", "new-a", "chat-x"]),
    st.sampled_from([*NODES, None]),  # None: the pod goes away
    st.sampled_from([None, "1", "40", "200"]),
    st.sampled_from(["Running", "Running", "Pending", "Succeeded"]),
    st.integers(0, 2),
)
# an existing pod (most are named by a GPU sample) moves, is unbound, changes its SLO or phase, or goes
existing_edits = st.tuples(
    st.just("existing"),
    st.integers(0, 40),
    st.sampled_from([*NODES, "unbound", "gone"]),
    st.sampled_from([None, "1", "40", "200"]),
    st.sampled_from(["Running", "Running", "Succeeded"]),
)
node_edits = st.tuples(
    st.just("node"),
    st.integers(0, 9),
    st.sampled_from(["cordon", "jurisdiction", "gpus", "product", "copy", "label", "remove"]),
)
reservations = st.lists(
    st.builds(
        Reservation,
        namespace=st.sampled_from(TENANTS),
        name=st.sampled_from(["r1", "chat"]),
        node=st.sampled_from(NODES),
        gpus=st.integers(0, 2),
    ),
    max_size=3,
)


def _edit_node(nodes: list[NodeInfo], i: int, how: str) -> list[NodeInfo]:
    if not nodes:
        return nodes
    i %= len(nodes)
    n, out = nodes[i], list(nodes)
    if how == "remove":
        del out[i]
        return out
    update: dict[str, object] = {
        "cordon": {"unschedulable": not n.unschedulable},
        "jurisdiction": {"labels": {**n.labels, "sovereignspec.io/jurisdiction": "EU"}},
        "gpus": {"gpu_allocatable": max(0, n.gpu_allocatable - 1)},
        "product": {"labels": {**n.labels, "nvidia.com/gpu.product": PRODUCTS[(i + 1) % len(PRODUCTS)]}},
        "copy": {},  # an equal object is still another object
        "label": {"labels": {**n.labels, "kwok.x-k8s.io/heartbeat": str(len(n.labels))}},
    }[how]
    out[i] = n.model_copy(update=update)
    return out


def _apply(prev: ClusterSnapshot, edits: list[Edit], tracked: bool) -> ClusterSnapshot:
    """The next snapshot, carrying `prev`'s index as the operator does."""
    pods, nodes = list(prev.pods), list(prev.nodes)
    for edit in edits:
        if edit[0] == "node":
            _, i, how = edit
            nodes = _edit_node(nodes, int(i), str(how))
            continue
        if edit[0] == "existing":
            _, i, where, slo, phase = edit
            if not pods:
                continue
            i = int(i) % len(pods)
            if where == "gone":
                del pods[i]
                continue
            ann = {"sovereignspec.io/tpot-slo-ms": slo} if slo else {}
            node = None if where == "unbound" else where
            pods[i] = pods[i].model_copy(update={"node": node, "annotations": ann, "phase": phase})
            continue
        _, ns, name, node, slo, phase, gpus = edit
        pods = [p for p in pods if (p.namespace, p.name) != (ns, name)]  # one pod per key
        if node is not None:
            ann = {"sovereignspec.io/tpot-slo-ms": slo} if slo else {}
            pods.append(
                PodInfo(
                    namespace=str(ns),
                    name=str(name),
                    node=node,
                    phase=str(phase),
                    gpu_request=int(gpus),
                    annotations=ann,
                )
            )
    nxt = prev.model_copy(update={"pods": pods, "nodes": nodes})
    drop_index(nxt)
    if tracked:  # the operator's way: the pods by key and the keys it saw change
        by_key = {(p.namespace, p.name): p for p in nxt.pods}
        old = {(p.namespace, p.name): p for p in prev.pods}
        carry_index(
            nxt, prev, (by_key, {k for k in by_key.keys() | old.keys() if by_key.get(k) is not old.get(k)})
        )
    else:
        carry_index(nxt, prev)
    return nxt


@settings(
    max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large]
)
@given(
    snap=snapshots(),
    reqs=st.lists(st.tuples(requests, st.integers(0, 1)), min_size=1, max_size=4),
    specs=st.lists(policies, min_size=2, max_size=2),
    steps=st.lists(
        st.tuples(
            st.lists(st.one_of(pod_edits, existing_edits, node_edits), min_size=1, max_size=3),
            reservations,
            st.booleans(),
        ),
        min_size=1,
        max_size=6,
    ),
)
def test_patched_snapshot_decides_like_a_fresh_one(
    snap: ClusterSnapshot,
    reqs: list[tuple[AdmissionRequest, int]],
    specs: list[SpeculationPolicySpec],
    steps: list[tuple[list[Edit], list[Reservation], bool]],
) -> None:
    pols = [Policies(spec, None, tuple(snap.sovereignty_policies)) for spec in specs]
    for req, p in reqs:  # warm: every row fact of these requests is memoised before the first edit
        decide(req, snap, pols[p], NOW)
    for edits, res, tracked in steps:
        snap = _apply(snap, edits, tracked)
        assert index_of(snap).how == "patched"
        assert_decides_like_fresh(snap, reqs, pols, res)


def test_a_patch_redoes_only_the_touched_rows(monkeypatch: pytest.MonkeyPatch) -> None:
    """The patch path is taken, not a rebuild: after a pod starts on one node of ten, the next decision
    asks for that node's evaluation inputs only (the other rows come from the carried arrays)."""
    names = [f"n{i}" for i in range(10)]
    snap = ClusterSnapshot(
        nodes=[
            NodeInfo(
                name=n,
                labels={"kubernetes.io/hostname": n, "nvidia.com/gpu.product": PRODUCTS[0]},
                gpu_allocatable=2,
            )
            for n in names
        ],
        namespaces=[NamespaceInfo(name=t) for t in TENANTS],
        telemetry=TelemetrySnapshot(
            time=NOW - timedelta(seconds=5),
            gpus=[GpuSample(node=n, uuid=f"{n}-0", tensor_active=0.1, fb_free_mib=40000.0) for n in names],
            acceptance=[acceptance()],
        ),
    )
    req = _request("bank-a", "chat", 1, "interactive", "eagle3", "8")
    pol = Policies(SpeculationPolicySpec(), None, ())
    decide(req, snap, pol, NOW)
    asked: list[str] = []
    real = core.node_input

    def counting(node: NodeInfo, *args: Any) -> Any:
        asked.append(node.name)
        return real(node, *args)

    monkeypatch.setattr(core, "node_input", counting)
    pod = PodInfo(namespace="shop", name="web-0", node="n3", phase="Running", gpu_request=1)
    nxt = snap.model_copy(update={"pods": [pod]})
    drop_index(nxt)
    carry_index(nxt, snap)
    got = decide(req, nxt, pol, NOW)
    assert asked == ["n3"]
    assert got.output() == decide(req, _fresh(nxt, []), pol, NOW).output()
    assert len(asked) == 11  # the fresh snapshot asks for every node


def test_a_pod_named_by_another_nodes_gpu_touches_that_node() -> None:
    """dcgm-exporter still names engine shop/eng on n0's GPU after the pod moved to n1; when its SLO
    then tightens on n1, n0's neighbour facts read the new SLO (n0 is touched although the pod is not
    bound there), so speculation on n0 turns off as on a fresh snapshot."""
    nodes = [
        NodeInfo(
            name=n,
            labels={"kubernetes.io/hostname": n, "nvidia.com/gpu.product": PRODUCTS[0]},
            gpu_allocatable=a,
        )
        for n, a in (("n0", 2), ("n1", 1))
    ]
    eng = PodInfo(
        namespace="shop",
        name="eng",
        node="n0",
        phase="Running",
        gpu_request=1,
        annotations={"sovereignspec.io/tpot-slo-ms": "200"},
    )
    snap = ClusterSnapshot(
        nodes=nodes,
        pods=[eng],
        namespaces=[NamespaceInfo(name=t) for t in TENANTS],
        telemetry=TelemetrySnapshot(
            time=NOW - timedelta(seconds=5),
            gpus=[
                GpuSample(
                    node="n0",
                    uuid="g0",
                    tensor_active=0.1,
                    fb_free_mib=40000.0,
                    pods=[PodRef(namespace="shop", name="eng")],
                ),
                GpuSample(node="n1", uuid="g1", tensor_active=0.1, fb_free_mib=40000.0),
            ],
            engines=[EngineSample(namespace="shop", pod="eng", tpot_seconds=0.03, running=8.0)],
            acceptance=[acceptance()],
        ),
    )
    req = _request("bank-a", "chat", 1, "interactive", "eagle3", "8")
    pol = Policies(SpeculationPolicySpec(), None, ())
    reasons = []
    for slo in ("200", "200", "20"):  # moved to n1 (filling it), then over its SLO there
        moved = eng.model_copy(update={"node": "n1", "annotations": {"sovereignspec.io/tpot-slo-ms": slo}})
        decide(req, snap, pol, NOW)
        nxt = snap.model_copy(update={"pods": [moved]})
        drop_index(nxt)
        carry_index(nxt, snap)
        got = decide(req, nxt, pol, NOW)
        assert got.output() == decide(req, _fresh(nxt, []), pol, NOW).output()
        assert got.node == "n0"
        reasons.append(got.reason)
        snap = nxt
    assert reasons == ["SpeculationOn", "SpeculationOn", "NeighbourSlo"]


def test_the_carried_chain_keeps_one_copy_of_each_fact() -> None:
    """carried_fact reads a key from the newest link holding it, so older copies are dropped."""
    oldest = Carried({"a": 0, "b": 1, "c": 3}, frozenset({"n3"}), None)
    newer = Carried({"b": 2}, frozenset({"n2"}), oldest)
    old = SimpleNamespace(wide={"a": 1}, carried=newer)
    chain = Carried.after(old, frozenset({"n1"}))  # type: ignore[arg-type]
    links = []
    link: Carried | None = chain
    while link is not None:
        links.append((link.wide, link.touched))
        link = link.older
    assert links == [({"a": 1}, {"n1"}), ({"b": 2}, {"n2"}), ({"c": 3}, {"n3"})]
