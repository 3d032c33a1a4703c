"""Facts about many nodes at once, as arrays aligned with a node list ("rows"): for the static filter's
list they are kept while the snapshot's nodes, pods and telemetry are the same, so a warm decision
reads a few arrays instead of visiting every node; on a patched index they are patched on the touched
nodes only (see `SnapshotIndex.carried_fact`).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import TypeVar, cast

import numpy as np
import numpy.typing as npt

from sovereignspec.model.cluster import NodeInfo
from sovereignspec.policy.cache.facts import Facts
from sovereignspec.policy.cache.keys import FactKey
from sovereignspec.policy.node_state import GpuInfo, replicas

BoolArray = npt.NDArray[np.bool_]
IntArray = npt.NDArray[np.int64]
FloatArray = npt.NDArray[np.float64]

_T = TypeVar("_T")

Patch = Callable[[tuple[object, ...], _T, frozenset[str]], _T | None]
"""Makes a fact from the same fact of an index this one was patched from (its owners, its value, the
nodes touched since), or declines (None)."""


@dataclass(frozen=True, eq=False)
class Rows:
    """A node list and what no request changes about its nodes."""

    nodes: Sequence[NodeInfo]
    names: list[str]
    """The nodes' names (the same list object in rows patched from one another)."""
    at: dict[str, int]
    """Name -> position (the last one for a name listed twice)."""
    rank: IntArray
    """Position of each name in sorted order (stable): the placement's last tie-break."""
    alloc: IntArray
    base_free: IntArray
    """Allocatable GPUs minus those of bound pods (reservations are read per decision)."""
    repeated: bool
    """Some name occurs twice (a hand-written scenario): facts kept by name are the last node's."""
    space: object | None
    """Facts about these rows are kept on the index under this name (the static filter's list's row
    space), or built each time (None)."""

    def touched(self, nodes: frozenset[str]) -> IntArray | None:
        """The rows of `nodes`, in order; None when patching them would not pay (or a name repeats)."""
        if self.repeated:
            return None
        at = self.at
        rows = sorted(i for n in nodes if (i := at.get(n)) is not None)
        if 2 * len(rows) > len(self.names):
            return None
        return np.asarray(rows, dtype=np.int64)


@dataclass(frozen=True, eq=False)
class GpuRows:
    infos: list[GpuInfo]
    u: FloatArray
    """Background load u per node, NaN where unknown."""
    empty: npt.NDArray[np.bool_]
    """The GPU the pod gets (the free GPU with the fewest pods) carries no pod."""
    shared: npt.NDArray[np.bool_]
    """The node's GPUs take several pods each (time-slicing replicas)."""


def _gpu_flags(facts: Facts, node: NodeInfo, info: GpuInfo) -> tuple[bool, bool]:
    """(the GPU the pod gets carries no pod; the node's GPUs take several pods). A node without GPU
    samples is neither: nothing is known about its GPUs (I6: placement stays legal, speculation off)."""
    free, samples = info[0], facts.idx.gpus_by_node.get(node.name, [])
    if not free or not samples:
        return False, False
    return min(len(g.pods) for g in free) == 0, replicas(node, samples) > 1


def wide(
    facts: Facts,
    key: FactKey,
    owners: tuple[object, ...],
    build: Callable[[], _T],
    patch: Patch[_T] | None = None,
) -> _T:
    """`build()` kept in the index's `wide` memo while `owners` are the same objects. On a patched
    index, `patch` makes the fact from the newest one the previous indexes hold under `key`."""
    idx = facts.idx
    hit = idx.wide.get(key)
    if (
        isinstance(hit, tuple)
        and len(hit[0]) == len(owners)
        and all(a is b for a, b in zip(hit[0], owners, strict=True))
    ):
        return cast(_T, hit[1])
    value: _T | None = None
    if patch is not None and (old := idx.carried_fact(key)) is not None:
        (old_owners, old_value), touched = cast(tuple[tuple[tuple[object, ...], _T], frozenset[str]], old)
        value = patch(old_owners, old_value, touched)
    if value is None:
        value = build()
    if len(idx.wide) > 256:
        idx.wide.clear()
    idx.wide[key] = (owners, value)
    return value


