"""Acceptance read from engines that draft different k: the aggregate inversion at the mean draft length,
and samples of one (target, draft, method) pooled on their common positions.

Engines running a per-batch-size schedule draft a different k from one step to the next, and engines of
one pair run different schedules. The old aggregate path inverted at the rounded mean k, so a mean of 2.4
read as k = 2 and a mean accepted count above 2 as alpha = 1; the old pooling dropped every per-position
count as soon as two engines reported different widths, which sent the decision down that path
(docs/decision.md, "Acceptance pooled over engines").
"""

from __future__ import annotations

from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from sovereignspec.api.speculation_policy import BetaPrior
from sovereignspec.model.acceptance import estimate_acceptance, mean_accepted_iid, pool_samples
from sovereignspec.model.telemetry import AcceptanceSample, TelemetrySnapshot
from sovereignspec.policy.claims import Claims
from sovereignspec.policy.speculation import acceptance_sample

PRIOR = BetaPrior(mean=0.8, strength=20)
MILLION = 1_000_000.0


def counters(mix: dict[int, float], **accepted: Any) -> AcceptanceSample:
    """One pair's counters over drafts of several lengths (k -> drafts), with the accepted counts given."""
    return AcceptanceSample(
        target_model="t",
        draft_model="d",
        method="eagle3",
        drafts=sum(mix.values()),
        draft_tokens=sum(k * n for k, n in mix.items()),
        **accepted,
    )


def aggregate(alpha: float, mix: dict[int, float]) -> AcceptanceSample:
    """Exact expected aggregate counters of drafts of several lengths (k -> drafts) at i.i.d. alpha."""
    return counters(mix, accepted=sum(n * mean_accepted_iid(alpha, k) for k, n in mix.items()))


def cut(alpha: float, mix: dict[int, float]) -> AcceptanceSample:
    """Exact expected per-position counters of one engine whose schedule drafted k tokens in `mix[k]` of
    its drafts (i.i.d. alpha): position i counts only the drafts of k >= i, as vLLM's counters do."""
    per_position = [sum(n for k, n in mix.items() if k >= i) * alpha**i for i in range(1, max(mix) + 1)]
    return counters(mix, accepted_per_position=per_position)


def positions(alpha: float, k: int, drafts: float) -> AcceptanceSample:
    """Exact expected per-position counters of `drafts` drafts of k at i.i.d. alpha."""
    return cut(alpha, {k: drafts})


def test_a_mean_draft_length_that_rounds_down_no_longer_reads_as_certain_acceptance() -> None:
    # Half the drafts at k=1, half at k=4 (mean 2.5, rounded to 2 before), alpha 0.95:
    # m = 0.5 * 0.95 + 0.5 * (0.95 + 0.9025 + 0.857375 + 0.81450625) = 2.237 >= 2, read as alpha = 1.
    got = estimate_acceptance(PRIOR, aggregate(0.95, {1: MILLION, 4: MILLION}), 8, 0.5)
    assert got.source == "aggregate"
    assert 0.9 < got.alpha <= 0.95


@settings(max_examples=200, deadline=None)
@given(
    alpha=st.floats(0.3, 0.97),
    mix=st.dictionaries(st.integers(1, 8), st.floats(1.0, 10.0), min_size=1, max_size=4),
)
def test_the_aggregate_estimate_never_overstates_alpha(alpha: float, mix: dict[int, float]) -> None:
    # m(alpha, k) is concave in k: the mean over drafts is at most m at the mean k, so the inversion at
    # the mean k gives at most the true alpha (equal when every draft has one k).
    sample = aggregate(alpha, {k: n * MILLION for k, n in mix.items()})
    got = estimate_acceptance(PRIOR, sample, 8, 0.5).alpha
    assert got <= alpha + 1e-4
    if len(mix) == 1:
        assert got == pytest.approx(alpha, abs=1e-3)


def test_samples_of_different_widths_pool_on_their_common_positions() -> None:
    short, long = positions(0.8, 2, 1000.0), positions(0.8, 4, 3000.0)
    pooled = pool_samples([short, long])
    assert pooled.drafts == 4000.0
    assert pooled.draft_tokens == 2 * 1000.0 + 4 * 3000.0
    assert pooled.accepted_per_position == pytest.approx([4000.0 * 0.8, 4000.0 * 0.64])
    assert pooled.accepted == pytest.approx(1000.0 * 1.44 + 3000.0 * (0.8 + 0.64 + 0.512 + 0.4096))


