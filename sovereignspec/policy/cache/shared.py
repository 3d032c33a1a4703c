"""Facts shared across snapshots: pure functions of the values in their key, kept in a bounded LRU.

The per-index memo (`facts.py`) starts empty with every snapshot. The drift sweep builds a one-node
snapshot per admitted workload, so a fact that depends on no snapshot at all (the acceptance estimate
of a prior and a counter sample) would be recomputed a thousand times per sweep (docs/scale.md).
"""

from __future__ import annotations

from collections import OrderedDict
from collections.abc import Callable, Hashable
from typing import Generic, TypeVar

V = TypeVar("V")


class ValueLru(Generic[V]):
    """A bounded least-recently-used map from value keys to facts (values only: no identities)."""

    def __init__(self, size: int) -> None:
        self._size = size
        self._facts: OrderedDict[Hashable, V] = OrderedDict()

    def get(self, key: Hashable, make: Callable[[], V]) -> V:
        got = self._facts.get(key)
        if got is not None:
            self._facts.move_to_end(key)
            return got
        got = self._facts[key] = make()
        if len(self._facts) > self._size:
            self._facts.popitem(last=False)
        return got

    def __len__(self) -> int:
        return len(self._facts)
