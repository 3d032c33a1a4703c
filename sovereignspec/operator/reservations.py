"""The reservations every decision must respect, kept up to date from the decisions and workloads that
changed instead of re-read from all of them per decision (that was O(workloads) per decision).

A SpeculationDecision in state Ready reserves GPUs on its node. It is trusted only while the Workload
that owns it is live (holding quota, same uid); otherwise it is kept, untrusted, so that a decision left
behind by a deleted workload fences off nothing. Decisions being written (in flight) override the table.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping
from typing import Any

from sovereignspec.model.cluster import Reservation, WorkloadRef
from sovereignspec.operator.mirror import Table
from sovereignspec.policy.parse import ParseError, parse_reservation

Key = tuple[str, str]
Owner = tuple[str, str | None, str | None]  # namespace, workload name, workload uid
Parsed = tuple[Reservation, Owner]


class ReservationTable:
    def __init__(self, parse: Callable[[Mapping[str, Any]], Parsed | None]) -> None:
        self._parse = parse
        self._parsed: dict[Key, Parsed] = {}
        self._by_owner: dict[tuple[str, str | None], set[Key]] = {}
        self.table: dict[Key, Reservation] = {}
        """Every reservation by decision (namespace, name), trusted or not."""
        self._held: dict[str, dict[Key, Reservation]] = {}
        self._groups: dict[str, tuple[Reservation, ...]] = {}
        """The trusted reservations by node, as handed to the snapshot (rebuilt per node on a change)."""

    def update(self, decisions: Table[Key, Any], holding: Table[Key, WorkloadRef]) -> None:
        """Take the keys that changed in both tables and recompute only the reservations they touch."""
        dirty: set[Key] = set()
        for key in decisions.take_changed():
            old = self._parsed.pop(key, None)
            if old is not None:
                self._by_owner.get(old[1][:2], set()).discard(key)
            obj = decisions.items.get(key)
            parsed: Parsed | None = None
            if obj is not None:
                try:
                    parsed = self._parse(obj)
                except ParseError:
                    parsed = None
            if parsed is not None:
                self._parsed[key] = parsed
                self._by_owner.setdefault(parsed[1][:2], set()).add(key)
            dirty.add(key)
        for wkey in holding.take_changed():
            dirty |= self._by_owner.get(wkey, set())
        for key in dirty:
            self._set(key, self._resolve(key, holding.items))

    def _resolve(self, key: Key, live: Mapping[Key, WorkloadRef]) -> Reservation | None:
        p = self._parsed.get(key)
        if p is None:
            return None
        r, (ns, owner, uid) = p
        w = live.get((ns, owner)) if owner is not None else None
        if r.trusted and (w is None or w.uid != uid):
            return r.model_copy(update={"trusted": False})
        return r

    def _set(self, key: Key, r: Reservation | None) -> None:
        old = self.table.pop(key, None)
        if old is not None and old.trusted:
            for one in old.per_node():
                self._ungroup(one.node, key)
        if r is None:
            return
        self.table[key] = r
        if r.trusted:
            for one in r.per_node():  # a group over several nodes holds each of them
                group = self._held.setdefault(one.node, {})
                group[key] = one
                self._groups[one.node] = tuple(group.values())

    def _ungroup(self, node: str, key: Key) -> None:
        group = self._held.get(node)
        if group is None or group.pop(key, None) is None:
            return
        if group:
            self._groups[node] = tuple(group.values())
        else:
            del self._held[node], self._groups[node]

    def view(
        self, inflight: Iterable[Reservation], live: Mapping[Key, WorkloadRef], exclude: Key | None
    ) -> tuple[list[Reservation], dict[str, tuple[Reservation, ...]]]:
        """(all reservations, the trusted ones by node) for one decision: the table, overridden by the
        in-flight reservations of live workloads, without `exclude` (the decided workload's own)."""
        overlay = {(r.namespace, r.name): r for r in inflight if (r.namespace, r.name) in live}
        touched = set(overlay)
        if exclude is not None:
            touched.add(exclude)
        everything = dict(self.table)
        for k in touched:
            everything.pop(k, None)
        everything.update((k, r) for k, r in overlay.items() if k != exclude)
        nodes = {
            one.node
            for k in touched
            if k in self.table and self.table[k].trusted
            for one in self.table[k].per_node()
        }
        mine = [one for k, r in overlay.items() if k != exclude and r.trusted for one in r.per_node()]
        nodes |= {one.node for one in mine}
        by_node = dict(self._groups)
        for n in nodes:
            kept = [r for r in self._groups.get(n, ()) if (r.namespace, r.name) not in touched]
            kept += [one for one in mine if one.node == n]
            if kept:
                by_node[n] = tuple(kept)
            else:
                by_node.pop(n, None)
        return list(everything.values()), by_node


def reservation_of(obj: Mapping[str, Any]) -> Parsed | None:
    """A SpeculationDecision as a reservation (parse_reservation without its liveness test) and the
    Workload (namespace, name, uid) whose liveness trusts it; None when it reserves nothing."""
    r = parse_reservation(obj, None)
    if r is None:
        return None
    owner = next(
        (
            o
            for o in (obj.get("metadata") or {}).get("ownerReferences") or []
            if isinstance(o, Mapping) and o.get("kind") == "Workload" and o.get("controller")
        ),
        {},
    )
    return r, (r.namespace, owner.get("name"), owner.get("uid"))
