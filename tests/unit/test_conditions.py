"""The paper's two admission conditions on a draft budget, by name (DESIGN.md §2): `self_benefit`
(S_real ≥ 1 + minGain) and `neighbour_slo` (our load increase within what every co-located engine's SLO
margin tolerates, `neighbour_bounds`). How they pick k* per range is in test_budget.py."""

from __future__ import annotations

import math

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from sovereignspec.model.speedup import neighbour_slowdown
from sovereignspec.policy.conditions import neighbour_bounds, neighbour_slo, self_benefit
from sovereignspec.policy.node_state import NO_NEIGHBOURS, NeighbourInput, Neighbours


def _one(margin: float | None, sigma: float = 0.5, u: float = 0.2) -> Neighbours:
    return Neighbours.of([NeighbourInput("ns", "p", sigma=sigma, margin=margin, u_total=u)])


def test_self_benefit_needs_the_minimum_gain() -> None:
    s_real = np.array([0.9, 1.0, 1.049, 1.05, 2.0])
    assert self_benefit(s_real, 0.05).tolist() == [False, False, False, True, True]
    assert self_benefit(s_real, 0.0).tolist() == [False, True, True, True, True]


def test_a_node_without_slo_bound_neighbours_holds_nothing_back() -> None:
    bounds = neighbour_bounds([NO_NEIGHBOURS, _one(None)], safety=0.1)
    assert bounds.tolist() == [math.inf, math.inf]


def test_a_neighbour_already_over_its_slo_allows_no_increase() -> None:
    (bound,) = neighbour_bounds([_one(-0.1)], safety=0.1)
    assert bound == -math.inf
    assert not neighbour_slo(np.array([[0.0]]), np.array([bound])).any()


def test_the_tightest_neighbour_sets_the_bound() -> None:
    both = neighbour_bounds([Neighbours.of([*_one(0.5).items, *_one(0.1).items])], 0.0)
    alone = neighbour_bounds([_one(0.1)], 0.0)
    assert both.tolist() == alone.tolist()


def test_neighbour_slo_compares_every_budget_of_a_node_with_its_bound() -> None:
    du = np.array([[[0.0, 0.1, 0.3]], [[0.0, 0.1, 0.3]]])  # [node, range, k]
    ok = neighbour_slo(du, np.array([0.2, math.inf]))
    assert ok.tolist() == [[[True, True, False]], [[True, True, True]]]


@settings(max_examples=200, deadline=None)
@given(st.floats(0.05, 2.0), st.floats(0.0, 0.95), st.floats(0.0, 0.9), st.floats(0.0, 0.5))
def test_at_the_bound_the_neighbour_slows_down_by_exactly_its_allowance(
    margin: float, sigma: float, u: float, safety: float
) -> None:
    """neighbour_bounds inverts the slowdown formula: at Δu = bound, ε_j = m_j(1 - safety)."""
    (bound,) = neighbour_bounds([_one(margin, sigma, u)], safety)
    eps = float(neighbour_slowdown(sigma, bound, u))
    assert eps == pytest.approx(margin * (1.0 - safety), rel=1e-6, abs=1e-9)
