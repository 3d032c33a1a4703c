"""Neighbour harm after admission, in the simulator (docs/decision.md, "Neighbour harm after admission").

random-002-008 (`python -m sovereignspec.evidence.random_pools OUT --seed 2`, the ninth pool): `s-5`
(44 ms SLO) arrives after `s-2` speculates on its GPU, and its load then grows above its claim; plain it
would run at 0.95-0.99 of its SLO, beside `s-2`'s drafts it breaks it. The drift sweep's neighbour-harm
verdict re-admits `s-2` with the smaller budget. The figures (seeds 1-5 of all 40 pools) are in
docs/decision.md; this keeps the two seeds where the harm is largest.
"""

from __future__ import annotations

import numpy as np
import pytest

from sovereignspec.evidence import policies as pol
from sovereignspec.evidence.metrics import goodput, violations_caused
from sovereignspec.evidence.pools import parse_pool
from sovereignspec.evidence.random_pools import random_pool
from sovereignspec.evidence.scenario import Scenario
from sovereignspec.evidence.sim import simulate
from sovereignspec.evidence.sovereign import SovereignSpec
from sovereignspec.evidence.suite import make_policy


def _random_pool(seed: int, index: int) -> Scenario:
    rng = np.random.default_rng(seed)
    for i in range(index + 1):
        name = f"random-{seed:03d}-{i:03d}"
        doc = random_pool(rng, name)
    return parse_pool(doc, name).scenario()


@pytest.mark.parametrize("seed", [2, 4])
def test_the_harming_engine_is_readmitted_and_the_windows_go(seed: int) -> None:
    sc = _random_pool(2, 8)
    runs = {}
    for name in ("sovereignspec+reconfigureOnNeighbourHarm=false", "sovereignspec"):
        policy = make_policy(name)
        sim = simulate(sc, policy, seed)
        plain = simulate(sc, pol.Replay(sim.placement.max(axis=0)), seed)
        assert isinstance(policy, SovereignSpec)
        runs[name] = (violations_caused(sim, plain).windows, policy.reconfigurations, goodput(sim))
    (w_off, re_off, g_off), (w_on, re_on, g_on) = runs.values()
    assert re_off == 0 and re_on >= 1, runs
    assert w_off >= 5 and w_on <= w_off // 4, runs  # 7 -> 1 and 8 -> 0 when measured
    assert g_on >= g_off, runs  # the neighbour's tokens within SLO outweigh the restart
