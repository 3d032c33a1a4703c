"""calibrate --measure without a GPU: the step-table fit, the measurement loop over a fake step timer, the
vLLM timer's arithmetic over a fake engine, and the profile/fragment it produces."""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass, field
from itertools import pairwise
from typing import Any

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from sovereignspec.api.speculation_policy import AcceleratorProfile, SpeculationPolicy
from sovereignspec.evidence.calibration import MAX_TABLE_POINTS, fit_step_table, policy_fragment
from sovereignspec.evidence.measure import (
    MeasuredRun,
    MeasureError,
    StepSample,
    StepShape,
    build_grid,
    coverage_order,
    measure,
    measured_profile,
)
from sovereignspec.evidence.vllm_step import METHOD, VllmStepTimer, split_tokens
from sovereignspec.model.profiles import DEFAULT_DRAFT_COST
from sovereignspec.model.steptime import StepCurve


def roofline(t: float) -> float:
    """A GPU-like step time: 6 ms memory-bound floor, compute takes over past a knee at 256 tokens."""
    return 0.006 + 2e-6 * t + 2.4e-5 * max(0.0, t - 256.0)


GRID = [1, 2, 4, 8, 16, 32, 64, 128, 256, 512, 1024, 2048, 4096, 8192]


# --- the fit ------------------------------------------------------------------------------------------


def test_noiseless_roofline_is_reproduced() -> None:
    f = fit_step_table([(t, roofline(t)) for t in GRID])
    assert f.mape < 1e-5 and f.max_error < 1e-5 and f.pooled == 0
    assert f.points[0][0] == 0 and f.points[0][1] == pytest.approx(0.006, rel=1e-3)
    assert [t for t, _ in f.points[1:]] == GRID
    curve = StepCurve.from_points([(float(t), s) for t, s in f.points])
    # Between grid points the linear interpolation of a piecewise-linear truth is exact away from the knee.
    assert curve.t_scalar(3000) == pytest.approx(roofline(3000), rel=1e-4)
    assert f.loo_mape is not None and f.loo_mape < 0.05


@settings(max_examples=200, deadline=None)
@given(
    st.dictionaries(
        st.integers(1, 100_000),
        st.floats(1e-5, 10.0, allow_nan=False, allow_infinity=False),
        min_size=2,
        max_size=120,
    )
)
def test_any_valid_samples_give_a_valid_monotone_profile(samples: dict[int, float]) -> None:
    f = fit_step_table(list(samples.items()))
    xs = [t for t, _ in f.points]
    ys = [s for _, s in f.points]
    assert xs[0] == 0 and ys[0] > 0
    assert all(b > a for a, b in pairwise(xs))
    assert all(b >= a for a, b in pairwise(ys))
    assert 2 <= len(f.points) <= MAX_TABLE_POINTS
    assert 0 <= f.mape <= f.max_error and math.isfinite(f.max_error)
    # What the CRD and the decision core accept.
    AcceleratorProfile(product="NVIDIA-H200", step_time=f.step_time())
    StepCurve.from_points([(float(t), s) for t, s in f.points])


@settings(max_examples=100, deadline=None)
@given(st.lists(st.floats(-0.03, 0.03), min_size=len(GRID), max_size=len(GRID)))
def test_noise_is_absorbed_not_amplified(noise: list[float]) -> None:
    """Isotonic pooling never errs at a sample by more than the noise spread (here 6 %, knee included)."""
    f = fit_step_table([(t, roofline(t) * (1 + e)) for t, e in zip(GRID, noise, strict=True)])
    assert f.max_error <= 0.062


def test_non_monotone_samples_are_pooled() -> None:
    f = fit_step_table([(1, 0.010), (2, 0.009), (4, 0.011), (8, 0.012)])
    assert f.pooled == 1
    assert [t for t, _ in f.points[1:3]] == [1, 2]  # the block {1, 2}: a flat segment at its mean
    assert [s for _, s in f.points[1:3]] == pytest.approx([0.0095, 0.0095])
    assert f.mape > 0


def test_many_samples_are_thinned_to_the_crd_limit() -> None:
    f = fit_step_table([(t, roofline(t)) for t in range(1, 500)])
    assert len(f.points) == MAX_TABLE_POINTS
    assert f.points[1][0] == 1 and f.points[-1][0] == 499


