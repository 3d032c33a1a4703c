"""Reservations that still hold GPUs, by node (`HeldReservations`): a snapshot index keeps one per
snapshot, built from the trusted reservations and the GPUs already bound under each decision name."""

from __future__ import annotations

from collections.abc import Iterator, Mapping, Sequence

from sovereignspec.model.cluster import Reservation


def _bound_key(r: Reservation) -> tuple[str, ...]:
    return (r.namespace, r.name, r.node) if r.per_node_share else (r.namespace, r.name)


class HeldReservations(Mapping[str, list[tuple[Reservation, int]]]):
    """Trusted reservations by node that still hold GPUs, each with the GPUs it holds: a reservation is
    consumed by the pods already bound under its decision name, and one that holds nothing any more is
    left out (its pods, where they run, count instead). Only the nodes with such a reservation are keys:
    in a cluster where every admitted workload has its pods, that is the few decisions in flight, not
    every node, so a decision revisits only those (a held-nothing reservation on every node made each
    decision O(nodes) again at 1,000 admitted workloads). The operator hands over groups it keeps up to
    date instead of regrouping every reservation of the cluster per decision."""

    def __init__(
        self, groups: Mapping[str, Sequence[Reservation]], bound: Mapping[tuple[str, ...], int]
    ) -> None:
        self._groups, self._bound = groups, bound
        self._done: dict[str, list[tuple[Reservation, int]]] = {}
        self._live: list[str] | None = None

    def _holding(self, node: str) -> list[tuple[Reservation, int]]:
        hit = self._done.get(node)
        if hit is None:
            bound = self._bound
            hit = self._done[node] = [
                (r, left)
                for r in self._groups.get(node, ())
                if (left := r.gpus - bound.get(_bound_key(r), 0)) > 0
            ]
        return hit

    def __getitem__(self, node: str) -> list[tuple[Reservation, int]]:
        hit = self._holding(node)
        if not hit:
            raise KeyError(node)
        return hit

    def __contains__(self, node: object) -> bool:
        return isinstance(node, str) and bool(self._holding(node))

    def _nodes(self) -> list[str]:
        if self._live is None:  # O(reservations) once per snapshot; a node's list is made when read
            b = self._bound
            self._live = [
                n for n, rs in self._groups.items() if any(r.gpus > b.get(_bound_key(r), 0) for r in rs)
            ]
        return self._live

    def __iter__(self) -> Iterator[str]:
        return iter(self._nodes())

    def __len__(self) -> int:
        return len(self._nodes())
