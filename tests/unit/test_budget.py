"""k*(B), the draft budget per batch range, and the vLLM schedule it becomes.

The grouped evaluation (one S_real table per distinct (curve, c_d, u), a per-node load bound, k* read
from a prefix table) picks exactly what a plain per-node evaluation picks.

The reference below evaluates one node at a time the way DESIGN.md §2 reads: τ, S_real and Δu over
ranges x budgets, a budget k passing the neighbour check only if every smaller one does (in one of two
scenarios: conservative, or idle with the neighbour forecast; `policy.conditions`), then the argmax of
S_real over the budgets passing both conditions (ties: smaller k; k = 0 always, at 1).
"""

from __future__ import annotations

import numpy as np
import numpy.typing as npt
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from sovereignspec.model.acceptance import expected_lengths, iid_curve
from sovereignspec.model.speedup import (
    arrival_share,
    bandwidth_slowdown,
    load_increase,
    max_load_increase,
    neighbour_slowdown,
    slack,
    step_ratio,
)
from sovereignspec.model.steptime import StepCurve, stretched
from sovereignspec.policy.budget import batch_ranges, merge_schedule, range_index, speculative_config
from sovereignspec.policy.node_state import NeighbourInput, Neighbours, NodeInput
from tests.support import evaluate_nodes, schedule_errors

CURVES = [
    StepCurve.from_points([(0, 0.006), (4096, 0.14)]),
    StepCurve.from_points([(0, 0.012), (512, 0.02), (8192, 0.4)]),
    StepCurve.from_points([(0, 0.004), (1, 0.004)]),  # g = 0: slack 1 everywhere
    StepCurve.from_points([(0, 0.006), (64, 0.05), (8192, 0.06)]),  # concave: Δu can fall as k grows
]
LOADS = [0.0, 0.2, 0.5, 0.9, 0.999, 1.0]


Row = npt.NDArray[np.float64]


def _plain(
    nd: NodeInput, el: Row, ends: list[int], batch: int, e_range: int, gain: float, safety: float
) -> tuple[npt.NDArray[np.int64], npt.NDArray[np.int64], float, float, float, Row]:
    """One node, no sharing: (k*, k* ignoring neighbours, S_real, slack, and the load the neighbours see
    at the expected batch: our plain share, as we arrive, plus Δu)."""
    ks = np.arange(el.size, dtype=np.float64)
    b = np.asarray([*ends, batch], dtype=np.float64)
    c = nd.curve
    g_b, g_bk = c.g(b)[:, None], c.g(b[:, None] * (ks[None, :] + 1.0))
    tau = step_ratio(c.t0, g_b, g_bk, nd.u, ks[None, :], nd.c_d)
    s = el[None, :] / tau
    self_ok = s >= 1.0 + gain
    du_u = load_increase(c.t0, g_b, g_bk, nd.u, tau)
    tau0 = step_ratio(c.t0, g_b, g_bk, 0.0, ks[None, :], nd.c_d)
    du_0 = load_increase(c.t0, g_b, g_bk, 0.0, tau0)
    du = np.maximum(du_u, du_0)
    arrival = g_b / stretched(c.t0, g_b, nd.u)  # our plain share at load u: we arrive on the node
    whole_0 = g_bk / (tau0 * (c.t0 + g_b))  # our whole share on a GPU the others have left
    nbs = nd.neighbours
    nb_ok = np.ones_like(self_ok)
    cons_ok = np.ones_like(self_ok)
    if nbs.items:
        # our plain steps read memory for v of their time and stretch each neighbour's weight reads
        # (memory_j of its step) by 1 + v; what is left of its allowance bounds Δu and our plain share
        memory = c.t0 / stretched(c.t0, g_b, nd.u)  # [R+1, 1]
        memory_0 = c.t0 / (c.t0 + g_b)
        forecast = np.asarray(
            [
                np.nan if x.margin is None else x.margin if x.margin_forecast is None else x.margin_forecast
                for x in nbs.items
            ]
        )
        thr = np.where(np.isnan(nbs.margin), np.inf, nbs.margin * (1.0 - safety))
        thr_f = np.where(np.isnan(forecast), np.inf, forecast * (1.0 - safety))

        def bound(mem: float, allowance: Row, u: Row) -> float:
            slowed = nbs.memory * mem
            left = np.where(
                (slowed == 0) | np.isinf(allowance), allowance, (1.0 + allowance) / (1.0 + slowed) - 1.0
            )
            return float(max_load_increase(nbs.sigma[None, :], left[None, :], u[None, :])[0])

        for r in range(memory.shape[0]):
            cons_ok[r] = np.logical_and.accumulate(
                du[r] + arrival[r] <= bound(memory[r, 0], thr, nbs.u_total)
            )
            observed = du_u[r] + arrival[r] <= bound(memory[r, 0], thr_f, nbs.u_total)
            idle = whole_0[r] <= bound(memory_0[r, 0], thr_f, np.zeros_like(nbs.u_total))
            idle_ok = np.logical_and.accumulate(observed & idle)
            nb_ok[r] = cons_ok[r] | idle_ok  # two prefixes: the longer one

    def pick(valid: npt.NDArray[np.bool_]) -> npt.NDArray[np.int64]:
        score = np.where(valid, s, -np.inf)
        score[:, 0] = 1.0
        best: npt.NDArray[np.int64] = np.argmax(score, axis=1)
        return best

    k_all, k_self, k_cons = pick(self_ok & nb_ok), pick(self_ok), pick(self_ok & cons_ok)
    k_e = int(k_all[e_range])
    slack = c.t0 / stretched(c.t0, g_b[-1, 0], nd.u)
    load_e = float((du if cons_ok[e_range, k_e] else du_u)[-1, k_e] + arrival[-1, 0])
    # the placement key: S_real at the budget the conservative scenario allows
    return k_all[:-1], k_self[:-1], float(s[-1, int(k_cons[e_range])]), float(slack), load_e, s[-1]


