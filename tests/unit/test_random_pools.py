"""The random pool generator (sovereignspec.evidence.random_pools): every drawn pool is a valid pool that
the simulator runs, and a seed names one set of pools."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
import yaml

from sovereignspec.evidence.pools import load_pool
from sovereignspec.evidence.random_pools import main, random_pool


def test_drawn_pools_load_and_a_seed_names_them(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    for out in ("a", "b"):
        monkeypatch.setattr("sys.argv", ["random_pools", str(tmp_path / out), "--count", "6", "--seed", "3"])
        main()
    names = sorted(p.name for p in (tmp_path / "a").iterdir())
    assert len(names) == 6
    for name in names:
        assert (tmp_path / "a" / name).read_text() == (tmp_path / "b" / name).read_text()
        sc = load_pool(tmp_path / "a" / name).scenario()
        assert any(e.subject for e in sc.engines) and any(not e.subject for e in sc.engines)


def test_every_subject_has_a_node_its_tenant_may_use() -> None:
    rng = np.random.default_rng(11)
    for i in range(30):
        doc = random_pool(rng, f"p{i}")
        allowed = doc["jurisdictions"]
        places = {n.get("jurisdiction", "KR") for n in doc["nodes"]}
        for s in doc["subjects"]:
            assert places & set(allowed[s["tenant"]]), yaml.safe_dump(s)


def test_an_arrival_gap_scales_the_arrivals_and_nothing_else(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """`--arrival-gap 3` (a burst, as in a rollout) draws the same pools as the default 15 s with the
    arrivals compressed: a rule is judged on bursts without a new draw of everything else."""
    spread = random_pool(np.random.default_rng(5), "p")
    burst = random_pool(np.random.default_rng(5), "p", gap=3.0)
    assert [s["arrivalS"] for s in burst["subjects"]] == [
        int(10 + (s["arrivalS"] - 10) * 3 / 15) for s in spread["subjects"]
    ]
    for s in (*spread["subjects"], *burst["subjects"]):
        s.pop("arrivalS")
    assert burst == spread
    monkeypatch.setattr("sys.argv", ["random_pools", str(tmp_path), "--count", "1", "--arrival-gap", "3"])
    main()
    assert [p.name for p in tmp_path.iterdir()] == ["random-001-g3-000.yaml"]
    monkeypatch.setattr("sys.argv", ["random_pools", str(tmp_path), "--arrival-gap", "0"])
    with pytest.raises(SystemExit):
        main()
