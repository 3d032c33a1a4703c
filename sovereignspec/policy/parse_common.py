"""What every parse function shares: ParseError, typed access to a raw object's fields, quantities,
GPU requests, taints and tolerations."""

from __future__ import annotations

import contextlib
import math
import re
from collections.abc import Mapping
from typing import Any, TypeVar

from pydantic import ValidationError

from sovereignspec.api.base import Model
from sovereignspec.api.meta import (
    RESOURCE_GPU,
    Toleration,
)
from sovereignspec.model.cluster import (
    Taint,
)

M = TypeVar("M", bound=Model)


class ParseError(ValueError):
    """A Kubernetes object that cannot be read; the message names the object and the field."""


def where_of(obj: Mapping[str, Any]) -> str:
    meta = obj.get("metadata")
    meta = meta if isinstance(meta, Mapping) else {}
    name = meta.get("name", "?")
    ns = meta.get("namespace")
    return f"{obj.get('kind', 'object')} {f'{ns}/' if ns else ''}{name}"  # any type: fuzzed input


def field_map(value: Any, what: str, where: str) -> Mapping[str, Any]:
    if value is None:
        return {}
    if not isinstance(value, Mapping):
        raise ParseError(f"{where}: {what} must be a mapping, got {type(value).__name__}")
    return value


def field_list(value: Any, what: str, where: str) -> list[Any]:
    if value is None:
        return []
    if not isinstance(value, list):
        raise ParseError(f"{where}: {what} must be a list, got {type(value).__name__}")
    return value


def map_list(value: Any, what: str, where: str) -> list[Mapping[str, Any]]:
    """A list of objects (`what[]` names an element that is not one)."""
    return [field_map(v, f"{what}[]", where) for v in field_list(value, what, where)]


def str_map(value: Any, what: str, where: str) -> dict[str, str]:
    m = field_map(value, what, where)
    out: dict[str, str] = {}
    for k, v in m.items():
        if not isinstance(k, str) or isinstance(v, (dict, list)):
            raise ParseError(f"{where}: {what}[{k!r}] must be a string")
        out[k] = "" if v is None else (str(v).lower() if isinstance(v, bool) else str(v))
    return out


def validation_message(exc: ValidationError) -> str:
    parts = []
    for err in exc.errors()[:5]:
        loc = ".".join(str(x) for x in err["loc"])
        parts.append(f"{loc}: {err['msg']}" if loc else err["msg"])
    more = f" (+{exc.error_count() - 5} more)" if exc.error_count() > 5 else ""
    return "; ".join(parts) + more


def validate(cls: type[M], data: Any, where: str) -> M:
    try:
        return cls.model_validate(data)
    except ValidationError as exc:
        raise ParseError(f"{where}: {validation_message(exc)}") from None


_QUANTITY = re.compile(r"^([+-]?[0-9.]+(?:[eE][+-]?[0-9]+)?)(m|k|M|G|T|P|E|Ki|Mi|Gi|Ti|Pi|Ei)?$")
_SUFFIX = {
    None: 1.0, "m": 1e-3, "k": 1e3, "M": 1e6, "G": 1e9, "T": 1e12, "P": 1e15, "E": 1e18,
    "Ki": 2.0**10, "Mi": 2.0**20, "Gi": 2.0**30, "Ti": 2.0**40, "Pi": 2.0**50, "Ei": 2.0**60,
}  # fmt: skip


def parse_quantity(value: Any, what: str = "quantity", where: str = "object") -> float:
    """A Kubernetes resource.Quantity ("2", 2, "500m", "1Gi") as a float."""
    if isinstance(value, bool):
        raise ParseError(f"{where}: {what} must be a quantity, got {value!r}")
    q: float | None = None
    if isinstance(value, (int, float)):
        try:
            q = float(value)
        except OverflowError:  # an int beyond float range
            q = math.inf
    elif isinstance(value, str):
        m = _QUANTITY.match(value.strip())
        if m:
            with contextlib.suppress(ValueError):
                q = float(m.group(1)) * _SUFFIX[m.group(2)]
    if q is not None and not math.isfinite(q):  # "1e309", NaN: int() of it would raise
        raise ParseError(f"{where}: {what} {value!r} is not a finite quantity")
    if q is None:
        raise ParseError(f"{where}: {what} {value!r} is not a quantity")
    return q


MAX_GPUS = 2**31 - 1
"""Most GPUs one count may say (a node's allocatable, a container's request): the decision core keeps
them in int64 arrays, where a finite but huge quantity (9.2e18, found by tests/chaos/test_fuzz.py)
overflowed and crashed every decision while the node existed."""


def gpu_count(value: Any, where: str) -> int:
    """A GPU quantity as an int, refused (ParseError) above MAX_GPUS."""
    q = parse_quantity(value, RESOURCE_GPU, where)
    if q > MAX_GPUS:
        raise ParseError(f"{where}: {RESOURCE_GPU} {value!r} is more GPUs than any node has")
    return int(q)


def resources_gpus(resources: Mapping[str, Any], where: str) -> int:
    req = field_map(resources.get("requests"), "resources.requests", where)
    lim = field_map(resources.get("limits"), "resources.limits", where)
    return gpu_count(req.get(RESOURCE_GPU, lim.get(RESOURCE_GPU, 0)), where)


def pod_spec_gpus(spec: Mapping[str, Any], where: str) -> int:
    """GPUs a pod spec requests: sum over containers, at least the largest init container."""
    total = 0
    for c in field_list(spec.get("containers"), "spec.containers", where):
        total += resources_gpus(
            field_map(field_map(c, "container", where).get("resources"), "resources", where), where
        )
    init = 0
    for c in field_list(spec.get("initContainers"), "spec.initContainers", where):
        init = max(
            init,
            resources_gpus(
                field_map(field_map(c, "container", where).get("resources"), "resources", where), where
            ),
        )
    return max(total, init)


def taints_of(raw: Any, what: str, where: str) -> list[Taint]:
    out = []
    for t in field_list(raw, what, where):
        t = field_map(t, what, where)
        if not isinstance(t.get("key"), str) or not isinstance(t.get("effect"), str):
            raise ParseError(f"{where}: {what} entries need key and effect")
        out.append(Taint(key=t["key"], value=t.get("value"), effect=t["effect"]))
    return out


def tolerations_of(raw: Any, what: str, where: str) -> list[Toleration]:
    return [validate(Toleration, t, f"{where}: {what}") for t in field_list(raw, what, where)]


def meta_of(obj: Mapping[str, Any]) -> tuple[Mapping[str, Any], str]:
    if not isinstance(obj, Mapping):
        raise ParseError(f"expected a Kubernetes object (mapping), got {type(obj).__name__}")
    where = where_of(obj)
    meta = field_map(obj.get("metadata"), "metadata", where)
    if not isinstance(meta.get("name"), str) or not meta["name"]:
        raise ParseError(f"{where}: metadata.name is required")
    return meta, where
