"""Decisions on a snapshot carried across a telemetry refresh equal decisions on a fresh snapshot.

Every telemetry refresh (10 s) gives the operator a snapshot whose GPU and engine samples are all new
objects, with the same nodes and pods. `carry_index` then patches the previous index
(`SnapshotIndex.how == "refreshed"`): it regroups only the samples and keeps the facts whose kind reads
no sample (`cache.keys.TELEMETRY_FREE`: occupants, isolation, the static filter, capacity rows), and the
facts of request kinds that pass the same nodes share their rows (`cache.static._shared`). A kept fact
that does read a sample would decide on the last reading: here random refreshes (loads, free memory,
the pods each GPU names, engines' TPOT and running sequences, engines appearing or going), some with pod
and node edits in the same step, follow one another with the facts warm before each, and every decision
must equal the one on a snapshot built cold.
"""

from __future__ import annotations

from datetime import timedelta
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from sovereignspec.api.speculation_policy import SpeculationPolicySpec
from sovereignspec.model.cluster import ClusterSnapshot, NamespaceInfo, NodeInfo, PodInfo, Reservation
from sovereignspec.model.telemetry import EngineSample, GpuSample, PodRef, TelemetrySnapshot
from sovereignspec.policy.cache import carry_index, drop_index, index_of
from sovereignspec.policy.cache import facts as core
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
from tests.unit.test_snapshot_reuse_patch import Edit, _apply, node_edits, pod_edits, reservations

Refresh = tuple[list[float | None], list[float | None], list[int], list[float | None], list[int], int]

refreshes = st.tuples(
    st.lists(st.sampled_from([0.0, 0.1, 0.4, 0.8, 0.95, None]), min_size=1, max_size=6),  # loads
    st.lists(st.sampled_from([1000.0, 40000.0, 40000.0, None]), min_size=1, max_size=4),  # free MiB
    # the pods a GPU names: the same list, reversed, one fewer, one more (a pod of another node too)
    st.lists(st.integers(0, 3), min_size=1, max_size=6),
    st.lists(st.sampled_from([0.01, 0.03, 0.07, 0.2, None]), min_size=1, max_size=5),  # TPOT
    st.lists(st.integers(0, 3), min_size=1, max_size=5),  # engine: kept (0-2, running), or gone (3)
    st.integers(0, 3),  # 0: GPUs and engines, 1: GPUs only, 2: engines only, 3: both, a new engine
)


def _refreshed(snap: ClusterSnapshot, plan: Refresh) -> TelemetrySnapshot | None:
    tel = snap.telemetry
    if tel is None:
        return None
    loads, fbs, ops, tpots, keeps, what = plan
    refs = [PodRef(namespace=p.namespace, name=p.name) for p in snap.pods]
    gpus, engines = list(tel.gpus), list(tel.engines)
    if what != 2:
        gpus = []
        for j, g in enumerate(tel.gpus):
            named, op = list(g.pods), ops[j % len(ops)]
            if op == 1:
                named.reverse()
            elif op == 2 and named:
                named.pop()
            elif op == 3 and refs and refs[j % len(refs)] not in named:
                named.append(refs[j % len(refs)])
            pods = g.pods if op == 0 else named
            load, fb = loads[j % len(loads)], fbs[j % len(fbs)]
            gpus.append(GpuSample(node=g.node, uuid=g.uuid, tensor_active=load, fb_free_mib=fb, pods=pods))
    if what != 1:
        engines = [
            EngineSample(
                namespace=e.namespace,
                pod=e.pod,
                tpot_seconds=tpots[j % len(tpots)],
                running=[None, 1.0, 16.0][keep],
            )
            for j, e in enumerate(tel.engines)
            if (keep := keeps[j % len(keeps)]) != 3
        ]
        have = {(e.namespace, e.pod) for e in engines}
        new = [r for r in refs if (r.namespace, r.name) not in have]
        if what == 3 and new:
            engines.append(
                EngineSample(namespace=new[0].namespace, pod=new[0].name, tpot_seconds=0.03, running=4)
            )
    return tel.model_copy(update={"gpus": gpus, "engines": engines})


def _step(prev: ClusterSnapshot, plan: Refresh, edits: list[Edit], tracked: bool) -> ClusterSnapshot:
    """The next snapshot after a refresh (and `edits`, if any), carrying `prev`'s index."""
    nxt = _apply(prev, edits, tracked) if edits else prev
    tel = _refreshed(nxt, plan)
    new = nxt.model_copy(update={"telemetry": tel})
    drop_index(new)
    if edits:  # pods and nodes as `_apply` found them changed, plus the new telemetry
        carry_index(new, prev)
    else:  # the operator's way: no pod changed since the last snapshot
        carry_index(new, prev, (dict(index_of(prev).pod_by_key), set()))
    return new


