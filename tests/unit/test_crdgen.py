"""crds/ is generated from the pydantic models: stale files, or a non-structural schema, fail here."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import yaml

from sovereignspec.api.crdgen import crds, render

ROOT = Path(__file__).resolve().parents[2]


def test_crds_directory_is_up_to_date() -> None:
    for name, text in render().items():
        path = ROOT / "crds" / name
        assert path.exists(), f"{path} missing: run `make crds`"
        assert path.read_text(encoding="utf-8") == text, f"{path} is stale: run `make crds`"


def _walk(node: Any, path: str, problems: list[str]) -> None:
    if isinstance(node, dict):
        for bad in ("$ref", "anyOf", "oneOf", "allOf", "$defs", "prefixItems", "const"):
            if bad in node:
                problems.append(f"{path}: {bad}")
        nested = "properties" in node or "additionalProperties" in node or "items" in node
        if nested and "type" not in node:
            problems.append(f"{path}: no type")
        if node.get("type") == "null" or node.get("default", 0) is None:
            problems.append(f"{path}: null")
        for k, v in node.items():
            if k == "default":
                continue
            _walk(v, f"{path}.{k}", problems)
    elif isinstance(node, list):
        for i, v in enumerate(node):
            _walk(v, f"{path}[{i}]", problems)


def test_schemas_are_structural() -> None:
    for name, crd in crds().items():
        problems: list[str] = []
        schema = crd["spec"]["versions"][0]["schema"]["openAPIV3Schema"]
        _walk(schema, name, problems)
        assert not problems, problems
        assert yaml.safe_load(yaml.safe_dump(crd)) == crd


def test_scopes_columns_and_status() -> None:
    by_kind = {c["spec"]["names"]["kind"]: c for c in crds().values()}
    assert by_kind["SpeculationPolicy"]["spec"]["scope"] == "Cluster"
    assert by_kind["SovereigntyPolicy"]["spec"]["scope"] == "Cluster"
    dec = by_kind["SpeculationDecision"]
    assert dec["spec"]["scope"] == "Namespaced"
    version = dec["spec"]["versions"][0]
    assert "subresources" not in version  # one apply writes the whole record (kube/ssa.py)
    cols = {c["name"]: c["jsonPath"] for c in version["additionalPrinterColumns"]}
    assert set(cols) == {"Mode", "K", "Speedup", "Slack", "Node", "State", "Reason", "Age"}
    status = version["schema"]["openAPIV3Schema"]["properties"]["status"]["properties"]
    for col in cols.values():
        parts = col.strip(".").split(".")
        if parts[0] == "status":
            node = status
            for p in parts[1:-1]:
                node = node[p]["properties"]
            assert parts[-1] in node, col


def test_cel_rules_present_for_cross_field_constraints() -> None:
    text = json.dumps(crds())
    for needle in (
        "self.stepTime.map(p, p.tokens)",
        "self.stepTime.map(p, p.seconds).isSorted()",
        "self.kMax >= 1",
        "self.alphaQuantile > 0.0",
        "self.minTpotSloMs > 0.0",
        "self.isolation in ['Shared', 'Node']",
        "has(self.stepTime) != has(self.roofline)",
    ):
        assert needle in text, needle
