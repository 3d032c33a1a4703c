"""`sovereignspec calibrate`: AcceleratorProfile step-time tables, fitted or measured.

Default: fit the decision core's step-time curve and draft cost to published speed-up-vs-batch curves
(given the acceptance), report the MAPE per curve and print a SpeculationPolicy fragment.
`--measure --model M`: measure the target's step time against tokens per step with vLLM on the local
GPU, fit a monotone table and print it as a fragment of the same shape (refuses, exit 2, without an
NVIDIA GPU or without vLLM). `--samples FILE`: fit again from a run saved with `--measure -o json`.
"""

from __future__ import annotations

import argparse
import json
import math
import sys
import time
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from sovereignspec.evidence.measure import MeasuredRun

NAME = "calibrate"
HELP = "Fit AcceleratorProfile step-time curves to published speed-up curves, or measure them with vLLM."

DECODE_BATCHES = "1,2,4,8,16,32,64,128,256"
PREFILL_TOKENS = "512,1024,2048,4096,8192"


def _ints(text: str) -> list[int]:
    try:
        return [int(x) for x in text.split(",") if x.strip()]
    except ValueError as e:
        raise argparse.ArgumentTypeError(f"expected comma-separated integers, got {text!r}") from e


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--curve", action="append", help="published curve key (default: all)")
    parser.add_argument("-o", "--output", choices=["yaml", "json"], default="yaml")
    parser.add_argument(
        "--measure",
        action="store_true",
        help="measure vLLM step time against tokens per step on the local NVIDIA GPU "
        "(needs vLLM installed); progress on stderr, the fragment on stdout",
    )
    parser.add_argument(
        "--samples",
        metavar="FILE",
        help="fit a profile from a saved run (the JSON of `--measure -o json`, or its `run`); no GPU needed",
    )
    m = parser.add_argument_group("--measure")
    m.add_argument(
        "--model",
        help="HF model name or local directory given to vLLM, e.g. meta-llama/Llama-3.1-8B-Instruct. "
        "With --load-format dummy only its config.json is read: it must be a local directory "
        "or already in the HF cache, since a GPU box is often offline (set HF_HUB_OFFLINE=1)",
    )
    m.add_argument(
        "--target-model",
        help="the profile's targetModel, as workloads name it in their "
        "sovereignspec.io/target-model annotation (default: --model)",
    )
    m.add_argument(
        "--product", help="the profile's GPU product (default: the CUDA device name, spaces as '-')"
    )
    m.add_argument(
        "--load-format",
        default="dummy",
        help="vLLM load_format; 'dummy' = random weights, same step time, no download (default)",
    )
    m.add_argument("--dtype", default="auto", help="vLLM dtype (default: auto, from config.json)")
    for flag, default, metavar, what in (
        ("--decode-batches", DECODE_BATCHES, "B,B,...", "decode batch sizes; T = B"),
        (
            "--prefill-tokens",
            PREFILL_TOKENS,
            "T,T,...",
            "tokens of one-step prefills, each > the largest decode batch",
        ),
    ):  # the measured points, comma-separated
        m.add_argument(
            flag, type=_ints, default=_ints(default), metavar=metavar, help=f"{what} (default {default})"
        )
    m.add_argument(
        "--prefill-sequences",
        type=int,
        default=None,
        help="sequences a prefill step spreads its tokens over (default: the largest decode batch)",
    )
    for flag, kind, number, what in (
        ("--context", int, 512, "prompt tokens of each decode sequence"),
        ("--decode-steps", int, 32, "decode steps between the two timed calls of a decode point"),
        ("--repeats", int, 3, "measurements per point, median kept"),
        ("--max-seconds", float, 540.0, "wall-clock budget of the whole run, engine start included"),
    ):  # how each point is measured
        m.add_argument(flag, type=kind, default=number, help=f"{what} (default {number:g})")
    m.add_argument(
        "--enforce-eager",
        action="store_true",
        help="no CUDA graphs: starts faster, but decode is slower than in serving",
    )
    m.add_argument("--tensor-parallel-size", type=int, default=1)
    m.add_argument("--gpu-memory-utilization", type=float, default=0.85)


def run(args: argparse.Namespace) -> int:
    if args.measure and args.samples:
        print("calibrate: give --measure or --samples, not both", file=sys.stderr)
        return 2
    if args.measure:
        return _measure(args)
    if args.samples:
        return _refit(args)
    return _published(args)


