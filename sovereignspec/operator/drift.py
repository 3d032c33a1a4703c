"""Drift conditions for the operator's sweep. The verdict itself (`evaluate_drift`: would we still
decide the same speculation for an admitted workload, on its node, today, with the workload's own load
taken out of its GPUs' measured tensor-active) is pure and lives in sovereignspec/policy/drift.py, so
that the evidence simulator runs the same rule; this module turns verdicts into the `Drift` condition
and the grace period (hysteresis) before reconfigureOnDrift re-admits a workload.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Mapping
from datetime import datetime
from typing import Any

from sovereignspec.api.meta import rfc3339
from sovereignspec.api.speculation_decision import MESSAGE_CHARS
from sovereignspec.policy.decision import DRIFT
from sovereignspec.policy.drift import UNKNOWN, DriftResult, evaluate_drift, k_at

__all__ = [
    "DRIFT",
    "UNKNOWN",
    "DriftResult",
    "SweepPace",
    "drift_condition",
    "evaluate_drift",
    "grace_over",
    "k_at",
]


class SweepPace:
    """Keeps a sweep's CPU under `share` of its wall time: `delay()` says how long to sleep before the
    next item so that CPU spent so far <= share x time since the sweep began.

    The drift sweep re-evaluates every admitted workload (about 0.7 ms of CPU each, bench/drift_bench.py):
    at 1,000 workloads that was a burst of 0.7 s on the operator's one core every interval, and every
    admission arriving meanwhile waited behind it. Paced, the same work is spread out, and at any size
    the sweep takes at most `share` of the core; a sweep longer than the interval delays the next one.
    """

    def __init__(
        self,
        share: float,
        *,
        cpu: Callable[[], float] = time.thread_time,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self.share = share
        self._cpu, self._clock = cpu, clock
        self.started = clock()
        self.spent = 0.0
        self._mark: float | None = None

    def delay(self) -> float:
        """Seconds to sleep before the next item (0 when within the share); counts the item just done."""
        now_cpu = self._cpu()
        if self._mark is not None:
            self.spent += now_cpu - self._mark
        if self.share >= 1:
            return 0.0
        return max(0.0, self.spent / self.share - (self._clock() - self.started))

    def resume(self) -> None:
        """The item about to run starts here (after the sleep: other handlers' CPU is not ours)."""
        self._mark = self._cpu()


def grace_over(condition: Mapping[str, Any] | None, result: DriftResult, now: datetime) -> bool:
    """Drift=True has lasted at least the policy's grace period (hysteresis against flapping)."""
    if condition is None or condition.get("status") != "True" or not condition.get("lastTransitionTime"):
        return False
    since = datetime.fromisoformat(str(condition["lastTransitionTime"]).replace("Z", "+00:00"))
    return (now - since).total_seconds() >= result.grace_seconds


def drift_condition(
    previous: Mapping[str, Any] | None, result: DriftResult, generation: int | None, now: datetime
) -> dict[str, Any] | None:
    """The Drift condition to apply, or None when the one on record already says the same."""
    status = "True" if result.drifted else "False"
    reason = "SpeculationDrifted" if result.drifted else "NoDrift"
    if (
        previous is not None
        and previous.get("status") == status
        and previous.get("reason") == reason
        and previous.get("message") == result.message
    ):
        return None
    keep = previous is not None and previous.get("status") == status and previous.get("lastTransitionTime")
    cond: dict[str, Any] = {
        "type": DRIFT,
        "status": status,
        "reason": reason,
        "message": result.message[:MESSAGE_CHARS],
        "lastTransitionTime": previous["lastTransitionTime"]  # type: ignore[index]
        if keep
        else rfc3339(now),
    }
    if generation is not None:
        cond["observedGeneration"] = generation
    return cond
