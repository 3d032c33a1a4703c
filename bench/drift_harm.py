"""Windows caused and goodput with and without re-admission on drift, paired on seeds 1..N (figures, not
a test). Each run's windows are counted as the suite counts them: against a replay of the same placement
with speculation off (`pol.Replay`). Re-admissions are the simulator's count
(`SovereignSpec.reconfigurations`).

    PYTHONPATH=. .venv/bin/python bench/drift_harm.py --seeds 5 --jobs 2 \
        --policy sovereignspec+reconfigureOnNeighbourHarm=false --policy sovereignspec \
        POOL.yaml ... > out.json

Prints one JSON object: {pool: {policy: {"goodput": [...], "windows": [...], "readmissions": [...],
"windowsAtOrAboveFloor": [...]}}} (the last: the windows of engines whose SLO is at least the default
`minTpotSloMs`, the floor every decision reads a lower claim as),
and a summary per policy on stderr (windows in all, runs with a window, max; the paired goodput change
of each policy against the first, mean of the pools' mean changes with a 95 % t-interval over pools).
"""

from __future__ import annotations

import argparse
import json
import sys
from concurrent.futures import ProcessPoolExecutor
from typing import Any

import numpy as np

from sovereignspec.api.speculation_policy import SpeculationPolicySpec
from sovereignspec.evidence import policies as pol
from sovereignspec.evidence.metrics import caused_windows, goodput
from sovereignspec.evidence.pools import pool_named
from sovereignspec.evidence.sim import simulate
from sovereignspec.evidence.stats import mean_ci
from sovereignspec.evidence.suite import make_policy


def _one(args: tuple[str, str, int]) -> tuple[str, str, int, float, int, int, int]:
    pool, name, seed = args
    sc = pool_named(pool).scenario()
    policy = make_policy(name)
    s = simulate(sc, policy, seed)
    plain = simulate(sc, pol.Replay(s.placement.max(axis=0)), seed)
    # The windows of engines whose SLO is at least the policy's minTpotSloMs: a lower claim counts as
    # that floor in every decision (issue 14), so a window against it is not one the policy guards.
    caused = caused_windows(s, plain)
    guarded = int(caused[:, s.slo >= SpeculationPolicySpec().min_tpot_slo_ms / 1000.0].sum())
    readmitted = getattr(policy, "reconfigurations", 0)
    return sc.name, name, seed, goodput(s), int(caused.sum()), readmitted, guarded


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("pools", nargs="+", help="standard pool names or pool files")
    ap.add_argument("--policy", action="append", required=True, help="the first is the reference")
    ap.add_argument("--seeds", type=int, default=5)
    ap.add_argument("--jobs", type=int, default=1)
    a = ap.parse_args()
    jobs = [(p, n, s) for p in a.pools for n in a.policy for s in range(1, a.seeds + 1)]
    out: dict[str, dict[str, dict[str, list[Any]]]] = {}
    with ProcessPoolExecutor(a.jobs) as ex:
        for pool, name, _seed, gp, win, re, guarded in ex.map(_one, jobs, chunksize=2):
            row = out.setdefault(pool, {}).setdefault(
                name, {"goodput": [], "windows": [], "readmissions": [], "windowsAtOrAboveFloor": []}
            )
            row["goodput"].append(gp)
            row["windows"].append(win)
            row["readmissions"].append(re)
            row["windowsAtOrAboveFloor"].append(guarded)
    ref = a.policy[0]
    for name in a.policy:
        wins = [w for p in out.values() for w in p[name]["windows"]]
        above = [w for p in out.values() for w in p[name]["windowsAtOrAboveFloor"]]
        res = sum(r for p in out.values() for r in p[name]["readmissions"])
        gains = [
            float(np.mean(np.array(p[name]["goodput"]) / np.array(p[ref]["goodput"]) - 1.0))
            for p in out.values()
        ]
        m, lo, hi = mean_ci(gains) if len(gains) > 1 else (gains[0], gains[0], gains[0])
        worse = sum(g < -1e-9 for g in gains)
        better = sum(g > 1e-9 for g in gains)
        print(
            f"{name:60s} windows {sum(wins):4d} in {sum(w > 0 for w in wins):3d} of {len(wins)} runs "
            f"(max {max(wins)}; against SLOs at or above minTpotSloMs: {sum(above)}, max {max(above)}); "
            f"re-admissions {res}; goodput vs {ref}: {m * 100:+.2f} % [{lo * 100:+.2f}, {hi * 100:+.2f}] "
            f"({better} pools better, {worse} worse)",
            file=sys.stderr,
        )
    json.dump(out, sys.stdout)
    return 0


if __name__ == "__main__":
    sys.exit(main())
