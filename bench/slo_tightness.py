"""Pool variants for claim C6 with the neighbours' SLOs set by one stated rule, at several tightnesses.

C6 needs neighbours near their SLO: in the shipped pools they run at 23-30 % of it, and the neighbour
condition never has harm to prevent. This writes, for each given pool file and each factor f, a copy in
which every background engine's `sloMs` is f times its TPOT alone on its GPU at its peak batch (the
load's mean x (1 + amplitude), or the trace's maximum): what a platform team that sets SLOs from a
measured baseline with f - 1 of headroom would write. Subjects, nodes and loads are unchanged. The
ground truth (`evidence/truth`) gives the baseline; it is read, never changed.

    PYTHONPATH=. .venv/bin/python bench/slo_tightness.py OUT_DIR POOL.yaml ... [--factor 1.5 ...]
    PYTHONPATH=. .venv/bin/python bench/c6_ablation.py --seeds 10 --pool OUT_DIR/...yaml

The factors are chosen before any run and every variant is reported, passing or not (docs/evidence.md).
"""

from __future__ import annotations

import argparse
from pathlib import Path

import yaml

from sovereignspec.evidence.pools import Background, Pool, _gpu_key, load_pool
from sovereignspec.evidence.truth import GPU_TYPES, step_parts, step_time

FACTORS = (1.2, 1.5, 2.0, 3.0)


def peak_batch(b: Background) -> float:
    if b.load.trace:
        return max(p[1] for p in b.load.trace)
    return b.load.batch * (1.0 + b.load.amplitude)


def tpot_alone_ms(pool: Pool, b: Background) -> float:
    """A plain engine's step time alone on its GPU at its peak batch (one token per step)."""
    node = next(n for n in pool.nodes if n.name == b.node)
    g = GPU_TYPES[_gpu_key(node.gpu)]
    batch = peak_batch(b)
    parts = step_parts(
        g.tflops, g.bandwidth_gbs, g.mfu, g.mbu, g.overhead_s, batch, 0, b.ctx, batch * b.prefill_ratio
    )
    return 1000.0 * float(step_time(parts, 0.0, 0.0))


def variant(path: Path, factor: float) -> dict[str, object]:
    """The pool file's document with the background SLOs replaced (the rest as written)."""
    pool = load_pool(path)
    doc = yaml.safe_load(path.read_text())
    doc["name"] = f"{pool.name}-slo{factor:g}"
    doc["description"] = f"{pool.description} [background sloMs = {factor:g} x TPOT alone at peak batch]"
    for raw, b in zip(doc.get("background") or [], pool.background, strict=True):
        raw["sloMs"] = round(factor * tpot_alone_ms(pool, b), 1)
    return doc


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("out", type=Path)
    ap.add_argument("pools", type=Path, nargs="+")
    ap.add_argument("--factor", type=float, action="append", help=f"default: {FACTORS}")
    args = ap.parse_args()
    args.out.mkdir(parents=True, exist_ok=True)
    for path in args.pools:
        for f in args.factor or FACTORS:
            doc = variant(path, f)
            dest = args.out / f"{doc['name']}.yaml"
            dest.write_text(yaml.safe_dump(doc, sort_keys=False))
            load_pool(dest)  # the variant validates as a pool file
            print(dest)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
