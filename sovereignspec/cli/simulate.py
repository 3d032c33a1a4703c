"""`sovereignspec simulate [--suite standard | --pool FILE.yaml ...] --seeds N -o json|table`: the evidence
suite over several seeds.

Runs the multi-tenant GPU simulator (sovereignspec.evidence) under every policy on every pool and seed and
prints one JSON object: `seeds`, `pools` (per policy the mean and 95 % t-interval of goodput, the share of
the per-seed best known goodput, the neighbour SLO windows caused; paired gains of sovereignspec against
every other policy) and `claims` (C1-C6, each {value, pass}). Progress goes to stderr.
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from typing import Any

NAME = "simulate"
HELP = "Run the multi-tenant GPU simulator over several seeds: policies compared, claims C1-C6, plots."


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--suite", choices=["standard"], default="standard",
                        help="the shipped pools mixed, busy and stress (ignored with --pool)")  # fmt: skip
    parser.add_argument(
        "--pool",
        action="append",
        metavar="FILE.yaml",
        default=[],
        help="run this pool file instead of the suite (repeatable; see docs/evidence.md)",
    )
    parser.add_argument("--seeds", type=int, default=10, help="number of seeds (default 10)")
    parser.add_argument("--first-seed", type=int, default=1, help="seeds are FIRST..FIRST+N-1 (default 1)")
    parser.add_argument("--jobs", type=int, default=1, help="worker processes (default 1)")
    parser.add_argument(
        "--policy",
        action="append",
        metavar="NAME",
        default=[],
        help="also run this policy (sovereignspec-throughput, sovereignspec-calibrated, "
        "sovereignspec-neighbour-blind)",
    )
    parser.add_argument("-o", "--output", choices=["json", "table"], default="table")
    parser.add_argument("--plots", metavar="DIR", help="write PNG plots into DIR (needs matplotlib)")
    parser.add_argument("--quiet", action="store_true", help="no progress line on stderr")
    parser.add_argument(
        "--sharing", choices=["mps", "time-slicing"], default="mps",
        help="how co-located engines share a GPU in the ground truth (default: mps, kernels overlap); "
             "a pool file's own `sharing` wins",
    )  # fmt: skip
    parser.add_argument(
        "--timeslice-ms", type=float, default=2.0,
        help="round-robin slice of --sharing time-slicing (nvidia-smi: short 2, medium 10, long 30)",
    )  # fmt: skip


def run(args: argparse.Namespace) -> int:
    try:
        import scipy  # noqa: F401
    except ImportError:
        print(
            "simulate needs the 'evidence' extra (scipy): pip install 'sovereignspec[evidence]'",
            file=sys.stderr,
        )
        return 2
    from sovereignspec.evidence.pools import STANDARD_POOLS, PoolError, load_pool, standard_pool
    from sovereignspec.evidence.scenario import sharing_model
    from sovereignspec.evidence.suite import POLICY_NAMES, acceptance, run_suite

    if not args.timeslice_ms > 0:
        print(f"--timeslice-ms must be > 0, got {args.timeslice_ms}", file=sys.stderr)
        return 2
    if args.seeds < 1 or args.jobs < 1:
        print("--seeds and --jobs must be >= 1", file=sys.stderr)
        return 2
    try:
        pools = [load_pool(p) for p in args.pool] if args.pool else [standard_pool(n) for n in STANDARD_POOLS]
    except PoolError as exc:
        print(str(exc), file=sys.stderr)
        return 2
    names = [p.name for p in pools]
    if len(set(names)) != len(names):
        print(f"pool names repeat: {names}", file=sys.stderr)
        return 2

    def progress(msg: str) -> None:
        if not args.quiet:
            print(f"\r[simulate] {msg:<70}", end="", file=sys.stderr, flush=True)

    seeds = list(range(args.first_seed, args.first_seed + args.seeds))
    start = time.monotonic()
    try:
        with sharing_model(args.sharing, args.timeslice_ms / 1000.0):
            scenarios = [p.scenario() for p in pools]
            run_ = run_suite(scenarios, seeds, names=(*POLICY_NAMES, *args.policy), jobs=args.jobs,
                             progress=progress)  # fmt: skip
    except ValueError as exc:
        print(f"\n{exc}", file=sys.stderr)
        return 2
    result = run_.result
    result["wallSeconds"] = round(time.monotonic() - start, 1)
    result["acceptance"] = acceptance(result)
    if not args.quiet:
        print(file=sys.stderr)
    if args.plots:
        try:
            from sovereignspec.evidence.plots import write_plots
        except ImportError as exc:
            print(f"plots need the 'evidence' extra (matplotlib): {exc}", file=sys.stderr)
            return 1
        result["plots"] = write_plots(run_, args.plots)
    if args.output == "json":
        print(json.dumps(result, indent=2))
        return 0
    print_table(result)
    return 0


def _iv(x: dict[str, Any], fmt: str) -> str:
    lo, hi = x["ci95"]
    return f"{x['mean']:{fmt}} [{lo:{fmt}}, {hi:{fmt}}]"


def print_table(result: dict[str, Any]) -> None:
    print(f"seeds {result['seeds']}")
    for pool, body in result["pools"].items():
        print(f"{pool}: {body['description']}")
        print(f"  {'POLICY':<38}{'GOODPUT mean [95% CI]':>30}{'BEST-KNOWN SHARE':>28}{'WIN max':>8}"
              f"{'SOVEREIGNSPEC GAIN':>28}")  # fmt: skip
        for name, row in body["policies"].items():
            gain = body["paired"].get(f"sovereignspec-vs-{name}")
            g = f"{gain['meanGain']:+.3f} [{gain['ci95'][0]:+.3f}, {gain['ci95'][1]:+.3f}]" if gain else ""
            print(f"  {name:<38}{_iv(row['goodput'], '.0f'):>30}{_iv(row['bestKnownShare'], '.3f'):>28}"
                  f"{row['sloWindowsCaused']['max']:>8}{g:>28}")  # fmt: skip
    for key, c in result["claims"].items():
        print(f"{key} {'PASS' if c['pass'] else 'FAIL'} {json.dumps(c['value'])}  ({c['what']})")
    for pool, a in result.get("acceptance", {}).items():
        failed = [k for k, ok in a["checks"].items() if not ok]
        print(f"acceptance {pool}: {'PASS' if a['pass'] else 'FAIL ' + ', '.join(failed)}")
    if "wallSeconds" in result:
        print(f"wall time {result['wallSeconds']} s")
