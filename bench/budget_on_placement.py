"""What decide()'s budget buys on its own placement: `sovereignspec` against the same placements replayed
with speculation off (the suite's windows counterfactual, `pol.Replay`), seeds 1..N, pool SLO-goodput.
The change is split into the subjects' part and the other engines' part, each relative to the replay's
pool goodput, mean and 95 % t-interval (docs/decision.md, "The budget's model of contention").

    PYTHONPATH=. .venv/bin/python bench/budget_on_placement.py --seeds 10 mixed busy stress \\
        docs/evidence/pools/heldout-edge.yaml
"""

from __future__ import annotations

import argparse
import sys

import numpy as np

from sovereignspec.evidence import policies as pol
from sovereignspec.evidence.pools import pool_named
from sovereignspec.evidence.sim import simulate
from sovereignspec.evidence.stats import mean_ci
from sovereignspec.evidence.suite import make_policy

sys.path.insert(0, __file__.rsplit("/", 1)[0])
from one_subject_speculates import slo_tokens


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("pools", nargs="+", help="standard pool names or pool files")
    ap.add_argument("--seeds", type=int, default=10)
    args = ap.parse_args()

    def ci(v: list[float]) -> str:
        m, lo, hi = mean_ci(v)
        return f"{m * 100:+.2f} % [{lo * 100:+.2f}, {hi * 100:+.2f}]"

    for name in args.pools:
        sc = pool_named(name).scenario()
        subj = np.array([e.subject for e in sc.engines])
        pool, ours, others = [], [], []
        for s in range(1, args.seeds + 1):
            run = simulate(sc, make_policy("sovereignspec"), s)
            a, b = slo_tokens(run), slo_tokens(simulate(sc, pol.Replay(run.placement.max(axis=0)), s))
            base = float(b.sum())
            pool.append(float(a.sum()) / base - 1)
            ours.append(float(a[subj].sum() - b[subj].sum()) / base)
            others.append(float(a[~subj].sum() - b[~subj].sum()) / base)
        print(f"{sc.name:18s} budget's gain {ci(pool)}; subjects' part {ci(ours)}; others' part {ci(others)}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
