"""Measure a target model's step time against tokens per step T, for `sovereignspec calibrate --measure`.

The orchestration lives here and takes any `StepTimer` (a callable that runs steps of one shape on the
engine and returns the seconds of one step): the grid of shapes, the order in which they are measured
(the ends of the T range first, then midpoints, so a budget cut still leaves the whole range covered),
repeats with the median kept, a wall-clock budget and progress lines. The real timer drives vLLM
(`sovereignspec.evidence.vllm_step`); unit tests drive a fake. `MeasuredRun` is the record a run
leaves (`calibrate --measure -o json`), which `calibrate --samples` fits again without a GPU.
"""

from __future__ import annotations

import math
import statistics
import time
from collections import deque
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Literal

from pydantic import Field

from sovereignspec.api.base import Model
from sovereignspec.api.speculation_policy import AcceleratorProfile
from sovereignspec.evidence.calibration import StepTableFit
from sovereignspec.model.profiles import DEFAULT_DRAFT_COST, DEFAULT_DRAFT_MEMORY_MIB

Kind = Literal["decode", "prefill"]


@dataclass(frozen=True)
class StepShape:
    """One engine step: `sequences` running sequences contributing `tokens` tokens in all.

    A decode step has one token per sequence (tokens == sequences); a prefill step spreads `tokens` over
    `sequences` prompts, the shape of a verification step (B sequences x (k+1) tokens) at large T.
    """

    kind: Kind
    sequences: int
    tokens: int

    def describe(self) -> str:
        if self.kind == "decode":
            return f"decode B={self.sequences} (T={self.tokens})"
        return f"prefill T={self.tokens} over {self.sequences} seq"


StepTimer = Callable[[StepShape], float]
"""Runs steps of the given shape on the engine and returns the seconds of one step."""


class MeasureError(Exception):
    """A shape the engine could not measure as asked (KV cache too small, engine error, bad timing)."""


class StepSample(Model):
    """The median step time of one shape over `repeats` measurements; spread = (max - min) / median."""

    tokens: int = Field(ge=1)
    seconds: float
    kind: Kind
    sequences: int = Field(ge=1)
    repeats: int = Field(ge=1)
    spread: float = Field(ge=0)


class MeasuredRun(Model):
    """What one `calibrate --measure` run measured, with where and how: enough to fit and cite it later."""

    product: str = Field(
        min_length=1, max_length=128, description="GPU product, label style (spaces as '-')."
    )
    target_model: str = Field(min_length=1, max_length=256)
    model: str = Field(min_length=1, description="The model name or path given to vLLM.")
    vllm_version: str
    load_format: str
    engine: dict[str, str | int | float | bool] = {}
    method: str
    measured_at: str = Field(description="UTC date and time of the run, ISO 8601.")
    elapsed_s: float = Field(ge=0)
    budget_hit: bool = False
    samples: list[StepSample]
    skipped: list[str] = []


def build_grid(
    decode_batches: Sequence[int], prefill_tokens: Sequence[int], prefill_sequences: int
) -> list[StepShape]:
    """Decode steps at each batch B (T = B) and prefill steps of each T > max B, sorted by T.

    Every T appears once (the fit takes one sample per T), so prefill T must exceed the largest decode B.
    """
    if not decode_batches:
        raise ValueError("the decode grid is empty: give at least one batch size")
    for name, values in (("decode batch", decode_batches), ("prefill tokens", prefill_tokens)):
        bad = [v for v in values if v < 1]
        if bad:
            raise ValueError(f"{name} {bad} must be >= 1")
        if len(set(values)) != len(values):
            raise ValueError(f"{name} values repeat: {sorted(values)}")
    if prefill_sequences < 1:
        raise ValueError(f"prefill sequences {prefill_sequences} must be >= 1")
    top = max(decode_batches)
    low = [t for t in prefill_tokens if t <= top]
    if low:
        raise ValueError(
            f"prefill tokens {low} must exceed the largest decode batch {top} (one sample per T)"
        )
    shapes = [StepShape("decode", b, b) for b in decode_batches]
    shapes += [StepShape("prefill", min(prefill_sequences, t), t) for t in prefill_tokens]
    return sorted(shapes, key=lambda s: s.tokens)


def coverage_order(shapes: Sequence[StepShape]) -> list[StepShape]:
    """Smallest and largest T first, then midpoints level by level: any prefix spans the whole range."""
    ordered = sorted(shapes, key=lambda s: s.tokens)
    n = len(ordered)
    if n <= 2:
        return ordered
    idx = [0, n - 1]
    todo = deque([(0, n - 1)])
    while todo:
        a, b = todo.popleft()
        if b - a < 2:
            continue
        m = (a + b) // 2
        idx.append(m)
        todo.extend([(a, m), (m, b)])
    return [ordered[i] for i in idx]


