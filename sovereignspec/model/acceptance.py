"""Draft acceptance: per-position curves, the i.i.d. model, Beta posteriors, and E[L(k)] (DESIGN.md §2).

`p[i-1]` is the probability that draft position i (1-based) is accepted, i.e. positions 1..i all are.
Public entry point for the decision: `estimate_acceptance(prior, sample, k_max, quantile)`.

How the posterior is formed (DESIGN.md leaves the combination open):
- per-position counters: position i has `n_i = accepted[i-2]` conditional trials (`accepted[-1]` =
  drafts) and `s_i = accepted[i-1]` successes; each conditional rate r_i gets the method's Beta prior
  updated with (s_i, n_i - s_i) and is read at the decision quantile; p_i = r_1·…·r_i. Beyond the k the
  engines ran with, the last conditional rate extends the curve geometrically. With no counts every
  r_i is the prior quantile, which is exactly the i.i.d. prior curve alpha_q^i.
- aggregate counters only (drafts, draft tokens, accepted): alpha is recovered from the mean accepted
  per draft at the mean draft length k = draft tokens / drafts, not rounded (bisection), turned into
  expected pseudo-counts, and the posterior quantile alpha_q gives p_i = alpha_q^i. Engines that run a
  per-batch-size schedule draft different k over the window; m(alpha, k) is concave in k, so inverting
  at the mean k never overstates alpha. Rounding the mean down did: m could reach the rounded k and
  read as alpha = 1 (docs/decision.md, "Acceptance pooled over engines").
- per-position counters count position i's trials right only when every draft proposed position i
  (`full_length`: draft tokens = drafts x the positions reported). An engine on a per-batch-size schedule
  drafts fewer tokens at larger batches; a draft cut at i - 1 then reads as a rejection at i, and the upper
  conditional rates fall far below the truth (docs/decision.md, "Drafts cut by the schedule"). Such
  counters go down the aggregate path, with the accepted total their sum.
- several samples of one (target, draft, method) are pooled on their common positions
  (`pool_samples`), the rule the telemetry join applies to a pair's pods; when one of them is not full
  length, the pool keeps only the totals.
- the reported `alpha` is the pooled i.i.d. posterior quantile; it classifies the draft as weak.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Literal

import numpy as np
import numpy.typing as npt

from sovereignspec.api.speculation_policy import BetaPrior
from sovereignspec.model.beta import beta_quantile
from sovereignspec.model.telemetry import AcceptanceSample

FloatArray = npt.NDArray[np.float64]


def extend_geometric(p: FloatArray, k: int) -> FloatArray:
    """The first k positions of the curve, continuing beyond len(p) with the last conditional rate."""
    if k <= p.size:
        return p[:k].copy()
    if p.size == 0:
        raise ValueError("cannot extend an empty acceptance curve")
    prev = p[-2] if p.size >= 2 else 1.0
    ratio = float(p[-1] / prev) if prev > 0 else 0.0
    tail = p[-1] * ratio ** np.arange(1, k - p.size + 1, dtype=np.float64)
    return np.concatenate([p, tail])


def iid_curve(alpha: float, k: int) -> FloatArray:
    """p_i = alpha^i for i = 1..k."""
    return alpha ** np.arange(1, k + 1, dtype=np.float64)


def expected_lengths(p: FloatArray) -> FloatArray:
    """E[L(k)] = 1 + sum_{i<=k} p_i for every k = 0..len(p) (index k)."""
    return np.concatenate([[1.0], 1.0 + np.cumsum(p)])


def iid_expected_length(alpha: float, k: float) -> float:
    """Closed form (1 - alpha^{k+1}) / (1 - alpha); k + 1 at alpha = 1. A real k is a mean draft length."""
    if alpha >= 1.0:
        return float(k + 1)
    return float((1.0 - alpha ** (k + 1)) / (1.0 - alpha))


def mean_accepted_iid(alpha: float, k: float) -> float:
    """m(alpha) = alpha(1 - alpha^k)/(1 - alpha): mean accepted tokens per draft of k (i.i.d.)."""
    return iid_expected_length(alpha, k) - 1.0


def alpha_from_mean_accepted(m: float, k: float, tol: float = 1e-12) -> float:
    """Solve m = alpha(1 - alpha^k)/(1 - alpha) for alpha ∈ [0, 1] by bisection (m is increasing in alpha).
    k may be a mean draft length (drafts of several lengths): see the module docstring."""
    if k < 1:
        raise ValueError("k must be >= 1")
    if m <= 0:
        return 0.0
    if m >= k:
        return 1.0
    lo, hi = 0.0, 1.0
    while hi - lo > tol:
        mid = 0.5 * (lo + hi)
        if mean_accepted_iid(mid, k) < m:
            lo = mid
        else:
            hi = mid
    return 0.5 * (lo + hi)


def prior_params(prior: BetaPrior) -> tuple[float, float]:
    return prior.mean * prior.strength, (1.0 - prior.mean) * prior.strength


@dataclass(frozen=True)
class AcceptanceEstimate:
    """Decision curve for k = 1..k_max plus the pooled decision alpha and where it came from."""

    source: Literal["observed", "aggregate", "prior"]
    alpha: float
    drafts: float
    p: FloatArray

    @property
    def expected_lengths(self) -> FloatArray:
        return expected_lengths(self.p)


def estimate_acceptance(
    prior: BetaPrior, sample: AcceptanceSample | None, k_max: int, quantile: float
) -> AcceptanceEstimate:
    """Conservative acceptance curve: the `quantile` of the Beta posterior (see module docstring)."""
    a0, b0 = prior_params(prior)
    acc = [max(0.0, x) for x in sample.accepted_per_position] if sample is not None else []
    if sample is not None and sample.drafts > 0 and acc and full_length(sample):
        drafts = sample.drafts
        trials = [drafts, *acc[:-1]]
        rates = []
        for s, n in zip(acc, trials, strict=True):
            s = min(s, n)
            rates.append(beta_quantile(quantile, a0 + s, b0 + max(n - s, 0.0)))
        observed = np.cumprod(np.asarray(rates, dtype=np.float64)).astype(np.float64)
        s_all, n_all = sum(min(s, n) for s, n in zip(acc, trials, strict=True)), sum(trials)
        alpha = beta_quantile(quantile, a0 + s_all, b0 + max(n_all - s_all, 0.0))
        return AcceptanceEstimate("observed", alpha, drafts, extend_geometric(observed, k_max))
    total = _total(sample) if sample is not None else None
    if sample is not None and total is not None and 0 < sample.drafts <= sample.draft_tokens:
        k_mean = sample.draft_tokens / sample.drafts
        m = min(max(total / sample.drafts, 0.0), k_mean)
        a_hat = alpha_from_mean_accepted(m, k_mean)
        n = sample.drafts * iid_expected_length(a_hat, k_mean - 1.0)  # trials: sum of a^i, i < k
        s = min(total, n)
        alpha = beta_quantile(quantile, a0 + s, b0 + max(n - s, 0.0))
        return AcceptanceEstimate("aggregate", alpha, sample.drafts, iid_curve(alpha, k_max))
    alpha = beta_quantile(quantile, a0, b0)
    return AcceptanceEstimate("prior", alpha, 0.0, iid_curve(alpha, k_max))


FULL_LENGTH_TOLERANCE = 0.01
"""Draft tokens may fall this short of drafts x positions and still count as full length: Prometheus's
increase() extrapolates each counter over the window on its own."""


def full_length(sample: AcceptanceSample) -> bool:
    """Whether every draft proposed every position the sample reports, so that the drafts that accepted
    position i - 1 are the trials of position i. A sample without a draft-token count (0) is taken as full
    length, as the telemetry join takes a missing count as drafts x k."""
    width = len(sample.accepted_per_position)
    if sample.draft_tokens <= 0 or width == 0:
        return True
    return sample.draft_tokens >= sample.drafts * width * (1.0 - FULL_LENGTH_TOLERANCE)


def pool_samples(samples: Sequence[AcceptanceSample]) -> AcceptanceSample:
    """One pair's samples summed: drafts, draft tokens, and the per-position counts of the positions every
    sample reports (the shortest k), so that each position counts only drafts that could reach it; the
    accepted total when every sample gives one (its own, or the sum of its per-position counts). When a
    sample is not `full_length`, its upper positions' trials are unknown, and so are the pool's: the pool
    keeps drafts, draft tokens and the accepted total only (the aggregate path)."""
    if not samples:
        raise ValueError("nothing to pool")
    first = samples[0]
    if len(samples) == 1:
        return first
    totals = [_total(a) for a in samples]
    full = all(full_length(a) for a in samples)
    width = min(len(a.accepted_per_position) for a in samples) if full else 0
    return AcceptanceSample(
        target_model=first.target_model,
        draft_model=first.draft_model,
        method=first.method,
        drafts=sum(a.drafts for a in samples),
        draft_tokens=sum(
            full_draft_tokens(a.drafts, a.draft_tokens, len(a.accepted_per_position)) for a in samples
        ),
        accepted_per_position=[sum(a.accepted_per_position[i] for a in samples) for i in range(width)],
        accepted=None if any(t is None for t in totals) else sum(t for t in totals if t is not None),
    )


def _total(sample: AcceptanceSample) -> float | None:
    """Accepted tokens: the sample's total, else the sum over positions (each accepted token is counted at
    exactly one position)."""
    if sample.accepted is not None:
        return sample.accepted
    return float(sum(sample.accepted_per_position)) if sample.accepted_per_position else None


def full_draft_tokens(drafts: float, draft_tokens: float | None, positions: int) -> float:
    """The draft-token count, drafts x positions where there is none (missing or 0: taken as full
    length, as `full_length` reads it), never 0 for drafts that ran."""
    if draft_tokens is not None and draft_tokens > 0:
        return draft_tokens
    return drafts * positions
