"""Pod groups (policy/group.py): members, claims agreement, whole-node placement in one jurisdiction,
and the per-range schedule rule; plus how parse_workload records the owner kind."""

from __future__ import annotations

from typing import Any

from hypothesis import given, settings
from hypothesis import strategies as st

from sovereignspec.api.meta import POD_GROUP_LABEL
from sovereignspec.model.cluster import ClusterSnapshot, PodInfo
from sovereignspec.model.workload import PodSetInfo, WorkloadInfo
from sovereignspec.policy.group import (
    ROLE_HASH_ANNOTATION,
    Unit,
    claims_of,
    members,
    place_units,
    spans_nodes,
    units,
    unpinnable,
    with_members,
)
from sovereignspec.policy.parse import parse_workload

CLAIMS = {
    "sovereignspec.io/class": "interactive",
    "sovereignspec.io/target-model": "meta-llama/Llama-3.3-70B-Instruct",
    "sovereignspec.io/draft-model": "yuhuili/EAGLE3-LLaMA3.3-Instruct-70B",
    "sovereignspec.io/spec-method": "eagle3",
}


def pod(name: str, group: str, ann: dict[str, str] | None = None, ns: str = "t", gpus: int = 8) -> PodInfo:
    return PodInfo(
        namespace=ns,
        name=name,
        gpu_request=gpus,
        labels={POD_GROUP_LABEL: group, "app": "x"},
        annotations={ROLE_HASH_ANNOTATION: "main", **(ann or {})},
    )


def sts_workload(count: int = 3) -> WorkloadInfo:
    return WorkloadInfo(
        namespace="t",
        name="statefulset-web-1a2b3",
        owner_kind="StatefulSet",
        pod_sets=[PodSetInfo(name="main", count=count, gpus_per_pod=1)],
    )


def lws_workload(leader: dict[str, str], worker: dict[str, str], size: int = 2) -> WorkloadInfo:
    return WorkloadInfo(
        namespace="t",
        name="leaderworkerset-llama-0-abc",
        owner_kind="LeaderWorkerSet",
        pod_sets=[
            PodSetInfo(name="leader", count=1, gpus_per_pod=8, annotations=leader),
            PodSetInfo(name="worker", count=size - 1, gpus_per_pod=8, annotations=worker),
        ],
    )


def test_members_are_the_group_label_in_the_namespace() -> None:
    wl = sts_workload()
    ps = [pod("web-1", wl.name), pod("web-0", wl.name), pod("other", "x"), pod("web-9", wl.name, ns="u")]
    assert [p.name for p in members(wl, ClusterSnapshot(pods=ps))] == ["web-0", "web-1"]


def test_statefulset_claims_come_from_its_pods() -> None:
    wl = sts_workload()
    group = [pod(f"web-{i}", wl.name, CLAIMS, gpus=1) for i in range(3)]
    eff = with_members(wl, group)
    assert eff.pod_sets[0].annotations["sovereignspec.io/spec-method"] == "eagle3"
    got = claims_of(eff, group)
    assert got.disagreement is None and got.annotations == CLAIMS
    assert claims_of(wl, []).annotations == {}  # no pods yet: no claims


def test_a_pod_that_differs_is_named() -> None:
    wl = sts_workload()
    group = [pod(f"web-{i}", wl.name, CLAIMS, gpus=1) for i in range(2)]
    group.append(pod("web-2", wl.name, {**CLAIMS, "sovereignspec.io/draft-model": "other-draft"}, gpus=1))
    got = claims_of(with_members(wl, group), group)
    assert got.disagreement is not None and got.disagreement.type == "ClaimsDisagree"
    msg = got.disagreement.message
    assert "sovereignspec.io/draft-model" in msg and "'other-draft'" in msg and "pod web-2" in msg


def test_lws_leader_and_worker_must_agree() -> None:
    assert claims_of(lws_workload(CLAIMS, CLAIMS)).disagreement is None
    worker = {k: v for k, v in CLAIMS.items() if k != "sovereignspec.io/spec-method"}
    bad = claims_of(lws_workload(CLAIMS, worker)).disagreement
    assert bad is not None
    assert "spec-method is 'eagle3' on pod set leader but unset on pod set worker" in bad.message
    # Template metadata, where Kueue keeps it, is not replaced by the pods'.
    wl = lws_workload(CLAIMS, CLAIMS)
    assert with_members(wl, [pod("l-0", wl.name, {})]) is wl


