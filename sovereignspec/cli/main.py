"""`sovereignspec` console script: one sub-command per module listed in COMMANDS."""

from __future__ import annotations

import argparse
import importlib
import sys
from collections.abc import Sequence
from types import ModuleType

from sovereignspec import __version__

# Each module defines NAME, HELP, add_arguments(parser) and run(args) -> int.
# Modules keep heavy imports (kopf, kubernetes) inside run() so that --help stays fast.
COMMANDS: list[str] = [
    "sovereignspec.cli.telemetry_sim",
    "sovereignspec.cli.decide",
    "sovereignspec.cli.run",
    "sovereignspec.cli.explain",
    "sovereignspec.cli.simulate",
    "sovereignspec.cli.calibrate",
]


def _load(name: str) -> ModuleType:
    return importlib.import_module(name)


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="sovereignspec",
        description="Scheduler-side speculative-decoding and sovereign placement for Kueue workloads.",
    )
    parser.add_argument("--version", action="version", version=f"sovereignspec {__version__}")
    sub = parser.add_subparsers(dest="command", metavar="COMMAND")
    for modname in COMMANDS:
        mod = _load(modname)
        p = sub.add_parser(mod.NAME, help=mod.HELP, description=mod.HELP)
        mod.add_arguments(p)
        p.set_defaults(_run=mod.run)
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    parser = build_parser()
    args = parser.parse_args(argv)
    run = getattr(args, "_run", None)
    if run is None:
        parser.print_help()
        return 2
    try:
        return int(run(args))
    except KeyboardInterrupt:
        print("interrupted", file=sys.stderr)
        return 130


if __name__ == "__main__":
    sys.exit(main())
