"""Random pool files, to judge a rule change on pools nobody has looked at.

    python -m sovereignspec.evidence.random_pools OUT_DIR [--count N] [--seed S]

Writes OUT_DIR/random-SSS-NNN.yaml, each a valid pool (`sovereignspec simulate --pool`): a site of 4-7
nodes drawn from the simulator's GPU types (counts, engines per GPU and an occasional node in another
jurisdiction drawn too), 3-7 background engines with sinusoidal or stepped load, and 5-9 subjects
arriving over the first 150 s with drawn classes, SLOs, batches, claims and drafts. The ranges are the
held-out pools' (docs/evidence/pools), written before any policy ran on a drawn pool; the draws depend
on --seed only, so a set of pools is named by its seed and count.
"""

from __future__ import annotations

import argparse
from pathlib import Path
from typing import Any

import numpy as np
import yaml

from sovereignspec.evidence.pools import parse_pool

# GPU type -> (a background engine's batch range, a subject's batch range): what one engine of that
# card serves in the held-out pools.
BATCHES: dict[str, tuple[tuple[int, int], tuple[int, int]]] = {
    "a100": ((8, 64), (2, 48)),
    "h100": ((10, 96), (2, 72)),
    "h200": ((12, 128), (2, 96)),
    "rtx4090": ((2, 8), (1, 12)),
}


def _load(rng: np.random.Generator, batch: float, horizon: float) -> dict[str, Any]:
    if rng.random() < 0.25:  # a stepped trace
        points = [[0.0, round(batch, 1)]]
        for t in sorted(rng.uniform(0.2, 0.9, size=2) * horizon):
            points.append([round(float(t)), round(float(max(1.0, batch * rng.uniform(0.4, 2.0))), 1)])
        points.append([horizon, round(float(max(1.0, batch * rng.uniform(0.4, 2.0))), 1)])
        return {"trace": points}
    out: dict[str, Any] = {"batch": round(batch, 1), "amplitude": round(float(rng.uniform(0.0, 0.5)), 2)}
    if rng.random() < 0.5:
        out["periodS"] = int(rng.choice([120, 150, 180, 200, 240, 300]))
    return out


def _draft(rng: np.random.Generator) -> dict[str, Any]:
    roll = rng.random()
    if roll < 0.35:
        return {"preset": "good"}
    if roll < 0.5:
        return {"preset": "weak"}
    return {"a0": round(float(rng.uniform(0.6, 0.88)), 2), "decay": round(float(rng.uniform(0.9, 0.97)), 2)}


def random_pool(rng: np.random.Generator, name: str, gap: float = 15.0) -> dict[str, Any]:
    """One pool document (validated by the caller); subjects arrive about `gap` seconds apart (the same
    draws for every gap: only the arrival times scale)."""
    horizon = int(rng.choice([420, 450, 480, 540, 600]))
    kinds = list(BATCHES)
    nodes: list[dict[str, Any]] = []
    for i in range(int(rng.integers(4, 8))):
        gpu = str(rng.choice(kinds, p=[0.3, 0.3, 0.2, 0.2]))
        node: dict[str, Any] = {"name": f"n{i}-{gpu}", "gpu": gpu, "count": int(rng.integers(1, 4))}
        if gpu != "rtx4090" and rng.random() < 0.3:
            node["replicas"] = int(rng.choice([1, 3, 4]))
        nodes.append(node)
    if rng.random() < 0.5:  # a node only one tenant may use
        nodes.append({"name": "abroad", "gpu": str(rng.choice(kinds[:3])), "count": 1, "jurisdiction": "JP"})
    slots = [(n, g) for n in nodes for g in range(n["count"])]
    background = []
    n_background = min(len(slots), int(rng.integers(3, 8)))
    for j, pick in enumerate(rng.choice(len(slots), size=n_background, replace=False)):
        node, g = slots[int(pick)]
        lo, hi = BATCHES[node["gpu"]][0]
        engine: dict[str, Any] = {
            "name": f"bg-{j}",
            "tenant": "jp" if node.get("jurisdiction") == "JP" else str(rng.choice(["web", "ops"])),
            "node": node["name"],
            "gpuIndex": g,
            "sloMs": int(rng.choice([40, 50, 60, 70, 80, 120, 200, 300])),
            "load": _load(rng, float(rng.integers(lo, hi + 1)), horizon),
        }
        if rng.random() < 0.3:
            engine["ctx"] = int(rng.choice([2000, 2500, 3000, 4000]))
            engine["prefillRatio"] = float(rng.choice([2.0, 3.0, 4.0, 5.0]))
        background.append(engine)
    subjects = []
    fast = [n["gpu"] for n in nodes if n["gpu"] != "rtx4090"] or ["rtx4090"]
    for s in range(int(rng.integers(5, 10))):
        batch_class = "batch" if rng.random() < 0.2 else "interactive"
        lo, hi = BATCHES[str(rng.choice(fast))][1]
        batch = int(rng.integers(lo, hi + 1)) if batch_class == "interactive" else int(rng.integers(32, 129))
        subject: dict[str, Any] = {
            "name": f"s-{s}",
            "tenant": str(rng.choice(["team-a", "team-b", "media"])),
            "arrivalS": int(10 + (15 * s + rng.integers(0, 10)) * gap / 15.0),
            "sloMs": int(rng.choice([250, 300])) if batch_class == "batch" else int(rng.integers(40, 101)),
            "load": _load(rng, float(batch), horizon),
        }
        if batch_class == "batch":
            subject["class"] = "batch"
        if rng.random() < 0.85:
            subject["expectedBatch"] = batch
        if rng.random() < 0.92:
            subject["draft"] = _draft(rng)
        if rng.random() < 0.3:
            subject["k"] = int(rng.integers(2, 9))
        subjects.append(subject)
    return {
        "name": name,
        "description": "drawn by sovereignspec.evidence.random_pools",
        "horizonS": horizon,
        "jurisdictions": {"team-a": ["KR"], "team-b": ["KR"], "media": ["KR", "JP"]},
        "nodes": nodes,
        "background": background,
        "subjects": subjects,
    }


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("out", type=Path)
    ap.add_argument("--count", type=int, default=40)
    ap.add_argument("--seed", type=int, default=1)
    ap.add_argument(
        "--arrival-gap",
        type=float,
        default=15.0,
        help="seconds between subjects' arrivals (15; a burst, e.g. a rollout: 2); names get -gN when not 15",
    )
    args = ap.parse_args()
    if not 0 < args.arrival_gap <= 60:
        ap.error("--arrival-gap must be in (0, 60]")
    tag = "" if args.arrival_gap == 15.0 else f"-g{args.arrival_gap:g}"
    args.out.mkdir(parents=True, exist_ok=True)
    rng = np.random.default_rng(args.seed)
    for i in range(args.count):
        name = f"random-{args.seed:03d}{tag}-{i:03d}"
        doc = random_pool(rng, name, args.arrival_gap)
        parse_pool(doc, name)  # the schema's errors, one per line, before anything is written
        (args.out / f"{name}.yaml").write_text(yaml.safe_dump(doc, sort_keys=False))
    print(f"{args.count} pools in {args.out}")


if __name__ == "__main__":
    main()