def _published(args: argparse.Namespace) -> int:
    from sovereignspec.evidence.calibration import PUBLISHED, Fit, fit, out_of_sample, policy_fragment

    known = {c.key: c for c in PUBLISHED}
    keys = args.curve or list(known)
    bad = [k for k in keys if k not in known]
    if bad:
        print(f"unknown curve(s) {', '.join(bad)}; known: {', '.join(known)}", file=sys.stderr)
        return 2
    fits = [fit(known[k]) for k in keys]

    def r4(x: float | None) -> float | None:
        return None if x is None else round(x, 4)

    keys = ("inSampleMape", "looMape", "extrapolationMape")

    def oos(f: Fit) -> dict[str, object]:
        o = out_of_sample(f.curve)
        return {"looMape": r4(o.loo_mape), "looMax": r4(o.loo_max),
                "extrapolationMape": r4(o.extrapolation_mape), "extrapolationMax": r4(o.extrapolation_max),
                "looAlphas": list(o.loo_alphas), "extrapolationAlpha": o.extrapolation_alpha,
                "byAlpha": {str(a): dict(zip(keys, map(r4, v), strict=True))
                            for a, v in o.by_alpha.items()}}  # fmt: skip

    report = [
        {
            "curve": f.curve.key,
            "mape": round(f.mape, 4),
            "observed": list(f.curve.speedups),
            "predicted": list(f.predicted),
            "outOfSample": oos(f),
        }
        for f in fits
    ]
    fragment = policy_fragment([f.profile() for f in fits])
    if args.output == "json":
        print(json.dumps({"fits": report, "policy": fragment}, indent=2))
        return 0
    import yaml

    for r in report:
        o = r["outOfSample"]
        ext = o["extrapolationMape"]  # type: ignore[index]
        print(
            f"# {r['curve']}: MAPE in sample {100 * float(r['mape']):.1f}%, leave-one-out "  # type: ignore[arg-type]
            f"{100 * o['looMape']:.1f}%, extrapolation B>24 "  # type: ignore[index]
            f"{'n/a' if ext is None else f'{100 * ext:.1f}%'} (alpha fitted over 0.6-0.9)"
        )
    print(yaml.safe_dump(fragment, sort_keys=False, width=110), end="")
    return 0


def _measure(args: argparse.Namespace) -> int:
    from datetime import UTC, datetime

    from sovereignspec.evidence.measure import MeasuredRun, build_grid, measure
    from sovereignspec.evidence.vllm_step import METHOD, Unavailable, VllmStepTimer, preflight

    try:
        pre = preflight()
    except Unavailable as e:
        print(e, file=sys.stderr)
        return 2
    if not args.model:
        print(
            "calibrate --measure needs --model (an HF name or local directory with config.json)",
            file=sys.stderr,
        )
        return 2
    decode, prefill = args.decode_batches, args.prefill_tokens
    prefill_seqs = args.prefill_sequences or max(decode, default=1)
    try:
        for name, value in (
            ("--context", args.context),
            ("--decode-steps", args.decode_steps),
            ("--repeats", args.repeats),
            ("--tensor-parallel-size", args.tensor_parallel_size),
        ):
            if value < 1:
                raise ValueError(f"{name} {value} must be >= 1")
        if len(args.target_model or args.model) > 256 or (args.product and len(args.product) > 128):
            raise ValueError("the profile's targetModel is at most 256 characters and its product 128")
        if not 0 < args.gpu_memory_utilization <= 1:
            raise ValueError(f"--gpu-memory-utilization {args.gpu_memory_utilization} must be in (0, 1]")
        shapes = build_grid(decode, prefill, prefill_seqs)
    except ValueError as e:
        print(f"calibrate --measure: {e}", file=sys.stderr)
        return 2
    max_num_seqs = max(max(decode), prefill_seqs)
    longest_prompt = max([args.context] + [math.ceil(t / prefill_seqs) for t in prefill])
    max_model_len = longest_prompt + args.decode_steps + 16

    def progress(msg: str) -> None:
        print(f"calibrate --measure: {msg}", file=sys.stderr, flush=True)

    started = time.monotonic()
    progress(
        f"starting vLLM {pre.vllm_version} on {pre.gpu} with {args.model} ({args.load_format} weights), "
        f"{len(shapes)} points, budget {args.max_seconds:.0f} s"
    )
    engine = {
        "dtype": args.dtype,
        "maxNumSeqs": max_num_seqs,
        "maxNumBatchedTokens": max([*prefill, max_num_seqs, 2048]),
        "maxModelLen": max_model_len,
        "enforceEager": bool(args.enforce_eager),
        "tensorParallelSize": args.tensor_parallel_size,
        "context": args.context,
        "decodeSteps": args.decode_steps,
        "torch": pre.torch_version,
    }
    try:
        timer = VllmStepTimer.start(
            args.model,
            load_format=args.load_format,
            dtype=args.dtype,
            max_num_seqs=max_num_seqs,
            max_num_batched_tokens=int(engine["maxNumBatchedTokens"]),
            max_model_len=max_model_len,
            enforce_eager=args.enforce_eager,
            tensor_parallel_size=args.tensor_parallel_size,
            gpu_memory_utilization=args.gpu_memory_utilization,
            context=args.context,
            decode_steps=args.decode_steps,
        )
    except Exception as e:  # vLLM's start-up errors are many (config not found offline, OOM, ...)
        first = str(e).splitlines()[0] if str(e) else ""
        print(
            f"calibrate --measure: vLLM could not start {args.model}: {type(e).__name__}: {first}",
            file=sys.stderr,
        )
        return 1
    left = args.max_seconds - (time.monotonic() - started)
    progress(f"engine up after {time.monotonic() - started:.0f} s; {max(left, 0):.0f} s left for measuring")
    outcome = measure(timer, shapes, budget_s=max(left, 0.0), repeats=args.repeats, progress=progress)
    run = MeasuredRun(
        product=args.product or pre.gpu.replace(" ", "-"),
        target_model=args.target_model or args.model,
        model=args.model,
        vllm_version=pre.vllm_version,
        load_format=args.load_format,
        engine=engine,
        method=METHOD,
        measured_at=datetime.now(UTC).isoformat(timespec="seconds"),
        elapsed_s=round(time.monotonic() - started, 1),
        budget_hit=outcome.budget_hit,
        samples=list(outcome.samples),
        skipped=list(outcome.skipped),
    )
    return _emit(run, args.output)


