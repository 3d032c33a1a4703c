"""Vectorised speculation evaluation over candidate nodes x batch ranges x draft budgets k.

One call of `evaluate_nodes` computes, for N nodes, R batch ranges (+1 column at the expected batch)
and k = 0..kMax, the step ratio τ, S_real, the load increase Δu and every neighbour's slowdown ε, then
picks k*(B) = argmax S_real under the self-benefit and neighbour-SLO conditions (ties → smaller k;
k = 0 always qualifies with S_real = 1).

τ, S_real and Δu depend on a node only through its (curve, c_d, u): they are computed once per
distinct triple (`Groups`; a large cluster has a few products and load levels, not one per node). A
node adds only the largest load increase its neighbours tolerate (`load_bounds`), and its k* is read
from a per-group table of the best budget under each prefix of passing budgets.

Neighbour check, conservative where DESIGN.md is silent: Δu is max(Δu at the observed load, Δu on an
idle GPU), and budget k passes only if every budget below it passes too. Both keep the SLO guarantee
when others' load drops, and make k* non-increasing as background load grows.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, fields
from functools import cached_property

import numpy as np
import numpy.typing as npt

from sovereignspec.model.speedup import load_increase, step_ratio
from sovereignspec.model.steptime import U_MAX, StepCurve, stretched

FloatArray = npt.NDArray[np.float64]
IntArray = npt.NDArray[np.int64]


@dataclass(frozen=True)
class NeighbourInput:
    namespace: str
    pod: str
    sigma: float
    margin: float | None  # None: not SLO-bound (no engine, no SLO claim): not constrained
    u_total: float


@dataclass(frozen=True, eq=False)
class Neighbours:
    """A node's co-located engines; their columns as arrays are made on first use (most nodes' are only
    ever read through `load_bounds`, which reads the items of many nodes at once)."""

    items: Sequence[NeighbourInput]
    namespaces: frozenset[str] = frozenset()

    @classmethod
    def of(cls, items: Sequence[NeighbourInput]) -> Neighbours:
        return cls(items=tuple(items), namespaces=frozenset(nb.namespace for nb in items))

    @cached_property
    def sigma(self) -> FloatArray:
        return np.asarray([nb.sigma for nb in self.items], dtype=np.float64)

    @cached_property
    def margin(self) -> FloatArray:
        """NaN: not SLO-bound."""
        return np.asarray([np.nan if nb.margin is None else nb.margin for nb in self.items], dtype=np.float64)

    @cached_property
    def u_total(self) -> FloatArray:
        return np.asarray([nb.u_total for nb in self.items], dtype=np.float64)


NO_NEIGHBOURS = Neighbours.of(())


@dataclass(frozen=True)
class NodeInput:
    name: str
    curve: StepCurve
    c_d: float
    u: float
    neighbours: Neighbours = NO_NEIGHBOURS


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
    best: IntArray  # [G, R+1, K+1] best budget among 0..k passing self-benefit (k = 0 scores 1)
    step: FloatArray  # [G] t_u(B) at the expected batch, plain
    slack: FloatArray  # [G] sigma(B) = t0 / t_u(B) at the expected batch

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
    load_increase_expected: FloatArray  # [N] Δu at the expected batch with its range's k*
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


def max_load_increase(sigma_j: FloatArray, thr_j: FloatArray, u_j: FloatArray) -> FloatArray:
    """Largest Δu that keeps every neighbour j within its budget thr_j = m_j(1 - safety), per node.

    eps_j(Δu) = (1 - sigma_j)·max(Δu, 0) / (1 - u_j - Δu) is increasing in Δu, so eps_j <= thr_j
    is Δu <= D_j with D_j = thr_j·(1 - u_j) / (1 - sigma_j + thr_j) (and Δu < 1 - u_j, the GPU not
    saturating); thr_j < 0 (already over its SLO) allows no increase at all (-inf), thr_j = inf
    (not SLO-bound) any. Reducing over j turns a [N, J, R, K] check into one [N, R, K] comparison.
    """
    room = 1.0 - np.minimum(u_j, U_MAX)
    with np.errstate(divide="ignore", invalid="ignore"):
        d = np.where(np.isinf(thr_j), np.inf, thr_j * room / (1.0 - sigma_j + thr_j))
    d = np.where((1.0 - sigma_j + thr_j) <= 0, room, d)  # sigma_j = 1 and thr_j = 0: only saturation
    d = np.minimum(d, np.where(np.isinf(thr_j), np.inf, np.nextafter(room, -np.inf)))
    d = np.where(thr_j < 0, -np.inf, d)
    out: FloatArray = d.min(axis=1) if d.shape[1] else np.full(d.shape[0], np.inf)
    return out


def load_bounds(neighbours: Sequence[Neighbours], safety: float) -> FloatArray:
    """`max_load_increase` per node, its neighbours scattered into one padded [N, J] matrix (a padding
    column, not SLO-bound, allows any increase); +inf for a node without neighbours."""
    n_nodes = len(neighbours)
    lens = np.fromiter((len(nb.items) for nb in neighbours), dtype=np.int64, count=n_nodes)
    n_j = int(lens.max()) if n_nodes else 0
    if not n_j:
        return np.full(n_nodes, np.inf)
    sigma_j = np.ones((n_nodes, n_j))
    thr_j = np.full((n_nodes, n_j), np.inf)
    u_j = np.zeros((n_nodes, n_j))
    rows_j = np.repeat(np.arange(n_nodes), lens)  # rows repeat, columns count within a row
    cols_j = np.arange(rows_j.size) - np.repeat(np.cumsum(lens) - lens, lens)
    flat = [x for nb in neighbours for x in nb.items]
    sigma_j[rows_j, cols_j] = [x.sigma for x in flat]
    u_j[rows_j, cols_j] = [x.u_total for x in flat]
    margin = np.asarray([np.nan if x.margin is None else x.margin for x in flat], dtype=np.float64)
    thr_j[rows_j, cols_j] = np.where(np.isnan(margin), np.inf, margin * (1.0 - safety))
    return max_load_increase(sigma_j, thr_j, u_j)


def evaluate_nodes(
    nodes: Sequence[NodeInput],
    expected_length: FloatArray,
    range_ends: Sequence[int],
    expected_batch: int,
    expected_range: int,
    min_gain: float,
    safety: float,
) -> Evaluation:
    groups, gid = Groups.of_nodes(nodes)
    neighbours = [nd.neighbours for nd in nodes]
    return evaluate_groups(
        tables(groups, expected_length, range_ends, expected_batch, min_gain),
        gid,
        load_bounds(neighbours, safety),
        expected_range,
    )


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
    s_real = expected_length[None, None, :] / tau
    # Conservative load increase: DESIGN's Δu at the observed load u, but never below Δu on an
    # otherwise idle GPU (other tenants' load can drop at any moment, which raises our share).
    tau0 = step_ratio(t0, g_b, g_bk, 0.0, ks[None, None, :], c_d)
    du = np.maximum(load_increase(t0, g_b, g_bk, u, tau), load_increase(t0, g_b, g_bk, 0.0, tau0))
    # best[.., k] = argmax over budgets 0..k of S_real where it passes self-benefit, k = 0 at 1 (first
    # index on ties, and at the first NaN, as np.argmax): a budget becomes the best where it beats all
    # before it, and the best is the last budget that did.
    score = np.where(s_real >= 1.0 + min_gain, s_real, -np.inf)
    score[..., 0] = 1.0
    before = np.maximum.accumulate(score, axis=2)[..., :-1]
    beats = (score[..., 1:] > before) | (np.isnan(score[..., 1:]) & ~np.isnan(before))
    at = np.where(beats, np.arange(1, n_k), 0)
    best = np.concatenate([np.zeros_like(at[..., :1]), np.maximum.accumulate(at, axis=2)], axis=2)
    step = stretched(t0_c[cid], g_b_c[cid][:, -1], groups.u)
    return Tables(
        s_real, du, np.maximum.accumulate(du, axis=2), best.astype(np.int64), step, t0_c[cid] / step
    )


def evaluate_groups(t: Tables, gid: IntArray, bound: FloatArray, expected_range: int) -> Evaluation:
    """`evaluate_nodes` for nodes of groups `gid` with neighbour load bounds `bound`: a budget k is safe
    only if every smaller budget is (the engine may run fewer draft tokens than num_speculative_tokens;
    this also makes k* non-increasing in background load), so the safe budgets are those where the
    running maximum of Δu stays within the bound, and k* is the best one among them. Δu is finite
    (t0 > 0, c_d ≥ 0, u < 1), so a node without neighbours (bound +inf) holds no budget back."""
    ranges = np.arange(t.best.shape[1])
    n_safe = np.count_nonzero(t.reach[gid] <= bound[:, None, None], axis=2)  # [N, R+1]
    k_all: IntArray = t.best[gid[:, None], ranges[None, :], np.maximum(n_safe - 1, 0)]
    k_e = k_all[:, expected_range]
    return Evaluation(
        k_star=k_all[:, :-1],
        k_star_self=t.best[gid, :-1, -1],
        speedup_expected=t.s_real[gid, -1, k_e],
        slack_expected=t.slack[gid],
        load_increase_expected=t.du[gid, -1, k_e],
        speedup_by_k=t.s_real[gid, -1, :],
        step_expected=t.step[gid],
    )
