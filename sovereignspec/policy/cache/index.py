"""The snapshot's incremental index: per-node groupings derived once from a ClusterSnapshot, the facts
the decision core memoises on them, and how a new snapshot carries them over from the previous one.

Nothing here decides anything: the rule modules compute facts, this package keeps them while their
inputs are the same objects. `index_of(snapshot)` builds (once) or returns a snapshot's index;
`with_reservations` and `carry_index` are how the operator reuses one between decisions.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING, NamedTuple

from sovereignspec.api.meta import ANNOTATION_DECISION
from sovereignspec.model.cluster import ClusterSnapshot, NamespaceInfo, PodInfo, Reservation, same_items
from sovereignspec.model.telemetry import EngineSample, GpuSample
from sovereignspec.policy.cache.groups import PodGroups
from sovereignspec.policy.cache.held import HeldReservations
from sovereignspec.policy.cache.keys import TELEMETRY_FREE, FactKey

if TYPE_CHECKING:  # annotations only
    from sovereignspec.model.cluster import NodeInfo, WorkloadRef


class SnapshotIndex:
    """Per-node groupings derived once from a snapshot (pure; rebuilt only with a new snapshot).

    Built from a `base` index, it shares everything but the reservations: the operator decides many
    workloads between two changes of nodes, pods or telemetry, and only the reservations move. Built
    with `carry`, the previous index, it keeps the facts memoised for every node whose inputs are the
    same objects as before (a pod starting on one node of 500 recomputes that node only).

    A fact about a node (`FactKey.node`) reads only that node, its pods, its GPU samples, the pods
    those samples name, and the global parts compared below."""

    memo: NodeMemo
    """Request- and reservation-independent derived facts (e.g. a node's neighbours under one policy),
    memoised by the decision core for the life of this index and of those built from it."""
    wide: dict[object, object]
    """Like `memo`, but facts about many nodes at once (arrays aligned with a node list): valid only while
    nodes, pods and telemetry are the same, so every full build or patch starts it empty; indexes
    derived with `base` share it. A patched index reaches the previous ones' through `carried`."""
    carried: Carried | None = None
    """The `wide` memos of the indexes this one was patched from, with the nodes touched since: a fact
    about many nodes is patched on those nodes instead of being rebuilt for all of them."""
    node_by_name: dict[str, NodeInfo]
    ns_labels: dict[str, dict[str, str]]
    pods_by_node: dict[str, list[PodInfo]]
    gpu_used: dict[str, int]
    pod_by_key: dict[tuple[str, str], PodInfo]
    pod_groups: PodGroups
    """Pods by Kueue pod group (namespace, group label): a group's members without a scan of every pod."""
    bound_by_decision: dict[tuple[str, ...], int]
    """GPUs of bound pods by (namespace, decision name), and by (namespace, decision name, node)."""
    gpus_by_node: dict[str, list[GpuSample]]
    engine_by_pod: dict[tuple[str, str], EngineSample]
    _fingerprints: dict[str, tuple[object, ...]]
    how: str = "derived"
    """How this index was had: full (grouped from scratch), patched, refreshed (patched across new
    telemetry), or derived (shared with a base)."""
    _nodes: list[NodeInfo]
    _named_on: dict[tuple[str, str], set[str]]
    """Pod key -> nodes whose GPU samples name it (a fact about a node reads those pods too)."""
    inputs: Inputs
    """The global parts any memoised fact may read: GPU and engine samples, namespace labels (not the
    acceptance samples: they change with every pod's draft identity and no per-node fact reads them)."""

    def __init__(
        self,
        snap: ClusterSnapshot,
        base: SnapshotIndex | None = None,
        carry: SnapshotIndex | None = None,
        held: Mapping[str, Sequence[Reservation]] | None = None,
        pods: PodChanges | None = None,
    ) -> None:
        if base is not None:
            self.memo = base.memo
            self.wide = base.wide
            self.node_by_name = base.node_by_name
            self.ns_labels = base.ns_labels
            self.pods_by_node = base.pods_by_node
            self.gpu_used = base.gpu_used
            self.pod_by_key = base.pod_by_key
            self.pod_groups = base.pod_groups
            self.bound_by_decision = base.bound_by_decision
            self.gpus_by_node = base.gpus_by_node
            self.engine_by_pod = base.engine_by_pod
            self.inputs = base.inputs
            self._fingerprints = base._fingerprints
            self._nodes = base._nodes
            self._named_on = base._named_on
            self.carried = base.carried
        elif carry is not None and self._patch(snap, carry, pods):
            self.wide = {}
        else:
            self.how = "full"
            self._build(snap)
            self.wide = {}
            if carry is not None:
                self._carry(carry)
        self.rmemo: dict[object, object] = {}
        """Derived facts that also read the reservations (a node's occupants, isolation), memoised
        for this snapshot only."""
        if held is None:
            grouped: dict[str, list[Reservation]] = {}
            for r in snap.reservations:
                if r.trusted:
                    for one in r.per_node():
                        grouped.setdefault(one.node, []).append(one)
            held = grouped
        self.reservations_by_node: Mapping[str, list[tuple[Reservation, int]]] = HeldReservations(
            held, self.bound_by_decision
        )
        """Trusted reservations by node, each with the GPUs it still holds (see HeldReservations)."""

    def _build(self, snap: ClusterSnapshot) -> None:
        self.memo = NodeMemo()
        self._fingerprints = {}
        self._nodes = snap.nodes
        self.node_by_name = {n.name: n for n in snap.nodes}
        self.ns_labels = {n.name: n.labels for n in snap.namespaces}
        self.pods_by_node = {}
        self.gpu_used = {}
        self.pod_by_key = {}
        self.bound_by_decision = {}
        for p in snap.pods:
            self.pod_by_key[(p.namespace, p.name)] = p
            if not p.active or p.node is None:
                continue
            self.pods_by_node.setdefault(p.node, []).append(p)
            self._count(p, p.node, 1)
        self.pod_groups = PodGroups.of(snap.pods)
        self._group_telemetry(snap)

    def _group_telemetry(self, snap: ClusterSnapshot) -> None:
        """The groupings of the GPU and engine samples (a telemetry refresh redoes only these)."""
        self.gpus_by_node = {}
        self.engine_by_pod = {}
        self._named_on = {}
        self.inputs = _global_inputs(snap)
        tel = snap.telemetry
        if tel is None:
            return
        for g in tel.gpus:
            self.gpus_by_node.setdefault(g.node, []).append(g)
            for ref in g.pods:
                self._named_on.setdefault((ref.namespace, ref.name), set()).add(g.node)
        for e in tel.engines:
            self.engine_by_pod[(e.namespace, e.pod)] = e

    def _count(self, p: PodInfo, node: str, sign: int) -> None:
        """Add (sign 1) or remove (-1) a bound pod's GPUs on its node and under its decision."""
        self.gpu_used[node] = self.gpu_used.get(node, 0) + sign * p.gpu_request
        dec = p.annotations.get(ANNOTATION_DECISION)
        if dec:
            for key in ((p.namespace, dec), (p.namespace, dec, node)):
                self.bound_by_decision[key] = self.bound_by_decision.get(key, 0) + sign * p.gpu_request

    def _patch(self, snap: ClusterSnapshot, old: SnapshotIndex, pods: PodChanges | None = None) -> bool:
        """Only pods, nodes or telemetry changed (namespaces are the same objects): patch `old`'s
        groupings for the pods that changed and keep every fact about the nodes they do not touch.
        O(pods) identity checks instead of regrouping every pod and GPU sample of the cluster; a node
        whose object changed (labels, taints, a cordon) loses only its own facts. New GPU or engine
        samples (a telemetry refresh) regroup only the samples, and keep only the facts whose kind
        reads none (`keys.TELEMETRY_FREE`: occupants, isolation, the static filter, capacity rows)."""
        inputs = _global_inputs(snap)
        if not same_items(inputs.namespaces, old.inputs.namespaces):
            return False
        refreshed = not _same_inputs(inputs, old.inputs)
        if pods is not None:
            pod_by_key, maybe = pods
            changed = {k for k in maybe if old.pod_by_key.get(k) is not pod_by_key.get(k)}
        else:
            pod_by_key = {(p.namespace, p.name): p for p in snap.pods}
            if len(pod_by_key) != len(snap.pods):
                return False  # one key twice (a hand-written scenario): the full build counts both
            changed = {k for k, p in pod_by_key.items() if old.pod_by_key.get(k) is not p}
            if len(pod_by_key) - len(changed) != len(old.pod_by_key):  # some pods are gone
                changed |= {k for k in old.pod_by_key if k not in pod_by_key}
        touched: set[str] = set()
        if same_items(snap.nodes, old._nodes):
            self._nodes, self.node_by_name = old._nodes, old.node_by_name
        else:
            node_by_name = {n.name: n for n in snap.nodes}
            if len(node_by_name) != len(snap.nodes):
                return False
            touched |= {n for n, obj in node_by_name.items() if old.node_by_name.get(n) is not obj}
            touched |= old.node_by_name.keys() - node_by_name.keys()
            self._nodes, self.node_by_name = snap.nodes, node_by_name
        self.pods_by_node = dict(old.pods_by_node)
        self.gpu_used = dict(old.gpu_used)
        self.bound_by_decision = dict(old.bound_by_decision)
        for k in changed:
            for p, sign in ((old.pod_by_key.get(k), -1), (pod_by_key.get(k), 1)):
                if p is None or not p.active or p.node is None:
                    continue
                touched.add(p.node)
                self._count(p, p.node, sign)
            touched |= old._named_on.get(k, set())
        for n in touched:
            kept = [p for p in old.pods_by_node.get(n, ()) if (p.namespace, p.name) not in changed]
            kept += [p for k in changed if (p := pod_by_key.get(k)) is not None and p.active and p.node == n]
            if kept:
                self.pods_by_node[n] = kept
            else:
                self.pods_by_node.pop(n, None)
        self.pod_groups = old.pod_groups.patched(old.pod_by_key, pod_by_key, changed)
        self.pod_by_key = pod_by_key
        self.ns_labels = old.ns_labels
        self.memo = old.memo.without(touched)
        if refreshed:
            self.how = "refreshed"
            self._group_telemetry(snap)
            self._fingerprints = {}
            self.memo = self.memo.only(TELEMETRY_FREE)
            self.carried = Carried.after(old, frozenset(touched), TELEMETRY_FREE)
            return True
        self.how = "patched"
        self.gpus_by_node = old.gpus_by_node
        self.engine_by_pod = old.engine_by_pod
        self.inputs = old.inputs
        self._named_on = old._named_on
        self._fingerprints = dict(old._fingerprints)
        for n in touched:
            self._fingerprints.pop(n, None)
        self.carried = Carried.after(old, frozenset(touched))
        return True

    def carried_fact(self, key: object) -> tuple[object, frozenset[str]] | None:
        """The newest `wide` entry under `key` among the indexes this one was patched from, and the nodes
        touched since it was made (None when none holds one)."""
        link, touched = self.carried, frozenset[str]()
        while link is not None:
            touched |= link.touched
            hit = link.wide.get(key)
            if hit is not None:
                return hit, touched
            link = link.older
        return None

    @property
    def node_list(self) -> list[NodeInfo]:
        """The nodes, the same list object until a node changes (a key for facts about all of them)."""
        return self._nodes

    def node_inputs(self, node: str) -> tuple[object, ...]:
        """Everything a memoised fact about `node` reads (compared by identity first, then value)."""
        hit = self._fingerprints.get(node)
        if hit is None:
            hit = self._fingerprints[node] = self._node_inputs(node)
        return hit

    def _node_inputs(self, node: str) -> tuple[object, ...]:
        gpus = self.gpus_by_node.get(node, ())
        return (
            self.node_by_name.get(node),
            tuple(self.pods_by_node.get(node, ())),
            tuple(gpus),
            tuple(self.pod_by_key.get((p.namespace, p.name)) for g in gpus for p in g.pods),
        )

    def _carry(self, old: SnapshotIndex) -> None:
        if not _same_inputs(self.inputs, old.inputs):
            return  # GPU and engine samples, namespace labels: every fact may read them
        kept = {n for n in self.node_by_name if self.node_inputs(n) == old.node_inputs(n)}
        self.memo.keep(old.memo, kept)


class NodeMemo:
    """Memoised facts grouped by the node they are about (`FactKey.slot`), so that a patch drops the
    touched nodes' facts without visiting every fact of the cluster. Indexes patched from one another
    share the groups of the nodes neither touched: their facts hold in both."""

    __slots__ = ("_by",)

    STATIC = FactKey("static-filter").slot
    """Facts about all nodes at once (checked against the node list): each index keeps its own."""

    def __init__(self, by: dict[object, dict[FactKey, object]] | None = None) -> None:
        self._by: dict[object, dict[FactKey, object]] = {} if by is None else by

    def get(self, key: FactKey) -> object:
        group = self._by.get(key.node if key.node is not None else key.slot)
        return None if group is None else group.get(key)

    def __setitem__(self, key: FactKey, value: object) -> None:
        slot = key.node if key.node is not None else key.slot
        group = self._by.get(slot)
        if group is None:
            group = self._by[slot] = {}
        group[key] = value

    def __len__(self) -> int:
        return sum(len(g) for g in self._by.values())

    def without(self, nodes: set[str]) -> NodeMemo:
        """The facts about every node but `nodes` (and the facts about no single node)."""
        by = dict(self._by)
        for n in nodes:
            by.pop(n, None)
        if self.STATIC in by:
            by[self.STATIC] = dict(by[self.STATIC])
        return NodeMemo(by)

    def only(self, kinds: frozenset[str]) -> NodeMemo:
        """The facts of these kinds only (after a telemetry refresh: those that read no sample)."""
        by: dict[object, dict[FactKey, object]] = {}
        for slot, group in self._by.items():
            kept = {k: v for k, v in group.items() if k.kind in kinds}
            if kept:
                by[slot] = kept
        return NodeMemo(by)

    def keep(self, old: NodeMemo, nodes: set[str]) -> None:
        """Take `old`'s facts about `nodes`, and its facts about no single node but the node list."""
        for slot, group in old._by.items():
            if slot in nodes or (not isinstance(slot, str) and slot != self.STATIC):
                self._by[slot] = group


class Carried:
    """One link of a patched index's chain: the `wide` memo of the index it was patched from, the nodes
    whose facts may differ since, and that index's own link (at most `DEPTH` links are kept).

    Deep enough to reach back past the decisions of other tenants and classes: each decision patches the
    base snapshot once (its predecessors' pods), and one request's facts are kept under its own keys, so
    a shallow chain finds none of them (docs/scale.md, "What made the decision path O(changes)")."""

    DEPTH = 32
    __slots__ = ("older", "touched", "wide")

    def __init__(self, wide: dict[object, object], touched: frozenset[str], older: Carried | None) -> None:
        self.wide, self.touched, self.older = wide, touched, older

    @classmethod
    def after(
        cls, old: SnapshotIndex, touched: frozenset[str], kinds: frozenset[str] | None = None
    ) -> Carried:
        """The chain of an index patched from `old` (a copy: `old`'s own chain stays as it is); with
        `kinds`, only the facts of those kinds (across a telemetry refresh)."""
        links: list[Carried] = []
        link = old.carried
        while link is not None and len(links) < cls.DEPTH - 1:
            links.append(link)
            link = link.older

        # A key found in a newer link is never read from an older one (carried_fact stops at the
        # newest): drop it there, so the chain holds about one copy of each fact, not one per link.
        def ok(k: object) -> bool:
            return kinds is None or (isinstance(k, FactKey) and k.kind in kinds)

        newest = old.wide if kinds is None else {k: v for k, v in old.wide.items() if ok(k)}
        seen = set(newest)
        kept: list[tuple[dict[object, object], frozenset[str]]] = []
        for link in links:
            wide = {k: v for k, v in link.wide.items() if k not in seen and ok(k)}
            seen.update(wide)
            kept.append((wide, link.touched))
        older: Carried | None = None
        for wide, was_touched in reversed(kept):
            older = cls(wide, was_touched, older)
        return cls(newest, touched, older)


class Inputs(NamedTuple):
    """The snapshot's lists that every node's facts may read: a change to any drops or patches them."""

    gpus: list[GpuSample] | None
    engines: list[EngineSample] | None
    namespaces: list[NamespaceInfo]


PodChanges = tuple[dict[tuple[str, str], PodInfo], set[tuple[str, str]]]
"""A snapshot's pods by (namespace, name), and the keys whose pod may differ from the previous one's."""


def _global_inputs(snap: ClusterSnapshot) -> Inputs:
    tel = snap.telemetry
    return Inputs(tel.gpus if tel else None, tel.engines if tel else None, snap.namespaces)


def _same_inputs(a: Inputs, b: Inputs) -> bool:
    return all(same_items(x or (), y or ()) for x, y in zip(a, b, strict=True))


_SLOT = "index"
"""Where a snapshot keeps its index: in its instance dict, beside (not among) its fields."""


def index_of(snap: ClusterSnapshot) -> SnapshotIndex:
    """The snapshot's index, built on first use."""
    got = snap.__dict__.get(_SLOT)
    if got is None:
        got = snap.__dict__[_SLOT] = SnapshotIndex(snap)
    assert isinstance(got, SnapshotIndex)
    return got


def drop_index(snap: ClusterSnapshot) -> None:
    """Forget the snapshot's index (a `model_copy` shares its original's until then)."""
    snap.__dict__.pop(_SLOT, None)


def with_reservations(
    snap: ClusterSnapshot,
    reservations: list[Reservation],
    workloads: list[WorkloadRef],
    held: Mapping[str, Sequence[Reservation]] | None = None,
) -> ClusterSnapshot:
    """This snapshot with other reservations and live workloads, sharing its index and the facts
    memoised on it (nodes, pods and telemetry are the same objects): one per decision, cheap.
    `held`, when given, is the trusted `reservations` already grouped by node."""
    new = snap.model_copy(update={"reservations": reservations, "workloads": workloads})
    new.__dict__[_SLOT] = SnapshotIndex(new, base=index_of(snap), held=held)
    return new


def carry_index(snap: ClusterSnapshot, previous: ClusterSnapshot, pods: PodChanges | None = None) -> None:
    """Build this snapshot's index keeping what `previous` memoised about unchanged nodes. `pods`,
    when the caller tracks them: this snapshot's pods by (namespace, name), and every key whose pod
    may differ from `previous`'s (saves comparing every pod)."""
    snap.__dict__[_SLOT] = SnapshotIndex(snap, carry=index_of(previous), pods=pods)
