"""Issue 14: claims take effect at admission. A neighbour that runs under a SpeculationDecision counts with
the claims that decision recorded, not with what its pod's annotations say now (a tenant with the `edit`
role can re-annotate its running pods). Each decision-level test fails on the code before the fix, which
read the neighbour's live annotations."""

from __future__ import annotations

import copy
from pathlib import Path
from typing import Any

import pytest

from sovereignspec.cli.decide import decide_scenario, load_scenario
from sovereignspec.model.cluster import PodInfo, RecordedClaims
from sovereignspec.operator.mirror import Mirror
from sovereignspec.policy.decision import Decision
from sovereignspec.policy.parse import recorded_claims, with_recorded_claims

SCENARIOS = Path(__file__).resolve().parents[1] / "scenarios"
SLO = "sovereignspec.io/tpot-slo-ms"
TARGET = "sovereignspec.io/target-model"
DECISION = "sovereignspec.io/decision"
BATCH = "sovereignspec.io/expected-batch"


def _record(
    ns: str = "shop",
    name: str = "shop-llm",
    node: str | None = "kr-1",
    slo: float | None = 1000.0,
    claimed: bool | None = True,
    target: str | None = "llama-3.1-8b",
    managed: bool = True,
) -> dict[str, Any]:
    inputs: dict[str, Any] = {"workloadClass": "interactive"}
    if slo is not None:
        inputs["tpotSloMs"] = slo
    if claimed is not None:
        inputs["tpotSloClaimed"] = claimed
    if target is not None:
        inputs["targetModel"] = target
    status: dict[str, Any] = {"state": "Ready", "gpus": 1, "inputs": inputs}
    if node is not None:
        status["node"] = node
    return {
        "apiVersion": "sovereignspec.io/v1alpha1",
        "kind": "SpeculationDecision",
        "metadata": {
            "name": name,
            "namespace": ns,
            "labels": {"app.kubernetes.io/managed-by": "sovereignspec"} if managed else {},
        },
        "spec": {"workload": name},
        "status": status,
    }


def _scenario(now_slo: str, record: dict[str, Any] | None) -> dict[str, Any]:
    """neighbour-at-slo with a fast neighbour (TPOT 9.1 ms, as on the local cluster) whose tenant may claim
    down to 1 ms (an administrator's minTpotSloMs), its pod now annotated `now_slo`, running under
    `record` (None: no decision)."""
    data = load_scenario((SCENARIOS / "neighbour-at-slo.yaml").read_text(encoding="utf-8"))
    for e in data["telemetry"]["engines"]:
        e["tpotSeconds"] = 0.0091
    data["objects"].append(
        {
            "apiVersion": "sovereignspec.io/v1alpha1",
            "kind": "SovereigntyPolicy",
            "metadata": {"name": "shop"},
            "spec": {"tenants": ["shop"], "jurisdictions": ["KR"], "limits": {"minTpotSloMs": 1}},
        }
    )
    for pod in (o for o in data["objects"] if o.get("kind") == "Pod"):
        ann = pod["metadata"].setdefault("annotations", {})
        ann[SLO] = now_slo
        if record is not None:
            ann[DECISION] = record["metadata"]["name"]
    if record is not None:
        data["objects"].append(record)
    return data


def _outcome(d: Decision) -> tuple[object, ...]:
    s = d.speculative
    return (d.state, d.node, d.reason, s.enabled, s.num_speculative_tokens, s.schedule, s.config)


def test_a_reannotated_neighbour_counts_with_the_claim_its_decision_recorded() -> None:
    control = decide_scenario(_scenario("1000", _record()))
    hostile = decide_scenario(_scenario("1", _record()))
    assert control.speculative.enabled, control.message
    assert _outcome(hostile) == _outcome(control), (hostile.message, control.message)
    assert hostile.neighbours[0].margin_before == pytest.approx(1000 / 9.1 - 1, rel=1e-3)
    # The hole this closes: read from the pod, the same 1 ms switches the newcomer's speculation off.
    live = decide_scenario(_scenario("1", None))
    assert live.reason == "NeighbourSlo" and not live.speculative.enabled, live.message
    assert live.neighbours[0].margin_before == pytest.approx(1 / 9.1 - 1, rel=1e-3)


def test_a_record_counts_only_where_it_placed_the_pod_and_only_when_the_operator_wrote_it() -> None:
    elsewhere = decide_scenario(_scenario("1", _record(node="kr-9")))
    forged = decide_scenario(_scenario("1", _record(managed=False)))
    for d in (elsewhere, forged):  # no valid record: the live annotation, clamped as before
        assert d.neighbours[0].margin_before == pytest.approx(1 / 9.1 - 1, rel=1e-3), d.neighbours


