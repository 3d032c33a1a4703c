"""Drift conditions for the operator's sweep. The verdict itself (`evaluate_drift`: would we still
decide the same speculation for an admitted workload, on its node, today, with the workload's own load
taken out of its GPUs' measured tensor-active) is pure and lives in sovereignspec/policy/drift.py, so
that the evidence simulator runs the same rule; this module turns verdicts into the `Drift` condition
and the grace period (hysteresis) before reconfigureOnDrift re-admits a workload.
"""

from __future__ import annotations

import math
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from sovereignspec.api.meta import rfc3339, wire_time
from sovereignspec.api.speculation_decision import MESSAGE_CHARS
from sovereignspec.policy.decision import DRIFT
from sovereignspec.policy.drift import UNKNOWN, DriftResult, evaluate_drift, k_at

NEIGHBOUR_HARM = "NeighbourHarm"
"""The Drift condition's reason for neighbour harm (`DriftResult.neighbour_harm`): the budget is cut while
an SLO-bound engine on the workload's GPUs runs within `safety` of its SLO."""

__all__ = [
    "DRIFT",
    "NEIGHBOUR_HARM",
    "UNKNOWN",
    "DriftResult",
    "SweepPace",
    "drift_condition",
    "evaluate_drift",
    "grace_over",
    "k_at",
]


@dataclass
class _Ledger:
    """What a sweep spent, and what the operator spent, in one state (answering admissions or not)."""

    spent: float = 0.0
    process: float = 0.0
    wall: float = 0.0


class SweepPace:
    """Keeps a sweep's CPU under `share` of the operator's CPU: `delay()` says how long to sleep before
    the next item so that the CPU the sweep spent so far is at most `share` of all the CPU the
    operator's process spent since the sweep began (the sweep's own included), or, when the operator
    is otherwise idle, at most `floor` of the wall time since the sweep began; both counted over the
    time the operator was not answering admissions (below).

    The drift sweep re-evaluates every admitted workload (about 1.2 ms of CPU each on a quiet machine,
    bench/drift_bench.py). Paced to a share of *wall* time (session 7), it took that share of the core
    whatever the operator did otherwise: when decisions are sparse (workloads queued for quota) the
    operator is mostly idle, and 10 % of wall time was 39 % of its CPU (docs/scale.md, session 8).
    Paced to a share of the operator's own CPU it stays that share of it, in bursts and when queued;
    the `floor` (of wall time) lets a sweep end when nothing else runs. Either way the same work is
    spread out, admissions do not queue behind a burst of evaluations, and a sweep longer than the
    drift interval delays the next one, so its cost per unit of time falls with its pace.

    Admissions come first: while `answering()` says the operator is answering admission checks, the
    sweep keeps under `busy_share` of the operator's CPU spent meanwhile. The two states keep separate
    ledgers (the sweep's CPU, the operator's CPU, wall time), so time spent answering earns the idle
    share and the floor nothing, and no credit is spent in a burst of evaluations afterwards
    (docs/scale.md, session 23).
    """

    POLL = 0.25
    """Seconds between checks while waiting for the rest of the operator's CPU to catch up."""

    def __init__(
        self,
        share: float,
        *,
        floor: float = 0.0,
        busy_share: float | None = None,
        answering: Callable[[], bool] = lambda: False,
        cpu: Callable[[], float] = time.thread_time,
        process_cpu: Callable[[], float] = time.process_time,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self.share, self.floor = share, min(floor, share)
        self.busy_share = share if busy_share is None else min(busy_share, share)
        self._answering = answering
        self._cpu, self._process_cpu, self._clock = cpu, process_cpu, clock
        self._last = clock()
        self._last_process = process_cpu()
        self.idle, self.busy = _Ledger(), _Ledger()
        self._was_busy = self._item_busy = answering()
        self._mark: float | None = None

    @property
    def spent(self) -> float:
        return self.idle.spent + self.busy.spent

    def delay(self) -> float:
        """Seconds to sleep before the next item (0 when within the share); counts the item just done."""
        now_cpu = self._cpu()
        if self._mark is not None:
            (self.busy if self._item_busy else self.idle).spent += now_cpu - self._mark
            self._mark = None
        now, process, busy = self._clock(), self._process_cpu(), self._answering()
        past = self.busy if self._was_busy else self.idle
        past.wall += now - self._last
        past.process += process - self._last_process
        self._last, self._last_process, self._was_busy = now, process, busy
        if busy:
            ok = self.busy_share >= 1 or self.busy.spent <= self.busy_share * self.busy.process
            return 0.0 if ok else self.POLL
        led = self.idle
        if self.share >= 1 or led.spent <= self.share * led.process:
            return 0.0
        by_wall = led.spent / self.floor - led.wall if self.floor > 0 else math.inf
        return max(0.0, min(by_wall, self.POLL))

    def resume(self) -> None:
        """The item about to run starts here (after the sleep: other handlers' CPU is not ours)."""
        self._mark, self._item_busy = self._cpu(), self._was_busy


def grace_over(condition: Mapping[str, Any] | None, result: DriftResult, now: datetime) -> bool:
    """Drift=True has lasted at least the policy's grace period (hysteresis against flapping)."""
    if condition is None or condition.get("status") != "True":
        return False
    since = wire_time(condition.get("lastTransitionTime"))
    return since is not None and (now - since).total_seconds() >= result.grace_seconds


def drift_condition(
    previous: Mapping[str, Any] | None,
    result: DriftResult,
    generation: int | None,
    now: datetime,
    refresh_seconds: float = 0.0,
) -> dict[str, Any] | None:
    """The Drift condition to apply, or None when the one on record already says the same, or when both
    say NoDrift and the one on record was written less than `refresh_seconds` ago.

    A stable verdict's message carries live figures (today's schedule at other batch sizes, predicted
    S_real under the hysteresis) that move with every telemetry refresh; rewriting them on every sweep
    was one status apply and one watch event per admitted workload per sweep, the largest
    self-inflicted load of an idle operator (docs/scale.md). A drifted verdict's message says what k
    would become at the expected batch, which a user acts on: it is written whenever it changes.
    """
    status = "True" if result.drifted else "False"
    reason = (
        (NEIGHBOUR_HARM if result.neighbour_harm else "SpeculationDrifted") if result.drifted else "NoDrift"
    )
    if previous is not None and previous.get("status") == status and previous.get("reason") == reason:
        if previous.get("message") == result.message:
            return None
        written = wire_time(previous.get("lastUpdateTime") or previous.get("lastTransitionTime"))
        recent = written is not None and (now - written).total_seconds() < refresh_seconds
        if recent and not result.drifted:
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
        "lastUpdateTime": rfc3339(now),
    }
    if generation is not None:
        cond["observedGeneration"] = generation
    return cond
