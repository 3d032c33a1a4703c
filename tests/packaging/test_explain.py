"""`sovereignspec explain` renders what the decision core recorded: S_real per k, schedule, ranking."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

from sovereignspec.cli.main import main
from sovereignspec.policy.decision import Decision, speculation_decision_object

ROOT = Path(__file__).resolve().parents[2]


def _decision_file(tmp_path: Path, scenario: str) -> tuple[Path, dict[str, object]]:
    out = subprocess.run(
        [
            sys.executable,
            "-m",
            "sovereignspec",
            "decide",
            "-f",
            str(ROOT / "tests/scenarios" / scenario),
            "-o",
            "json",
        ],
        capture_output=True,
        text=True,
        check=True,
    ).stdout
    d = Decision.model_validate(json.loads(out))
    obj = speculation_decision_object(d, "0000-uid")
    path = tmp_path / "decision.yaml"
    path.write_text(yaml.safe_dump(obj))
    return path, obj


def test_explain_speculation_on(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    path, obj = _decision_file(tmp_path, "mixed.yaml")
    status = obj["status"]
    assert isinstance(status, dict)
    ns, name = obj["metadata"]["namespace"], obj["metadata"]["name"]  # type: ignore[index]
    assert main(["explain", f"{ns}/{name}", "-f", str(path)]) == 0
    text = capsys.readouterr().out
    assert f"SpeculationDecision {ns}/{name}" in text
    # every S_real the core computed is printed, to 3 decimals, in k order
    assert status["speedupByK"], "the decision core must record S_real per k when it evaluated nodes"
    row = next(line for line in text.splitlines() if line.strip().startswith("S_real "))
    assert row.split()[1:] == [f"{s:.3f}" for s in status["speedupByK"]]
    assert "Why this node" in text and status["node"] in text
    for cand in status["candidates"]:
        assert cand["node"] in text
    if status["mode"] == "on":
        assert status["speculative"]["config"] in text


def test_explain_json_round_trips(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    path, obj = _decision_file(tmp_path, "saturated.yaml")
    ns, name = obj["metadata"]["namespace"], obj["metadata"]["name"]  # type: ignore[index]
    assert main(["explain", f"{ns}/{name}", "-f", str(path), "-o", "json"]) == 0
    data = json.loads(capsys.readouterr().out)
    assert data["status"]["state"] == obj["status"]["state"]  # type: ignore[index]


@pytest.mark.parametrize("target", ["no-slash", "/x", "ns/", "a/b/c"])
def test_explain_bad_target(target: str, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["explain", target, "-f", "/nonexistent"]) == 2
    assert "NAMESPACE/WORKLOAD" in capsys.readouterr().err


def test_explain_unreadable_file(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    bad = tmp_path / "bad.yaml"
    bad.write_text("kind: SpeculationDecision\nspec: {}\nstatus: {state: Maybe}\n")
    assert main(["explain", "a/b", "-f", str(bad)]) == 2
    assert "not a SpeculationDecision" in capsys.readouterr().err
    assert main(["explain", "a/b", "-f", str(tmp_path / "missing.yaml")]) == 2
