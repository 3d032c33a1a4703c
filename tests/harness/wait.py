"""Polling with a deadline: tests against real processes wait for state, never sleep blindly."""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import TypeVar

T = TypeVar("T")


class WaitTimeout(AssertionError):
    """The awaited state did not appear in time; the message says what was last seen."""


def wait_until(
    probe: Callable[[], T | None],
    *,
    timeout: float,
    what: str,
    interval: float = 0.5,
    describe: Callable[[], str] | None = None,
) -> T:
    """Call `probe` until it returns something truthy, and return that.

    `describe` (optional) is called once on timeout to put the last observed state in the error.
    """
    deadline = time.monotonic() + timeout
    while True:
        result = probe()
        if result:
            return result
        if time.monotonic() >= deadline:
            seen = f"; last seen: {describe()}" if describe else ""
            raise WaitTimeout(f"timed out after {timeout:.0f}s waiting for {what}{seen}")
        time.sleep(interval)