def _refit(args: argparse.Namespace) -> int:
    from pydantic import ValidationError

    from sovereignspec.evidence.measure import MeasuredRun

    try:
        with open(args.samples, encoding="utf-8") as fh:
            doc = json.load(fh)
        if isinstance(doc, dict) and "run" in doc:
            doc = doc["run"]
        run = MeasuredRun.model_validate(doc)
    except (OSError, json.JSONDecodeError) as e:
        print(f"calibrate --samples: cannot read {args.samples}: {e}", file=sys.stderr)
        return 2
    except ValidationError as e:
        where = ", ".join(f"{'.'.join(map(str, err['loc']))}: {err['msg']}" for err in e.errors()[:3])
        print(f"calibrate --samples: {args.samples} is not a measured run ({where})", file=sys.stderr)
        return 2
    return _emit(run, args.output)


def _emit(run: MeasuredRun, output: str) -> int:
    """Fit the run's samples and print the profile as a SpeculationPolicy fragment (or JSON with the run)."""
    from sovereignspec.evidence.calibration import fit_step_table, policy_fragment
    from sovereignspec.evidence.measure import measured_profile

    try:
        fit = fit_step_table([(s.tokens, s.seconds) for s in run.samples])
    except ValueError as e:
        print(
            f"calibrate: no step-time table from {len(run.samples)} sample(s) of {run.product}: {e}; "
            "the run is printed on stdout",
            file=sys.stderr,
        )
        print(json.dumps({"run": run.wire()}, indent=2))
        return 1
    fragment = policy_fragment([measured_profile(run, fit)], name="measured")
    if output == "json":
        report = {
            "mape": round(fit.mape, 4),
            "maxError": round(fit.max_error, 4),
            "looMape": None if fit.loo_mape is None else round(fit.loo_mape, 4),
            "pooled": fit.pooled,
        }
        print(json.dumps({"run": run.wire(), "fit": report, "policy": fragment}, indent=2))
        return 0
    import yaml

    loo = "" if fit.loo_mape is None else f", leave-one-out {100 * fit.loo_mape:.1f}%"
    print(
        f"# measured {run.product} / {run.target_model}: {len(run.samples)} points, table MAPE "
        f"{100 * fit.mape:.1f}% (max {100 * fit.max_error:.1f}%{loo}), {run.elapsed_s:.0f} s"
    )
    for s in run.samples:
        print(
            f"#   T={s.tokens:<6} {s.kind:<7} {s.sequences:>4} seq  {1000 * s.seconds:9.3f} ms "
            f"(spread {100 * s.spread:.1f}%, {s.repeats}x)"
        )
    for line in run.skipped:
        print(f"#   skipped {line}")
    print(yaml.safe_dump(fragment, sort_keys=False, width=110), end="")
    return 0
