"""Issue 14, policy level: what a hostile tenant writes cannot slip past the sovereignty rules, switch off
a neighbour's speculation, or leave a dishonest record (each test fails on the code before the fix)."""

from __future__ import annotations

import copy
import json
from pathlib import Path
from typing import Any

import pytest

from sovereignspec.api.sovereignty_policy import TenantLimits
from sovereignspec.api.speculation_policy import SpeculationPolicySpec
from sovereignspec.cli.decide import decide_scenario, load_scenario
from sovereignspec.model.cluster import NodeInfo
from sovereignspec.model.workload import NodeSelectorTerm
from sovereignspec.policy.claims import MAX_MODEL_CHARS, read_claims
from sovereignspec.policy.decision import Decision, decision_status
from sovereignspec.policy.sovereignty import TenantRules, affinity_allows

SCENARIOS = Path(__file__).resolve().parents[1] / "scenarios"


def _scenario(name: str) -> dict[str, Any]:
    return load_scenario((SCENARIOS / f"{name}.yaml").read_text(encoding="utf-8"))


def _objects(data: dict[str, Any], kind: str) -> list[dict[str, Any]]:
    return [o for o in data["objects"] if o.get("kind") == kind]


def _template(data: dict[str, Any]) -> dict[str, Any]:
    return data["workload"]["spec"]["podSets"][0]["template"]  # type: ignore[no-any-return]


def _policy_spec(data: dict[str, Any]) -> dict[str, Any]:
    return _objects(data, "SpeculationPolicy")[0].setdefault("spec", {})  # type: ignore[no-any-return]


def _gpu_pod(ns: str, name: str, node: str, owner_kind: str | None = None) -> dict[str, Any]:
    meta: dict[str, Any] = {"name": name, "namespace": ns}
    if owner_kind:
        meta["ownerReferences"] = [{"apiVersion": "apps/v1", "kind": owner_kind, "name": "ds", "uid": "u1"}]
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": meta,
        "spec": {
            "nodeName": node,
            "containers": [{"name": "c", "resources": {"limits": {"nvidia.com/gpu": 1}}}],
        },
        "status": {"phase": "Running"},
    }


# ---- isolation: DaemonSet pods count; only listed system namespaces are exempt -----------------------


