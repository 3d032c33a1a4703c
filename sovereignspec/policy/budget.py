"""k*(B): the draft budget per batch range, and the vLLM schedule and `--speculative-config` it gives.

For N nodes, R batch ranges (+1 column at the expected batch) and k = 0..kMax, `tables` computes the
step ratio τ, S_real and the load increase Δu, and `evaluate_groups` picks k*(B) = argmax S_real under
the two conditions (`sovereignspec.policy.conditions`; ties → smaller k; k = 0 always qualifies with
S_real = 1). τ, S_real and Δu depend on a node only through its (curve, c_d, u): they are computed once
per distinct triple (`Groups`; a large cluster has a few products and load levels, not one per node). A
node adds only the largest load increase its neighbours tolerate, and its k* is read from a per-group
table of the best budget under each prefix of passing budgets. `budget_on` turns the chosen nodes' k*
into the schedule.

The config JSON is compact (`,` and `:` separators, no spaces) with keys in this fixed order:
`method`, `model` (the draft; omitted for ngram or when unknown), `num_speculative_tokens`,
`num_speculative_tokens_per_batch_size` (a list of inclusive [start, end, k] ranges). Same
decision, same bytes: the annotation never flaps.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from dataclasses import dataclass, fields
from functools import cached_property

import numpy as np
import numpy.typing as npt

from sovereignspec.api.speculation_decision import Reason
from sovereignspec.model.speedup import arrival_share, load_increase, real_speedup, slack, step_ratio
from sovereignspec.model.steptime import StepCurve, stretched
from sovereignspec.policy.conditions import NeighbourTable, neighbour_load, neighbour_slo, self_benefit
from sovereignspec.policy.node_state import NodeInput
from sovereignspec.policy.pin import Pin
from sovereignspec.policy.record import ReasonType

FloatArray = npt.NDArray[np.float64]
IntArray = npt.NDArray[np.int64]


@dataclass(frozen=True, eq=False)
class Groups:
    """The distinct (curve, c_d, u) of some nodes: all S_real, τ and Δu depend on."""

    curves: Sequence[StepCurve]
    """Distinct curves (by object); `curve[g]` indexes them per group."""
    curve: IntArray
    c_d: FloatArray
    u: FloatArray

    @classmethod
    def of_nodes(cls, nodes: Sequence[NodeInput]) -> tuple[Groups, IntArray]:
        """The groups of `nodes`, and each node's group."""
        curves: dict[int, int] = {}
        uniq: list[StepCurve] = []
        seen: dict[tuple[int, float, float], int] = {}
        rows: list[tuple[int, float, float]] = []
        of = np.empty(len(nodes), dtype=np.int64)
        for i, nd in enumerate(nodes):
            c = curves.get(id(nd.curve))
            if c is None:
                c = curves[id(nd.curve)] = len(uniq)
                uniq.append(nd.curve)
            key = (c, nd.c_d, nd.u)
            g = seen.get(key)
            if g is None:
                g = seen[key] = len(rows)
                rows.append(key)
            of[i] = g
        groups = cls(
            curves=uniq,
            curve=np.asarray([r[0] for r in rows], dtype=np.int64),
            c_d=np.asarray([r[1] for r in rows], dtype=np.float64),
            u=np.asarray([r[2] for r in rows], dtype=np.float64),
        )
        return groups, of

    @cached_property
    def _number(self) -> dict[tuple[int, float, float], int]:
        """(curve id, c_d, u) -> group."""
        curves = [id(self.curves[c]) for c in self.curve.tolist()]
        return {key: g for g, key in enumerate(zip(curves, self.c_d.tolist(), self.u.tolist(), strict=True))}

    def extended(self, nodes: Sequence[NodeInput]) -> tuple[Groups, IntArray]:
        """These groups with those of `nodes` that are new added at the end (the same object when none
        is), and each node's group: a group already here keeps its number."""
        number = self._number
        of = np.empty(len(nodes), dtype=np.int64)
        added: dict[tuple[int, float, float], int] = {}
        curves = self.curves
        for i, nd in enumerate(nodes):
            key = (id(nd.curve), nd.c_d, nd.u)
            g = number.get(key)
            if g is None:
                g = added.get(key)
                if g is None:
                    g = added[key] = len(number) + len(added)
                    if not any(c is nd.curve for c in curves):
                        curves = [*curves, nd.curve]
            of[i] = g
        if not added:
            return self, of
        at = {id(c): j for j, c in enumerate(curves)}
        return (
            Groups(
                curves=curves,
                curve=np.concatenate([self.curve, np.asarray([at[k[0]] for k in added], dtype=np.int64)]),
                c_d=np.concatenate([self.c_d, np.asarray([k[1] for k in added], dtype=np.float64)]),
                u=np.concatenate([self.u, np.asarray([k[2] for k in added], dtype=np.float64)]),
            ),
            of,
        )

    def extends(self, other: Groups) -> bool:
        """`other`'s groups are this one's first, with the same numbers."""
        n = other.curve.size
        return (
            self.curve.size >= n
            and len(self.curves) >= len(other.curves)
            and all(a is b for a, b in zip(self.curves, other.curves, strict=False))
            and np.array_equal(self.curve[:n], other.curve)
            and np.array_equal(self.c_d[:n], other.c_d)
            and np.array_equal(self.u[:n], other.u)
        )

    def since(self, other: Groups) -> Groups:
        """The groups after `other`'s (for this one when it `extends` other)."""
        n = other.curve.size
        return Groups(self.curves, self.curve[n:], self.c_d[n:], self.u[n:])