@dataclass(frozen=True)
class MeasureOutcome:
    samples: tuple[StepSample, ...]
    skipped: tuple[str, ...]
    elapsed_s: float
    budget_hit: bool


def measure(
    timer: StepTimer,
    shapes: Sequence[StepShape],
    *,
    budget_s: float,
    repeats: int = 3,
    warmup: bool = True,
    clock: Callable[[], float] = time.monotonic,
    progress: Callable[[str], None] = lambda _: None,
) -> MeasureOutcome:
    """Time every shape `repeats` times (median kept) within `budget_s` seconds of wall clock.

    Before each timer call the cost of the dearest call of that kind so far is taken as the estimate;
    a shape (or a further repeat) that would overrun the budget is skipped, with the reason recorded.
    A timer's MeasureError skips that shape and the run goes on; any other exception propagates.
    """
    if repeats < 1:
        raise ValueError(f"repeats {repeats} must be >= 1")
    start = clock()
    deadline = start + budget_s
    order = coverage_order(shapes)
    cost: dict[str, float] = {}
    samples: list[StepSample] = []
    skipped: list[str] = []
    budget_hit = False

    def timed(shape: StepShape) -> float:
        t = clock()
        value = timer(shape)
        cost[shape.kind] = max(cost.get(shape.kind, 0.0), clock() - t)
        if not (math.isfinite(value) and value > 0):
            raise MeasureError(f"the timer gave {value!r} s for one step")
        return value

    if warmup and order:
        progress(f"warm-up: {order[0].describe()}")
        try:
            timed(order[0])
        except MeasureError as e:
            progress(f"warm-up failed: {e}")
    for i, shape in enumerate(order, 1):
        values: list[float] = []
        try:
            for r in range(repeats):
                estimate = cost.get(shape.kind, max(cost.values(), default=0.0))
                left = deadline - clock()
                if estimate > left:
                    budget_hit = True
                    if r == 0:
                        raise MeasureError(
                            f"budget: ~{estimate:.1f} s per measurement, {max(left, 0):.1f} s left"
                        )
                    break
                values.append(timed(shape))
        except MeasureError as e:
            skipped.append(f"{shape.describe()}: {e}")
            progress(f"[{i}/{len(order)}] {shape.describe()}: skipped ({e})")
            continue
        med = statistics.median(values)
        sample = StepSample(
            tokens=shape.tokens,
            seconds=med,
            kind=shape.kind,
            sequences=shape.sequences,
            repeats=len(values),
            spread=(max(values) - min(values)) / med,
        )
        samples.append(sample)
        progress(
            f"[{i}/{len(order)}] {shape.describe()}: {1000 * med:.3f} ms/step "
            f"(spread {100 * sample.spread:.1f}% over {len(values)}), "
            f"{clock() - start:.0f}/{budget_s:.0f} s"
        )
    samples.sort(key=lambda s: s.tokens)
    return MeasureOutcome(tuple(samples), tuple(skipped), clock() - start, budget_hit)


SOURCE_MAX = 512
"""AcceleratorProfile.source holds at most 512 characters."""


def measured_profile(run: MeasuredRun, fit: StepTableFit) -> AcceleratorProfile:
    """The AcceleratorProfile of a measured run: its step-time table and a source that cites the run.

    Draft cost and memory are not measured by a target-only run; the built-in defaults are carried so
    that the decision core does not read a missing draft cost as free (c_d = 0).
    """
    loo = "" if fit.loo_mape is None else f", leave-one-out {100 * fit.loo_mape:.1f}%"
    source = (
        f"measured by sovereignspec calibrate --measure on {run.product}, vLLM {run.vllm_version}, "
        f"{run.model} ({run.load_format} weights), {run.measured_at}; {run.method}; "
        f"table MAPE {100 * fit.mape:.1f}%{loo}; draftCost/draftMemoryMiB: built-in defaults, not measured"
    )
    if len(source) > SOURCE_MAX:
        source = source[: SOURCE_MAX - 1] + "…"
    return AcceleratorProfile(
        product=run.product,
        target_model=run.target_model,
        step_time=fit.step_time(),
        draft_cost=dict(DEFAULT_DRAFT_COST),
        draft_memory_mib=dict(DEFAULT_DRAFT_MEMORY_MIB),
        source=source,
    )