neighbour = st.tuples(
    st.floats(0.0, 1.0),
    st.one_of(st.none(), st.floats(-0.5, 3.0)),
    st.sampled_from(LOADS),
    st.floats(0.0, 1.0),
    st.one_of(st.none(), st.floats(0.0, 2.0)),  # how far the forecast lowers the margin
).map(lambda nb: (*nb[:4], None if nb[1] is None or nb[4] is None else nb[1] - nb[4]))
node = st.tuples(
    st.integers(0, len(CURVES) - 1),
    st.sampled_from([0.0, 0.03, 0.2]),
    st.sampled_from(LOADS),
    st.lists(neighbour, max_size=3),
)


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    nodes=st.lists(node, min_size=1, max_size=12),
    alpha=st.floats(0.3, 0.95),
    k_max=st.integers(1, 10),
    gain=st.sampled_from([0.0, 0.05, 0.5]),
    safety=st.sampled_from([0.0, 0.1, 0.9]),
    batch=st.sampled_from([1, 8, 300, 5000]),
)
def test_grouped_evaluation_equals_plain_per_node(
    nodes: list[tuple[int, float, float, list[tuple[float, float | None, float, float, float | None]]]],
    alpha: float,
    k_max: int,
    gain: float,
    safety: float,
    batch: int,
) -> None:
    # in decide() c_d is a property of the curve (one accelerator profile); here curve 0 varies it too
    inputs = [
        NodeInput(
            name=f"n{i}",
            curve=CURVES[c],
            c_d=c_d if c == 0 else 0.01 * c,
            u=u,
            neighbours=Neighbours.of([NeighbourInput("ns", f"p{j}", *nb) for j, nb in enumerate(nbs)]),
        )
        for i, (c, c_d, u, nbs) in enumerate(nodes)
    ]
    el = expected_lengths(iid_curve(alpha, k_max))
    ranges = batch_ranges([1, 2, 4, 8, 16, 32, 64, 128, 256], 1024)
    ends = [e for _, e in ranges]
    e_range = 3
    ev = evaluate_nodes(inputs, el, ends, batch, e_range, gain, safety)
    for i, nd in enumerate(inputs):
        k_all, k_self, s_e, slack, du_e, s_by_k = _plain(nd, el, ends, batch, e_range, gain, safety)
        assert ev.k_star[i].tolist() == k_all.tolist()
        assert ev.k_star_self[i].tolist() == k_self.tolist()
        assert ev.speedup_expected[i] == s_e
        assert ev.slack_expected[i] == slack
        assert ev.speedup_by_k[i].tolist() == s_by_k.tolist()
        if nd.neighbours.items:  # the recorded slowdowns, from the same load (arrival and Δu)
            load = ev.load_increase_expected[i] + ev.arrival_expected[i]
            want = neighbour_slowdown(nd.neighbours.sigma, du_e, nd.neighbours.u_total)
            got = neighbour_slowdown(nd.neighbours.sigma, load, nd.neighbours.u_total)
            assert got.tolist() == want.tolist()


