"""Typed, frozen keys for memoised facts.

A fact is named by its kind, the node it is about (None: about no single node) and what else it
reads (`scope`). An object the fact depends on by identity (a policy, a profile, a curve) is held in
the key through `Same`: equal only to itself, hashed by identity, and kept alive by the key, so an
identity never outlives the object it names.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import NamedTuple, TypeVar

_T = TypeVar("_T")


class Same:
    """An object compared by identity (frozen policies hold lists: hashing them by value is not an
    option, and comparing them by value on every lookup would cost more than the fact)."""

    __slots__ = ("obj",)

    def __init__(self, obj: object) -> None:
        self.obj = obj

    def __eq__(self, other: object) -> bool:
        return isinstance(other, Same) and other.obj is self.obj

    def __hash__(self) -> int:
        return id(self.obj)


class FactKey(NamedTuple):
    """Immutable and typed; a named tuple, so that hashing and comparing it stay in C (a cold decision
    over 500 nodes makes thousands)."""

    kind: str
    node: str | None = None
    """The node the fact is about: a patch that touches the node drops it. None: no single node."""
    scope: tuple[object, ...] = ()
    """Everything else the fact depends on (values, or `Same` objects)."""

    @property
    def slot(self) -> object:
        """The group the fact is kept in: its node, or its kind for facts about no single node."""
        return self.node if self.node is not None else ("kind", self.kind)


TELEMETRY_FREE = frozenset(
    {
        "static-filter", "batch-spec", "ns-rules", "slo-ms", "curves", "profiles", "estimate",
        "pod-occupants", "isolation", "rows", "passed-lists", "busy",
    }
)  # fmt: skip
"""The kinds of facts that read no GPU or engine sample (nodes, pods, namespaces, policies, or values
only): a telemetry refresh keeps them (`SnapshotIndex._patch`). A kind not listed here is dropped at
each refresh, so a new kind is safe until it is listed; list one only when its fact and everything it
calls read no `GpuSample`, `EngineSample`, `gpus_by_node`, `engine_by_pod` or fingerprint."""


_INTERNED: dict[tuple[int, ...], tuple[object, ...]] = {}


def interned(items: Iterable[_T]) -> tuple[_T, ...]:
    """The one tuple of these objects (by identity). Callers that rebuild a tuple of the same objects for
    each request (`select_policies` does, for the SovereigntyPolicies) get the tuple they got before, so
    the facts keyed on it through `Same`, and the facts it owns, are found again: with a new tuple per
    request, every decision in the operator rebuilt every node's rows (docs/scale.md, session 12). The
    table holds its tuples, so their ids are not reused while they are kept."""
    got = tuple(items)
    key = tuple(map(id, got))
    hit = _INTERNED.get(key)
    if hit is None:
        if len(_INTERNED) >= 64:
            _INTERNED.clear()
        hit = _INTERNED[key] = got
    return hit  # type: ignore[return-value]
