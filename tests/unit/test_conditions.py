"""The paper's two admission conditions on a draft budget, by name (DESIGN.md §2): `self_benefit`
(S_real ≥ 1 + minGain) and `neighbour_slo` (our load increase within what every co-located engine's SLO
margin tolerates, `NeighbourTable.bounds`, read here through `tests.support.neighbour_bounds`). How they
pick k* per range is in test_budget.py. Last, through decide(): the evidence-only switch that turns the
neighbour condition off (the C6 ablation)."""

from __future__ import annotations

import math
from dataclasses import replace
from datetime import datetime
from pathlib import Path

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from sovereignspec.api.speculation_decision import NeighbourImpact
from sovereignspec.cli.decide import load_scenario
from sovereignspec.model.cluster import ClusterSnapshot, WorkloadRef
from sovereignspec.model.speedup import bandwidth_slowdown, memory_share_scalar, neighbour_slowdown
from sovereignspec.policy.conditions import neighbour_slo, self_benefit
from sovereignspec.policy.decide import decide
from sovereignspec.policy.node_state import NO_NEIGHBOURS, NeighbourInput, Neighbours
from sovereignspec.policy.parse import build_snapshot, parse_telemetry, parse_time, parse_workload
from sovereignspec.policy.request import AdmissionRequest, Policies, request_for
from tests.support import neighbour_bounds


def _one(margin: float | None, sigma: float = 0.5, u: float = 0.2) -> Neighbours:
    return Neighbours.of([NeighbourInput("ns", "p", sigma=sigma, margin=margin, u_total=u)])


def test_self_benefit_needs_the_minimum_gain() -> None:
    s_real = np.array([0.9, 1.0, 1.049, 1.05, 2.0])
    assert self_benefit(s_real, 0.05).tolist() == [False, False, False, True, True]
    assert self_benefit(s_real, 0.0).tolist() == [False, True, True, True, True]


def test_a_node_without_slo_bound_neighbours_holds_nothing_back() -> None:
    bounds = neighbour_bounds([NO_NEIGHBOURS, _one(None)], 0.1, np.array([[0.0, 0.9], [0.0, 0.9]]))
    assert bounds.tolist() == [[math.inf, math.inf], [math.inf, math.inf]]


def test_a_neighbour_already_over_its_slo_allows_no_increase() -> None:
    ((bound,),) = neighbour_bounds([_one(-0.1)], safety=0.1)
    assert bound == -math.inf
    assert not neighbour_slo(np.array([[[0.0]]]), np.array([[bound]])).any()


def test_the_tightest_neighbour_sets_the_bound() -> None:
    share = np.array([[0.0, 0.5]])
    both = neighbour_bounds([Neighbours.of([*_one(0.5).items, *_one(0.1).items])], 0.0, share)
    alone = neighbour_bounds([_one(0.1)], 0.0, share)
    assert both.tolist() == alone.tolist()


def test_neighbour_slo_compares_every_budget_of_a_node_with_its_bound() -> None:
    du = np.array([[[0.0, 0.1, 0.3]], [[0.0, 0.1, 0.3]]])  # [node, range, k]
    ok = neighbour_slo(du, np.array([[0.2], [math.inf]]))
    assert ok.tolist() == [[[True, True, False]], [[True, True, True]]]


@settings(max_examples=200, deadline=None)
@given(st.floats(0.05, 2.0), st.floats(0.0, 0.95), st.floats(0.0, 0.9), st.floats(0.0, 0.5))
def test_at_the_bound_the_neighbour_slows_down_by_exactly_its_allowance(
    margin: float, sigma: float, u: float, safety: float
) -> None:
    """neighbour_bounds inverts the slowdown formula: at Δu = bound, ε_j = m_j(1 - safety)."""
    ((bound,),) = neighbour_bounds([_one(margin, sigma, u)], safety)
    eps = float(neighbour_slowdown(sigma, bound, u))
    assert eps == pytest.approx(margin * (1.0 - safety), rel=1e-6, abs=1e-9)


