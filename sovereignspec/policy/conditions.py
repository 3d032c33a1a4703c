"""The paper's two admission conditions on a draft budget k (DESIGN.md §2), named:

- `self_benefit`: speculation must pay for itself, S_real(k, B) ≥ 1 + minGain;
- `neighbour_slo`: no co-located engine may be pushed past its SLO margin (less the policy's safety),
  i.e. our load increase Δu stays within the largest increase every neighbour tolerates
  (`NeighbourTable.bounds`, the inverse of the slowdown ε_j: `model.speedup.max_load_increase`). Where
  we arrive, the memory bandwidth our plain steps take slows the neighbour first and uses up part of
  that margin (`model.speedup.bandwidth_slowdown`, `allowance_left`; docs/decision.md, "Memory
  bandwidth at arrival").

Where DESIGN.md is silent, a budget passes the neighbour condition in either of two scenarios, and only
if every budget below it passes in the same one (`budget.evaluate_groups`):
- conservative: Δu is max(Δu at the observed load, Δu on an idle GPU), against each neighbour's
  bound at the observed load and its measured margin;
- the idle scenario with a neighbour forecast: Δu at the observed load against the bound at that load,
  and our whole share on a GPU the others have left against the bound at load 0, both at each
  neighbour's margin at its forecast batch (`policy.neighbour_forecast`; docs/decision.md, "The idle
  scenario with a neighbour forecast").
A neighbour's margin is measured before we arrive, so at admission the increase it must absorb is our
plain share as well as Δu (`neighbour_load`; docs/decision.md, "The neighbour's margin after we
arrive").
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass, fields

import numpy as np
import numpy.typing as npt

from sovereignspec.model.speedup import allowance_left, bandwidth_slowdown, max_load_increase
from sovereignspec.policy.node_state import Neighbours

FloatArray = npt.NDArray[np.float64]
BoolArray = npt.NDArray[np.bool_]
IntArray = npt.NDArray[np.int64]


def self_benefit(s_real: FloatArray, min_gain: float) -> BoolArray:
    """Condition 1: the budget's predicted speed-up reaches 1 + minGain."""
    return np.asarray(s_real >= 1.0 + min_gain)


def neighbour_load(load_increase: FloatArray, arrival: FloatArray) -> FloatArray:
    """The load increase a neighbour's margin must absorb: our speculation's Δu ([N, R+1, K+1]) plus
    our plain share where we arrive ([N, R+1]; 0 where our pods already run and its TPOT has them)."""
    return np.asarray(load_increase + arrival[..., None])


def neighbour_slo(load_increase: FloatArray, bound: FloatArray) -> BoolArray:
    """Condition 2: our load increase ([N, R+1, K+1]) stays within `bound` ([N, R+1]), the largest
    increase the node's neighbours tolerate at each batch range."""
    return np.asarray(load_increase <= bound[..., None])


