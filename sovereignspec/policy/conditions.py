"""The paper's two admission conditions on a draft budget k (DESIGN.md §2), named:

- `self_benefit`: speculation must pay for itself, S_real(k, B) ≥ 1 + minGain;
- `neighbour_slo`: no co-located engine may be pushed past its SLO margin (less the policy's safety),
  i.e. our load increase Δu stays within the largest increase every neighbour tolerates
  (`neighbour_bounds`, the inverse of the slowdown ε_j: `model.speedup.max_load_increase`).

Conservative where DESIGN.md is silent: Δu is max(Δu at the observed load, Δu on an idle GPU), and a
budget passes the neighbour condition only if every budget below it passes too (`budget.tables`).
A neighbour's margin is measured before we arrive, so at admission the increase it must absorb is our
plain share as well as Δu (`neighbour_load`; docs/decision.md, "The neighbour's margin after we
arrive").
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
import numpy.typing as npt

from sovereignspec.model.speedup import max_load_increase
from sovereignspec.policy.node_state import Neighbours

FloatArray = npt.NDArray[np.float64]
BoolArray = npt.NDArray[np.bool_]


def self_benefit(s_real: FloatArray, min_gain: float) -> BoolArray:
    """Condition 1: the budget's predicted speed-up reaches 1 + minGain."""
    return np.asarray(s_real >= 1.0 + min_gain)


def neighbour_load(load_increase: FloatArray, arrival: FloatArray) -> FloatArray:
    """The load increase a neighbour's margin must absorb: our speculation's Δu ([N, R+1, K+1]) plus
    our plain share where we arrive ([N, R+1]; 0 where our pods already run and its TPOT has them)."""
    return np.asarray(load_increase + arrival[..., None])


def neighbour_slo(load_increase: FloatArray, bound: FloatArray) -> BoolArray:
    """Condition 2: our load increase (per node n, any trailing shape) stays within `bound[n]`, the
    largest increase the node's neighbours tolerate."""
    extra = (None,) * (load_increase.ndim - 1)
    return np.asarray(load_increase <= bound[(slice(None), *extra)])


def neighbour_bounds(neighbours: Sequence[Neighbours], safety: float) -> FloatArray:
    """The largest Δu each node's neighbours tolerate (+inf for a node without neighbours): every
    SLO-bound neighbour j keeps ε_j ≤ m_j·(1 - safety); one without an SLO allows any increase. The
    neighbours are scattered into one padded [N, J] matrix (a padding column is not SLO-bound)."""
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