def test_schedule_and_config() -> None:
    ranges = batch_ranges([1, 2, 4, 8], 16)
    assert ranges == [(1, 1), (2, 3), (4, 7), (8, 16)]
    assert range_index(ranges, 5) == 2 and range_index(ranges, 100) == 3
    sched = merge_schedule(ranges, [3, 3, 1, 0])
    assert sched == [[1, 3, 3], [4, 7, 1], [8, 16, 0]]
    assert schedule_errors(sched, 3) == []
    assert schedule_errors([[2, 3, 1]], 1) and schedule_errors([[1, 3, 1], [3, 4, 0]], 1)
    assert schedule_errors([[1, 3, 4]], 3)
    assert speculative_config("eagle3", "d", sched) == (
        '{"method":"eagle3","model":"d","num_speculative_tokens":3,'
        '"num_speculative_tokens_per_batch_size":[[1,3,3],[4,7,1],[8,16,0]]}'
    )
    assert '"model"' not in speculative_config("ngram", "ignored", sched)


def test_a_neighbours_margin_must_absorb_our_arrival_as_well_as_our_speculation() -> None:
    """The neighbour's margin was measured before we arrive. One that absorbs our speculation's Δu
    alone but not our plain share on top of it gets no budget when we arrive (admission), and keeps
    the budget when our pods already run there (a re-decision: its TPOT carries our plain load)."""
    curve = CURVES[0]
    el = expected_lengths(iid_curve(0.8, 4))
    ends, batch = [1, 7, 31, 1024], 31  # the expected batch at its range's end: the same Δu
    base = NodeInput(name="n", curve=curve, c_d=0.03, u=0.2)
    alone = evaluate_nodes([base], el, ends, batch, 2, 0.05, 0.1)
    k_alone = int(alone.k_star[0, 2])
    assert k_alone > 0
    g_b = curve.g(np.asarray([float(batch)]))[0]
    arrival = float(arrival_share(curve.t0, g_b, 0.2))
    du = float(alone.load_increase_expected[0])
    sigma, u_nb = 0.5, 0.2
    # margin whose bound sits between Δu and arrival + Δu (safety 0.1, inverse of `neighbour_slowdown`)
    target = du + 0.5 * arrival
    margin = float(neighbour_slowdown(sigma, target, u_nb)) / 0.9
    nb = Neighbours.of([NeighbourInput("ns", "nb", sigma=sigma, margin=margin, u_total=u_nb)])
    node = NodeInput(name="n", curve=curve, c_d=0.03, u=0.2, neighbours=nb)
    arriving = evaluate_nodes([node], el, ends, batch, 2, 0.05, 0.1)
    running = evaluate_nodes([node], el, ends, batch, 2, 0.05, 0.1, arriving=False)
    assert int(arriving.k_star[0, 2]) < k_alone
    assert int(running.k_star[0, 2]) == k_alone
    assert arriving.arrival_expected[0] == pytest.approx(arrival) and running.arrival_expected[0] == 0.0


@pytest.mark.parametrize("memory_j", [0.8, 0.1])
def test_the_bandwidth_we_take_as_we_arrive_must_fit_a_neighbours_margin(memory_j: float) -> None:
    """A neighbour that our compute does not slow (sigma 1) but whose step is `memory_j` weight reads.
    Our plain steps read memory for a share v of their time; with margin set so that 0.8·v is over its
    allowance, a memory-bound neighbour (0.8) leaves us no budget as we arrive, a memory-light one (0.1)
    does, and on a re-decision (our pods run there, its TPOT carries them) both keep the budget."""
    curve = CURVES[0]
    el = expected_lengths(iid_curve(0.8, 4))
    ends, batch = [1, 7, 31, 1024], 31
    alone = evaluate_nodes([NodeInput(name="n", curve=curve, c_d=0.03, u=0.2)], el, ends, batch, 2, 0.05, 0.1)
    k_alone = int(alone.k_star[0, 2])
    assert k_alone > 0
    v = float(slack(curve.t0, curve.g(np.asarray([float(batch)]))[0], 0.2))
    margin = 0.5 * 0.8 * v / 0.9  # half of what a memory-bound neighbour would need (safety 0.1)
    nb = NeighbourInput("ns", "nb", sigma=1.0, margin=margin, u_total=0.2, memory=memory_j)
    node = NodeInput(name="n", curve=curve, c_d=0.03, u=0.2, neighbours=Neighbours.of([nb]))
    arriving = evaluate_nodes([node], el, ends, batch, 2, 0.05, 0.1)
    running = evaluate_nodes([node], el, ends, batch, 2, 0.05, 0.1, arriving=False)
    assert int(arriving.k_star[0, 2]) == (0 if memory_j == 0.8 else k_alone)
    assert int(running.k_star[0, 2]) == k_alone
    assert arriving.memory_expected[0] == pytest.approx(v) and running.memory_expected[0] == 0.0
    assert float(bandwidth_slowdown(memory_j, v)) == pytest.approx(memory_j * v)
