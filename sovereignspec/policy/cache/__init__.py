"""Caching and incremental indexing for the decision core: nothing here decides anything.

- `index`: a snapshot's per-node groupings (`SnapshotIndex`), the facts memoised on them, and how the
  operator reuses them (`index_of`, `with_reservations`, `carry_index`);
- `keys`: the typed, frozen keys facts are kept under;
- `facts`: one decision's access to the facts kept per node and per value;
- `rows`, `static`, `spec`: facts about many nodes at once, kept and patched as arrays.
"""

from sovereignspec.policy.cache.index import carry_index, drop_index, index_of, with_reservations

__all__ = ["carry_index", "drop_index", "index_of", "with_reservations"]
