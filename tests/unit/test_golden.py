"""`sovereignspec decide -o json` on every scenario gives the stored golden output, byte for byte.

The goldens pin today's behaviour so that a restructuring of the decision core can prove it changed
nothing. A deliberate behaviour change regenerates them, in a commit of its own, from the code that
made the change: `SOVEREIGNSPEC_REGEN_GOLDEN=1 pytest tests/unit/test_golden.py`.
"""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from sovereignspec.cli.main import main

SCENARIOS = sorted((Path(__file__).resolve().parents[1] / "scenarios").glob("*.yaml"))
GOLDEN = SCENARIOS[0].parent / "golden"
REGEN = os.environ.get("SOVEREIGNSPEC_REGEN_GOLDEN") == "1"


def test_every_scenario_has_a_golden_and_every_golden_a_scenario() -> None:
    if REGEN:
        pytest.skip("regenerating")
    assert {p.stem for p in GOLDEN.glob("*.json")} == {p.stem for p in SCENARIOS}


@pytest.mark.parametrize("path", SCENARIOS, ids=[p.stem for p in SCENARIOS])
def test_decide_json_matches_golden(path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["decide", "-f", str(path), "-o", "json"]) == 0
    out = capsys.readouterr().out
    golden = GOLDEN / f"{path.stem}.json"
    if REGEN:
        golden.write_text(out, encoding="utf-8")
    assert out == golden.read_text(encoding="utf-8")
