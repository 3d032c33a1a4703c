"""Pool files: the standard suite's pools ship as files, the schema rejects bad pools with clear errors,
and `simulate --pool FILE` prints the suite's JSON shape for one pool."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
import yaml

from sovereignspec.cli.main import main
from sovereignspec.evidence.pools import (
    POOL_DIR,
    STANDARD_POOLS,
    PoolError,
    load_pool,
    parse_pool,
    pool_named,
    standard_pool,
)

TINY: dict[str, Any] = {
    "name": "tiny",
    "horizonS": 90,
    "jurisdictions": {"bank": ["KR"]},
    "nodes": [{"name": "n1", "gpu": "NVIDIA-H100-80GB-HBM3", "count": 1},
              {"name": "n2", "gpu": "a100", "count": 1, "replicas": 2}],
    "background": [{"name": "bg", "tenant": "shop", "node": "n1", "sloMs": 80,
                    "load": {"trace": [[0, 16], [90, 48]], "noise": 0.0}}],
    "subjects": [{"name": "s1", "tenant": "bank", "arrivalS": 20, "sloMs": 100, "expectedBatch": 8,
                  "draft": {"preset": "good"}, "load": {"batch": 8}},
                 {"name": "s2", "tenant": "bank", "arrivalS": 30, "sloMs": 150, "class": "batch",
                  "draft": {"a0": 0.7, "decay": 0.93}, "k": 3, "load": {"batch": 32}}],
}  # fmt: skip


def test_standard_pools_ship_as_files() -> None:
    assert sorted(p.stem for p in POOL_DIR.glob("*.yaml")) == sorted(STANDARD_POOLS)
    for name in STANDARD_POOLS:
        sc = standard_pool(name).scenario(("mps", 2e-3))
        assert sc.name == name and any(e.subject for e in sc.engines)


def test_a_pool_becomes_a_scenario() -> None:
    sc = parse_pool(TINY).scenario(("mps", 2e-3))
    assert [n.gpu for n in sc.nodes] == ["h100", "a100"] and sc.nodes[1].slots == 2
    s2 = next(e for e in sc.engines if e.name == "s2")
    assert s2.workload_class == "batch" and s2.k == 3 and s2.draft is not None and s2.draft.a0 == 0.7
    bg = next(e for e in sc.engines if e.name == "bg")
    assert bg.trace == ((0.0, 16.0), (90.0, 48.0))


@pytest.mark.parametrize(
    ("patch", "message"),
    [
        ({"nodes": [{"name": "n1", "gpu": "tpu-v5", "count": 1}]}, "nodes[0]: unknown GPU 'tpu-v5'"),
        ({"background": [{"name": "bg", "tenant": "t", "node": "nx", "sloMs": 50}]},
         "background[0] (bg): node 'nx' is not in nodes"),
        ({"background": [{"name": "bg", "tenant": "t", "node": "n1", "gpuIndex": 3, "sloMs": 50}]},
         "gpuIndex 3 but n1 has 1 GPU(s)"),
        ({"subjects": [{"name": "s", "tenant": "b", "sloMs": 50, "draft": {"a0": 0.7}}]},
         "subjects[0].draft: give a preset (good | weak) or both a0 and decay"),
        ({"subjects": [{"name": "s", "tenant": "b", "sloMs": -1}]},
         "subjects[0].sloMs: Input should be greater than 0"),
        ({"subjects": [{"name": "s", "tenant": "b", "sloMs": 50, "bogus": 1}]},
         "subjects[0].bogus: Extra inputs"),
        ({"subjects": [{"name": "bg", "tenant": "b", "sloMs": 50}]}, "engine names repeat: ['bg']"),
        ({"horizonS": 10}, "arrivalS 20.0 >= horizonS 10.0"),
    ],
)  # fmt: skip
def test_bad_pools_are_refused_with_the_field_and_the_reason(patch: dict[str, Any], message: str) -> None:
    with pytest.raises(PoolError) as exc:
        parse_pool({**TINY, **patch}, "p.yaml")
    assert message in str(exc.value) and str(exc.value).startswith("p.yaml: ")


def test_unreadable_files(tmp_path: Path) -> None:
    with pytest.raises(PoolError, match="cannot read"):
        load_pool(tmp_path / "missing.yaml")
    bad = tmp_path / "bad.yaml"
    bad.write_text("nodes: [\n")
    with pytest.raises(PoolError, match="not valid YAML"):
        load_pool(bad)


def test_a_pool_is_named_by_its_standard_name_else_by_its_file(tmp_path: Path) -> None:
    assert pool_named("mixed") == standard_pool("mixed")
    path = tmp_path / "tiny.yaml"
    path.write_text(yaml.safe_dump(TINY))
    assert pool_named(str(path)) == load_pool(path)
    with pytest.raises(PoolError, match="cannot read"):
        pool_named("mixd")  # neither a standard name nor a file


def test_cli_runs_a_pool_file_with_the_suite_shape(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    f = tmp_path / "tiny.yaml"
    f.write_text(yaml.safe_dump(TINY))
    assert main(["simulate", "--pool", str(f), "--seeds", "2", "--quiet", "-o", "json"]) == 0
    out = json.loads(capsys.readouterr().out)
    assert out["seeds"] == [1, 2] and set(out["pools"]) == {"tiny"}
    body = out["pools"]["tiny"]
    assert {"sovereignspec", "off", "always-on", "clairvoyant"} <= set(body["policies"])
    assert body["policies"]["clairvoyant"]["bestKnownShare"]["mean"] <= 1.0
    assert "sovereignspec-vs-off" in body["paired"]
    assert (
        set(out["claims"]) == {f"C{i}" for i in range(1, 7)}
        and out["claims"]["C4"]["value"]["pool"] == "tiny"
    )
    f.write_text(yaml.safe_dump({**TINY, "nodes": []}))
    assert main(["simulate", "--pool", str(f), "--seeds", "1", "--quiet"]) == 2
    assert "nodes: List should have at least 1 item" in capsys.readouterr().err


def test_held_out_pools_in_the_docs_are_valid() -> None:
    """docs/evidence/pools/*.yaml, the pools no rule was chosen on (docs/decision.md), stay loadable."""
    docs = Path(__file__).resolve().parents[2] / "docs" / "evidence" / "pools"
    files = sorted(docs.glob("*.yaml"))
    assert len(files) >= 2
    for f in files:
        sc = load_pool(f).scenario(("mps", 2e-3))
        assert sc.name == f.stem and any(e.subject for e in sc.engines)