@dataclass(frozen=True, eq=False)
class Tables:
    """Per group g, range r (+1 column at the expected batch) and budget k: what a node's k* is read from."""

    s_real: FloatArray  # [G, R+1, K+1]
    du: FloatArray  # [G, R+1, K+1] conservative Δu
    reach: FloatArray  # [G, R+1, K+1] max of Δu over budgets 0..k (NaN from a NaN on)
    arrival: FloatArray  # [G, R+1] our plain tensor share at the observed load (`arrival_share`)
    memory: FloatArray  # [G, R+1] our plain memory share, the slack sigma(B) = t0 / t_u(B) (`slack`)
    best: IntArray  # [G, R+1, K+1] best budget among 0..k passing self-benefit (k = 0 scores 1)
    step: FloatArray  # [G] t_u(B) at the expected batch, plain
    du_observed: FloatArray  # [G, R+1, K+1] Δu at the observed load alone (the idle scenario's)
    reach_observed: FloatArray  # [G, R+1, K+1] its max over budgets 0..k
    reach_idle: FloatArray  # [G, R+1, K+1] max over budgets 0..k of our whole share on an idle GPU
    memory_idle: FloatArray  # [G, R+1] our plain memory share on an idle GPU

    def concat(self, more: Tables) -> Tables:
        """These groups' tables followed by `more`'s (a group's table reads only that group)."""
        return Tables(*(np.concatenate([getattr(self, f.name), getattr(more, f.name)]) for f in fields(self)))


@dataclass(frozen=True)
class Evaluation:
    """Per node n: k_star[n, r] per range, and at the expected batch its S_real, slack and Δu."""

    k_star: IntArray  # [N, R]
    k_star_self: IntArray  # [N, R] ignoring neighbours (to tell "no gain" from "neighbour SLO")
    speedup_expected: FloatArray  # [N]
    slack_expected: FloatArray  # [N]
    load_increase_expected: (
        FloatArray  # [N] Δu at the expected batch with its range's k*, as its scenario has it
    )
    arrival_expected: FloatArray  # [N] our plain share at the expected batch where we arrive, else 0
    memory_expected: FloatArray  # [N] our plain memory share at the expected batch where we arrive, else 0
    speedup_by_k: FloatArray  # [N, K+1] S_real at the expected batch for every k (for the record)
    step_expected: FloatArray  # [N] t_u(B) at the expected batch, plain (for placement Throughput)

    def copy(self) -> Evaluation:
        return Evaluation(*(getattr(self, f.name).copy() for f in fields(self)))

    def take(self, rows: IntArray) -> Evaluation:
        """The evaluation of the nodes at `rows`, in that order."""
        return Evaluation(*(getattr(self, f.name)[rows] for f in fields(self)))

    def put(self, rows: IntArray, other: Evaluation) -> None:
        """Overwrite the nodes at `rows` with `other`'s (in place: for an evaluation just taken)."""
        for f in fields(self):
            getattr(self, f.name)[rows] = getattr(other, f.name)


