"""Generate the CustomResourceDefinitions in `crds/` from the pydantic models (the one source).

`python -m sovereignspec.api.crdgen [DIR]` (or `make crds`) rewrites `DIR/*.yaml` (default `crds`);
`tests/unit/test_crdgen.py` fails when the files are stale. The pydantic JSON schema becomes an
OpenAPI v3 *structural* schema: `$ref`s inlined, `Optional` (anyOf with null) collapsed to the
non-null branch, JSON-Schema-2020 `exclusiveMinimum: x` turned into OpenAPI 3.0's
`minimum: x, exclusiveMinimum: true`, titles dropped, and each model's CEL rules
(`x-kubernetes-validations` in its `json_schema_extra`) carried over.
"""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Any

import yaml
from pydantic import BaseModel

from sovereignspec.api.meta import GROUP, VERSION
from sovereignspec.api.sovereignty_policy import SovereigntyPolicySpec
from sovereignspec.api.speculation_decision import SpeculationDecisionSpec, SpeculationDecisionStatus
from sovereignspec.api.speculation_policy import SpeculationPolicySpec

_DROP = {"title"}


def _strip_nulls(value: Any) -> Any:
    """Defaults must validate against a structural schema, which has no nullable fields here."""
    if isinstance(value, dict):
        return {k: _strip_nulls(v) for k, v in value.items() if v is not None}
    if isinstance(value, list):
        return [_strip_nulls(v) for v in value]
    return value


def _resolve(node: Any, defs: dict[str, Any]) -> Any:
    if isinstance(node, list):
        return [_resolve(x, defs) for x in node]
    if not isinstance(node, dict):
        return node
    if "$ref" in node:
        name = node["$ref"].split("/")[-1]
        merged = {**defs[name], **{k: v for k, v in node.items() if k != "$ref"}}
        return _resolve(merged, defs)
    out: dict[str, Any] = {}
    for key, value in node.items():
        if key in _DROP or key == "$defs":
            continue
        if key == "anyOf":
            branches = [b for b in value if b.get("type") != "null"]
            if len(branches) != 1:
                raise ValueError(f"cannot express anyOf {value} structurally")
            for bk, bv in _resolve(branches[0], defs).items():
                out.setdefault(bk, bv)
            continue
        if key == "properties":
            out[key] = {p: _resolve(v, defs) for p, v in value.items()}
            continue
        out[key] = _resolve(value, defs)
    if "exclusiveMinimum" in out and not isinstance(out["exclusiveMinimum"], bool):
        out["minimum"], out["exclusiveMinimum"] = out["exclusiveMinimum"], True
    if "exclusiveMaximum" in out and not isinstance(out["exclusiveMaximum"], bool):
        out["maximum"], out["exclusiveMaximum"] = out["exclusiveMaximum"], True
    if "const" in out:
        out["enum"] = [out.pop("const")]
    if "default" in out:
        if out["default"] is None:
            del out["default"]
        else:
            out["default"] = _strip_nulls(out["default"])
    if out.get("additionalProperties") is False:
        del out["additionalProperties"]  # structural schemas prune unknown fields anyway
    if "format" in out and out["format"] not in ("date-time", "int32", "int64", "float", "double"):
        del out["format"]
    return out


def openapi_schema(model: type[BaseModel]) -> dict[str, Any]:
    raw = model.model_json_schema(by_alias=True, mode="validation")
    schema: dict[str, Any] = _resolve(raw, raw.get("$defs", {}))
    return schema


