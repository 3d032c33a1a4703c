"""The operator's CPU per watch event, one loop for `make bench-floor` (an empty cluster) and the scale
bench (inside its own run, on the run's heap and objects), so that the two figures are one measurement.

A round patches a label on each object of a kind (one watch event each), waits until the operator's
event counter has moved by as many, waits `tail_s` more for the last handlers' tails, and divides the
CPU each clock read, less that clock's idle rate over the round's wall time, by the events counted
(other events of the kind that arrived meanwhile are counted and paid for alike). The figure per kind
is the median over rounds.
"""

from __future__ import annotations

import statistics
import time
from collections.abc import Callable, Mapping
from typing import Any

from tests.harness.wait import wait_until

Clock = Callable[[], float]
"""CPU-seconds so far: the operator process's, or one of its threads'."""

Patcher = tuple[int, Callable[[int, str], Any]]
"""(n objects, patch(i, label value)) for one kind."""


def idle_rates(clocks: Mapping[str, Clock], seconds: float) -> dict[str, float]:
    """Each clock's CPU-seconds per second of wall over `seconds` with nothing patched."""
    c0, t0 = {k: c() for k, c in clocks.items()}, time.monotonic()
    time.sleep(seconds)
    wall = time.monotonic() - t0
    return {k: (c() - c0[k]) / wall for k, c in clocks.items()}


def event_cost(
    patchers: Mapping[str, Patcher],
    events: Callable[[str], float],
    clocks: Mapping[str, Clock],
    idle: Mapping[str, float],
    rounds: int = 3,
    tail_s: float = 1.0,
    timeout_s: float = 120.0,
    say: Callable[[str], None] = print,
) -> dict[str, dict[str, float]]:
    """ms of CPU per watch event, {clock: {kind: median over rounds}}; `events(kind)` reads the
    operator's own counter of the kind's handled events. Round r patches the label value str(r)."""
    per: dict[str, dict[str, list[float]]] = {c: {k: [] for k in patchers} for c in clocks}
    for rnd in range(1, rounds + 1):
        for kind, (n, patch) in patchers.items():
            if n <= 0:
                continue
            before = events(kind)
            c0, t0 = {c: clock() for c, clock in clocks.items()}, time.monotonic()
            for i in range(n):
                patch(i, str(rnd))
            wait_until(
                lambda k=kind, b=before, m=n: events(k) >= b + m,
                timeout=timeout_s,
                interval=0.5,
                what=f"{n} {kind} events handled",
            )
            time.sleep(tail_s)
            counted = events(kind) - before
            wall = time.monotonic() - t0
            costs = {c: 1000 * (clock() - c0[c] - idle[c] * wall) / counted for c, clock in clocks.items()}
            for c, ms in costs.items():
                per[c][kind].append(ms)
            say(
                f"round {rnd}, {kind}: {counted:.0f} events handled, "
                + ", ".join(f"{c} {ms:.2f} ms each" for c, ms in costs.items())
            )
    return {c: {k: statistics.median(v) for k, v in kinds.items() if v} for c, kinds in per.items()}
