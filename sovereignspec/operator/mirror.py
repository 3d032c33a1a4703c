"""What the index handlers parsed, kept by key with the keys that changed since they were last read.

kopf's indexes answer "what is there", so every decision rebuilt its inputs from all of them: at 1,000
workloads that was ~30 ms of Python per decision (views and the reservation table), O(cluster) work for
an O(1) change. The index handlers also write here, as they parse; a deletion comes through the event
handlers (kopf calls no index handler for it). Each consumer then reads the current tables and only the
keys that changed. Everything runs on the operator's event loop: no locks.
"""

from __future__ import annotations

from collections.abc import Hashable
from typing import Generic, TypeVar

from sovereignspec.model.cluster import PodInfo, WorkloadRef
from sovereignspec.model.telemetry import PodRef
from sovereignspec.telemetry.annotations import DraftIdentity

K = TypeVar("K", bound=Hashable)
V = TypeVar("V")


class Table(Generic[K, V]):
    """One kind's objects by key, and the keys changed since `take_changed` was last called."""

    def __init__(self) -> None:
        self.items: dict[K, V] = {}
        self.version = 0
        self._changed: set[K] = set()

    def put(self, key: K, value: V | None) -> bool:
        """Store (None: forget) `value`; an equal value keeps the stored object. True if it changed."""
        old = self.items.get(key)
        if value is None:
            if old is None:
                return False
            del self.items[key]
        elif old is value or (old is not None and old == value):
            return False
        else:
            self.items[key] = value
        self._changed.add(key)
        self.version += 1
        return True

    @property
    def changed(self) -> bool:
        return bool(self._changed)

    def take_changed(self) -> set[K]:
        changed, self._changed = self._changed, set()
        return changed


PodKey = tuple[str, str]


class Mirror:
    """Pods (with their draft identities), SpeculationDecisions and holding Workloads."""

    def __init__(self) -> None:
        self.pods: Table[PodKey, PodInfo] = Table()
        self.decisions: Table[tuple[str, str], dict[str, object]] = Table()
        self.holding: Table[tuple[str, str], WorkloadRef] = Table()
        self._identity: dict[PodKey, tuple[PodRef, DraftIdentity]] = {}
        self._identities: dict[PodRef, DraftIdentity] = {}
        self._identities_copy: dict[PodRef, DraftIdentity] | None = None

    def put_pod(
        self, key: PodKey, pod: PodInfo | None, ref: PodRef | None = None, ident: DraftIdentity | None = None
    ) -> None:
        self.pods.put(key, pod)
        new = (ref, ident) if pod is not None and ref is not None and ident is not None else None
        old = self._identity.get(key)
        if old == new:
            return
        if old is not None:
            self._identities.pop(old[0], None)
            del self._identity[key]
        if new is not None:
            self._identity[key] = new
            self._identities[new[0]] = new[1]
        self._identities_copy = None

    def identities(self) -> dict[PodRef, DraftIdentity]:
        """The pods' draft identities: a new dict after each change, the same one until the next."""
        if self._identities_copy is None:
            self._identities_copy = dict(self._identities)
        return self._identities_copy
