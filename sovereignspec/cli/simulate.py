"""`sovereignspec simulate --suite standard -o json|table [--plots DIR] [--seed N]`: the evidence suite.

Runs the multi-tenant GPU simulator (sovereignspec.evidence) under every policy and prints one JSON
object with `policies`, `claims` (C1-C6, each {value, pass}) and `goals`. Progress goes to stderr.
"""

from __future__ import annotations

import argparse
import json
import sys

NAME = "simulate"
HELP = "Run the multi-tenant GPU simulator: policies compared, the paper's claims C1-C6, plots."


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--suite", choices=["standard"], default="standard")
    parser.add_argument("--seed", type=int, default=7)
    parser.add_argument("-o", "--output", choices=["json", "table"], default="table")
    parser.add_argument("--plots", metavar="DIR", help="write PNG plots into DIR (needs matplotlib)")
    parser.add_argument("--quiet", action="store_true", help="no progress line on stderr")
    parser.add_argument(
        "--sharing", choices=["mps", "time-slicing"], default="mps",
        help="how co-located engines share a GPU in the ground truth (default: mps, kernels overlap)",
    )  # fmt: skip
    parser.add_argument(
        "--timeslice-ms", type=float, default=2.0,
        help="round-robin slice of --sharing time-slicing (nvidia-smi: short 2, medium 10, long 30)",
    )  # fmt: skip


def run(args: argparse.Namespace) -> int:
    from sovereignspec.evidence.scenario import sharing_model
    from sovereignspec.evidence.suite import run_standard

    if not args.timeslice_ms > 0:
        print(f"--timeslice-ms must be > 0, got {args.timeslice_ms}", file=sys.stderr)
        return 2

    def progress(msg: str) -> None:
        if not args.quiet:
            print(f"\r[simulate] {msg:<60}", end="", file=sys.stderr, flush=True)

    with sharing_model(args.sharing, args.timeslice_ms / 1000.0):
        result, raw = run_standard(seed=args.seed, progress=progress)
    if not args.quiet:
        print(file=sys.stderr)
    if args.plots:
        try:
            from sovereignspec.evidence.plots import write_plots
        except ImportError as exc:
            print(f"plots need the 'evidence' extra (matplotlib): {exc}", file=sys.stderr)
            return 1
        result["plots"] = write_plots(raw, args.plots)
    if args.output == "json":
        print(json.dumps(result, indent=2))
        return 0
    for scen, body in result["scenarios"].items():
        print(f"{scen}: {body['description']}")
        print(f"  {'POLICY':<32}{'GOODPUT':>10}{'TPOT50ms':>10}{'TPOT99ms':>10}{'VIOL':>6}{'GPUs/1k':>9}")
        for name, row in {**body["policies"], **body["variants"]}.items():
            print(f"  {name:<32}{row['goodput']:>10.0f}{row['tpotP50']:>10.2f}{row['tpotP99']:>10.2f}"
                  f"{row['sloViolationsCaused']:>6}{row['gpuSecondsPer1kTokens']:>9.4f}")  # fmt: skip
    for key, c in result["claims"].items():
        print(f"{key} {'PASS' if c['pass'] else 'FAIL'} {json.dumps(c['value'])}  ({c['what']})")
    print("goals", json.dumps(result["goals"]))
    print("goals with calibrated profiles", json.dumps(result["goalsCalibrated"]))
    print("goals with placement Throughput", json.dumps(result["goalsThroughput"]))
    print("goals with calibrated profiles and placement Throughput",
          json.dumps(result["goalsCalibratedThroughput"]))  # fmt: skip
    return 0
