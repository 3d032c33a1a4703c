"""A snapshot derived with `with_reservations` decides exactly like one built from scratch.

The operator keeps one snapshot between changes of nodes, pods and telemetry and swaps only the
reservations per decision; a memo that wrongly survived the swap would place an isolated tenant next to
a reservation it must avoid, or over-commit a node's GPUs.
"""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

from hypothesis import given, settings
from hypothesis import strategies as st

from sovereignspec.api.meta import ObjectMeta
from sovereignspec.api.sovereignty_policy import SovereigntyPolicy, SovereigntyPolicySpec
from sovereignspec.api.speculation_policy import SpeculationPolicySpec
from sovereignspec.model.cluster import ClusterSnapshot, NamespaceInfo, NodeInfo, PodInfo, Reservation
from sovereignspec.model.telemetry import GpuSample, PodRef, TelemetrySnapshot
from sovereignspec.model.workload import CheckEntry, PodSetAssignment, PodSetInfo, WorkloadInfo
from sovereignspec.policy.cache import carry_index, drop_index, index_of, with_reservations
from sovereignspec.policy.decide import decide
from sovereignspec.policy.request import AdmissionRequest, Policies

NOW = datetime(2026, 11, 29, 10, 0, 5, tzinfo=UTC)
NODES = [f"n{i}" for i in range(5)]
TENANTS = ["bank-a", "bank-b", "shop"]


def _base() -> ClusterSnapshot:
    pods = [PodInfo(namespace="shop", name="eng", node="n0", phase="Running", gpu_request=1)]
    return ClusterSnapshot(
        nodes=[
            NodeInfo(
                name=n,
                labels={"kubernetes.io/hostname": n, "sovereignspec.io/jurisdiction": "KR"},
                gpu_allocatable=2,
            )
            for n in NODES
        ],
        pods=pods,
        namespaces=[NamespaceInfo(name=t) for t in TENANTS],
        sovereignty_policies=[
            SovereigntyPolicy(
                metadata=ObjectMeta(name="iso"),
                spec=SovereigntyPolicySpec(
                    tenants=["bank-a", "bank-b"], jurisdictions=["KR"], isolation="Node"
                ),
            )
        ],
        telemetry=TelemetrySnapshot(
            time=NOW - timedelta(seconds=2),
            gpus=[
                GpuSample(
                    node=n,
                    uuid=f"{n}-g{g}",
                    tensor_active=0.1 * i,
                    fb_free_mib=40000,
                    pods=[PodRef(namespace="shop", name="eng")] if (n, g) == ("n0", 0) else [],
                )
                for i, n in enumerate(NODES)
                for g in range(2)
            ],
        ),
    )


SPECULATE = {
    "sovereignspec.io/spec-method": "eagle3",
    "sovereignspec.io/draft-model": "d",
    "sovereignspec.io/target-model": "m",
}


def _request(ns: str, speculate: bool = False) -> AdmissionRequest:
    """A one-GPU workload; `speculate` asks for EAGLE-3, so the per-node S_real memo is read too."""
    wl = WorkloadInfo(
        namespace=ns,
        name="chat",
        uid=f"{ns}-uid",
        pod_sets=[
            PodSetInfo(name="main", count=1, gpus_per_pod=1, annotations=SPECULATE if speculate else {})
        ],
        quota_reserved=True,
        assignments=[PodSetAssignment(name="main", flavors={})],
        checks=[CheckEntry(name="sovereignspec", state="Pending")],
    )
    return AdmissionRequest(workload=wl, check="sovereignspec")


reservations = st.lists(
    st.builds(
        Reservation,
        namespace=st.sampled_from(TENANTS),
        name=st.sampled_from(["r1", "r2", "r3"]),
        node=st.sampled_from(NODES),
        gpus=st.integers(0, 2),
        trusted=st.booleans(),
    ),
    max_size=8,
)


@settings(max_examples=150, deadline=None)
@given(rounds=st.lists(st.tuples(reservations, st.sampled_from(TENANTS)), min_size=1, max_size=4))
def test_derived_snapshot_decides_like_a_fresh_one(rounds: list[tuple[list[Reservation], str]]) -> None:
    base = _base()
    policy = SpeculationPolicySpec()
    for res, ns in rounds:  # one base, several reservation sets in turn: memos must not leak between them
        derived = with_reservations(base, res, [])
        fresh = _base().model_copy(update={"reservations": res})
        pol = Policies(speculation=policy, sovereignty=[p for p in base.sovereignty_policies])
        a = decide(_request(ns), derived, pol, NOW)
        b = decide(_request(ns), fresh, pol, NOW)
        assert a.model_dump() == b.model_dump()


