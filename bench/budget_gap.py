"""Where a policy's budget leaves goodput on its own placement: the policy against the oracle's per-tick
budget on the same placement (`pol.PlacedOracle`, the suite's clairvoyant search when that placement is
the best known), seeds 1..N. Per pool: the gap, mean and 95 % t-interval; per engine: its mean batch, its
mean k under each, and the mean change of its tok/s within SLO (docs/decision.md, "The budget's gap on
our own placement").

    PYTHONPATH=. .venv/bin/python bench/budget_gap.py --seeds 10 --jobs 2 \\
        docs/evidence/pools/heldout-clinic.yaml docs/evidence/pools/heldout-regional.yaml
"""

from __future__ import annotations

import argparse
import sys
from concurrent.futures import ProcessPoolExecutor

import numpy as np
import numpy.typing as npt

from sovereignspec.evidence import policies as pol
from sovereignspec.evidence.metrics import goodput
from sovereignspec.evidence.pools import pool_named
from sovereignspec.evidence.sim import Simulation, simulate
from sovereignspec.evidence.stats import mean_ci
from sovereignspec.evidence.suite import make_policy

FloatArray = npt.NDArray[np.float64]
Seed = tuple[float, FloatArray, FloatArray, FloatArray, FloatArray, FloatArray]


def _per_engine(s: Simulation, horizon_s: float) -> tuple[FloatArray, FloatArray, FloatArray]:
    """Tok/s within SLO, mean k and mean batch over the ticks each engine runs (0 where it never runs)."""
    ok = s.active & (s.tpot <= s.slo[None, :])
    ticks = np.maximum(s.active.sum(axis=0), 1)
    within = (s.tokens * ok).sum(axis=0) / horizon_s
    k = (s.k * s.active).sum(axis=0) / ticks
    batch = (s.batch * s.active).sum(axis=0) / ticks
    return within, k, batch


def _one(args: tuple[str, str, int]) -> Seed:
    pool, name, seed = args
    sc = pool_named(pool).scenario()
    ours = simulate(sc, make_policy(name), seed)
    oracle = simulate(sc, pol.PlacedOracle(ours.placement.max(axis=0)), seed)
    gp_a, k_a, batch = _per_engine(ours, sc.horizon_s)
    gp_b, k_b, _ = _per_engine(oracle, sc.horizon_s)
    return goodput(oracle) / goodput(ours) - 1.0, gp_b - gp_a, k_a, k_b, batch, gp_a


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("pools", nargs="+", help="standard pool names or pool files")
    ap.add_argument("--policy", default="sovereignspec")
    ap.add_argument("--seeds", type=int, default=10)
    ap.add_argument("--jobs", type=int, default=1)
    a = ap.parse_args()
    if a.seeds < 2:
        ap.error("--seeds must be at least 2 (a confidence interval needs two)")
    with ProcessPoolExecutor(a.jobs) as ex:
        for pool in a.pools:
            runs = list(ex.map(_one, [(pool, a.policy, s) for s in range(1, a.seeds + 1)]))
            m, lo, hi = mean_ci([r[0] for r in runs])
            print(f"{pool}: the oracle's budget on {a.policy}'s placement {m * 100:+.2f} % [{lo * 100:+.2f}, "
                  f"{hi * 100:+.2f}] (seeds 1-{a.seeds})")  # fmt: skip
            gain, k_a, k_b, batch, gp_a = (np.stack([r[i] for r in runs]).mean(axis=0) for i in range(1, 6))
            for e, eng in enumerate(pool_named(pool).scenario().engines):
                print(
                    f"  {'subject' if eng.subject else 'backgr.'} {eng.name:16s} batch {batch[e]:6.1f}  "
                    f"k {k_a[e]:4.2f} -> {k_b[e]:4.2f}  tok/s within SLO {gp_a[e]:8.1f} {gain[e]:+8.1f}"
                )
    return 0


if __name__ == "__main__":
    sys.exit(main())