def _crd(
    kind: str,
    plural: str,
    scope: str,
    spec_model: type[BaseModel],
    status_model: type[BaseModel] | None,
    columns: list[dict[str, Any]],
    short_names: list[str],
    spec_required: bool = True,
    status_subresource: bool = True,
) -> dict[str, Any]:
    props: dict[str, Any] = {
        "apiVersion": {"type": "string"},
        "kind": {"type": "string"},
        "metadata": {"type": "object"},
        "spec": openapi_schema(spec_model),
    }
    if status_model is not None:
        props["status"] = openapi_schema(status_model)
    top: dict[str, Any] = {"type": "object", "properties": props}
    if spec_required:
        top["required"] = ["spec"]
    version: dict[str, Any] = {
        "name": VERSION,
        "served": True,
        "storage": True,
        "schema": {"openAPIV3Schema": top},
    }
    if status_model is not None and status_subresource:
        version["subresources"] = {"status": {}}
    if columns:
        version["additionalPrinterColumns"] = columns
    return {
        "apiVersion": "apiextensions.k8s.io/v1",
        "kind": "CustomResourceDefinition",
        "metadata": {"name": f"{plural}.{GROUP}"},
        "spec": {
            "group": GROUP,
            "names": {
                "kind": kind,
                "listKind": f"{kind}List",
                "plural": plural,
                "singular": kind.lower(),
                "shortNames": short_names,
                "categories": ["sovereignspec"],
            },
            "scope": scope,
            "versions": [version],
        },
    }


def _col(
    name: str, path: str, typ: str = "string", priority: int = 0, fmt: str | None = None
) -> dict[str, Any]:
    c: dict[str, Any] = {"name": name, "type": typ, "jsonPath": path}
    if priority:
        c["priority"] = priority
    if fmt:
        c["format"] = fmt
    return c


def crds() -> dict[str, dict[str, Any]]:
    """File name → CRD object."""
    return {
        "sovereignspec.io_speculationpolicies.yaml": _crd(
            "SpeculationPolicy", "speculationpolicies", "Cluster", SpeculationPolicySpec, None,
            [_col("kMax", ".spec.kMax", "integer"), _col("MinGain", ".spec.minGain", "number"),
             _col("Age", ".metadata.creationTimestamp", "date")],
            ["specpol"], spec_required=False,
        ),
        "sovereignspec.io_sovereigntypolicies.yaml": _crd(
            "SovereigntyPolicy", "sovereigntypolicies", "Cluster", SovereigntyPolicySpec, None,
            [_col("Isolation", ".spec.isolation"), _col("Jurisdictions", ".spec.jurisdictions"),
             _col("Age", ".metadata.creationTimestamp", "date")],
            ["sovpol"],
        ),
        "sovereignspec.io_speculationdecisions.yaml": _crd(
            "SpeculationDecision", "speculationdecisions", "Namespaced", SpeculationDecisionSpec,
            SpeculationDecisionStatus,
            [_col("Mode", ".status.mode"), _col("K", ".status.speculative.numSpeculativeTokens", "integer"),
             _col("Speedup", ".status.predictedSpeedup", "number"), _col("Slack", ".status.slack", "number"),
             _col("Node", ".status.node"), _col("State", ".status.state"), _col("Reason", ".status.reason"),
             _col("Age", ".metadata.creationTimestamp", "date")],
            # No status subresource: a record only the operator writes, in ONE server-side apply of
            # metadata, spec and status (the reservation must be durable before our entry turns
            # Ready; a second request per decision was a third of the operator's API round trips).
            ["specdec"], status_subresource=False,
        ),
    }  # fmt: skip


def render() -> dict[str, str]:
    header = "# Generated by `make crds` (sovereignspec.api.crdgen) from the pydantic models. Do not edit.\n"
    return {name: header + yaml.safe_dump(obj, sort_keys=False, width=100) for name, obj in crds().items()}


def main(argv: list[str] | None = None) -> int:
    """Write the CRDs into every directory given (default `crds`; `make crds` adds the chart's)."""
    for arg in (argv if argv is not None else sys.argv[1:]) or ["crds"]:
        out = Path(arg)
        out.mkdir(parents=True, exist_ok=True)
        for name, text in render().items():
            (out / name).write_text(text, encoding="utf-8")
            print(f"wrote {out / name}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
