"""`sovereignspec run`: the operator process (kopf AdmissionCheck controller)."""

from __future__ import annotations

import argparse

NAME = "run"
HELP = "Run the SovereignSpec Kueue AdmissionCheck controller."


def add_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument("--kubeconfig", help="kubeconfig path (default: $KUBECONFIG, then in-cluster)")
    p.add_argument("--namespace", action="append", dest="namespaces", help="watch only this namespace")
    p.add_argument("--prometheus-url", help="Prometheus base URL; without it speculation stays off")
    p.add_argument("--metrics-port", type=int, help="port of /metrics (0 disables)")
    p.add_argument("--health-port", type=int, help="port of /healthz and /readyz (0 disables)")
    p.add_argument("--bind-address", help="address the metrics and health servers listen on")
    p.add_argument("--log-format", choices=["json", "text"])
    p.add_argument("--log-level", choices=["DEBUG", "INFO", "WARNING", "ERROR"])
    p.add_argument("--identity", help="leader-election identity (default: hostname-pid)")
    p.add_argument(
        "--no-leader-election",
        dest="leader_election",
        action="store_false",
        default=None,
        help="act without holding the Lease (single replica, tests)",
    )
    p.add_argument("--lease-namespace", help="namespace of the leader Lease")


def run(args: argparse.Namespace) -> int:
    import sys

    from pydantic import ValidationError

    from sovereignspec.operator.settings import OperatorSettings

    overrides = {k: v for k, v in vars(args).items() if not k.startswith("_") and k != "command"}
    overrides = {k: v for k, v in overrides.items() if v is not None}
    try:
        settings = OperatorSettings(**overrides)
    except ValidationError as exc:
        print(f"sovereignspec run: invalid settings: {exc}", file=sys.stderr)
        return 2

    from sovereignspec.operator.main import run_operator

    return run_operator(settings)