@dataclass(frozen=True, eq=False)
class NeighbourTable:
    """Nodes' SLO-bound neighbours as padded [N, J] columns (a padding column is not SLO-bound): slack
    sigma_j, weight-read share memory_j, the GPU's load u_j and the allowance thr_j = m_j(1 - safety)
    (+inf: not SLO-bound; < 0: already over its SLO), and the same allowance at the neighbour's forecast
    margin (`thr_forecast`, never above thr_j)."""

    sigma: FloatArray
    memory: FloatArray
    u: FloatArray
    thr: FloatArray
    thr_forecast: FloatArray

    @classmethod
    def empty(cls, n_nodes: int) -> NeighbourTable:
        z = np.zeros((n_nodes, 0))
        return cls(z, z, z, z, z)

    def take(self, rows: IntArray) -> NeighbourTable:
        return NeighbourTable(*(getattr(self, f.name)[rows] for f in fields(self)))

    def put(self, rows: IntArray, other: NeighbourTable) -> NeighbourTable:
        """A copy with the nodes at `rows` replaced by `other`'s (the wider of the two paddings)."""
        width = max(self.thr.shape[1], other.thr.shape[1])
        mine, theirs = self.padded(width), other.padded(width)

        def merged(old: FloatArray, new: FloatArray) -> FloatArray:
            out = old.copy()
            out[rows] = new
            return out

        return NeighbourTable(*(merged(getattr(mine, f.name), getattr(theirs, f.name)) for f in fields(self)))

    def padded(self, width: int) -> NeighbourTable:
        """These nodes with padding columns (not SLO-bound, nothing read) up to `width`: the one place the
        padding values are written."""
        extra = width - self.thr.shape[1]
        if extra <= 0:
            return self
        n = self.thr.shape[0]
        return NeighbourTable(
            np.hstack([self.sigma, np.ones((n, extra))]),
            np.hstack([self.memory, np.zeros((n, extra))]),
            np.hstack([self.u, np.zeros((n, extra))]),
            np.hstack([self.thr, np.full((n, extra), np.inf)]),
            np.hstack([self.thr_forecast, np.full((n, extra), np.inf)]),
        )

    def bounds(self, memory_share: FloatArray, *, idle: bool = False, forecast: bool = False) -> FloatArray:
        """[N, R+1]: the largest Δu (with our plain compute share) every neighbour tolerates once our
        plain steps, reading memory for `memory_share` ([N, R+1]) of their time, have slowed it through
        bandwidth: its allowance left (`speedup.allowance_left`) inverted through ε_j
        (`speedup.max_load_increase`). +inf where no neighbour is SLO-bound. `idle`: on a GPU the others
        have left (load 0); `forecast`: at each neighbour's forecast margin."""
        n, r = memory_share.shape
        j = self.thr.shape[1]
        if not j:
            return np.full((n, r), np.inf)
        shape = (n, r, j)
        slowed = bandwidth_slowdown(self.memory[:, None, :], memory_share[..., None])
        thr = self.thr_forecast if forecast else self.thr
        left = allowance_left(np.broadcast_to(thr[:, None, :], shape), slowed)
        sigma = np.broadcast_to(self.sigma[:, None, :], shape).reshape(-1, j)
        u = np.broadcast_to((np.zeros_like(self.u) if idle else self.u)[:, None, :], shape).reshape(-1, j)
        out: FloatArray = max_load_increase(sigma, left.reshape(-1, j), u).reshape(n, r)
        return out


def neighbour_table(neighbours: Sequence[Neighbours], safety: float) -> NeighbourTable:
    """The nodes' neighbours scattered into one padded [N, J] table (`NeighbourTable`): each SLO-bound
    neighbour j must keep its slowdown within m_j·(1 - safety); one without an SLO allows any."""
    n_nodes = len(neighbours)
    lens = np.fromiter((len(nb.items) for nb in neighbours), dtype=np.int64, count=n_nodes)
    n_j = int(lens.max()) if n_nodes else 0
    if not n_j:
        return NeighbourTable.empty(n_nodes)
    table = NeighbourTable.empty(n_nodes).padded(n_j)  # new arrays, every cell a padding column's
    rows_j = np.repeat(np.arange(n_nodes), lens)  # rows repeat, columns count within a row
    cols_j = np.arange(rows_j.size) - np.repeat(np.cumsum(lens) - lens, lens)
    flat = [x for nb in neighbours for x in nb.items]
    table.sigma[rows_j, cols_j] = [x.sigma for x in flat]
    table.memory[rows_j, cols_j] = [x.memory for x in flat]
    table.u[rows_j, cols_j] = [x.u_total for x in flat]

    def allowance(margins: Iterable[float | None]) -> FloatArray:
        m = np.asarray([np.nan if x is None else x for x in margins], dtype=np.float64)
        out: FloatArray = np.where(np.isnan(m), np.inf, m * (1.0 - safety))
        return out

    table.thr[rows_j, cols_j] = allowance(x.margin for x in flat)
    table.thr_forecast[rows_j, cols_j] = allowance(x.forecast_or_measured_margin for x in flat)
    return table
