"""Refresh cost of the Prometheus reader at cluster scale, on the simulator and a real Prometheus.

    .venv/bin/python bench/telemetry_bench.py [--gpus 500] [--pods 2000] [--refreshes 10]

Starts `sovereignspec telemetry-sim` (subprocess) with a generated scenario, a Debian `prometheus`
scraping it, waits for a full window of data, then times uncached refreshes and prints figures.
"""

from __future__ import annotations

import argparse
import json
import statistics
import subprocess
import sys
import tempfile
import time
import urllib.request
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

import yaml  # noqa: E402

from sovereignspec.api.telemetry_spec import TelemetrySpec  # noqa: E402
from sovereignspec.telemetry.annotations import identities_from_pods  # noqa: E402
from sovereignspec.telemetry.join import build_snapshot  # noqa: E402
from sovereignspec.telemetry.reader import PrometheusReader  # noqa: E402
from tests.telemetry.promproc import PrometheusProcess, free_port  # noqa: E402

PRODUCTS = ["NVIDIA-H100-80GB-HBM3", "NVIDIA-A100-SXM4-80GB", "NVIDIA-L40S", "NVIDIA-H200"]


def scenario(gpus: int, pods: int, tick: float) -> dict[str, object]:
    """8-GPU nodes, time-sliced so that `pods` fit; every other pod speculates (k = 2..5)."""
    per_node = 8
    n_nodes = -(-gpus // per_node)
    replicas = max(1, -(-pods // gpus))
    nodes = []
    for i in range(n_nodes):
        count = min(per_node, gpus - i * per_node)
        nodes.append(
            {"name": f"gpu-{i:03d}", "product": PRODUCTS[i % len(PRODUCTS)], "gpus": count,
             "baseLoad": round(0.05 * (i % 10), 2), "timeSlicingReplicas": replicas,
             "hostnameLabel": "Hostname" if i % 2 else "hostname"}
        )  # fmt: skip
    slots = [(n["name"], s) for n in nodes for s in range(int(n["gpus"]) * replicas)]  # type: ignore[call-overload]
    out_pods = []
    for j in range(pods):
        node = slots[j % len(slots)][0]
        ann = {"sovereignspec.io/target-model": "meta-llama/Llama-3.1-8B-Instruct"}
        if j % 2 == 0:
            k = 2 + j % 4
            ann |= {
                "sovereignspec.io/draft-model": f"eagle3-{j % 3}",
                "sovereignspec.io/spec-method": "eagle3",
                "sovereignspec.io/speculative-config": json.dumps(
                    {"method": "eagle3", "model": f"eagle3-{j % 3}", "num_speculative_tokens": k}
                ),
            }
        out_pods.append(
            {"namespace": f"tenant-{j % 20}", "name": f"llm-{j:04d}", "node": node,
             "requestRate": 0.5 + (j % 7) * 0.5, "annotations": ann}
        )  # fmt: skip
    return {"seed": 1, "tickSeconds": tick, "noise": 0.01, "nodes": nodes, "pods": out_pods}


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--gpus", type=int, default=500)
    ap.add_argument("--pods", type=int, default=2000)
    ap.add_argument("--refreshes", type=int, default=10)
    ap.add_argument("--scrape-interval", type=float, default=5.0)
    ap.add_argument("--window", default="1m")
    args = ap.parse_args()

    tmp = Path(tempfile.mkdtemp(prefix="sovspec-bench-"))
    sc = scenario(args.gpus, args.pods, tick=args.scrape_interval / 2)
    (tmp / "scenario.yaml").write_text(yaml.safe_dump(sc))
    port = free_port()
    sim = subprocess.Popen(
        [sys.executable, "-m", "sovereignspec", "telemetry-sim", "-f", str(tmp / "scenario.yaml"),
         "--port", str(port), "--log-level", "WARNING"],
        cwd=ROOT, stdout=subprocess.DEVNULL, stderr=subprocess.STDOUT,
    )  # fmt: skip
    prom = None
    try:
        deadline = time.monotonic() + 60
        body = b""
        while time.monotonic() < deadline:
            try:
                t0 = time.monotonic()
                body = urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=30).read()
                expo = time.monotonic() - t0
                break
            except OSError:
                time.sleep(0.5)
        lines = sum(1 for ln in body.splitlines() if ln and not ln.startswith(b"#"))
        print(f"simulator: {args.gpus} GPUs, {args.pods} pods, {lines} samples, {len(body) / 1e6:.1f} MB, "
              f"exposition {expo * 1000:.0f} ms")  # fmt: skip

        prom = PrometheusProcess([f"127.0.0.1:{port}"], scrape_interval=args.scrape_interval).start()
        window_s = int(args.window[:-1]) * {"s": 1, "m": 60, "h": 3600}[args.window[-1]]
        print(f"waiting {window_s}s for a full {args.window} window of scrapes ...", flush=True)
        prom.wait_for("up == 1", timeout=60)
        time.sleep(window_s + 2 * args.scrape_interval)
        scrape = prom.query("scrape_duration_seconds")[0]["value"][1]
        series = prom.query("scrape_samples_scraped")[0]["value"][1]
        print(f"prometheus: scrape every {args.scrape_interval:g}s, {series} samples/scrape, "
              f"last scrape {float(scrape) * 1000:.0f} ms")  # fmt: skip

        spec = TelemetrySpec(
            window=args.window, query_timeout_seconds=30, cache_ttl_seconds=0, staleness_seconds=120
        )
        reader = PrometheusReader(prom.url, spec)
        pods = [
            {"metadata": {"namespace": p["namespace"], "name": p["name"], "annotations": p["annotations"]}}
            for p in sc["pods"]  # type: ignore[attr-defined]
        ]
        ids = identities_from_pods(pods)
        times, joins, cpus = [], [], []
        reading = reader.refresh()  # warm-up (connection setup, Prometheus caches)
        for _ in range(args.refreshes):
            c0 = time.process_time()  # this process only: the simulator and Prometheus are children
            reading = reader.refresh()
            cpus.append(time.process_time() - c0)
            times.append(reading.seconds)
            t0 = time.monotonic()
            snap = build_snapshot(reading, ids)
            joins.append(time.monotonic() - t0)
        print(f"queries per refresh: {reading.queries} (fixed; independent of workloads)")
        p50, worst = statistics.median(times) * 1000, max(times) * 1000
        print(f"refresh latency (all queries in parallel, uncached): p50 {p50:.0f} ms, "
              f"max {worst:.0f} ms over {len(times)} refreshes")  # fmt: skip
        print(f"refresh CPU in the reader's process (all its threads: HTTP, JSON, parse, assemble): "
              f"p50 {statistics.median(cpus) * 1000:.0f} ms")  # fmt: skip
        print(f"join + snapshot build: p50 {statistics.median(joins) * 1000:.0f} ms")
        print(f"snapshot: {len(snap.gpus)} GPUs, {len(snap.engines)} engines, "
              f"{len(snap.acceptance)} acceptance pairs, {len(snap.missing)} gaps")  # fmt: skip
        codes: dict[str, int] = {}
        for g in snap.missing:
            codes[f"{g.source}:{g.reason.split(':')[0]}"] = (
                codes.get(f"{g.source}:{g.reason.split(':')[0]}", 0) + 1
            )
        if codes:
            print(f"gaps by source:reason: {codes}")
        # Per-query latency, sequential, for the record.
        for name, promql in reader.queries.items():
            t0 = time.monotonic()
            n = len(prom.query(promql))
            print(f"  {name.value:28s} {(time.monotonic() - t0) * 1000:6.0f} ms  {n:6d} series")
        return 0
    finally:
        if prom is not None:
            prom.cleanup()
        sim.terminate()
        sim.wait(timeout=10)


if __name__ == "__main__":
    sys.exit(main())