def tables(
    groups: Groups,
    expected_length: FloatArray,
    range_ends: Sequence[int],
    expected_batch: int,
    min_gain: float,
) -> Tables:
    n_k = expected_length.size
    ks = np.arange(n_k, dtype=np.float64)
    batches = np.asarray([*range_ends, expected_batch], dtype=np.float64)  # [R+1]
    cid = groups.curve
    t0_c = np.asarray([c.t0 for c in groups.curves])
    g_b_c = np.stack([c.g(batches) for c in groups.curves]) if groups.curves else np.zeros((0, batches.size))
    g_bk_c = (
        np.stack([c.g(batches[:, None] * (ks[None, :] + 1.0)) for c in groups.curves])
        if groups.curves
        else np.zeros((0, batches.size, n_k))
    )  # [C, R+1, K+1]
    t0 = t0_c[cid][:, None, None]
    g_b = g_b_c[cid][:, :, None]
    g_bk = g_bk_c[cid]
    u = groups.u[:, None, None]
    c_d = groups.c_d[:, None, None]
    tau = step_ratio(t0, g_b, g_bk, u, ks[None, None, :], c_d)
    s_real = real_speedup(expected_length[None, None, :], tau)
    # Conservative load increase: DESIGN's Δu at the observed load u, but never below Δu on an
    # otherwise idle GPU (other tenants' load can drop at any moment, which raises our share). The idle
    # scenario instead takes Δu at u, and our whole share on the idle GPU as its own state.
    tau0 = step_ratio(t0, g_b, g_bk, 0.0, ks[None, None, :], c_d)
    du_observed = load_increase(t0, g_b, g_bk, u, tau)
    du_idle = load_increase(t0, g_b, g_bk, 0.0, tau0)
    du = np.maximum(du_observed, du_idle)
    whole_idle = du_idle + arrival_share(t0, g_b, 0.0)
    # best[.., k] = argmax over budgets 0..k of S_real where it passes self-benefit, k = 0 at 1 (first
    # index on ties, and at the first NaN, as np.argmax): a budget becomes the best where it beats all
    # before it, and the best is the last budget that did.
    score = np.where(self_benefit(s_real, min_gain), s_real, -np.inf)
    score[..., 0] = 1.0
    before = np.maximum.accumulate(score, axis=2)[..., :-1]
    beats = (score[..., 1:] > before) | (np.isnan(score[..., 1:]) & ~np.isnan(before))
    at = np.where(beats, np.arange(1, n_k), 0)
    best = np.concatenate([np.zeros_like(at[..., :1]), np.maximum.accumulate(at, axis=2)], axis=2)
    step = stretched(t0_c[cid], g_b_c[cid][:, -1], groups.u)
    arrival = arrival_share(t0[..., 0], g_b[..., 0], u[..., 0])
    memory = slack(t0[..., 0], g_b[..., 0], u[..., 0])
    reach = np.maximum.accumulate(du, axis=2)
    return Tables(
        s_real,
        du,
        reach,
        arrival,
        memory,
        best.astype(np.int64),
        step,
        du_observed,
        np.maximum.accumulate(du_observed, axis=2),
        np.maximum.accumulate(whole_idle, axis=2),
        slack(t0[..., 0], g_b[..., 0], 0.0),
    )


