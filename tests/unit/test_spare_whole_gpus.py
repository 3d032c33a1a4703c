"""Issue 16's placement rule `spareWholeGpus` (RelativeSpeedup; measured in session 9, the default since
session 15: docs/decision.md).
A workload above defaultExpectedBatch does not take an empty GPU when a node where it shares an occupied
GPU predicts at least its decode rate S_real / t_u(B); in a small workload's keepCapacity band the nodes
predicting at least the S_real-best node's rate join, and the slot that holds the smallest share of
hardware (unloaded plain step times engines per GPU) comes first. Off: the session-8 rules."""

from __future__ import annotations

from sovereignspec.api.speculation_policy import SpeculationPolicySpec
from tests.unit.test_keep_capacity import A100, H100, H200, RTX4090, _decide, _snapshot


def test_spare_whole_gpus_is_the_default_and_can_be_switched_off() -> None:
    assert SpeculationPolicySpec().spare_whole_gpus is True
    assert SpeculationPolicySpec.model_validate({"spareWholeGpus": False}).spare_whole_gpus is False


def test_a_large_workload_leaves_an_idle_slow_gpu_for_a_loaded_fast_one_that_beats_it_in_rate() -> None:
    """heldout-campus's triage-bot: the idle A100's higher S_real took a whole two-engine GPU, while the
    H200 next to one engine gives the workload about twice the tokens/s."""
    snap = _snapshot([("a100", A100, 2, [(0.0, []), (0.0, [])]), ("h200", H200, 3, [(0.3, [20])])])
    assert _decide(snap, "interactive", 12, spareWholeGpus=False).node == "a100"
    spared = _decide(snap, "interactive", 12, spareWholeGpus=True)
    assert spared.node == "h200" and spared.speculative.enabled


def test_a_large_workload_still_takes_an_empty_gpu_that_is_faster() -> None:
    snap = _snapshot([("a100", A100, 2, [(0.3, [20])]), ("h200", H200, 2, [(0.0, [])])])
    assert _decide(snap, "interactive", 12, spareWholeGpus=True).node == "h200"
    assert _decide(snap, "interactive", 12, spareWholeGpus=False).node == "h200"


def test_a_small_workload_takes_a_third_of_a_loaded_h200_rather_than_a_whole_idle_h100() -> None:
    """heldout-campus's tutor-2: the whole H100 (one engine per GPU) is the only band node that keeps
    capacity under the session-8 rule; the H200 slot predicts a higher rate and holds a third of a GPU."""
    snap = _snapshot(
        [("h100", H100, 1, [(0.0, [])]), ("h200", H200, 3, [(0.25, [20])]), ("a100", A100, 2, [(0.0, [])])]
    )
    assert _decide(snap, "interactive", 6, spareWholeGpus=False).node == "h100"
    assert _decide(snap, "interactive", 6, spareWholeGpus=True).node == "h200"


def test_a_small_workload_still_takes_the_slow_card_for_an_insignificant_gain() -> None:
    snap = _snapshot(
        [("h100", H100, 2, [(0.1, [4])]), ("r4090", RTX4090, 1, [(0.0, [])]), ("h200", H200, 2, [(0.0, [])])]
    )
    assert _decide(snap, "interactive", 4, spareWholeGpus=True).node == "r4090"
    assert _decide(snap, "interactive", 4, spareWholeGpus=False).node == "r4090"


def test_a_large_workload_takes_the_card_with_the_higher_predicted_rate_not_the_higher_speedup() -> None:
    """Session 19: on idle cards, S_real is highest where the plain step is slowest; a batch-61 workload
    ranked by it went to an RTX 4090 at a third of the H100's tokens/s (random pools, docs/decision.md
    "Large workloads by predicted rate"). Ranked by S_real / t_u(B), it takes the H200."""
    idle = [(0.0, [])]
    snap = _snapshot([("h100", H100, 2, idle * 2), ("h200", H200, 2, idle), ("r4090", RTX4090, 1, idle)])
    for batch in (16, 61):
        got = _decide(snap, "interactive", batch)
        speedup = {c.node: c.predicted_speedup or 0.0 for c in got.candidates}
        assert speedup["h100"] > speedup["h200"] > speedup["r4090"]  # the old key ranks h100 first
        assert got.node == "h200" and got.speculative.enabled
        assert [c.node for c in got.candidates] == ["h200", "h100", "r4090"]
