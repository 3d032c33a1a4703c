"""Validation of Prometheus instant-vector results: everything doubtful becomes a Gap, never 0.

Pure: takes the decoded JSON `data.result` that prometheus-api-client returns, so it is tested
without processes.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from typing import Any

from pydantic import BaseModel, ConfigDict, TypeAdapter, ValidationError

from sovereignspec.telemetry.gaps import Gap, GapCode


class VectorSample(BaseModel):
    """One element of an instant vector: labels and `[evaluation time, "value"]`."""

    model_config = ConfigDict(frozen=True, extra="ignore", strict=False)

    metric: dict[str, str]
    value: tuple[float, str]


_VECTOR = TypeAdapter(list[VectorSample])


def parse_vector(source: str, raw: Any) -> tuple[list[VectorSample], Gap | None]:
    """Decode a query result as an instant vector; scalars, strings and matrices are the wrong type."""
    if not isinstance(raw, list) or (raw and not all(isinstance(x, Mapping) for x in raw)):
        return [], Gap(source, GapCode.WRONG_TYPE, f"expected an instant vector, got {_describe(raw)}")
    try:
        samples = _VECTOR.validate_python(raw)
    except ValidationError as exc:
        first = exc.errors()[0]
        where = ".".join(str(p) for p in first["loc"])
        return [], Gap(source, GapCode.WRONG_TYPE, f"not an instant vector ({where}: {first['msg']})")
    if not samples:
        return [], Gap(source, GapCode.EMPTY, "query returned no series")
    return samples, None


def _describe(raw: Any) -> str:
    if isinstance(raw, list) and len(raw) == 2 and isinstance(raw[1], str):
        return "a scalar or string"
    return type(raw).__name__


def checked_value(
    source: str, subject: str, text: str, low: float, high: float, *, low_open: bool = False
) -> float | Gap:
    """The sample's value if finite and within [low, high] (or (low, high]); else a Gap naming why."""
    try:
        value = float(text)
    except (TypeError, ValueError):
        return Gap(source, GapCode.WRONG_TYPE, f"{subject}: value {text!r} is not a number")
    if math.isnan(value):
        return Gap(source, GapCode.NAN, f"{subject}: value is NaN")
    if math.isinf(value):
        return Gap(source, GapCode.INF, f"{subject}: value is {value}")
    if value < 0 and low >= 0:
        return Gap(source, GapCode.NEGATIVE, f"{subject}: value {value:g} is negative")
    if value < low or value > high or (low_open and value == low):
        bracket = "(" if low_open else "["
        return Gap(
            source, GapCode.OUT_OF_RANGE, f"{subject}: value {value:g} outside {bracket}{low:g}, {high:g}]"
        )
    return value


def first_label(metric: Mapping[str, str], names: tuple[str, ...]) -> str | None:
    """The first non-empty label among `names` (dcgm-exporter spells the host label two ways)."""
    for name in names:
        v = metric.get(name)
        if v:
            return v
    return None