def evaluate_groups(
    t: Tables, gid: IntArray, neighbours: NeighbourTable, expected_range: int, arriving: bool = True
) -> Evaluation:
    """k* per node of groups `gid` with their `neighbours` (`conditions.NeighbourTable`, one row per
    node), per range and at the expected batch, with what the record shows there: a budget k is safe
    only if every smaller budget is safe in the same scenario (the engine may run fewer draft tokens
    than num_speculative_tokens; this also makes k* non-increasing in background load), so the safe
    budgets are those where the running maximum of the load stays within the bound, and k* is the best
    one among them. Δu is finite (t0 > 0, c_d ≥ 0, u < 1), so a node without SLO-bound neighbours
    (bound +inf) holds no budget back.

    Two scenarios (`conditions`), and a budget is safe in either: the conservative one (Δu floored at
    its idle value, at the measured margins), or the idle scenario with the neighbour forecast (Δu at
    the observed load, and our whole share on an idle GPU against the bound at load 0, both at the
    forecast margins). The placement key (`speedup_expected`) is the S_real of the conservative budget:
    the idle scenario changes a node's budget, not which node is chosen (docs/decision.md, "The idle
    scenario with a neighbour forecast").

    The neighbours' margins were measured without us: where the workload is `arriving` (it runs
    nowhere on those nodes yet), its plain share comes on top of Δu (`conditions.neighbour_load`), and
    the bandwidth its plain steps take (its memory share at each range's batch) has used up part of each
    neighbour's margin first (`NeighbourTable.bounds`); on a re-decision where its own pods run, their
    TPOT already carries both (and the idle scenario adds only what our share grows by there)."""
    ranges = np.arange(t.best.shape[1])
    arrival = t.arrival[gid] if arriving else np.zeros_like(t.arrival[gid])  # [N, R+1]
    memory = t.memory[gid] if arriving else np.zeros_like(t.memory[gid])  # [N, R+1]
    bound = neighbours.bounds(memory)  # [N, R+1]
    n_conservative = np.count_nonzero(neighbour_slo(neighbour_load(t.reach[gid], arrival), bound), axis=2)
    n_safe = np.maximum(n_conservative, _safe_when_idle(t, gid, neighbours, arrival, memory, arriving))
    k_all: IntArray = t.best[gid[:, None], ranges[None, :], np.maximum(n_safe - 1, 0)]
    k_e = k_all[:, expected_range]
    k_key = t.best[gid, expected_range, np.maximum(n_conservative[:, expected_range] - 1, 0)]
    return Evaluation(
        k_star=k_all[:, :-1],
        k_star_self=t.best[gid, :-1, -1],
        speedup_expected=t.s_real[gid, -1, k_key],
        slack_expected=t.memory[gid, -1],
        load_increase_expected=np.where(
            k_e < n_conservative[:, expected_range], t.du[gid, -1, k_e], t.du_observed[gid, -1, k_e]
        ),
        arrival_expected=arrival[:, -1],
        memory_expected=memory[:, -1],
        speedup_by_k=t.s_real[gid, -1, :],
        step_expected=t.step[gid],
    )


def _safe_when_idle(
    t: Tables,
    gid: IntArray,
    neighbours: NeighbourTable,
    arrival: FloatArray,
    memory: FloatArray,
    arriving: bool,
) -> IntArray:
    """[N, R+1]: how many budgets (0..k) are safe in the idle scenario at the neighbours' forecast
    margins: Δu at the observed load (with our arrival share) within the bound at that load, and our
    whole share on a GPU the others have left within the bound at load 0. On a re-decision the
    neighbours' TPOT already carries our plain share at the observed load, so only the rest counts."""
    observed = neighbour_slo(
        neighbour_load(t.reach_observed[gid], arrival), neighbours.bounds(memory, forecast=True)
    )
    whole = t.reach_idle[gid] if arriving else t.reach_idle[gid] - t.arrival[gid][..., None]
    memory_idle = t.memory_idle[gid] if arriving else np.zeros_like(memory)
    idle = neighbour_slo(whole, neighbours.bounds(memory_idle, idle=True, forecast=True))
    out: IntArray = np.count_nonzero(observed & idle, axis=2)
    return out


