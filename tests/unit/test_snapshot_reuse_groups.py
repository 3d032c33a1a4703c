"""Pod groups kept on the snapshot's index (policy/cache/groups.py) equal a scan of every pod, however
the index was had: built cold, patched from the previous snapshot with the changed pods found by
comparison or handed over as the operator's pod mirror does, or shared with a derived snapshot."""

from __future__ import annotations

from hypothesis import given, settings
from hypothesis import strategies as st

from sovereignspec.api.meta import POD_GROUP_LABEL
from sovereignspec.model.cluster import ClusterSnapshot, PodInfo
from sovereignspec.model.workload import WorkloadInfo
from sovereignspec.policy.cache import carry_index, drop_index, index_of, with_reservations
from sovereignspec.policy.group import members

NAMESPACES = ["a", "b"]
GROUPS = ["web", "llm", None]  # None: no group label
NAMES = [f"p{i}" for i in range(6)]

# (namespace, name, group or None, node or None, phase) puts that pod in the snapshot; a None group
# with "gone" removes it.
edits = st.tuples(
    st.sampled_from(NAMESPACES),
    st.sampled_from(NAMES),
    st.sampled_from(GROUPS),
    st.sampled_from(["n0", "n1", None, "gone"]),
    st.sampled_from(["Running", "Pending", "Succeeded"]),
)


def _scan(pods: list[PodInfo], ns: str, group: str) -> list[PodInfo]:
    """The oracle: every pod of the snapshot whose group label names `group` in `ns`, by name."""
    got = [p for p in pods if p.namespace == ns and p.labels.get(POD_GROUP_LABEL) == group]
    return sorted(got, key=lambda p: p.name)


def _apply(prev: ClusterSnapshot, step: list[tuple[str, str, str | None, str | None, str]]) -> list[PodInfo]:
    pods = list(prev.pods)
    for ns, name, group, node, phase in step:
        pods = [p for p in pods if (p.namespace, p.name) != (ns, name)]
        if node == "gone":
            continue
        labels = {"app": "x"} if group is None else {POD_GROUP_LABEL: group, "app": "x"}
        pods.append(PodInfo(namespace=ns, name=name, node=node, phase=phase, gpu_request=1, labels=labels))
    return pods


def _check(snap: ClusterSnapshot) -> None:
    for ns in NAMESPACES:
        for group in GROUPS[:-1]:
            want = _scan(snap.pods, ns, group)
            got = members(WorkloadInfo(namespace=ns, name=group), snap)
            assert [id(p) for p in got] == [id(p) for p in want]
    assert set(index_of(snap).pod_groups) == {
        (p.namespace, g) for p in snap.pods if (g := p.labels.get(POD_GROUP_LABEL)) is not None
    }


@settings(max_examples=200, deadline=None)
@given(
    steps=st.lists(st.tuples(st.lists(edits, min_size=1, max_size=4), st.booleans()), min_size=1, max_size=8)
)
def test_patched_pod_groups_equal_a_scan(
    steps: list[tuple[list[tuple[str, str, str | None, str | None, str]], bool]],
) -> None:
    snap = ClusterSnapshot()
    _check(snap)
    for step, tracked in steps:
        nxt = ClusterSnapshot(pods=_apply(snap, step))
        drop_index(nxt)
        if tracked:
            by_key = {(p.namespace, p.name): p for p in nxt.pods}
            old = {(p.namespace, p.name): p for p in snap.pods}
            carry_index(
                nxt,
                snap,
                (by_key, {k for k in by_key.keys() | old.keys() if by_key.get(k) is not old.get(k)}),
            )
        else:
            carry_index(nxt, snap)
        assert index_of(nxt).how == "patched"
        _check(nxt)
        _check(with_reservations(nxt, [], []))
        snap = nxt


def test_a_patch_outside_any_group_shares_the_groups() -> None:
    grouped = PodInfo(namespace="a", name="w-0", labels={POD_GROUP_LABEL: "web"})
    plain = PodInfo(namespace="a", name="x", node="n0", phase="Running")
    snap = ClusterSnapshot(pods=[grouped, plain])
    nxt = ClusterSnapshot(pods=[grouped, plain.model_copy(update={"node": "n1"})])
    carry_index(nxt, snap)
    assert index_of(nxt).pod_groups is index_of(snap).pod_groups
