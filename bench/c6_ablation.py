"""Claim C6's ablation, paired on seeds 1..N: `sovereignspec` against `sovereignspec-no-neighbour-condition`
(the same snapshot, the neighbour-SLO condition switched off in `Policies`) and against
`sovereignspec-neighbour-blind` (every SLO annotation and engine sample hidden: what C6 compared before).

Only these three policies, on the same `simulate()` runs and the same windows-caused counterfactual
(`pol.Replay` of each run's placement, speculation off) as the suite's `run_pool_seed`; the suite's
`claims` formula for C6 (`suite.claim_c6`). One process, no worker pool.

    PYTHONPATH=. .venv/bin/python bench/c6_ablation.py --seeds 10 [--pool FILE.yaml ...] > c6.json
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from typing import Any

import numpy as np

from sovereignspec.evidence import policies as pol
from sovereignspec.evidence.metrics import windows
from sovereignspec.evidence.pools import STANDARD_POOLS, load_pool, standard_pool
from sovereignspec.evidence.sim import Simulation, simulate
from sovereignspec.evidence.stats import mean_ci, paired_gain
from sovereignspec.evidence.suite import OURS, PoolSeed, _summarise, claim_c6, make_policy

NAMES = (OURS, "sovereignspec-no-neighbour-condition", "sovereignspec-neighbour-blind")


def closest_approach(sim: Simulation) -> float:
    """The highest TPOT / SLO of any 10-s window of an engine that runs plain next to a speculating
    co-located engine (the windows the suite's windows-caused count looks at; 0 when there is none):
    how much of its SLO the others' speculation left a neighbour."""
    tp, own, others = windows(sim)
    near = others & ~own & (tp > 0)
    return float((tp / sim.slo[None, :])[near].max()) if near.any() else 0.0


def run(sc: Any, seed: int) -> tuple[PoolSeed, dict[str, Any]]:
    out = PoolSeed(sc.name, seed)
    plain: dict[bytes, Simulation] = {}
    sims: dict[str, Simulation] = {}
    for name in NAMES:
        s = sims[name] = simulate(sc, make_policy(name), seed)
        key = s.placement.max(axis=0).tobytes()
        if key not in plain:
            plain[key] = simulate(sc, pol.Replay(s.placement.max(axis=0)), seed)
        out.runs[name] = _summarise(s, plain[key])
    ours = sims[OURS]
    diff: dict[str, Any] = {
        n: {
            "placementsDiffer": int(np.sum(ours.placement.max(axis=0) != sims[n].placement.max(axis=0))),
            "subjectsWithOtherK": int(np.sum(ours.k.max(axis=0) != sims[n].k.max(axis=0))),
        }
        for n in NAMES[1:]
    }
    diff["closestApproach"] = {n: round(closest_approach(s), 4) for n, s in sims.items()}
    return out, diff


def ci(values: list[float], nd: int = 4) -> dict[str, Any]:
    m, lo, hi = mean_ci(values)
    return {"mean": round(m, nd), "ci95": [round(lo, nd), round(hi, nd)]}


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--seeds", type=int, default=10)
    ap.add_argument("--pool", action="append", default=[], help="pool files (default: the standard suite)")
    ap.add_argument("--claim-pool", default="stress")
    args = ap.parse_args()
    pools = [load_pool(p) for p in args.pool] if args.pool else [standard_pool(n) for n in STANDARD_POOLS]
    seeds = list(range(1, args.seeds + 1))
    start = time.monotonic()
    results: dict[str, list[PoolSeed]] = {}
    report: dict[str, Any] = {"seeds": seeds, "pools": {}}
    for p in pools:
        sc = p.scenario()
        t0 = time.monotonic()
        done = []
        diffs = []
        for seed in seeds:
            ps, diff = run(sc, seed)
            done.append(ps)
            diffs.append(diff)
            print(f"{sc.name} seed {seed} ({time.monotonic() - t0:.0f} s)", file=sys.stderr, flush=True)
        results[sc.name] = done
        body: dict[str, Any] = {"policies": {}, "paired": {}, "differs": {}, "wallSeconds": 0.0}
        for n in NAMES:
            g = [ps.runs[n].goodput for ps in done]
            w = [ps.runs[n].windows for ps in done]
            body["policies"][n] = {
                "goodput": ci(g, 1),
                "sloWindowsCaused": {"mean": round(float(np.mean(w)), 2), "max": int(max(w)),
                                     "ci95": ci([float(x) for x in w], 2)["ci95"]},
                "neighboursHarmed": {"mean": round(float(np.mean([ps.runs[n].harmed for ps in done])), 2)},
                "perSeed": {"goodput": [round(x, 1) for x in g], "windows": w},
            }  # fmt: skip
            if n != OURS:
                m, lo, hi = paired_gain([ps.runs[OURS].goodput for ps in done], g)
                body["paired"][f"{OURS}-vs-{n}"] = {
                    "meanGain": round(m, 5),
                    "ci95": [round(lo, 5), round(hi, 5)],
                }
                body["differs"][n] = {
                    k: [d[n][k] for d in diffs] for k in ("placementsDiffer", "subjectsWithOtherK")
                }
        body["closestApproach"] = {
            n: {"perSeed": (a := [d["closestApproach"][n] for d in diffs]), "max": max(a)} for n in NAMES
        }
        body["wallSeconds"] = round(time.monotonic() - t0, 1)
        report["pools"][sc.name] = body
    cp = args.claim_pool if args.claim_pool in results else list(results)[-1]
    report["C6"] = claim_c6(results, cp)
    report["C6neighbourBlind"] = claim_c6(results, cp, ablation="sovereignspec-neighbour-blind")
    report["wallSeconds"] = round(time.monotonic() - start, 1)
    print(json.dumps(report, indent=1))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
