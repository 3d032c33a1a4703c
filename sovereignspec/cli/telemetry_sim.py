"""`sovereignspec telemetry-sim`: dcgm-exporter- and vLLM-shaped metrics for GPU nodes that don't exist."""

from __future__ import annotations

import argparse
import json
import logging
import os
import signal
import sys
import tempfile
import threading
from pathlib import Path

NAME = "telemetry-sim"
HELP = "Serve simulated dcgm-exporter and vLLM metrics (from a scenario file or the API server's pods)."


def add_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument(
        "-f", "--scenario", help="scenario YAML (nodes, pods, load knobs); optional with --kubeconfig"
    )
    p.add_argument("--kubeconfig", help="watch this cluster's GPU nodes and pods instead of the scenario's")
    p.add_argument("--context", help="kubeconfig context")
    p.add_argument("--host", default="127.0.0.1", help="listen address (loopback by default)")
    p.add_argument("--port", type=int, default=9400, help="listen port (0 = any free port)")
    p.add_argument("--seed", type=int, help="override the scenario's seed")
    p.add_argument("--tick", type=float, help="override the scenario's tick (simulated seconds per tick)")
    p.add_argument("--file-sd", help="write a Prometheus file_sd JSON target for this simulator here")
    p.add_argument("--log-level", default="INFO")


def _write_file_sd(path: str, port: int) -> None:
    target = [{"targets": [f"127.0.0.1:{port}"], "labels": {"job": "telemetry-sim"}}]
    d = Path(path).resolve().parent
    d.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(dir=d, prefix=".sim-", suffix=".json")
    with os.fdopen(fd, "w") as f:
        json.dump(target, f)
    os.replace(tmp, path)  # Prometheus must never read a half-written file


def run(args: argparse.Namespace) -> int:
    from sovereignspec.telemetry.sim.scenario import Scenario, ScenarioError, load_scenario
    from sovereignspec.telemetry.sim.server import SimServer
    from sovereignspec.telemetry.sim.simulator import Simulator

    logging.basicConfig(level=args.log_level.upper(), format="%(asctime)s %(levelname)s %(name)s %(message)s")
    if not args.scenario and not args.kubeconfig:
        print("telemetry-sim: give --scenario, --kubeconfig, or both", file=sys.stderr)
        return 2
    try:
        scenario = load_scenario(args.scenario) if args.scenario else Scenario()
    except ScenarioError as exc:
        print(f"telemetry-sim: {exc}", file=sys.stderr)
        return 2
    updates: dict[str, object] = {}
    if args.seed is not None:
        updates["seed"] = args.seed
    if args.tick is not None:
        updates["tick_seconds"] = args.tick
    if args.kubeconfig:
        updates |= {"nodes": [], "pods": []} if not args.scenario else {"pods": []}
    scenario = scenario.model_copy(update=updates)

    # Before anything serves: a SIGTERM that arrives while the server starts still stops it cleanly.
    stop = threading.Event()
    for sig in (signal.SIGINT, signal.SIGTERM):
        signal.signal(sig, lambda *_: stop.set())
    sim = Simulator(scenario)
    source = None
    if args.kubeconfig:
        from sovereignspec.telemetry.sim.kube import KubeSource

        sim.set_nodes([])  # the API server decides which GPU nodes exist
        try:
            source = KubeSource(sim, args.kubeconfig, args.context).start()
        except Exception as exc:
            print(f"telemetry-sim: cannot read the cluster: {exc}", file=sys.stderr)
            return 1
    sim.tick()  # the first scrape already sees every series
    try:
        server = SimServer(sim, host=args.host, port=args.port).start()
    except OSError as exc:
        print(f"telemetry-sim: cannot listen on {args.host}:{args.port}: {exc}", file=sys.stderr)
        return 1
    if args.file_sd:
        _write_file_sd(args.file_sd, server.port)
    print(f"serving {server.url}", flush=True)
    stop.wait()
    server.stop()
    if source is not None:
        source.stop()
    return 0