@settings(
    max_examples=120, deadline=None, suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large]
)
@given(
    snap=snapshots(),
    reqs=st.lists(st.tuples(requests, st.integers(0, 1)), min_size=1, max_size=4),
    specs=st.lists(policies, min_size=2, max_size=2),
    steps=st.lists(
        st.tuples(
            refreshes,
            st.lists(st.one_of(pod_edits, node_edits), max_size=2),
            reservations,
            st.booleans(),
        ),
        min_size=1,
        max_size=5,
    ),
)
def test_refreshed_snapshot_decides_like_a_fresh_one(
    snap: ClusterSnapshot,
    reqs: list[tuple[AdmissionRequest, int]],
    specs: list[SpeculationPolicySpec],
    steps: list[tuple[Refresh, list[Edit], list[Reservation], bool]],
) -> None:
    pols = [Policies(spec, None, tuple(snap.sovereignty_policies)) for spec in specs]
    for req, p in reqs:  # warm: every fact of these requests is memoised before the first refresh
        decide(req, snap, pols[p], NOW)
    for plan, edits, res, tracked in steps:
        before = snap.telemetry
        snap = _step(snap, plan, edits, tracked)
        changed = before is not None and snap.telemetry is not None and snap.telemetry != before
        assert index_of(snap).how == ("refreshed" if changed else "patched")
        assert_decides_like_fresh(snap, reqs, pols, res)


def _counting(monkeypatch: pytest.MonkeyPatch, name: str) -> dict[str, int]:
    calls = {"n": 0}
    real = getattr(core, name)

    def counted(*args: Any, **kwargs: Any) -> Any:
        calls["n"] += 1
        return real(*args, **kwargs)

    monkeypatch.setattr(core, name, counted)
    return calls


def _cluster(n: int = 4) -> ClusterSnapshot:
    """`n` time-sliced nodes (one GPU, two replicas), each with one engine of a tenant's neighbour."""
    nodes, pods, gpus, engines = [], [], [], []
    for i in range(n):
        name = f"n{i}"
        labels = {"sovereignspec.io/jurisdiction": "KR", "nvidia.com/gpu.product": PRODUCTS[i % 3]}
        nodes.append(NodeInfo(name=name, labels=labels, gpu_allocatable=2))
        ann = {"sovereignspec.io/tpot-slo-ms": "80"}
        pods.append(PodInfo(namespace="shop", name=f"eng-{i}", node=name, gpu_request=1, annotations=ann))
        ref = PodRef(namespace="shop", name=f"eng-{i}")
        gpus.append(
            GpuSample(node=name, uuid=f"{name}-0", tensor_active=0.1 * i, fb_free_mib=40000, pods=[ref])
        )
        engines.append(EngineSample(namespace="shop", pod=f"eng-{i}", tpot_seconds=0.03, running=16))
    return ClusterSnapshot(
        nodes=nodes,
        pods=pods,
        namespaces=[NamespaceInfo(name=t) for t in TENANTS],
        telemetry=TelemetrySnapshot(
            time=NOW - timedelta(seconds=5), gpus=gpus, engines=engines, acceptance=[acceptance()]
        ),
    )


def test_a_refresh_keeps_isolation_and_redoes_each_nodes_neighbours_once(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """A refresh keeps what reads no sample (isolation against pods) and redoes each node's neighbours
    (loads, TPOT) once for every request kind that passes the same nodes: two tenants, two classes."""
    snap = _cluster()
    pol = Policies(SpeculationPolicySpec(k_max=4), None, ())
    kinds = [
        _request(ns, "chat", 1, c, "eagle3", "8")
        for ns in ("bank-a", "bank-b")
        for c in ("interactive", "batch")
    ]
    for req in kinds:
        assert decide(req, snap, pol, NOW).state == "Ready"
    isolation, neighbours = (
        _counting(monkeypatch, "isolation_allows"),
        _counting(monkeypatch, "neighbour_inputs"),
    )
    nxt = _step(snap, ([0.5, 0.2], [40000.0], [0], [0.05], [1], 0), [], True)
    assert index_of(nxt).how == "refreshed"
    got = [decide(req, nxt, pol, NOW).output() for req in kinds]
    assert isolation["n"] == 0
    assert neighbours["n"] == len(nxt.nodes)
    assert got == [decide(req, _fresh(nxt, []), pol, NOW).output() for req in kinds]
    assert got != [decide(req, _fresh(snap, []), pol, NOW).output() for req in kinds]  # the loads moved
