"""Pods by Kueue pod group, kept on the snapshot's index: a decision reads its own group's pods
(`policy/group.py`) instead of scanning every pod of the cluster, and a patched index regroups only the
groups of the pods that changed."""

from __future__ import annotations

from collections.abc import Iterable, Iterator, Mapping

from sovereignspec.api.meta import POD_GROUP_LABEL
from sovereignspec.model.cluster import PodInfo

GroupKey = tuple[str, str]
"""(namespace, value of the pod-group label): the Workload a group's pods belong to."""
PodKey = tuple[str, str]


def group_of(p: PodInfo) -> GroupKey | None:
    g = p.labels.get(POD_GROUP_LABEL)
    return None if g is None else (p.namespace, g)


class PodGroups(Mapping[GroupKey, tuple[PodInfo, ...]]):
    """Every pod that carries the pod-group label, by group, in the snapshot's order (bound or not,
    running or finished: the group's claims are read from all of them)."""

    __slots__ = ("_by",)

    def __init__(self, by: Mapping[GroupKey, tuple[PodInfo, ...]]) -> None:
        self._by = by

    @classmethod
    def of(cls, pods: Iterable[PodInfo]) -> PodGroups:
        by: dict[GroupKey, list[PodInfo]] = {}
        for p in pods:
            if (g := group_of(p)) is not None:
                by.setdefault(g, []).append(p)
        return cls({g: tuple(ps) for g, ps in by.items()})

    def patched(
        self, old: Mapping[PodKey, PodInfo], new: Mapping[PodKey, PodInfo], changed: set[PodKey]
    ) -> PodGroups:
        """These groups after the pods under `changed` went from `old` to `new` (a key missing from one
        side: a pod created or deleted). Only the groups those pods leave or join are rebuilt; this
        object is returned as it is when none is (the common case: pods outside any group)."""
        touched = {
            g for k in changed for p in (old.get(k), new.get(k)) if p is not None and (g := group_of(p))
        }
        if not touched:
            return self
        by = dict(self._by)
        for g in touched:
            kept = [p for p in self._by.get(g, ()) if (p.namespace, p.name) not in changed]
            kept += [p for k in changed if (p := new.get(k)) is not None and group_of(p) == g]
            if kept:
                by[g] = tuple(kept)
            else:
                by.pop(g, None)
        return PodGroups(by)

    def __getitem__(self, key: GroupKey) -> tuple[PodInfo, ...]:
        return self._by[key]

    def __iter__(self) -> Iterator[GroupKey]:
        return iter(self._by)

    def __len__(self) -> int:
        return len(self._by)