def batch_ranges(breakpoints: Sequence[int], max_batch: int) -> list[tuple[int, int]]:
    """[1, 2, 4] with max 16 → [(1, 1), (2, 3), (4, 16)]: each range ends where the next starts."""
    ends = [b - 1 for b in breakpoints[1:]] + [max_batch]
    return list(zip(breakpoints, ends, strict=True))


def range_index(ranges: Sequence[tuple[int, int]], batch: int) -> int:
    """The range holding `batch` (clamped into the covered span)."""
    for i, (start, end) in enumerate(ranges):
        if start <= batch <= end:
            return i
    return len(ranges) - 1 if batch > ranges[-1][1] else 0


def merge_schedule(ranges: Sequence[tuple[int, int]], ks: Sequence[int]) -> list[list[int]]:
    """Adjacent ranges with equal k merge: [[1,1,3],[2,3,3],[4,7,1]] → [[1,3,3],[4,7,1]]."""
    out: list[list[int]] = []
    for (start, end), k in zip(ranges, ks, strict=True):
        if out and out[-1][2] == int(k) and out[-1][1] + 1 == start:
            out[-1][1] = end
        else:
            out.append([start, end, int(k)])
    return out


def speculative_config(method: str, draft_model: str | None, schedule: Sequence[Sequence[int]]) -> str:
    """The exact `--speculative-config` JSON string for a schedule whose max k is > 0."""
    num = max(int(row[2]) for row in schedule)
    cfg: dict[str, object] = {"method": method}
    if draft_model and method != "ngram":
        cfg["model"] = draft_model
    cfg["num_speculative_tokens"] = num
    cfg["num_speculative_tokens_per_batch_size"] = [[int(a), int(b), int(c)] for a, b, c in schedule]
    return json.dumps(cfg, separators=(",", ":"))


@dataclass(frozen=True)
class Budget:
    """The speculation the chosen node(s) get: k* per range, merged into vLLM's schedule."""

    schedule: list[list[int]]
    num: int
    """The largest k of the schedule (num_speculative_tokens)."""
    enabled: bool
    config: str
    off: Reason | None
    """Why speculation is off (None: on; a pinned config may run with an off reason)."""
    method: str | None = None
    draft_model: str | None = None
    pin: Pin | None = None
    """The template's pin the budget is (None: the decision's own)."""


def budget_on(
    placed_k: IntArray | None,
    placed_k_self: IntArray | None,
    off: Reason | None,
    ranges: Sequence[tuple[int, int]],
    method: str | None,
    draft_model: str | None,
    no_gain: str,
) -> Budget:
    """The per-range minimum of k* over the placed nodes (`placed_k`, [nodes, R]; None when one of
    them was not evaluated). No budget anywhere is the neighbours' doing when the nodes' own k*
    (`placed_k_self`, ignoring neighbours) had one, else no gain (`no_gain`: the message)."""
    k_row: list[int] = [0] * len(ranges)
    if placed_k is not None and placed_k_self is not None:
        k_row = [int(x) for x in placed_k.min(axis=0)]
        if max(k_row) == 0:
            if int(placed_k_self.min(axis=0).max()) > 0:
                off = Reason(
                    type=ReasonType.NEIGHBOUR_SLO,
                    message="a co-located neighbour's SLO margin leaves no draft budget",
                )
            else:
                off = Reason(type=ReasonType.NO_GAIN, message=no_gain)
    schedule = merge_schedule(ranges, k_row)
    num = max(k_row)
    enabled = num > 0 and off is None
    config = speculative_config(method or "", draft_model, schedule) if enabled else ""
    return Budget(schedule, num, enabled, config, off, method, draft_model)


def pinned_budget(pin: Pin, max_batch: int, off: Reason | None) -> Budget:
    """What a template's pin runs, with its own k (at most kMax: `pin.read_pin` refuses more)."""
    schedule = pin.schedule or [[1, max_batch, pin.k]]
    return Budget(schedule, pin.k, pin.k > 0, pin.config, off, pin.method, pin.draft_model, pin)
