"""Per-seed goodput of named policies on pools, and the paired change between two such runs (figures, not
a test). How docs/decision.md measures a rule change: run `dump` in a checkout of the old code and in
one of the new, on the same pools and seeds, then `compare` the two files.

    PYTHONPATH=. .venv/bin/python bench/paired_policies.py dump --pool mixed \
        --pool docs/evidence/pools/heldout-edge.yaml --policy sovereignspec --seeds 10 > new.json
    PYTHONPATH=. .venv/bin/python bench/paired_policies.py compare old.json new.json

`--pool` takes a standard pool's name or a pool file; `--policy` any name `simulate` knows, including
`sovereignspec+KEY=VALUE,...`. `compare` prints, per pool and policy found in both files, the two means,
the paired relative change of the second over the first (mean and 95 % t-interval, as the suite's
`paired` figures) and on how many seeds the two runs differ. One process, no worker pool.
"""

from __future__ import annotations

import argparse
import json
import sys
from typing import Any

from sovereignspec.evidence.metrics import goodput
from sovereignspec.evidence.pools import pool_named
from sovereignspec.evidence.sim import simulate
from sovereignspec.evidence.stats import paired_gain
from sovereignspec.evidence.suite import make_policy


def dump(pools: list[str], policies: list[str], seeds: int) -> dict[str, dict[str, list[float]]]:
    out: dict[str, dict[str, list[float]]] = {}
    for name in pools:
        sc = pool_named(name).scenario()
        out[sc.name] = {
            p: [goodput(simulate(sc, make_policy(p), s)) for s in range(1, seeds + 1)] for p in policies
        }
        print(f"{sc.name}: done", file=sys.stderr, flush=True)
    return out


def compare(before: dict[str, Any], after: dict[str, Any]) -> None:
    for pool, runs in before.items():
        for policy, old in runs.items():
            new = after.get(pool, {}).get(policy)
            if new is None or len(new) != len(old):
                continue
            m, lo, hi = paired_gain(new, old)
            changed = sum(1 for a, b in zip(new, old, strict=True) if abs(a - b) > 1e-6)
            print(
                f"{pool:20s} {policy:36s} {sum(old) / len(old):9.1f} -> {sum(new) / len(new):9.1f}  "
                f"{m * 100:+.2f} % [{lo * 100:+.2f}, {hi * 100:+.2f}]  seeds changed {changed} of {len(old)}"
            )


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    sub = ap.add_subparsers(dest="cmd", required=True)
    d = sub.add_parser("dump", help="per-seed goodput as JSON on stdout")
    d.add_argument("--pool", action="append", required=True, help="standard pool name or pool file")
    d.add_argument("--policy", action="append", required=True)
    d.add_argument("--seeds", type=int, default=10, help="seeds 1..N (default 10)")
    c = sub.add_parser("compare", help="paired change of AFTER over BEFORE")
    c.add_argument("before")
    c.add_argument("after")
    args = ap.parse_args()
    if args.cmd == "dump":
        if args.seeds < 2:
            ap.error("--seeds must be at least 2 (a t-interval needs two)")
        json.dump(dump(args.pool, args.policy, args.seeds), sys.stdout)
        return 0
    with open(args.before) as f, open(args.after) as g:
        compare(json.load(f), json.load(g))
    return 0


if __name__ == "__main__":
    sys.exit(main())
