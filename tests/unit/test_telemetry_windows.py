"""The policy's telemetry window in seconds: what the simulator averages its telemetry over."""

from __future__ import annotations

import pytest
from pydantic import ValidationError

from sovereignspec.api.telemetry_spec import TelemetrySpec


@pytest.mark.parametrize(("window", "seconds"), [("45s", 45.0), ("1m", 60.0), ("2m", 120.0), ("1h", 3600.0)])
def test_window_seconds(window: str, seconds: float) -> None:
    assert TelemetrySpec.model_validate({"window": window}).window_seconds == seconds


def test_the_default_is_two_minutes() -> None:
    assert TelemetrySpec().window_seconds == 120.0


@pytest.mark.parametrize("bad", ["2", "1d", "m", "-1m", "1.5m"])
def test_a_window_that_prometheus_cannot_read_is_refused(bad: str) -> None:
    with pytest.raises(ValidationError, match="window"):
        TelemetrySpec.model_validate({"window": bad})