@settings(max_examples=200, deadline=None)
@given(
    st.floats(0.05, 2.0), st.floats(0.0, 0.95), st.floats(0.0, 0.9), st.floats(0.0, 0.5),
    st.floats(0.0, 1.0), st.floats(0.0, 1.0),
)  # fmt: skip
def test_bandwidth_and_compute_slowdowns_compound_to_exactly_the_allowance(
    margin: float, sigma: float, u: float, safety: float, memory: float, share: float
) -> None:
    """Our plain steps read memory for `share` of their time and slow the neighbour by memory·share
    first; at Δu = bound the compute slowdown on top brings it to exactly its allowance,
    (1 + bandwidth)(1 + ε_j) = 1 + m_j(1 - safety), or there is no room left (bound -inf)."""
    nb = Neighbours.of([NeighbourInput("ns", "p", sigma=sigma, margin=margin, u_total=u, memory=memory)])
    ((bound,),) = neighbour_bounds([nb], safety, np.array([[share]]))
    slowed = float(bandwidth_slowdown(memory, share))
    allowed = margin * (1.0 - safety)
    if slowed > allowed:
        assert bound == -math.inf
    else:
        eps = float(neighbour_slowdown(sigma, bound, u))
        assert (1.0 + slowed) * (1.0 + eps) == pytest.approx(1.0 + allowed, rel=1e-6, abs=1e-9)


def test_a_neighbours_memory_share_is_its_weights_read_time_over_its_measured_tpot() -> None:
    """t0 / TPOT where it reports a TPOT, never above its slack (the roofline's t_u has no CPU time);
    without a TPOT, 0: no measurement, and an SLO claimant without metrics must not block by it."""
    assert memory_share_scalar(0.006, 0.9, None) == 0.0
    assert memory_share_scalar(0.006, 0.9, 0.012) == pytest.approx(0.5)
    assert memory_share_scalar(0.006, 0.4, 0.012) == 0.4
    assert NeighbourInput("ns", "p", sigma=0.7, margin=0.3, u_total=0.2).memory == 0.0


# -- the switch the C6 ablation flips (`Policies.neighbour_condition`), through decide() ------------------

SCENARIO = Path(__file__).resolve().parents[1] / "scenarios" / "neighbour-at-slo.yaml"


def _near_slo(
    tpot_s: float, tensor_active: float
) -> tuple[AdmissionRequest, ClusterSnapshot, Policies, datetime]:
    """neighbour-at-slo with the neighbour `shop-llm-0` (SLO 40 ms) running at `tpot_s`, i.e. within
    its SLO, on a GPU at `tensor_active`: decide()'s inputs as the CLI builds them."""
    data = load_scenario(SCENARIO.read_text(encoding="utf-8"))
    data["telemetry"]["engines"][0]["tpotSeconds"] = tpot_s
    data["telemetry"]["gpus"][0]["tensorActive"] = tensor_active
    wl = parse_workload(data["workload"])
    snap = build_snapshot(
        data["objects"],
        parse_telemetry(data["telemetry"]),
        extra_workloads=[WorkloadRef(namespace=wl.namespace, name=wl.name, uid=wl.uid)],
    )
    request, policies = request_for(wl, snap)
    return request, snap, policies, parse_time(data["now"], "now")


def _figures(nb: NeighbourImpact) -> tuple[float, float]:
    """(SLO margin, our predicted slowdown) of a neighbour on the record."""
    assert nb.margin_before is not None and nb.slowdown is not None
    return nb.margin_before, nb.slowdown


