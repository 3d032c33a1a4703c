"""CPU per telemetry refresh, before and after issue 18's incremental refresh, side by side.

    .venv/bin/python bench/telemetry_refresh_ab.py [--sizes 500,4000] [--reps 12] [--variants 3]
        [--heap 0]

Both readers refresh against the same recorded answers (`tests/telemetry/prom_answers.py`, the scale
bench's shape: one engine per four GPUs), served by `bench/prom_replay.py` in another process as
Prometheus would (gzip when asked). Every refresh sees the next of `--variants` answer sets, whose
values all move (1: nothing moves between refreshes). The two paths alternate, which goes first too,
and each refresh is timed with `time.process_time()` of this process (all the reader's threads: HTTP,
JSON, validation, assembly, the collector) plus the join into the snapshot, `--block` refreshes in a
row per timing (the collector's work lands in some block of its path). `--heap N` keeps
N long-lived containers, as the operator's indexes do, so that the collector's cost of each path's
allocations shows. After the timing, both readers' readings are checked equal.

*before* = `tests/telemetry/reference_reader.py` (main at 9ee1081: `.content` with gzip, the old
assembly); *after* = `sovereignspec.telemetry.reader.PrometheusReader`.
"""

from __future__ import annotations

import argparse
import gc
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

from sovereignspec.api.telemetry_spec import TelemetrySpec  # noqa: E402
from sovereignspec.telemetry.join import build_snapshot  # noqa: E402
from sovereignspec.telemetry.reader import PrometheusReader  # noqa: E402
from tests.telemetry.prom_answers import NOW, answers  # noqa: E402
from tests.telemetry.promproc import free_port  # noqa: E402
from tests.telemetry.reference_reader import ReferenceReader  # noqa: E402


def record(root: Path, gpus: int, variants: int, spec: TelemetrySpec) -> None:
    queries = PrometheusReader("http://unused", spec).queries
    (root / "queries.json").write_text(json.dumps({promql: q.value for q, promql in queries.items()}))
    for v in range(variants):
        d = root / f"{v:02d}"
        d.mkdir()
        for q, body in answers(gpus, gpus // 4, seed=v + 1).items():
            (d / f"{q.value}.json").write_bytes(body)


def cpu_ms(reader: PrometheusReader, block: int) -> float:
    """CPU per refresh over `block` refreshes in a row, the collector left to run as it would: what
    one refresh leaves for it is paid within the block, or by the other path's next block."""
    c0 = time.process_time()
    for _ in range(block):
        reading = reader.refresh()
        build_snapshot(reading, {})
    return (time.process_time() - c0) * 1000 / block


def run(gpus: int, reps: int, variants: int, block: int) -> tuple[list[float], list[float], bool]:
    spec = TelemetrySpec(window="1m", query_timeout_seconds=30, cache_ttl_seconds=0, staleness_seconds=120)
    with tempfile.TemporaryDirectory(prefix="sovspec-ab-") as tmp:
        record(Path(tmp), gpus, variants, spec)
        port = free_port()
        server = subprocess.Popen([sys.executable, str(ROOT / "bench" / "prom_replay.py"), tmp, str(port)])
        try:
            url = f"http://127.0.0.1:{port}"
            for _ in range(100):
                try:
                    urllib.request.urlopen(f"{url}/ready/api/v1/query?query=x", timeout=1)
                except urllib.error.HTTPError:
                    break  # answering (an unknown query is a 404)
                except OSError:
                    time.sleep(0.1)
            clock = lambda: NOW + 1.0  # noqa: E731 (the answers' time)
            before = ReferenceReader(f"{url}/before", spec, clock=clock)
            after = PrometheusReader(f"{url}/after", spec, clock=clock)
            for _ in range(2):  # warm-up: connections, caches, the first reading's carry
                before.refresh()
                after.refresh()
            t_before: list[float] = []
            t_after: list[float] = []
            for i in range(reps):
                if i % 2 == 0:
                    t_before.append(cpu_ms(before, block))
                    t_after.append(cpu_ms(after, block))
                else:
                    t_after.append(cpu_ms(after, block))
                    t_before.append(cpu_ms(before, block))
            a, b = after.refresh(), before.refresh()  # the same turn of the same answers
            parts = (a.gpus, a.engines, a.pod_acceptance, a.gaps, a.newest_sample)
            same = parts == (b.gpus, b.engines, b.pod_acceptance, b.gaps, b.newest_sample)
            return t_before, t_after, same and len(a.gpus) == gpus
        finally:
            server.terminate()
            server.wait(timeout=10)


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--sizes", default="500,4000", help="GPUs, comma-separated (engines: a quarter)")
    ap.add_argument("--reps", type=int, default=12)
    ap.add_argument("--variants", type=int, default=3)
    ap.add_argument("--block", type=int, default=3, help="refreshes in a row per timing")
    ap.add_argument("--heap", type=int, default=0, help="long-lived containers held meanwhile")
    args = ap.parse_args()
    held = [[i] for i in range(args.heap)]  # noqa: F841 (held for the collector to walk)
    gc.collect()
    print(f"reps {args.reps} x {args.block} refreshes per path, variants {args.variants}, heap {args.heap:,}")
    for gpus in (int(s) for s in args.sizes.split(",")):
        t_before, t_after, same = run(gpus, args.reps, args.variants, args.block)
        ratios = sorted(b / a for b, a in zip(t_before, t_after, strict=True))
        mb, ma = statistics.median(t_before), statistics.median(t_after)
        print(
            f"{gpus:5d} GPUs, {gpus // 4:4d} engines: CPU ms per refresh"
            f" before p50 {mb:6.1f} [{min(t_before):.1f}-{max(t_before):.1f}],"
            f" after p50 {ma:6.1f} [{min(t_after):.1f}-{max(t_after):.1f}];"
            f" before/after {mb / ma:.2f} (per pair {ratios[0]:.2f}-{ratios[-1]:.2f},"
            f" p50 {statistics.median(ratios):.2f}); readings equal: {same}",
            flush=True,
        )
    return 0


if __name__ == "__main__":
    sys.exit(main())