def test_the_decision_reads_per_position_counts_from_engines_of_different_k() -> None:
    # Before: two engines of one pair with 2 and 4 positions lost their per-position counts, and with
    # no accepted total the decision fell back to the prior.
    tel = TelemetrySnapshot(acceptance=[positions(0.9, 2, 5000.0), positions(0.9, 4, 5000.0)])
    claims = Claims("interactive", "t", "d", "eagle3", tpot_slo_ms=100.0, expected_batch=8)
    sample = acceptance_sample(tel, claims)
    assert sample is not None and len(sample.accepted_per_position) == 2
    got = estimate_acceptance(PRIOR, sample, 8, 0.5)
    assert got.source == "observed"
    assert got.alpha == pytest.approx(0.9, abs=0.01)


def test_one_sample_pools_to_itself_and_none_is_an_error() -> None:
    one = positions(0.7, 3, 10.0)
    assert pool_samples([one]) is one
    with pytest.raises(ValueError):
        pool_samples([])


def test_drafts_the_schedule_cut_short_do_not_read_as_rejections() -> None:
    # Three drafts in four at k=1 (a large batch), one at k=3: position 2 has 1M trials, not 3.2M. Read as
    # 3.2M, its conditional rate was 0.2 and the decision alpha about 0.6, below the weak-draft threshold
    # for a draft that accepts 0.8 (docs/decision.md, "Drafts cut by the schedule").
    sample = cut(0.8, {1: 3 * MILLION, 3: MILLION})
    assert sample.accepted is None
    got = estimate_acceptance(PRIOR, sample, 8, 0.5)
    assert got.source == "aggregate"
    assert 0.75 < got.alpha <= 0.8 + 1e-4  # 0.771: the aggregate inversion's concavity bound
    assert got.p[1] > 0.55  # position 2: 0.64 at the truth, 0.16 read position by position


@settings(max_examples=200, deadline=None)
@given(
    alpha=st.floats(0.3, 0.97),
    mix=st.dictionaries(st.integers(1, 8), st.floats(1.0, 10.0), min_size=1, max_size=4),
)
def test_per_position_counts_of_any_schedule_never_overstate_alpha(
    alpha: float, mix: dict[int, float]
) -> None:
    sample = cut(alpha, {k: n * MILLION for k, n in mix.items()})
    got = estimate_acceptance(PRIOR, sample, 8, 0.5)
    assert got.alpha <= alpha + 1e-4
    if len(mix) == 1:  # one k: every draft proposed every position, read position by position
        assert got.source == "observed"
        assert got.alpha == pytest.approx(alpha, abs=1e-3)


@settings(max_examples=200, deadline=None)
@given(alpha=st.floats(0.3, 0.97), k=st.integers(1, 7), share=st.floats(0.1, 0.95))
def test_a_schedule_between_two_neighbouring_k_reads_close_to_the_truth(
    alpha: float, k: int, share: float
) -> None:
    # A batch that moves across one boundary of the schedule drafts k or k + 1; the inversion at the mean
    # length then loses at most 0.016 (worse for lengths far apart, e.g. 0.10 for k = 1 and 8).
    got = estimate_acceptance(PRIOR, cut(alpha, {k: share * MILLION, k + 1: (1 - share) * MILLION}), 8, 0.5)
    assert got.source == "aggregate"
    assert alpha - 0.02 < got.alpha <= alpha + 1e-4


def test_a_pool_with_a_cut_sample_keeps_only_the_totals() -> None:
    full, short = positions(0.8, 3, 2 * MILLION), cut(0.8, {1: MILLION, 3: MILLION})
    pooled = pool_samples([full, short])
    assert pooled.accepted_per_position == []
    assert pooled.drafts == 4 * MILLION
    assert pooled.draft_tokens == 6 * MILLION + 4 * MILLION
    totals = sum(full.accepted_per_position) + sum(short.accepted_per_position)
    assert pooled.accepted == pytest.approx(totals)
    assert estimate_acceptance(PRIOR, pooled, 8, 0.5).alpha == pytest.approx(0.8, abs=0.02)
    # Full-length samples of different widths still pool position by position.
    assert len(pool_samples([full, positions(0.8, 2, MILLION)]).accepted_per_position) == 2
