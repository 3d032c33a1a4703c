"""Every scenario under tests/scenarios/ decides as its `expect` block says, via the real CLI path."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
import yaml

from sovereignspec.cli.decide import decide_scenario, load_scenario
from sovereignspec.cli.main import main
from tests.support import schedule_errors

SCENARIOS = sorted((Path(__file__).resolve().parents[1] / "scenarios").glob("*.yaml"))
REQUIRED = {
    "idle", "mixed", "saturated", "weak-draft", "neighbour-at-slo", "no-sovereign-node",
    "never-sovereign", "isolated-tenant", "telemetry-missing", "telemetry-stale",
    "flavor-template-conflict", "malformed-annotation",
}  # fmt: skip


def test_every_required_case_has_a_scenario() -> None:
    assert {p.stem for p in SCENARIOS} >= REQUIRED


@pytest.mark.parametrize("path", SCENARIOS, ids=[p.stem for p in SCENARIOS])
def test_scenario_outcome(path: Path) -> None:
    data = load_scenario(path.read_text(encoding="utf-8"))
    expect: dict[str, Any] = data["expect"]
    out = decide_scenario(data).output()
    assert out["state"] == expect["state"], out["message"]
    assert out["reason"] == expect["reason"], out["message"]
    assert out["node"] == expect["node"]
    assert out["speculative"]["enabled"] is expect["enabled"]
    spec = out["speculative"]
    if out["state"] == "Ready":
        assert (
            not schedule_errors(spec["schedule"], max(spec["numSpeculativeTokens"], 0) or 0)
            or not spec["enabled"]
        )
        assert len(out["podSetUpdates"]) == len(data["workload"]["spec"]["podSets"])
        for update, ps in zip(out["podSetUpdates"], data["workload"]["spec"]["podSets"], strict=True):
            tmpl = ps["template"]
            for key, value in update.get("labels", {}).items():
                assert tmpl["metadata"].get("labels", {}).get(key, value) == value
            for key, value in update.get("annotations", {}).items():
                assert tmpl["metadata"].get("annotations", {}).get(key, value) == value
            for key, value in update.get("nodeSelector", {}).items():
                assert tmpl["spec"].get("nodeSelector", {}).get(key, value) == value
            assert update["nodeSelector"]["kubernetes.io/hostname"] == out["node"]
            assert update["annotations"]["sovereignspec.io/decision"] == data["workload"]["metadata"]["name"]
        if spec["enabled"] and out["reason"] == "TemplatePinsSpeculation":  # recorded as the template pins it
            pinned = data["workload"]["spec"]["podSets"][0]["template"]["metadata"]["annotations"]
            assert spec["config"] == pinned["sovereignspec.io/speculative-config"]
            assert json.loads(spec["config"])["num_speculative_tokens"] == spec["numSpeculativeTokens"]
        elif spec["enabled"]:
            cfg = json.loads(spec["config"])
            assert cfg["num_speculative_tokens"] == spec["numSpeculativeTokens"]
            assert cfg["num_speculative_tokens_per_batch_size"] == spec["schedule"]
        else:
            assert spec["config"] == ""
    else:
        assert out["podSetUpdates"] == []


def test_isolated_tenant_excludes_untrusted_and_ignores_forged_reservation() -> None:
    data = load_scenario((SCENARIOS[0].parent / "isolated-tenant.yaml").read_text(encoding="utf-8"))
    out = decide_scenario(data).output()
    assert "kr-1" not in {c["node"] for c in out["candidates"]}  # untrusted shop pod there (I2)
    assert {"kr-2", "kr-3"} <= {c["node"] for c in out["candidates"]}


def test_flavor_template_conflict_leaves_out_the_pinned_label() -> None:
    data = load_scenario((SCENARIOS[0].parent / "flavor-template-conflict.yaml").read_text(encoding="utf-8"))
    out = decide_scenario(data).output()
    update = out["podSetUpdates"][0]
    assert "sovereignspec.io/speculative" not in update.get("labels", {})
    assert "sovereignspec.io/speculative-config" not in update.get("annotations", {})
    assert "TemplateConflict" not in {r["type"] for r in out["reasons"]}  # nothing contradicts the pin
    assert out["speculative"]["numSpeculativeTokens"] == 3  # recorded with the template's own k
    assert out["podSetUpdates"][0]["nodeSelector"]["sovereignspec.io/jurisdiction"] == "KR"


def _run(tmp_path: Path, text: str, capsys: pytest.CaptureFixture[str], *extra: str) -> tuple[int, str, str]:
    f = tmp_path / "s.yaml"
    f.write_text(text, encoding="utf-8")
    rc = main(["decide", "-f", str(f), *extra])
    cap = capsys.readouterr()
    return rc, cap.out, cap.err


def test_cli_json_and_table(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    text = (SCENARIOS[0].parent / "idle.yaml").read_text(encoding="utf-8")
    rc, out, err = _run(tmp_path, text, capsys, "-o", "json")
    assert rc == 0, err
    doc = json.loads(out)
    for key in ("state", "message", "node", "speculative", "predictedSpeedup", "slack", "acceptance",
                "neighbours", "podSetUpdates", "reasons"):  # fmt: skip
        assert key in doc
    for key in ("enabled", "method", "draftModel", "numSpeculativeTokens", "schedule", "config"):
        assert key in doc["speculative"]
    rc, out, _ = _run(tmp_path, text, capsys, "-o", "table")
    assert rc == 0 and "SpeculationOn" in out and "gpu-kr-1" in out


@pytest.mark.parametrize(
    ("text", "needle"),
    [
        ("workload: [unclosed", "not valid YAML"),
        ("objects: []\nnow: '2026-11-29T10:00:00Z'\n", "workload is missing"),
        ("- just a list\n", "must be a mapping"),
    ],
)
def test_cli_malformed_input_is_a_clear_error(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], text: str, needle: str
) -> None:
    rc, out, err = _run(tmp_path, text, capsys)
    assert rc == 1 and out == ""
    assert needle in err and "Traceback" not in err


def test_cli_contradictory_and_broken_objects(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    base = yaml.safe_load((SCENARIOS[0].parent / "idle.yaml").read_text(encoding="utf-8"))
    base["objects"].append(
        {"apiVersion": "sovereignspec.io/v1alpha1", "kind": "SovereigntyPolicy",
         "metadata": {"name": "eu-only"}, "spec": {"tenants": ["bank-a"], "jurisdictions": ["EU"]}}
    )  # fmt: skip
    rc, out, _ = _run(tmp_path, yaml.safe_dump(base), capsys)
    assert rc == 0 and json.loads(out)["state"] == "Rejected"
    assert json.loads(out)["reason"] == "ContradictoryPolicies"
    bad = yaml.safe_load((SCENARIOS[0].parent / "idle.yaml").read_text(encoding="utf-8"))
    bad["objects"].append({"apiVersion": "sovereignspec.io/v1alpha1", "kind": "SpeculationPolicy",
                           "metadata": {"name": "x"}, "spec": {"kMax": 0}})  # fmt: skip
    rc, out, err = _run(tmp_path, yaml.safe_dump(bad), capsys)
    assert rc == 1 and "SpeculationPolicy x" in err and "kMax" in err and "Traceback" not in err
    nocheck = yaml.safe_load((SCENARIOS[0].parent / "idle.yaml").read_text(encoding="utf-8"))
    nocheck["workload"]["status"]["admissionChecks"] = []
    rc, out, err = _run(tmp_path, yaml.safe_dump(nocheck), capsys)
    assert rc == 1 and "sovereignspec.io/admission" in err
    badnode = yaml.safe_load((SCENARIOS[0].parent / "idle.yaml").read_text(encoding="utf-8"))
    badnode["objects"].append(
        {"kind": "Node", "metadata": {"name": "n"}, "status": {"allocatable": {"nvidia.com/gpu": "many"}}}
    )
    rc, out, err = _run(tmp_path, yaml.safe_dump(badnode), capsys)
    assert rc == 1 and "Node n" in err and "many" in err
