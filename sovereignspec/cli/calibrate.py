"""`sovereignspec calibrate [--curve KEY] [-o yaml|json] [--measure]`: fit AcceleratorProfiles.

Fits the decision core's step-time curve and draft cost to published speed-up-vs-batch curves (given
the acceptance), reports the MAPE per curve and prints a SpeculationPolicy fragment. `--measure`
profiles vLLM on a local GPU and refuses when none is present.
"""

from __future__ import annotations

import argparse
import json
import sys

NAME = "calibrate"
HELP = "Fit AcceleratorProfile step-time curves to published speed-up curves; report MAPE."


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--curve", action="append", help="published curve key (default: all)")
    parser.add_argument("-o", "--output", choices=["yaml", "json"], default="yaml")
    parser.add_argument("--measure", action="store_true", help="measure vLLM step time on a local GPU")


def run(args: argparse.Namespace) -> int:
    from sovereignspec.evidence.calibration import PUBLISHED, fit, gpu_present

    if args.measure:
        gpu = gpu_present()
        if gpu is None:
            print("calibrate --measure needs an NVIDIA GPU (nvidia-smi found none on this machine); "
                  "nothing measured", file=sys.stderr)  # fmt: skip
            return 2
        print(f"calibrate --measure: GPU {gpu} found, but the vLLM step-time profiler is not part of this "
              "build (no GPU was available to develop it); nothing measured", file=sys.stderr)  # fmt: skip
        return 2
    known = {c.key: c for c in PUBLISHED}
    keys = args.curve or list(known)
    bad = [k for k in keys if k not in known]
    if bad:
        print(f"unknown curve(s) {', '.join(bad)}; known: {', '.join(known)}", file=sys.stderr)
        return 2
    fits = [fit(known[k]) for k in keys]
    report = [{"curve": f.curve.key, "mape": round(f.mape, 4), "observed": list(f.curve.speedups),
               "predicted": list(f.predicted)} for f in fits]  # fmt: skip
    fragment = {
        "apiVersion": "sovereignspec.io/v1alpha1",
        "kind": "SpeculationPolicy",
        "metadata": {"name": "calibrated"},
        "spec": {"acceleratorProfiles": [f.profile().wire() for f in fits]},
    }
    if args.output == "json":
        print(json.dumps({"fits": report, "policy": fragment}, indent=2))
        return 0
    import yaml

    for r in report:
        print(f"# {r['curve']}: MAPE {100 * float(r['mape']):.1f}%")  # type: ignore[arg-type]
    print(yaml.safe_dump(fragment, sort_keys=False, width=110), end="")
    return 0