@pytest.mark.parametrize(
    ("samples", "message"),
    [
        ([], "at least 2"),
        ([(8, 0.01)], "at least 2"),
        ([(1, 0.01), (8, -0.02)], "finite and > 0"),
        ([(1, 0.01), (8, 0.0)], "finite and > 0"),
        ([(1, 0.01), (8, float("nan"))], "finite and > 0"),
        ([(1, 0.01), (8, float("inf"))], "finite and > 0"),
        ([(1, 0.01), (8, 0.02), (8, 0.03)], "duplicate tokens per step [8]"),
        ([(0, 0.01), (8, 0.02)], "whole number >= 1"),
        ([(1.5, 0.01), (8, 0.02)], "whole number >= 1"),
        ([(float("nan"), 0.01), (8, 0.02)], "whole number >= 1"),
    ],
)
def test_invalid_samples_are_refused_clearly(samples: list[tuple[float, float]], message: str) -> None:
    with pytest.raises(ValueError, match=message.replace("[", r"\[").replace("]", r"\]")):
        fit_step_table(samples)


# --- grid and order -----------------------------------------------------------------------------------


def test_grid_has_one_shape_per_t_and_prefill_spreads_over_sequences() -> None:
    shapes = build_grid([1, 4, 64], [512, 2048], prefill_sequences=64)
    assert [s.tokens for s in shapes] == [1, 4, 64, 512, 2048]
    assert shapes[0] == StepShape("decode", 1, 1)
    assert shapes[-1] == StepShape("prefill", 64, 2048)
    assert build_grid([2], [3], prefill_sequences=8)[-1] == StepShape("prefill", 3, 3)


@pytest.mark.parametrize(
    ("decode", "prefill", "seqs", "message"),
    [
        ([], [512], 1, "empty"),
        ([0, 4], [512], 4, ">= 1"),
        ([4, 4], [512], 4, "repeat"),
        ([4, 256], [128, 512], 4, "must exceed the largest decode batch 256"),
        ([4], [512], 0, "prefill sequences"),
    ],
)
def test_bad_grids_are_refused(decode: list[int], prefill: list[int], seqs: int, message: str) -> None:
    with pytest.raises(ValueError, match=message):
        build_grid(decode, prefill, seqs)


@given(st.sets(st.integers(1, 10_000), min_size=1, max_size=40))
def test_coverage_order_is_a_permutation_that_starts_with_the_ends(tokens: set[int]) -> None:
    shapes = [StepShape("decode", t, t) for t in tokens]
    order = coverage_order(shapes)
    assert sorted(s.tokens for s in order) == sorted(tokens)
    assert order[0].tokens == min(tokens) and order[min(1, len(order) - 1)].tokens == max(tokens)


# --- the measurement loop over a fake step timer -------------------------------------------------------


@dataclass
class FakeEngine:
    """Stands in for a GPU: each timer call advances a fake clock by `calls_per_point` steps' worth."""

    now: float = 0.0
    noise: list[float] = field(default_factory=lambda: [1.0, 1.02, 0.99])
    calls: list[StepShape] = field(default_factory=list)
    fail_on: int | None = None
    call_cost_s: float = 2.0

    def clock(self) -> float:
        return self.now

    def timer(self, shape: StepShape) -> float:
        self.calls.append(shape)
        self.now += self.call_cost_s
        if shape.tokens == self.fail_on:
            raise MeasureError("KV cache too small")
        return roofline(shape.tokens) * self.noise[len(self.calls) % len(self.noise)]


def test_measure_covers_the_grid_and_keeps_medians() -> None:
    eng = FakeEngine()
    lines: list[str] = []
    shapes = build_grid([1, 8, 64, 256], [1024, 4096], 256)
    out = measure(eng.timer, shapes, budget_s=1000, repeats=3, clock=eng.clock, progress=lines.append)
    assert [s.tokens for s in out.samples] == [1, 8, 64, 256, 1024, 4096]
    assert len(eng.calls) == 1 + 3 * 6  # warm-up + repeats
    assert all(s.repeats == 3 and s.spread == pytest.approx(0.03, abs=1e-9) for s in out.samples)
    for s in out.samples:
        assert s.seconds == pytest.approx(roofline(s.tokens), rel=1e-12)  # the median of (1, 1.02, 0.99)
    assert not out.budget_hit and not out.skipped and out.elapsed_s == pytest.approx(38.0)
    assert lines[0].startswith("warm-up") and len(lines) == 7 and "[6/6]" in lines[-1]
    assert fit_step_table([(s.tokens, s.seconds) for s in out.samples]).mape < 0.01


def test_budget_cuts_the_middle_not_the_ends() -> None:
    eng = FakeEngine()
    shapes = build_grid(GRID[:9], GRID[9:], 256)
    out = measure(eng.timer, shapes, budget_s=21, repeats=2, clock=eng.clock)
    got = [s.tokens for s in out.samples]
    assert out.budget_hit and out.skipped
    assert min(got) == 1 and max(got) == 8192 and len(got) < len(GRID)
    assert all("budget" in r for r in out.skipped)
    assert eng.now <= 21