def _isolated_with_daemonset(ns: str, labels: dict[str, str] | None = None) -> dict[str, Any]:
    data = _scenario("isolated-tenant")
    data["objects"].append(
        {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": ns, "labels": labels or {}}}
    )
    data["objects"].append(_gpu_pod(ns, "gpu-agent-kr3", "kr-3", owner_kind="DaemonSet"))
    return data


def test_a_tenant_daemonset_gpu_pod_keeps_an_isolated_tenant_off_its_node() -> None:
    before = decide_scenario(_scenario("isolated-tenant"))
    assert before.node == "kr-3"  # the control: kr-3 is the best legal node
    d = decide_scenario(_isolated_with_daemonset("mallory"))
    assert d.state == "Ready" and d.node == "kr-2", d.message  # kr-3 holds mallory's DaemonSet pod (I2)
    assert "kr-3" not in {c.node for c in d.candidates}


def test_isolation_exempts_only_listed_or_labelled_system_namespaces() -> None:
    listed = _isolated_with_daemonset("gpu-operator")
    _policy_spec(listed)["systemNamespaces"] = ["kube-system", "gpu-operator"]
    assert decide_scenario(listed).node == "kr-3"
    labelled = _isolated_with_daemonset("infra", {"sovereignspec.io/system": "true"})
    assert decide_scenario(labelled).node == "kr-3"
    kube = _isolated_with_daemonset("kube-system")
    assert decide_scenario(kube).node == "kr-3"
    unlisted = _isolated_with_daemonset("gpu-operator")  # default list: kube-* only
    assert decide_scenario(unlisted).node == "kr-2"


# ---- SLO claims: a global floor; an unmeasured neighbour counts with the policy's margin --------------


def test_global_slo_floor_applies_when_the_tenant_policy_sets_none() -> None:
    spec = SpeculationPolicySpec()
    assert spec.min_tpot_slo_ms == 20.0
    c = read_claims({"sovereignspec.io/tpot-slo-ms": "1"}, spec, TenantRules(tenant="t"))
    assert c.tpot_slo_ms == 20.0 and [n.type for n in c.notes] == ["SloClamped"]
    assert "SpeculationPolicy floor" in c.notes[0].message
    own = TenantRules(tenant="t", min_tpot_slo_ms=5.0)  # an administrator's own limit wins
    assert read_claims({"sovereignspec.io/tpot-slo-ms": "1"}, spec, own).tpot_slo_ms == 5.0
    lowered = SpeculationPolicySpec(min_tpot_slo_ms=0.5)
    assert (
        read_claims({"sovereignspec.io/tpot-slo-ms": "1"}, lowered, TenantRules(tenant="t")).tpot_slo_ms
        == 1.0
    )
    assert TenantLimits().min_tpot_slo_ms is None


def _neighbour_claims(data: dict[str, Any], slo: str) -> dict[str, Any]:
    out = copy.deepcopy(data)
    for pod in _objects(out, "Pod"):
        pod["metadata"].setdefault("annotations", {})["sovereignspec.io/tpot-slo-ms"] = slo
    return out


def _outcome(d: Decision) -> tuple[object, ...]:
    s = d.speculative
    return (d.state, d.node, d.reason, s.enabled, s.num_speculative_tokens, s.schedule, s.config)


def test_a_1ms_claim_decides_like_the_1000ms_control() -> None:
    """neighbour-at-slo's neighbour runs at TPOT 50 ms; its tenant sets no minTpotSloMs."""
    base = _scenario("neighbour-at-slo")
    for e in base["telemetry"].get("engines", []):  # a fast neighbour: 9.1 ms TPOT, as on the local cluster
        e["tpotSeconds"] = 0.0091
    tight, control = (
        decide_scenario(_neighbour_claims(base, "1")),
        decide_scenario(_neighbour_claims(base, "1000")),
    )
    assert control.speculative.enabled, control.message
    assert _outcome(tight) == _outcome(control), (tight.message, control.message)
    assert tight.neighbours and tight.neighbours[0].margin_before == pytest.approx(20 / 9.1 - 1, rel=1e-3)


def test_a_neighbour_claiming_an_slo_without_metrics_counts_with_the_policy_margin() -> None:
    data = _scenario("neighbour-not-in-dcgm-yet")
    d = decide_scenario(data)
    assert d.neighbours and all(nb.margin_before == 0.5 for nb in d.neighbours), d.neighbours
    assert d.reason != "NeighbourSlo" or d.neighbours[0].margin_before != 0.0
    strict = copy.deepcopy(data)
    _policy_spec(strict)["unknownNeighbourMargin"] = 0.0
    assert decide_scenario(strict).reason == "NeighbourSlo"  # margin 0, as before: blocks
    d_default = decide_scenario(data)
    assert d_default.speculative.enabled, d_default.message


# ---- required node affinity ----------------------------------------------------------------------------


def test_required_node_affinity_excludes_unreachable_nodes() -> None:
    data = _scenario("isolated-tenant")
    _template(data).setdefault("spec", {})["affinity"] = {
        "nodeAffinity": {
            "requiredDuringSchedulingIgnoredDuringExecution": {
                "nodeSelectorTerms": [
                    {
                        "matchExpressions": [
                            {"key": "kubernetes.io/hostname", "operator": "NotIn", "values": ["kr-3"]}
                        ]
                    }
                ]
            }
        }
    }
    d = decide_scenario(data)
    assert d.state == "Ready" and d.node == "kr-2", d.message
    nowhere = copy.deepcopy(data)
    _template(nowhere)["spec"]["affinity"]["nodeAffinity"][
        "requiredDuringSchedulingIgnoredDuringExecution"
    ] = {"nodeSelectorTerms": [{"matchExpressions": [{"key": "zone", "operator": "In", "values": ["mars"]}]}]}
    never = decide_scenario(nowhere)
    assert never.state == "Rejected" and "template nodeAffinity" in never.message


@pytest.mark.parametrize(
    ("expr", "ok"),
    [
        ({"key": "a", "operator": "In", "values": ["1", "2"]}, True),
        ({"key": "a", "operator": "In", "values": ["2"]}, False),
        ({"key": "a", "operator": "NotIn", "values": ["2"]}, True),
        ({"key": "zz", "operator": "NotIn", "values": ["2"]}, True),
        ({"key": "a", "operator": "Exists"}, True),
        ({"key": "zz", "operator": "Exists"}, False),
        ({"key": "zz", "operator": "DoesNotExist"}, True),
        ({"key": "n", "operator": "Gt", "values": ["7"]}, True),
        ({"key": "n", "operator": "Lt", "values": ["7"]}, False),
        ({"key": "a", "operator": "Gt", "values": ["x"]}, False),
    ],
)
def test_affinity_operators(expr: dict[str, Any], ok: bool) -> None:
    node = NodeInfo(name="n1", labels={"a": "1", "n": "8"})
    assert affinity_allows(node, [NodeSelectorTerm.model_validate({"matchExpressions": [expr]})]) is ok


def test_affinity_terms_or_and_fields() -> None:
    node = NodeInfo(name="n1", labels={"a": "1"})
    miss = NodeSelectorTerm.model_validate(
        {"matchExpressions": [{"key": "a", "operator": "In", "values": ["2"]}]}
    )
    by_name = NodeSelectorTerm.model_validate(
        {"matchFields": [{"key": "metadata.name", "operator": "In", "values": ["n1"]}]}
    )
    assert affinity_allows(node, [miss, by_name])
    assert not affinity_allows(node, [miss])
    assert not affinity_allows(node, [NodeSelectorTerm()])  # an empty term matches nothing


# ---- a template-pinned speculative-config --------------------------------------------------------------


def _pinned(config: str | None, label: str | None = None) -> dict[str, Any]:
    data = _scenario("idle")
    meta = _template(data).setdefault("metadata", {})
    if config is not None:
        meta.setdefault("annotations", {})["sovereignspec.io/speculative-config"] = config
    if label is not None:
        meta.setdefault("labels", {})["sovereignspec.io/speculative"] = label
    return data


def test_a_pinned_config_is_recorded_with_its_own_k() -> None:
    cfg = '{"method":"eagle3","model":"d","num_speculative_tokens":4}'
    d = decide_scenario(_pinned(cfg))
    assert d.state == "Ready" and d.reason == "TemplatePinsSpeculation", d.message
    s = d.speculative
    assert s.enabled and s.num_speculative_tokens == 4 and s.config == cfg and s.method == "eagle3"
    assert decision_status(d).mode == "on"
    update = d.pod_set_updates[0]
    assert update.labels == {"sovereignspec.io/speculative": "on"}  # not "off" while the pods run k=4
    assert "sovereignspec.io/speculative-config" not in update.annotations  # the template's stands
    per_batch = json.dumps({"method": "ngram", "num_speculative_tokens": 3,
                            "num_speculative_tokens_per_batch_size": [[1, 4, 3], [5, 1024, 0]]})  # fmt: skip
    d2 = decide_scenario(_pinned(per_batch))
    assert d2.speculative.schedule == [[1, 4, 3], [5, 1024, 0]] and d2.speculative.num_speculative_tokens == 3


@pytest.mark.parametrize(
    ("config", "reason"),
    [
        ('{"method":"eagle3","num_speculative_tokens":16}', "PinnedSpeculationOverKMax"),
        ('{"method":"ngram","num_speculative_tokens":2,"num_speculative_tokens_per_batch_size":[[1,8,12]]}',
         "PinnedSpeculationOverKMax"),
        ("not json", "PinnedConfigInvalid"),
        ('{"method":"eagle3"}', "PinnedConfigInvalid"),
        ('{"num_speculative_tokens":true}', "PinnedConfigInvalid"),
        ("[" * 100_000, "PinnedConfigInvalid"),
    ],
)  # fmt: skip
def test_a_pinned_config_beyond_kmax_or_unreadable_is_rejected(config: str, reason: str) -> None:
    d = decide_scenario(_pinned(config))
    assert d.state == "Rejected" and d.reason == reason, d.message
    assert len(d.message) < 1024
    if reason == "PinnedSpeculationOverKMax":
        assert "kMax 8" in d.message


def test_a_pinned_plain_label_stays_plain() -> None:
    d = decide_scenario(_pinned(None, label="off"))
    assert d.state == "Ready" and not d.speculative.enabled and d.reason == "TemplatePinsSpeculation"


# ---- bounded claims ------------------------------------------------------------------------------------


@pytest.mark.parametrize("key", ["draft-model", "target-model", "spec-method", "class", "tpot-slo-ms"])
def test_an_overlong_claim_is_malformed_and_quoted_briefly(key: str) -> None:
    data = _scenario("idle")
    _template(data)["metadata"]["annotations"][f"sovereignspec.io/{key}"] = "\U0001f4a5" * (256 * 1024 // 4)
    d = decide_scenario(data)
    assert d.state == "Ready" and d.reason == "MalformedAnnotation", d.message
    assert f"sovereignspec.io/{key}" in d.message and "characters" in d.message
    assert len(d.model_dump_json()) < 20_000  # nothing of the 256 KiB value is carried into the record


def test_a_model_name_at_the_limit_is_accepted() -> None:
    data = _scenario("idle")
    _template(data)["metadata"]["annotations"]["sovereignspec.io/target-model"] = "m" * MAX_MODEL_CHARS
    assert decide_scenario(data).reason != "MalformedAnnotation"


def test_template_conflict_quotes_a_huge_template_value_briefly() -> None:
    data = _scenario("idle")
    _template(data)["metadata"]["annotations"]["sovereignspec.io/decision"] = "x" * 200_000
    d = decide_scenario(data)
    conflict = next(r for r in d.reasons if r.type == "TemplateConflict")
    assert len(conflict.message) < 300
