"""The evaluation's per-node inputs and the evaluation itself over the static filter's rows, kept per
policies (the neighbour condition's switch included), method and target model (and acceptance curve,
ranges and expected batch), patched on the touched rows only: a group's table and a node's evaluation
read only that group and that node."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import cast

import numpy as np
import numpy.typing as npt

from sovereignspec.api.speculation_decision import Reason
from sovereignspec.policy.budget import Evaluation, Groups, Tables, evaluate_groups, range_index, tables
from sovereignspec.policy.cache.facts import Facts
from sovereignspec.policy.cache.keys import FactKey
from sovereignspec.policy.cache.rows import GpuRows, Rows, on_rows
from sovereignspec.policy.conditions import NeighbourTable, neighbour_table
from sovereignspec.policy.node_state import NO_NEIGHBOURS, Neighbours, NodeInput

IntArray = npt.NDArray[np.int64]
FloatArray = npt.NDArray[np.float64]


@dataclass(frozen=True, eq=False)
class SpecRows:
    """Per node: what the evaluation needs (its `NodeInput`) or why speculation is off there."""

    got: list[NodeInput | Reason]
    groups: Groups
    gid: IntArray
    """The node's (curve, c_d, u) group; -1 where speculation is off."""
    table: NeighbourTable
    """The node's SLO-bound neighbours (`neighbour_table_of`; none where speculation is off)."""
    own: dict[str, list[int]]
    """Namespace -> rows with a neighbour in it (a re-decision there must drop its own pods)."""
    evaluated: IntArray
    """Row -> its index among the rows evaluated (-1 where speculation is off)."""


def neighbour_table_of(facts: Facts, neighbours: Sequence[Neighbours]) -> NeighbourTable:
    """The nodes' neighbours under the policy's safety (`conditions.neighbour_table`), or none on any
    node when the policies switch the neighbour condition off (`Policies.neighbour_condition`, the
    evidence's C6 ablation): then every budget passes condition 2 and self-benefit alone picks k*. The
    one place the switch is read."""
    if not facts.policies.neighbour_condition:
        return NeighbourTable.empty(len(neighbours))
    return neighbour_table(neighbours, facts.policy.safety)


def _neighbours(got: NodeInput | Reason) -> Neighbours:
    """A row's neighbours as the evaluation judges them (none where speculation is off)."""
    return got.neighbours if isinstance(got, NodeInput) else NO_NEIGHBOURS


def spec_rows(facts: Facts, rows: Rows, gpu: GpuRows, method: str, target: str | None) -> SpecRows:
    """Kept per rows, policies, method and target model (`gpu` is the rows' GPU state under the
    policy's slack aggregation, so the policy names it)."""

    def one(i: int) -> NodeInput | Reason:
        return facts.node_input(rows.nodes[i], gpu.infos[i], method, target)

    def build() -> SpecRows:
        got = [one(i) for i in range(len(rows.nodes))]
        inputs = [g for g in got if isinstance(g, NodeInput)]
        groups, of = Groups.of_nodes(inputs)
        ok = np.fromiter((isinstance(g, NodeInput) for g in got), dtype=np.bool_, count=len(got))
        gid = np.full(len(got), -1, dtype=np.int64)
        gid[ok] = of
        evaluated = np.full(len(got), -1, dtype=np.int64)
        evaluated[ok] = np.arange(len(inputs))
        table = neighbour_table_of(facts, [_neighbours(g) for g in got])
        own: dict[str, list[int]] = {}
        for i, g in enumerate(got):
            if isinstance(g, NodeInput):
                for ns in g.neighbours.namespaces:
                    own.setdefault(ns, []).append(i)
        return SpecRows(got, groups, gid, table, own, evaluated)

    def patch(old: SpecRows, at: IntArray) -> SpecRows:
        got = list(old.got)
        rows_at = at.tolist()
        for i in rows_at:
            got[i] = one(i)
        on = [i for i in rows_at if isinstance(got[i], NodeInput)]
        inputs = [cast(NodeInput, got[i]) for i in on]
        groups, of = old.groups.extended(inputs)  # the groups there keep their numbers
        gid = old.gid.copy()
        gid[at] = -1
        gid[on] = of
        table = old.table.put(at, neighbour_table_of(facts, [_neighbours(got[i]) for i in rows_at]))
        evaluated = old.evaluated
        ok = gid >= 0
        if not np.array_equal(ok[at], old.gid[at] >= 0):
            evaluated = np.full(len(got), -1, dtype=np.int64)
            evaluated[ok] = np.arange(int(np.count_nonzero(ok)))
        own = _own_patched(old, got, rows_at, on, inputs)
        return SpecRows(got, groups, gid, table, own, evaluated)

    key = FactKey("spec", None, (facts.spec, facts.sov, facts.policies.neighbour_condition, method, target))
    return on_rows(facts, rows, key, (facts.policy, facts.sovereignty), build, patch)