def test_a_reservation_on_the_only_free_node_moves_an_isolated_tenant() -> None:
    """The derived snapshot sees the new reservation: bank-a (isolated) leaves the node bank-b holds."""
    base = _base()
    pol = Policies(speculation=SpeculationPolicySpec(), sovereignty=list(base.sovereignty_policies))
    first = decide(_request("bank-a"), with_reservations(base, [], []), pol, NOW)
    assert first.state == "Ready" and first.node is not None
    held = Reservation(namespace="bank-b", name="r", node=first.node, gpus=1)
    second = decide(_request("bank-a"), with_reservations(base, [held], []), pol, NOW)
    assert second.state == "Ready" and second.node not in (None, first.node)


NODE_EDITS = ("cordon", "leave-jurisdiction", "fewer-gpus", "other-gpu", "remove", "same-copy")


def _edit_nodes(nodes: list[NodeInfo], edit: tuple[str, str] | None) -> list[NodeInfo]:
    """The node list after one change to one node (a copy equal to the old one is a change of object)."""
    if edit is None:
        return nodes
    name, how = edit
    out: list[NodeInfo] = []
    for n in nodes:
        if n.name != name:
            out.append(n)
        elif how == "cordon":
            out.append(n.model_copy(update={"unschedulable": not n.unschedulable}))
        elif how == "leave-jurisdiction":
            out.append(n.model_copy(update={"labels": {**n.labels, "sovereignspec.io/jurisdiction": "EU"}}))
        elif how == "fewer-gpus":
            out.append(n.model_copy(update={"gpu_allocatable": max(0, n.gpu_allocatable - 1)}))
        elif how == "other-gpu":  # another step-time profile: a memoised S_real would be stale
            out.append(n.model_copy(update={"labels": {**n.labels, "nvidia.com/gpu.product": "NVIDIA-A10"}}))
        elif how == "same-copy":
            out.append(n.model_copy())
    return out


pod_changes = st.lists(
    st.tuples(
        st.sampled_from(["eng", "eng2", "batch"]),
        st.sampled_from(TENANTS),
        st.sampled_from([*NODES, None]),
        st.sampled_from([None, "1", "200"]),
        st.sampled_from([None, *((n, how) for n in NODES for how in NODE_EDITS)]),
    ),
    min_size=1,
    max_size=5,
)


@settings(max_examples=100, deadline=None)
@given(steps=pod_changes, ns=st.sampled_from(TENANTS), speculate=st.booleans(), tracked=st.booleans())
def test_carried_index_decides_like_a_fresh_one(
    steps: list[tuple[str, str, str | None, str | None, tuple[str, str] | None]],
    ns: str,
    speculate: bool,
    tracked: bool,
) -> None:
    """Pods start, move, change their SLO or go away, and nodes change, one after another; each new
    snapshot carries what the previous one memoised about unchanged nodes, and must decide like a
    snapshot built cold."""
    prev = _base()
    pol = Policies(speculation=SpeculationPolicySpec(), sovereignty=list(prev.sovereignty_policies))
    decide(_request(ns, speculate), prev, pol, NOW)  # fill the memo
    for name, pod_ns, node, slo, node_edit in steps:
        pods = [p for p in prev.pods if p.name != name]  # one pod per name: keys stay unique
        if node is not None:
            ann = {"sovereignspec.io/tpot-slo-ms": slo} if slo else {}
            pods.append(
                PodInfo(
                    namespace=pod_ns, name=name, node=node, phase="Running", gpu_request=1, annotations=ann
                )
            )
        nxt = prev.model_copy(update={"pods": pods, "nodes": _edit_nodes(prev.nodes, node_edit)})
        drop_index(nxt)
        if tracked:  # the operator's way: the pods by key, and the keys it saw change (plus one spare)
            by_key = {(p.namespace, p.name): p for p in nxt.pods}
            old = {(p.namespace, p.name): p for p in prev.pods}
            maybe = {k for k in by_key.keys() | old.keys() if by_key.get(k) is not old.get(k)}
            carry_index(nxt, prev, (by_key, maybe | {("shop", "eng")}))
        else:
            carry_index(nxt, prev)
        assert index_of(nxt).how == "patched"
        fresh = nxt.model_copy()
        drop_index(fresh)
        assert (
            decide(_request(ns, speculate), nxt, pol, NOW).model_dump()
            == decide(_request(ns, speculate), fresh, pol, NOW).model_dump()
        )
        prev = nxt
