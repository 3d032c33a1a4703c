"""What any per-subject schedule could gain over plain decoding on a pool: each subject in turn speculates
at a fixed k while every other subject decodes plain, on the baselines' placement (LeastAllocated, as the
static schedule and the best fixed k of claim C5 use). Prints, per subject, the change of its own tokens
within SLO and of the pool's SLO-goodput (every engine counted), mean and 95 % t-interval over seeds 1..N.

Claim C5 asks decide()'s schedule to beat the static schedule on the stress pool; where no subject's
speculation raises the pool's goodput, no schedule can (docs/evidence.md, "Claims"). Figures, not a test.

    PYTHONPATH=. .venv/bin/python bench/one_subject_speculates.py --pool stress --seeds 10 [--k 1]
"""

from __future__ import annotations

import argparse
import sys

import numpy as np

from sovereignspec.evidence import policies as pol
from sovereignspec.evidence.pools import pool_named
from sovereignspec.evidence.sim import FloatArray, Simulation, simulate
from sovereignspec.evidence.stats import mean_ci


class OneSubject(pol.Scheduled):
    """LeastAllocated placement; subject `only` speculates at k, every other engine runs plain."""

    def __init__(self, only: int, k: int) -> None:
        super().__init__(f"only-{only}-k{k}", None)
        self.only, self.k = only, k

    def admit(self, sim: Simulation, e: int) -> int | None:
        sim.schedule[e] = [[1, 1024, self.k]] if e == self.only else None
        return pol.spread_place(sim, e)


def slo_tokens(sim: Simulation) -> FloatArray:
    """Tokens per second within SLO, per engine (the suite's goodput, not summed)."""
    ok = sim.active & (sim.tpot <= sim.slo[None, :])
    out: FloatArray = (sim.tokens * ok).sum(axis=0) / sim.sc.horizon_s
    return out


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--pool", default="stress", help="standard pool name or pool file")
    ap.add_argument("--seeds", type=int, default=10)
    ap.add_argument("--k", type=int, default=1)
    args = ap.parse_args()
    sc = pool_named(args.pool).scenario()
    seeds = range(1, args.seeds + 1)
    plain = {s: slo_tokens(simulate(sc, pol.off(), s)) for s in seeds}
    print(f"{sc.name}: each subject alone at k={args.k}, others plain; seeds 1-{args.seeds}; mean [95 % CI]")
    best = 0.0
    for e, spec in enumerate(sc.engines):
        if not spec.subject:
            continue
        own, pool = [], []
        for s in seeds:
            one = slo_tokens(simulate(sc, OneSubject(e, args.k), s))
            own.append(float(one[e] / plain[s][e] - 1) if plain[s][e] > 0 else float("nan"))
            pool.append(float(one.sum() / plain[s].sum() - 1))
        o, p = mean_ci([x for x in own if np.isfinite(x)]), mean_ci(pool)
        best += max(p[0], 0.0)
        print(
            f"  {spec.name:14s} own {o[0] * 100:+7.2f} % [{o[1] * 100:+.2f}, {o[2] * 100:+.2f}]   "
            f"pool {p[0] * 100:+6.2f} % [{p[1] * 100:+.2f}, {p[2] * 100:+.2f}]",
            flush=True,
        )
    print(
        f"  sum of the positive pool means (a bound on any per-subject schedule's gain, to first order): "
        f"{best * 100:+.3f} %"
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())