def test_multi_role_pod_groups_map_pods_by_role_hash() -> None:
    wl = WorkloadInfo(
        namespace="t",
        name="g",
        owner_kind="Pod",
        pod_sets=[PodSetInfo(name="aaa", gpus_per_pod=1), PodSetInfo(name="bbb", gpus_per_pod=1)],
    )
    a = pod("a", "g", {ROLE_HASH_ANNOTATION: "aaa", "x": "1"}, gpus=1)
    b = pod("b", "g", {ROLE_HASH_ANNOTATION: "bbb", "x": "2"}, gpus=1)
    eff = with_members(wl, [a, b])
    assert [ps.annotations["x"] for ps in eff.pod_sets] == ["1", "2"]


def test_spans_nodes_only_for_multi_pod_leaderworkersets() -> None:
    assert spans_nodes(lws_workload(CLAIMS, CLAIMS, size=2))
    one = lws_workload(CLAIMS, CLAIMS, size=1)
    assert not spans_nodes(one.model_copy(update={"pod_sets": one.pod_sets[:1]}))
    assert not spans_nodes(sts_workload(3))
    assert unpinnable(units(lws_workload(CLAIMS, CLAIMS, size=2))) is None
    assert unpinnable(units(lws_workload(CLAIMS, CLAIMS, size=3))) == Unit("worker", 2, 8)


def test_place_units_whole_nodes_in_one_jurisdiction() -> None:
    us = [Unit("leader", 1, 8), Unit("worker", 1, 8)]
    alloc = [8, 8, 8, 4]
    # Best-ranked node is KR, but KR has one whole free node only: the group goes to DE, never split.
    zone = ["KR", "DE", "DE", "KR"]
    free = [8, 8, 8, 4]
    assert place_units(us, [0, 3, 1, 2], free, alloc, zone) == [1, 2]
    # A partly used node is no whole node.
    assert place_units(us, [1, 2], [8, 7, 8, 4], alloc, zone) is None
    # A 4-GPU node does not host an 8-GPU pod, nor an 8-GPU node a 4-GPU pod.
    assert place_units([Unit("leader", 1, 4)], [0, 3], free, alloc, zone) == [3]
    assert place_units(us, [0, 3], free, alloc, zone) is None


@settings(max_examples=300, deadline=None)
@given(
    st.lists(
        st.tuples(st.sampled_from(["KR", "DE", "US"]), st.sampled_from([4, 8]), st.integers(0, 8)),
        min_size=1,
        max_size=8,
    ),
    st.lists(st.sampled_from([4, 8]), min_size=1, max_size=4),
    st.randoms(use_true_random=False),
)
def test_place_units_never_splits_nor_shares_nor_overbooks(
    nodes: list[tuple[str, int, int]], per_pod: list[int], rnd: Any
) -> None:
    zone = [z for z, _, _ in nodes]
    alloc = [a for _, a, _ in nodes]
    free = [min(f, a) for _, a, f in nodes]
    order = list(range(len(nodes)))
    rnd.shuffle(order)
    us = [Unit(f"u{i}", 1, g) for i, g in enumerate(per_pod)]
    got = place_units(us, order, free, alloc, zone)
    if got is None:
        # Then no jurisdiction has a distinct whole free node for every unit (checked by counting).
        for z in set(zone):
            for g in set(per_pod):
                want = sum(1 for x in per_pod if x == g)
                have = sum(1 for c in range(len(nodes)) if zone[c] == z and alloc[c] == g and free[c] >= g)
                if have < want:
                    break
            else:
                raise AssertionError(f"jurisdiction {z} could hold the group")
        return
    assert len(got) == len(us) and len(set(got)) == len(got)
    assert len({zone[c] for c in got}) == 1
    for u, c in zip(us, got, strict=True):
        assert alloc[c] == u.gpus_per_pod and free[c] >= u.need


def _workload(meta: dict[str, Any]) -> dict[str, Any]:
    return {
        "kind": "Workload",
        "metadata": {"name": "w", "namespace": "t", **meta},
        "spec": {"podSets": [{"name": "main", "count": 1, "template": {"spec": {"containers": []}}}]},
    }


def test_parse_workload_records_the_owner_kind() -> None:
    lws = {"apiVersion": "leaderworkerset.x-k8s.io/v1", "kind": "LeaderWorkerSet", "name": "l", "uid": "1"}
    assert parse_workload(_workload({"ownerReferences": [lws]})).owner_kind == "LeaderWorkerSet"
    gvk = {"kueue.x-k8s.io/job-owner-gvk": "leaderworkerset.x-k8s.io/v1, Kind=LeaderWorkerSet"}
    assert parse_workload(_workload({"annotations": gvk})).owner_kind == "LeaderWorkerSet"
    p = {"apiVersion": "v1", "kind": "Pod", "name": "p", "uid": "2"}
    assert parse_workload(_workload({"ownerReferences": [p]})).owner_kind == "Pod"
    assert parse_workload(_workload({})).owner_kind is None
