"""Validation of Prometheus instant-vector results: everything doubtful becomes a Gap, never 0.

Pure: takes the HTTP body of a query answer (`parse_response`) or its decoded `data.result`
(`parse_vector`), so it is tested without processes.
"""

from __future__ import annotations

import json
import math
from collections.abc import Callable, Mapping
from typing import Any, Literal

from pydantic import TypeAdapter, ValidationError
from typing_extensions import TypedDict  # pydantic needs this one on Python < 3.12

from sovereignspec.telemetry.gaps import Gap, GapCode


class VectorSample(TypedDict):
    """One element of an instant vector: labels and `[evaluation time, "value"]`.

    A validated dict, not a model instance: a refresh at 4,000 GPUs validates about 18,000 of them,
    and building model instances cost as much again as parsing the JSON (docs/scale.md)."""

    metric: dict[str, str]
    value: tuple[float, str]


class _VectorData(TypedDict):
    resultType: Literal["vector"]
    result: list[VectorSample]


class _VectorAnswer(TypedDict):
    status: Literal["success"]
    data: _VectorData


_VECTOR = TypeAdapter(list[VectorSample])
_ANSWER = TypeAdapter(_VectorAnswer)


def parse_response(source: str, body: bytes) -> tuple[list[VectorSample], Gap | None]:
    """An HTTP 200 answer of `/api/v1/query`, validated from its bytes in one pass (pydantic-core reads
    the JSON): no decoded document is built first. Anything but a successful instant vector is decoded
    again and judged by `parse_vector`, so its gap says what it was."""
    try:
        samples = _ANSWER.validate_json(body)["data"]["result"]
    except ValidationError:
        try:
            doc = json.loads(body)
            raw = doc["data"]["result"]
        except (ValueError, KeyError, TypeError) as exc:
            detail = str(exc).replace("\n", " ")[:200]
            return [], Gap(source, GapCode.BAD_RESPONSE, f"undecodable answer: {detail}")
        return parse_vector(source, raw)
    if not samples:
        return [], Gap(source, GapCode.EMPTY, "query returned no series")
    return samples, None


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


def in_range(text: str, low: float, high: float, *, low_open: bool = False) -> float | None:
    """The value when `checked_value` would accept it, else None (then call it for the gap): the hot
    loops of a refresh build no subject name for the thousands of values that are fine."""
    try:
        value = float(text)
    except (TypeError, ValueError):
        return None
    # NaN fails every comparison and an infinity fails the finite bound: both give None.
    if (low < value or (value == low and not low_open)) and value <= high:
        return value
    return None


def checked_lazily(
    source: str, subject: Callable[[], str], text: str, low: float, high: float, *, low_open: bool = False
) -> float | Gap:
    """`checked_value`, naming the subject only when there is a gap to report."""
    value = in_range(text, low, high, low_open=low_open)
    if value is not None:
        return value
    return checked_value(source, subject(), text, low, high, low_open=low_open)


def first_label(metric: Mapping[str, str], names: tuple[str, ...]) -> str | None:
    """The first non-empty label among `names` (dcgm-exporter spells the host label two ways)."""
    for name in names:
        v = metric.get(name)
        if v:
            return v
    return None
