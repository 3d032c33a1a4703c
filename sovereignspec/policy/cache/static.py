"""The node filter's request- and reservation-independent part, kept on the index while its node list
is the same object (a node change replaces the list, and only the changed nodes are checked again): the
per-node label and taint checks were most of a decision over 500 nodes, and they depend only on the
nodes and on the request's constraints."""

from __future__ import annotations

from collections.abc import Callable, Collection, Sequence
from dataclasses import dataclass, replace
from typing import cast

from sovereignspec.model.cluster import NodeInfo
from sovereignspec.policy.cache.facts import Facts
from sovereignspec.policy.cache.keys import FactKey

Check = Callable[[NodeInfo], str | None]
"""Why a node is excluded (None: it passes)."""


@dataclass(frozen=True, eq=False)
class StaticFilter:
    excluded: dict[str, int]
    """How many nodes each exclusion removed."""
    possible: bool
    """Some node passes the exclusions that cannot change: waiting can help."""
    passed: list[NodeInfo]
    why: list[str | None]
    """Per node of the node list, why it is excluded (None: passed)."""
    space: object
    """Names the passed list's row space for facts kept per row: the same while the passed nodes have
    the same names in the same order (a patched filter keeps it)."""


def static_filter(
    facts: Facts, scope: tuple[object, ...], check: Check, late: Collection[str]
) -> StaticFilter:
    """`check` over the index's node list, kept under `scope` (everything `check` reads but the nodes);
    `late` are the exclusions that may lift (a node so excluded could host later)."""
    idx = facts.idx
    key = FactKey("static-filter", None, (*scope, facts.sov))
    hit = idx.memo.get(key)
    nodes = idx.node_list
    if isinstance(hit, tuple) and hit[0] is nodes:
        return cast(StaticFilter, hit[1])
    if isinstance(hit, tuple):  # another node list: check only the changed nodes
        patched = _patch(hit[0], cast(StaticFilter, hit[1]), nodes, check, late)
        if patched is not None:
            patched = _shared(facts, patched)
            idx.memo[key] = (nodes, patched)
            return patched
    why = [check(node) for node in nodes]
    excluded: dict[str, int] = {}
    for w in why:
        if w is not None:
            excluded[w] = excluded.get(w, 0) + 1
    result = _shared(facts, _result(nodes, why, excluded, object(), late))
    idx.memo[key] = (nodes, result)
    return result


def _shared(facts: Facts, result: StaticFilter) -> StaticFilter:
    """Filters of other scopes (tenants, constraints) that pass the same node objects share one passed
    list and row space: the facts kept per row (GPU state, evaluation inputs, the evaluation) are then
    made once for all of them. A space still names one sequence of names: the same objects have the
    same names, and a patched filter keeps its space only for the same names."""
    table: dict[tuple[int, ...], tuple[list[NodeInfo], object]] = facts.memo(FactKey("passed-lists"), dict)
    key = tuple(map(id, result.passed))  # the table holds the lists: their ids are not reused meanwhile
    hit = table.get(key)
    if hit is None:
        if len(table) >= 64:
            table.clear()
        table[key] = (result.passed, result.space)
        return result
    return replace(result, passed=hit[0], space=hit[1])


def _result(
    nodes: Sequence[NodeInfo],
    why: list[str | None],
    excluded: dict[str, int],
    space: object,
    late: Collection[str],
) -> StaticFilter:
    passed = [n for n, w in zip(nodes, why, strict=True) if w is None]
    possible = bool(passed) or any(excluded.get(w) for w in late)
    return StaticFilter(excluded, possible, passed, why, space)


def _patch(
    old_nodes: Sequence[NodeInfo],
    old: StaticFilter,
    nodes: Sequence[NodeInfo],
    check: Check,
    late: Collection[str],
) -> StaticFilter | None:
    """The filter of `nodes` from the filter of `old_nodes` when the same names are in the same order:
    only the nodes whose object changed are checked again (None: rebuild)."""
    if len(old_nodes) != len(nodes):
        return None
    why, excluded = old.why, old.excluded
    for i, (a, b) in enumerate(zip(old_nodes, nodes, strict=True)):
        if a is b:
            continue
        if a.name != b.name:
            return None
        w = check(b)
        if w == why[i]:
            continue
        if why is old.why:
            why, excluded = list(why), dict(excluded)
        if (was := why[i]) is not None:
            excluded[was] -= 1
            if not excluded[was]:
                del excluded[was]
        if w is not None:
            excluded[w] = excluded.get(w, 0) + 1
        why[i] = w
    same_rows = why is old.why or [w is None for w in why] == [w is None for w in old.why]
    return _result(nodes, why, excluded, old.space if same_rows else object(), late)