def test_budget_drops_repeats_before_points() -> None:
    eng = FakeEngine()
    out = measure(eng.timer, build_grid([1, 2], [], 1), budget_s=7, repeats=3, clock=eng.clock)
    # warm-up 2 s, then T=1 twice (6 s): a third repeat would overrun, and T=2 does not start.
    assert [(s.tokens, s.repeats) for s in out.samples] == [(1, 2)]
    assert out.budget_hit and out.skipped[0].startswith("decode B=2") and eng.now <= 7


def test_a_failing_shape_is_skipped_and_the_run_goes_on() -> None:
    eng = FakeEngine(fail_on=64)
    out = measure(eng.timer, build_grid([1, 8, 64, 256], [], 256), budget_s=1000, clock=eng.clock)
    assert [s.tokens for s in out.samples] == [1, 8, 256]
    assert out.skipped == ("decode B=64 (T=64): KV cache too small",)


@pytest.mark.parametrize("bad", [0.0, -1.0, float("nan")])
def test_a_nonsense_timing_is_skipped(bad: float) -> None:
    eng = FakeEngine()

    def timer(shape: StepShape) -> float:
        return bad if shape.tokens == 8 else eng.timer(shape)

    out = measure(timer, build_grid([1, 8, 64], [], 64), budget_s=1000, clock=eng.clock, warmup=False)
    assert [s.tokens for s in out.samples] == [1, 64]
    assert "the timer gave" in out.skipped[0]


def test_other_errors_propagate() -> None:
    def timer(shape: StepShape) -> float:
        raise RuntimeError("bug")

    with pytest.raises(RuntimeError):
        measure(timer, build_grid([1], [], 1), budget_s=10)


# --- the profile and the fragment ---------------------------------------------------------------------


def run_of(samples: list[StepSample], model: str = "meta-llama/Llama-3.1-8B-Instruct") -> MeasuredRun:
    return MeasuredRun(
        product="NVIDIA-H200",
        target_model=model[:256],
        model=model,
        vllm_version="0.11.0",
        load_format="dummy",
        engine={"maxNumSeqs": 256},
        method=METHOD,
        measured_at="2026-07-01T10:00:00+00:00",
        elapsed_s=300.0,
        samples=samples,
    )


def samples_of(tokens: list[int]) -> list[StepSample]:
    return [
        StepSample(
            tokens=t,
            seconds=roofline(t),
            kind="decode" if t <= 256 else "prefill",
            sequences=min(t, 256),
            repeats=3,
            spread=0.01,
        )
        for t in tokens
    ]


def test_measured_profile_is_a_valid_policy_fragment_with_its_source() -> None:
    run = run_of(samples_of(GRID))
    fit = fit_step_table([(s.tokens, s.seconds) for s in run.samples])
    prof = measured_profile(run, fit)
    frag = policy_fragment([prof], name="measured")
    pol = SpeculationPolicy.model_validate(frag)
    (p,) = pol.spec.accelerator_profiles
    assert p.product == "NVIDIA-H200" and p.target_model == "meta-llama/Llama-3.1-8B-Instruct"
    assert p.step_time is not None and p.step_time[0].tokens == 0 and len(p.step_time) == len(GRID) + 1
    assert p.draft_cost == DEFAULT_DRAFT_COST  # not measured: the defaults, never a free draft
    assert p.source is not None
    for part in ("vLLM 0.11.0", "NVIDIA-H200", "dummy weights", "2026-07-01", "decode: wall-time difference"):
        assert part in p.source
    assert MeasuredRun.model_validate(run.wire()) == run  # the saved run reads back as it was


def test_long_names_do_not_overflow_the_source_field() -> None:
    run = run_of(samples_of(GRID[:4]), model="org/" + "x" * 400)
    prof = measured_profile(run, fit_step_table([(s.tokens, s.seconds) for s in run.samples]))
    assert prof.source is not None and len(prof.source) <= 512


def test_policy_fragment_refuses_what_the_operator_would() -> None:
    prof = AcceleratorProfile(product="p", step_time=fit_step_table([(1, 0.01), (2, 0.02)]).step_time())
    frag = policy_fragment([prof])
    bad = dict(frag, kind="Nope")
    with pytest.raises(ValueError):
        SpeculationPolicy.model_validate(bad)


# --- the vLLM timer's arithmetic over a fake engine ---------------------------------------------------


@dataclass
class _Out:
    token_ids: list[int]