def test_without_the_neighbour_condition_decide_speculates_past_a_neighbours_slo() -> None:
    """The neighbour runs 0.25 % inside its SLO (39.9 ms against 40 ms) on a GPU at tensor-active 0.8.
    With the condition (the default, and all `select_policies` ever gives) every budget would push it
    past its margin: speculation off, NeighbourSlo. With it switched off, the same snapshot gets a
    schedule whose predicted slowdown of that neighbour is far beyond its margin. Ignoring the switch
    fails the second half."""
    request, snap, policies, now = _near_slo(0.0399, 0.8)
    assert policies.neighbour_condition  # the operator's and the CLI's policies keep the condition
    kept = decide(request, snap, policies, now)
    dropped = decide(request, snap, replace(policies, neighbour_condition=False), now)
    assert (kept.state, kept.reason, kept.speculative.enabled) == ("Ready", "NeighbourSlo", False), (
        kept.message
    )
    assert (dropped.state, dropped.node) == ("Ready", kept.node)
    assert dropped.speculative.enabled and dropped.speculative.num_speculative_tokens > 0, dropped.message
    assert dropped.reason != "NeighbourSlo"
    (nb,) = dropped.neighbours
    margin, slowdown = _figures(nb)
    assert nb.pod == "shop-llm-0" and 0 < margin < 0.01
    assert slowdown > 5 * margin  # its TPOT is predicted well past the SLO


def test_the_switch_changes_only_the_neighbour_condition_and_is_kept_apart_in_the_memo() -> None:
    """A neighbour 20 % inside its SLO (32 ms against 40) on a GPU at tensor-active 0.5: with the
    condition decide() keeps speculation, with a budget no larger in any batch range and smaller in some,
    and its predicted slowdowns of the neighbour (through compute: our arrival and speculation; through
    memory bandwidth: our arrival) each within the margin less the safety; without it, the larger budget.
    Decided in turn on one snapshot (one index and memo), each answer is the one a fresh snapshot gives:
    the memoised evaluation is kept per switch."""
    request, snap, policies, now = _near_slo(0.032, 0.5)
    off = replace(policies, neighbour_condition=False)
    answers = [decide(request, snap, p, now) for p in (policies, off, policies, off)]
    fresh = [decide(*_near_slo(0.032, 0.5)[:2], p, now) for p in (policies, off)]
    schedules = [d.speculative.schedule for d in answers]
    assert schedules == [fresh[0].speculative.schedule, fresh[1].speculative.schedule] * 2
    kept, dropped = answers[:2]
    assert kept.speculative.enabled and dropped.speculative.enabled
    per_batch = [[_k_at(d.speculative.schedule, b) for b in range(1, 1025)] for d in (kept, dropped)]
    assert all(a <= b for a, b in zip(*per_batch, strict=True)) and per_batch[0] != per_batch[1]
    margin, slowdown = _figures(kept.neighbours[0])
    assert 0 < slowdown <= margin * (1 - policies.speculation.safety) + 1e-9
    memory = kept.neighbours[0].memory_slowdown
    assert memory is not None and 0 < memory <= margin * (1 - policies.speculation.safety) + 1e-9


def test_a_budget_is_refused_where_our_arrivals_bandwidth_alone_uses_up_the_neighbours_margin() -> None:
    """The same neighbour 12.5 % inside its SLO (35 ms), GPU at 0.5: at every batch range our plain
    steps' bandwidth alone would slow it past its allowance, so no budget anywhere (NeighbourSlo) and
    the record says by how much; without the condition, a budget."""
    request, snap, policies, now = _near_slo(0.035, 0.5)
    kept = decide(request, snap, policies, now)
    dropped = decide(request, snap, replace(policies, neighbour_condition=False), now)
    assert (kept.reason, kept.speculative.enabled, dropped.speculative.enabled) == (
        "NeighbourSlo",
        False,
        True,
    )
    margin, _ = _figures(kept.neighbours[0])
    memory = kept.neighbours[0].memory_slowdown
    assert memory is not None and memory > margin * (1 - policies.speculation.safety)


def _k_at(schedule: list[list[int]], batch: int) -> int:
    return next(k for start, end, k in schedule if start <= batch <= end)
