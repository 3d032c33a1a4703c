"""Which reservations a snapshot holds: only those still holding GPUs, by node.

A reservation is consumed by the pods bound under its decision name; one that holds nothing any more
is left out, so a decision revisits only the nodes with decisions in flight, and a tenant whose pods
ended up elsewhere does not count as an occupant of the node it once reserved.
"""

from __future__ import annotations

from sovereignspec.api.meta import ANNOTATION_DECISION
from sovereignspec.model.cluster import ClusterSnapshot, NodeInfo, PodInfo, Reservation
from sovereignspec.policy.cache import index_of


def node(name: str) -> NodeInfo:
    return NodeInfo(name=name, labels={"kubernetes.io/hostname": name}, gpu_allocatable=8)


def bound(ns: str, name: str, where: str, decision: str, gpus: int = 1) -> PodInfo:
    return PodInfo(namespace=ns, name=name, node=where, phase="Running", gpu_request=gpus,
                   annotations={ANNOTATION_DECISION: decision})  # fmt: skip


def snap(pods: list[PodInfo], reservations: list[Reservation]) -> ClusterSnapshot:
    return ClusterSnapshot(nodes=[node("n1"), node("n2")], pods=pods, reservations=reservations)


R = Reservation(namespace="a", name="job", node="n1", gpus=2)


def test_an_unbound_reservation_holds_all_its_gpus() -> None:
    held = index_of(snap([], [R])).reservations_by_node
    assert list(held) == ["n1"] and len(held) == 1 and "n1" in held
    assert held["n1"] == [(R, 2)]
    assert held.get("n2") is None and "n2" not in held


def test_bound_pods_consume_it_and_a_consumed_one_is_gone() -> None:
    half = index_of(snap([bound("a", "job-0", "n1", "job")], [R])).reservations_by_node
    assert half["n1"] == [(R, 1)]
    full = snap([bound("a", "job-0", "n1", "job"), bound("a", "job-1", "n1", "job")], [R])
    held = index_of(full).reservations_by_node
    assert list(held) == [] and len(held) == 0 and "n1" not in held and held.get("n1") is None
    assert index_of(full).gpu_used["n1"] == 2  # the pods count instead


def test_pods_bound_elsewhere_leave_no_occupant_behind() -> None:
    s = snap([bound("a", "job-0", "n2", "job", gpus=2)], [R])
    assert "n1" not in index_of(s).reservations_by_node
    assert index_of(s).gpu_used == {"n2": 2}


def test_untrusted_reservations_hold_nothing() -> None:
    s = snap([], [R.model_copy(update={"trusted": False})])
    assert len(index_of(s).reservations_by_node) == 0


def test_a_group_holds_each_node_until_its_own_pods_bind_there() -> None:
    """A decision over two nodes (a LeaderWorkerSet): the leader binding on n1 consumes only n1's share."""
    g = Reservation(namespace="a", name="lws", node="n1", gpus=8, also={"n2": 8})
    both = index_of(snap([], [g])).reservations_by_node
    assert sorted(both) == ["n1", "n2"] and both["n2"][0][1] == 8
    leader = index_of(snap([bound("a", "lws-0", "n1", "lws", gpus=8)], [g])).reservations_by_node
    assert list(leader) == ["n2"] and leader["n2"][0][1] == 8