def test_recorded_claims_read_the_decision_inputs() -> None:
    rec = recorded_claims(_record())
    assert rec == RecordedClaims(nodes=frozenset({"kr-1"}), claims={SLO: "1000.0", TARGET: "llama-3.1-8b"})
    assert recorded_claims(_record(claimed=False)) == RecordedClaims(
        nodes=frozenset({"kr-1"}), claims={TARGET: "llama-3.1-8b"}
    )  # the workload claimed no SLO: as a neighbour it is SLO-bound only through its engine
    assert recorded_claims(_record(claimed=None)).claims[SLO] == "1000.0"  # type: ignore[union-attr]
    assert recorded_claims(_record(node=None)) is None
    assert recorded_claims(_record(managed=False)) is None
    group = _record()
    group["status"]["placements"] = [
        {"podSet": "a", "node": "kr-1", "gpus": 8},
        {"podSet": "b", "node": "kr-2", "gpus": 8},
    ]
    assert recorded_claims(group).nodes == {"kr-1", "kr-2"}  # type: ignore[union-attr]
    broken = copy.deepcopy(_record())
    broken["status"]["inputs"] = "nonsense"
    assert recorded_claims(broken) is None


def test_the_expected_batch_as_decided_is_recorded() -> None:
    """An engine not measured yet is priced at its expected batch (`unmeasured_load`): as decided, not as
    its pod says later."""
    rec = _record()
    rec["status"]["inputs"]["expectedBatch"] = 44
    assert recorded_claims(rec).claims[BATCH] == "44"  # type: ignore[union-attr]
    for bad in (0, -3, True, "44", 4.5):
        rec["status"]["inputs"]["expectedBatch"] = bad
        assert BATCH not in recorded_claims(rec).claims  # type: ignore[union-attr]


def test_an_unclaimed_slo_stays_unclaimed_whatever_the_pod_says_later() -> None:
    pod = PodInfo(namespace="shop", name="p", node="kr-1", annotations={SLO: "1"})
    rec = recorded_claims(_record(claimed=False))
    got = with_recorded_claims(pod, rec)
    assert got.recorded == {TARGET: "llama-3.1-8b"} and SLO not in got.recorded
    assert with_recorded_claims(pod, None) is pod


def _pod(ann: dict[str, str], node: str | None = "kr-1") -> PodInfo:
    return PodInfo(namespace="shop", name="shop-llm-0", node=node, gpu_request=1, annotations=ann)


def test_the_mirror_keeps_a_pod_on_the_decision_it_was_first_seen_under() -> None:
    m = Mirror()
    key = ("shop", "shop-llm-0")
    m.put_pod(key, _pod({DECISION: "shop-llm", SLO: "1000"}))
    assert m.pods.items[key].recorded is None  # the record has not arrived yet
    m.put_decision(("shop", "shop-llm"), _record())
    assert m.pods.items[key].recorded == {SLO: "1000.0", TARGET: "llama-3.1-8b"}
    m.pods.take_changed()
    # re-annotated: a hostile SLO, then the decision link pointed elsewhere, then removed
    m.put_decision(("shop", "other"), _record(name="other", slo=1.0))
    for ann in ({DECISION: "shop-llm", SLO: "1"}, {DECISION: "other", SLO: "1"}, {SLO: "1"}):
        m.put_pod(key, _pod(ann))
        assert m.pods.items[key].recorded == {SLO: "1000.0", TARGET: "llama-3.1-8b"}, ann
        got = m.pods.items[key]
        assert got.annotations[SLO] == "1"  # the pod as it is (its own next decision reads it) ...
        assert got.annotations[DECISION] == "shop-llm"  # ... but under the decision it was admitted under
    # its decision is rewritten (its next decision): the new record counts
    m.put_decision(("shop", "shop-llm"), _record(slo=250.0))
    assert m.pods.items[key].recorded == {SLO: "250.0", TARGET: "llama-3.1-8b"}
    assert m.pods.items[key].annotations[DECISION] == "shop-llm"  # still the link, not the pod's own value
    m.put_decision(("shop", "shop-llm"), None)
    assert m.pods.items[key].recorded is None
    # a pod gone is unlinked: a new pod of the same name links afresh
    m.put_pod(key, None)
    m.put_pod(key, _pod({DECISION: "other", SLO: "1"}))
    assert m.pods.items[key].recorded == {SLO: "1.0", TARGET: "llama-3.1-8b"}
