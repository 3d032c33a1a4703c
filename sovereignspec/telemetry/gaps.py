"""Why a telemetry value is missing: a bounded code for metrics, a sentence for people."""

from __future__ import annotations

from enum import StrEnum
from typing import NamedTuple

from sovereignspec.model.telemetry import TelemetryGap


class GapCode(StrEnum):
    """Bounded set of reasons; used as the `reason` label of the error counter."""

    TIMEOUT = "timeout"
    CONNECTION = "connection"
    HTTP = "http"
    BAD_RESPONSE = "bad_response"
    ERROR = "error"
    WRONG_TYPE = "wrong_type"
    EMPTY = "empty"
    MISSING_LABEL = "missing_label"
    DUPLICATE = "duplicate"
    NAN = "nan"
    INF = "inf"
    NEGATIVE = "negative"
    OUT_OF_RANGE = "out_of_range"
    STALE = "stale"
    NOT_FRESH = "not_fresh"
    INCONSISTENT = "inconsistent"
    UNMAPPED = "unmapped"


class Gap(NamedTuple):
    source: str
    code: GapCode
    detail: str

    def telemetry_gap(self) -> TelemetryGap:
        return TelemetryGap(source=self.source, reason=f"{self.code.value}: {self.detail}")