def on_rows(
    facts: Facts,
    rows: Rows,
    key: FactKey,
    owners: tuple[object, ...],
    build: Callable[[], _T],
    patch: Callable[[_T, IntArray], _T | None],
) -> _T:
    """A fact about `rows`, kept with them when they are; `patch(old value, rows touched)` makes it
    from the fact of a previous index on rows with the same names and the same `owners`."""
    if rows.space is None:
        return build()

    def carried(old_owners: tuple[object, ...], old: _T, touched: frozenset[str]) -> _T | None:
        old_rows = old_owners[0]
        if not isinstance(old_rows, Rows) or old_rows.names is not rows.names:
            return None
        if any(a is not b for a, b in zip(old_owners[1:], owners, strict=True)):
            return None
        at = rows.touched(touched)
        return None if at is None else patch(old, at)

    scoped = FactKey(key.kind, None, (*key.scope, rows.space))
    return wide(facts, scoped, (rows, *owners), build, carried)


def node_rows(facts: Facts, nodes: Sequence[NodeInfo], space: object | None = None) -> Rows:
    """`nodes` as rows; kept under `space` when given (the static filter's passed list)."""
    used = facts.idx.gpu_used

    def build() -> Rows:
        names = [n.name for n in nodes]
        rank = np.empty(len(names), dtype=np.int64)
        rank[sorted(range(len(names)), key=names.__getitem__)] = np.arange(len(names))
        alloc = np.fromiter((n.gpu_allocatable for n in nodes), dtype=np.int64, count=len(nodes))
        base_free = alloc - np.fromiter((used.get(n, 0) for n in names), dtype=np.int64, count=len(nodes))
        at = {name: i for i, name in enumerate(names)}
        return Rows(nodes, names, at, rank, alloc, base_free, len(at) != len(names), space)

    def patch(_: tuple[object, ...], old: Rows, touched: frozenset[str]) -> Rows | None:
        # the same space: the same names in the same order (the static filter keeps it only then)
        at = old.touched(touched)
        if at is None or len(old.names) != len(nodes):
            return None
        alloc, base_free = old.alloc.copy(), old.base_free.copy()
        for i in at.tolist():
            alloc[i] = nodes[i].gpu_allocatable
            base_free[i] = alloc[i] - used.get(old.names[i], 0)
        return Rows(nodes, old.names, old.at, old.rank, alloc, base_free, False, space)

    return build() if space is None else wide(facts, FactKey("rows", None, (space,)), (nodes,), build, patch)


def pod_isolation(facts: Facts, rows: Rows) -> BoolArray:
    """I2 and I3 for the request's tenant against each node's pods (reservations are read per decision)."""

    def one(i: int) -> bool:
        name = rows.names[i]
        return facts.isolation_among(name, facts.pod_occupants(name))

    def build() -> BoolArray:
        return np.fromiter(map(one, range(len(rows.names))), dtype=np.bool_, count=len(rows.names))

    def patch(old: BoolArray, at: IntArray) -> BoolArray:
        new = old.copy()
        for i in at.tolist():
            new[i] = one(i)
        return new

    key = FactKey("isolation", None, (facts.wl.namespace, facts.sov, facts.system_namespaces))
    return on_rows(facts, rows, key, (facts.sovereignty,), build, patch)


def gpu_rows(facts: Facts, rows: Rows) -> GpuRows:
    """Each row's GPU state (free GPUs, aggregated load, free framebuffer)."""

    def build() -> GpuRows:
        infos = [facts.gpu_state(n) for n in rows.nodes]
        u = np.fromiter((np.nan if i[1] is None else i[1] for i in infos), dtype=np.float64, count=len(infos))
        pairs = [_gpu_flags(facts, n, i) for n, i in zip(rows.nodes, infos, strict=True)]
        flags = np.asarray(pairs, dtype=bool).reshape(len(infos), 2)
        return GpuRows(infos, u, flags[:, 0].copy(), flags[:, 1].copy())

    def patch(old: GpuRows, at: IntArray) -> GpuRows:
        infos, u, empty, shared = list(old.infos), old.u.copy(), old.empty.copy(), old.shared.copy()
        for i in at.tolist():
            infos[i] = info = facts.gpu_state(rows.nodes[i])
            u[i] = np.nan if info[1] is None else info[1]
            empty[i], shared[i] = _gpu_flags(facts, rows.nodes[i], info)
        return GpuRows(infos, u, empty, shared)

    policy = facts.policy
    key = FactKey("gpu", None, (policy.slack_aggregation, policy.shared_gpu_allocation, not facts.holding))
    return on_rows(facts, rows, key, (), build, patch)