def _own_patched(
    old: SpecRows, got: list[NodeInput | Reason], rows_at: list[int], on: list[int], inputs: list[NodeInput]
) -> dict[str, list[int]]:
    own = dict(old.own)
    moved = set(rows_at)
    spaces = {
        ns
        for i in rows_at
        for g in (old.got[i], got[i])
        if isinstance(g, NodeInput)
        for ns in g.neighbours.namespaces
    }
    for ns in spaces:
        mine = [r for r in own.get(ns, ()) if r not in moved]
        mine.extend(i for i, nd in zip(on, inputs, strict=True) if ns in nd.neighbours.namespaces)
        if mine:
            own[ns] = sorted(mine)
        else:
            own.pop(ns, None)
    return own


def evaluation_rows(
    facts: Facts,
    rows: Rows,
    spec: SpecRows,
    el: FloatArray,
    ranges: Sequence[tuple[int, int]],
    batch: int,
    method: str,
    target: str | None,
) -> tuple[Tables, Evaluation]:
    """The evaluation of every row where speculation can be on (in row order), and the group tables it
    was read from. Patched, only the touched rows are evaluated again, and groups added since get
    their tables."""
    min_gain = facts.policy.min_gain
    ends = [end for _, end in ranges]
    e_range = range_index(ranges, batch)

    def evaluate(t: Tables) -> Evaluation:
        ok = spec.evaluated >= 0
        return evaluate_groups(t, spec.gid[ok], spec.table.take(np.flatnonzero(ok)), e_range)

    def build() -> tuple[Tables, Evaluation, SpecRows]:
        t = tables(spec.groups, el, ends, batch, min_gain)
        return t, evaluate(t), spec

    def patch(
        old: tuple[Tables, Evaluation, SpecRows], at: IntArray
    ) -> tuple[Tables, Evaluation, SpecRows] | None:
        t, ev, was = old
        if spec.groups is not was.groups:
            if not spec.groups.extends(was.groups):
                return None
            t = t.concat(tables(spec.groups.since(was.groups), el, ends, batch, min_gain))
        if not np.array_equal(spec.evaluated, was.evaluated):
            return t, evaluate(t), spec
        ev = ev.copy()
        redo = spec.evaluated[at]
        on = redo >= 0
        if on.any():
            rows_on = at[on]
            ev.put(
                redo[on],
                evaluate_groups(t, spec.gid[rows_on], spec.table.take(rows_on), e_range),
            )
        return t, ev, spec

    key = FactKey(
        "evaluation",
        None,
        (facts.spec, facts.sov, facts.policies.neighbour_condition, method, target, el.tobytes(),
         tuple(ranges), batch),
    )  # fmt: skip
    got = on_rows(facts, rows, key, (facts.policy, facts.sovereignty), build, patch)
    if got[2] is not spec:  # the spec was made again under the same key (not while the memo holds)
        got = build()
    return got[0], got[1]
