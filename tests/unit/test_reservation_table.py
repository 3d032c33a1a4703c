"""The operator's incrementally kept reservations equal the ones read from scratch from every decision.

The table is updated only from the decisions and workloads that changed; a change it missed would let
a decision over-commit a node's GPUs (a reservation lost) or fence one off for nothing (a stale one).
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any

from hypothesis import given, settings
from hypothesis import strategies as st

from sovereignspec.model.cluster import Reservation, WorkloadRef
from sovereignspec.operator.mirror import Table
from sovereignspec.operator.reservations import ReservationTable, reservation_of

NAMES = ["w1", "w2"]
NODES = ["n1", "n2", "n3"]


def _decision(
    name: str,
    node: str,
    gpus: int,
    state: str,
    managed: bool,
    owner_uid: str | None,
    other: str | None = None,
) -> dict[str, Any]:
    meta: dict[str, Any] = {"name": name, "namespace": "ns"}
    if managed:
        meta["labels"] = {"app.kubernetes.io/managed-by": "sovereignspec"}
    if owner_uid:
        meta["ownerReferences"] = [
            {"apiVersion": "kueue.x-k8s.io/v1beta2", "kind": "Workload", "name": name, "uid": owner_uid,
             "controller": True}
        ]  # fmt: skip
    return {
        "apiVersion": "sovereignspec.io/v1alpha1",
        "kind": "SpeculationDecision",
        "metadata": meta,
        "spec": {"workload": name},
        "status": {"state": state, "node": node, "gpus": gpus, **_placements(node, gpus, other)},
    }


def _placements(node: str, gpus: int, other: str | None) -> dict[str, Any]:
    """A group over two nodes (a LeaderWorkerSet): its worker's node is held too."""
    if other is None or other == node:
        return {}
    return {
        "placements": [
            {"podSet": "leader", "node": node, "gpus": gpus},
            {"podSet": "worker", "node": other, "gpus": gpus},
        ]
    }


decision_ops = st.tuples(
    st.just("decision"),
    st.sampled_from(NAMES),
    st.one_of(
        st.none(),
        st.builds(
            _decision,
            st.just("x"),  # replaced by the key's name below
            st.sampled_from(NODES),
            st.integers(0, 3),
            st.sampled_from(["Ready", "Ready", "Retry"]),
            st.sampled_from([True, True, False]),
            st.sampled_from([None, "u1", "u1", "u2"]),
            st.sampled_from([None, None, *NODES]),
        ),
    ),
)
holding_ops = st.tuples(st.just("holding"), st.sampled_from(NAMES), st.sampled_from([None, "u1", "u1", "u2"]))
ops = st.lists(st.one_of(decision_ops, holding_ops, st.just(("update", "", None))), max_size=30)


def _reference(
    decisions: Mapping[tuple[str, str], Mapping[str, Any]],
    holding: Mapping[tuple[str, str], WorkloadRef],
    inflight: Iterable[Reservation],
    exclude: tuple[str, str] | None,
) -> dict[tuple[str, str], Reservation]:
    """The operator's former per-decision reading: every decision parsed, its owner tested for life."""
    live_owners = {(w.namespace, w.name, w.uid) for w in holding.values()}
    out: dict[tuple[str, str], Reservation] = {}
    for obj in decisions.values():
        parsed = reservation_of(obj)
        if parsed is None:
            continue
        r, owner = parsed
        if r.trusted and owner not in live_owners:
            r = r.model_copy(update={"trusted": False})
        out[(r.namespace, r.name)] = r
    for r in inflight:
        if (r.namespace, r.name) in holding:
            out[(r.namespace, r.name)] = r
    if exclude is not None:
        out.pop(exclude, None)
    return out


@settings(max_examples=400, deadline=None)
@given(
    steps=ops,
    inflight=st.lists(
        st.builds(
            Reservation,
            namespace=st.just("ns"),
            name=st.sampled_from(NAMES),
            node=st.sampled_from(NODES),
            gpus=st.integers(1, 2),
            also=st.dictionaries(st.sampled_from(NODES), st.integers(1, 2), max_size=1),
        ).map(lambda r: r.model_copy(update={"also": {n: g for n, g in r.also.items() if n != r.node}})),
        max_size=3,
    ),
    exclude=st.sampled_from([None, *(("ns", n) for n in NAMES)]),
)
def test_incremental_table_equals_a_reading_from_scratch(
    steps: list[tuple[str, str, Any]], inflight: list[Reservation], exclude: tuple[str, str] | None
) -> None:
    decisions: Table[tuple[str, str], dict[str, Any]] = Table()
    holding: Table[tuple[str, str], WorkloadRef] = Table()
    table = ReservationTable(reservation_of)
    for kind, name, value in [*steps, ("update", "", None)]:
        key = ("ns", name)
        if kind == "decision":
            if value is not None:
                value = {**value, "metadata": {**value["metadata"], "name": name}}
                if "ownerReferences" in value["metadata"]:
                    value["metadata"]["ownerReferences"] = [
                        {**value["metadata"]["ownerReferences"][0], "name": name}
                    ]
                value["spec"] = {"workload": name}
            decisions.put(key, value)
        elif kind == "holding":
            holding.put(key, None if value is None else WorkloadRef(namespace="ns", name=name, uid=value))
        else:
            table.update(decisions, holding)
            res, held = table.view(inflight, holding.items, exclude)
            want = _reference(decisions.items, holding.items, inflight, exclude)
            assert {(r.namespace, r.name): r for r in res} == want
            assert len(res) == len(want)
            grouped: dict[str, set[tuple[str, str]]] = {}
            for r in want.values():
                if r.trusted:
                    for one in r.per_node():  # a group holds each of its nodes
                        grouped.setdefault(one.node, set()).add((r.namespace, r.name))
            assert {n: {(r.namespace, r.name) for r in rs} for n, rs in held.items()} == grouped
            assert all(r.trusted and r.node == n for n, rs in held.items() for r in rs)
