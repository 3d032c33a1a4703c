"""estimate_acceptance with the hand-written Beta quantile (before c2a08b1) against SciPy's, interleaved
on one core (docs/scale.md, session 11).

    .venv/bin/python bench/beta_quantile_ab.py

The old module is read from git (`git show c2a08b1~1:sovereignspec/model/beta.py`), so this runs in a
checkout with history. Prints the largest difference and the CPU per estimate of each arm per round.
"""

from __future__ import annotations

import importlib.util
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

import sovereignspec.model.acceptance as acc  # noqa: E402
from sovereignspec.model.acceptance import BetaPrior  # noqa: E402
from sovereignspec.model.beta import beta_quantile as scipy_quantile  # noqa: E402
from sovereignspec.model.telemetry import AcceptanceSample  # noqa: E402


def old_quantile() -> object:
    text = subprocess.run(
        ["git", "show", "c2a08b1~1:sovereignspec/model/beta.py"], cwd=ROOT, check=True, capture_output=True
    ).stdout
    path = Path(tempfile.mkdtemp()) / "old_beta.py"
    path.write_bytes(text)
    spec = importlib.util.spec_from_file_location("old_beta", path)
    assert spec is not None and spec.loader is not None
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod.beta_quantile


def main() -> int:
    if hasattr(os, "sched_setaffinity"):
        os.sched_setaffinity(0, {min(os.sched_getaffinity(0))})
    old = old_quantile()
    prior = BetaPrior(mean=0.7, strength=20)
    samples = [
        AcceptanceSample(
            target_model="m", draft_model="d", method="eagle3", drafts=1000.0 + 37 * i,
            accepted_per_position=[700.0 + 5 * i, 480.0 + 3 * i, 320.0 + i, 200.0, 120.0],
        )
        for i in range(200)
    ]  # fmt: skip
    worst = 0.0
    for s in samples[:50]:
        acc.beta_quantile = old  # type: ignore[assignment]
        a = acc.estimate_acceptance(prior, s, 8, 0.25)
        acc.beta_quantile = scipy_quantile
        b = acc.estimate_acceptance(prior, s, 8, 0.25)
        worst = max(worst, abs(a.alpha - b.alpha), float(abs(a.p - b.p).max()))
    ms: dict[str, list[float]] = {"hand-written": [], "scipy": []}
    arms = [("hand-written", old), ("scipy", scipy_quantile)]
    for rnd in range(3):
        for name, fn in arms if rnd % 2 == 0 else arms[::-1]:
            acc.beta_quantile = fn  # type: ignore[assignment]
            c = time.thread_time()
            for s in samples:
                acc.estimate_acceptance(prior, s, 8, 0.25)
            ms[name].append((time.thread_time() - c) * 1000 / len(samples))
    acc.beta_quantile = scipy_quantile
    print(f"largest difference in alpha and the acceptance curve: {worst:.2e}")
    for name, v in ms.items():
        print(f"{name:<13} ms CPU per estimate, by round: " + ", ".join(f"{x:.3f}" for x in v))
    print(f"ratio of medians: {statistics.median(ms['hand-written']) / statistics.median(ms['scipy']):.0f}x")
    return 0


if __name__ == "__main__":
    sys.exit(main())