@dataclass
class _ReqOut:
    outputs: list[_Out]


@dataclass
class _Metric:
    name: str
    value: int


class FakeLLM:
    """vllm.LLM's generate/get_metrics surface over a simulated engine: per call a fixed overhead, one
    step per prefill of all prompts, then one decode step per further output token."""

    def __init__(self, step: Callable[[int, int], float], overhead: float = 0.05) -> None:
        self.step = step  # (sequences, tokens) -> seconds
        self.overhead = overhead
        self.now = 0.0
        self.preemptions = 0
        self.short = False
        self.params: list[dict[str, Any]] = []

    def clock(self) -> float:
        return self.now

    def generate(
        self, prompts: list[dict[str, list[int]]], params: dict[str, Any], use_tqdm: bool
    ) -> list[_ReqOut]:
        assert use_tqdm is False
        self.params.append(params)
        n, tokens = len(prompts), sum(len(p["prompt_token_ids"]) for p in prompts)
        steps = params["max_tokens"]
        self.now += self.overhead + self.step(n, tokens) + (steps - 1) * self.step(n, n)
        got = steps - 1 if self.short else steps
        return [_ReqOut([_Out(list(range(got)))]) for _ in prompts]

    def get_metrics(self) -> list[_Metric]:
        return [_Metric("vllm:num_preemptions", self.preemptions), _Metric("vllm:other", 99)]


def fake_timer(llm: FakeLLM, context: int = 64) -> VllmStepTimer:
    return VllmStepTimer(llm, dict, context=context, decode_steps=16, vocab=1000, clock=llm.clock)


def test_vllm_timer_recovers_decode_and_prefill_steps() -> None:
    llm = FakeLLM(lambda n, t: roofline(t))
    timer = fake_timer(llm)
    assert timer(StepShape("decode", 32, 32)) == pytest.approx(roofline(32), rel=1e-9)
    assert timer(StepShape("prefill", 32, 2048)) == pytest.approx(roofline(2048), rel=1e-9)
    # The prefill of an unseen batch measures that batch's decode step first.
    assert timer(StepShape("prefill", 16, 1000)) == pytest.approx(roofline(1000), rel=1e-9)
    p = llm.params[0]
    assert p["ignore_eos"] is True and p["min_tokens"] == p["max_tokens"] and p["detokenize"] is False


def test_vllm_timer_refuses_short_outputs_and_preemption() -> None:
    llm = FakeLLM(lambda n, t: roofline(t))
    llm.short = True
    with pytest.raises(MeasureError, match="expected 8 x 2"):
        fake_timer(llm)(StepShape("decode", 8, 8))
    llm.short = False
    real = llm.generate

    def preempting(*a: Any, **k: Any) -> list[_ReqOut]:
        llm.preemptions += 1
        return real(*a, **k)

    llm.generate = preempting  # type: ignore[method-assign]
    with pytest.raises(MeasureError, match="preempted 1 request"):
        fake_timer(llm)(StepShape("decode", 8, 8))


def test_vllm_timer_turns_engine_errors_into_skips() -> None:
    llm = FakeLLM(lambda n, t: roofline(t))

    def boom(*a: Any, **k: Any) -> list[_ReqOut]:
        raise RuntimeError("CUDA out of memory\nlong trace")

    llm.generate = boom  # type: ignore[method-assign]
    with pytest.raises(MeasureError, match=r"vLLM failed: RuntimeError: CUDA out of memory$"):
        fake_timer(llm)(StepShape("decode", 8, 8))


def test_vllm_timer_refuses_noise_larger_than_the_signal() -> None:
    llm = FakeLLM(lambda n, t: 0.0)
    with pytest.raises(MeasureError, match="timing noise"):
        fake_timer(llm)(StepShape("decode", 8, 8))


@given(st.integers(1, 100_000), st.integers(1, 512))
def test_split_tokens_is_exact_and_even(tokens: int, sequences: int) -> None:
    lengths = split_tokens(tokens, sequences)
    assert sum(lengths) == tokens and len(lengths) == sequences
    assert max(lengths) - min(lengths) <= 1


def test_fake_engine_prompts_are_fresh_token_ids() -> None:
    """Two calls never send the same prompt (prefix caching is off in vLLM, and the ids differ anyway)."""
    llm = FakeLLM(lambda n, t: roofline(t))
    timer = fake_timer(llm, context=32)
    a = timer._prompts([32, 32])
    b = timer._prompts([32, 32])
    assert a != b and all(10 <= i < 1000 for p in a for i in p["prompt_token_ids"])
    assert np.array([len(p["prompt_token_ids"]) for p in a]).tolist() == [32, 32]
