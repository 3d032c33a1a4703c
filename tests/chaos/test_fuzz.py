"""Fuzz: malformed and adversarial Workloads, annotations, policies and telemetry.

- 10,000 examples (SOVEREIGNSPEC_FUZZ_EXAMPLES) through the exact path of `sovereignspec decide`
  (parse → snapshot → request_for → decide()): no crash — the only exceptions allowed are ValueError
  subclasses (ParseError, RequestError, pydantic's) with a message, and every Decision has a state,
  a reason and a message; a Ready one names a snapshot node in the tenant's jurisdiction (I1).
- Through the API: invalid SpeculationPolicies/SovereigntyPolicies are refused by the schema/CEL with a
  message naming the field; Jobs with adversarial annotations are all answered by a live operator.
"""

from __future__ import annotations

import copy
import math
import os
from pathlib import Path
from typing import Any

import pytest
import yaml
from hypothesis import HealthCheck, event, example, given, settings
from hypothesis import strategies as st
from kubernetes import client
from kubernetes.client.exceptions import ApiException

from sovereignspec.cli.decide import decide_scenario
from tests.chaos.conftest import Chaos
from tests.chaos.harness import (
    add_nodes_bulk,
    check_invariants,
    jobs_docs,
    log_records,
    setup_private_queue,
    wait_queue_active,
)
from tests.e2e.pool import NodeDef, decided, serving_annotations

pytestmark = pytest.mark.chaos

BASE = yaml.safe_load((Path(__file__).resolve().parents[1] / "scenarios" / "mixed.yaml").read_text())
EXAMPLES = int(os.environ.get("SOVEREIGNSPEC_FUZZ_EXAMPLES", "10000"))
KEYS = ["class", "target-model", "draft-model", "spec-method", "tpot-slo-ms", "expected-batch"]
JURISDICTION = {"kr-h100": "KR", "kr-a100": "KR", "eu-h100": "EU"}

nasty_text = st.one_of(
    st.text(max_size=40),
    st.sampled_from(
        ["", "NaN", "nan", "inf", "-inf", "-1", "0", "1e309", "9" * 40, "0x10", " 50 ", "50ms",
         "\uff15\uff10", "interactive", "batch", "INTERACTIVE", "eagle3", "ngram", "mtp", "draft_model",
         "medusa", "\x00", "\U0001f4a5" * 10]
    ),
)  # fmt: skip
nasty_value: st.SearchStrategy[Any] = st.recursive(
    st.one_of(
        st.none(),
        st.booleans(),
        st.integers(min_value=-(2**70), max_value=2**70),
        st.floats(allow_nan=True, allow_infinity=True),
        nasty_text,
    ),
    lambda inner: st.one_of(st.lists(inner, max_size=3), st.dictionaries(nasty_text, inner, max_size=3)),
    max_leaves=6,
)

POD = ("workload", "spec", "podSets", 0)
PATHS: list[tuple[Any, ...]] = [
    ("workload", "metadata", "name"),
    ("workload", "metadata", "namespace"),
    ("workload", "metadata", "uid"),
    ("workload", "spec"),
    ("workload", "spec", "podSets"),
    (*POD, "count"),
    (*POD, "name"),
    (*POD, "template"),
    (*POD, "template", "spec", "nodeSelector"),
    (*POD, "template", "spec", "tolerations"),
    (*POD, "template", "spec", "containers"),
    (*POD, "template", "spec", "containers", 0, "resources", "limits", "nvidia.com/gpu"),
    (*POD, "template", "metadata", "annotations"),
    ("workload", "status"),
    ("workload", "status", "conditions"),
    ("workload", "status", "admission"),
    ("workload", "status", "admission", "podSetAssignments", 0, "flavors"),
    ("workload", "status", "admission", "podSetAssignments", 0, "count"),
    ("workload", "status", "admissionChecks", 0, "state"),
    ("workload", "status", "admissionChecks"),
    ("objects", 2, "spec", "kMax"),  # SpeculationPolicy
    ("objects", 2, "spec", "minGain"),
    ("objects", 2, "spec", "batchBreakpoints"),
    ("objects", 2, "spec", "priors"),
    ("objects", 2, "spec", "acceleratorProfiles"),
    ("objects", 2, "spec", "slackAggregation"),
    ("objects", 2, "spec", "alphaQuantile"),
    ("objects", 3, "spec", "jurisdictions"),  # SovereigntyPolicy
    ("objects", 3, "spec", "isolation"),
    ("objects", 3, "spec", "tenants"),
    ("objects", 6, "status", "allocatable", "nvidia.com/gpu"),  # Node
    ("objects", 6, "metadata", "labels"),
    ("telemetry", "time"),
    ("telemetry", "gpus", 0, "tensorActive"),
    ("telemetry", "gpus", 0, "fbFreeMiB"),
    ("telemetry", "gpus"),
    ("telemetry",),
]


def _set(doc: Any, path: tuple[Any, ...], value: Any) -> None:
    for i, key in enumerate(path[:-1]):
        nxt = path[i + 1]
        if isinstance(doc, list):
            if not isinstance(key, int) or key >= len(doc):
                return
            if not isinstance(doc[key], dict | list):
                doc[key] = [] if isinstance(nxt, int) else {}
            doc = doc[key]
        elif isinstance(doc, dict):
            if not isinstance(doc.get(key), dict | list):
                doc[key] = [] if isinstance(nxt, int) else {}
            doc = doc[key]
        else:
            return
    last = path[-1]
    if isinstance(doc, dict) or (isinstance(doc, list) and isinstance(last, int) and last < len(doc)):
        doc[last] = value


# Half the examples keep the objects intact, so that hostile annotations reach decide() itself.
mutations = st.one_of(
    st.just([]), st.lists(st.tuples(st.sampled_from(PATHS), nasty_value), min_size=1, max_size=3)
)
annotations = st.dictionaries(
    st.one_of(st.sampled_from(KEYS).map(lambda k: f"sovereignspec.io/{k}"), nasty_text),
    nasty_text,
    max_size=6,
)


@settings(max_examples=EXAMPLES, deadline=None, database=None, suppress_health_check=list(HealthCheck))
@given(muts=mutations, ann=annotations)
@example(muts=[(PATHS[11], "1E309")], ann={})  # found by this fuzz: an infinite GPU quantity crashed int()
@example(muts=[(("workload", "metadata", "namespace"), [None])], ann={})  # and a list as namespace
@example(
    muts=[(("objects", 6, "status", "allocatable", "nvidia.com/gpu"), 2**63 - 512)], ann={}
)  # int64 overflow
def test_fuzz_decide_never_crashes_and_always_explains(
    muts: list[tuple[tuple[Any, ...], Any]], ann: dict[str, str]
) -> None:
    data = copy.deepcopy(BASE)
    data["workload"]["spec"]["podSets"][0]["template"]["metadata"]["annotations"].update(ann)
    for path, value in muts:
        _set(data, path, copy.deepcopy(value))
    try:
        d = decide_scenario(data)
    except ValueError as exc:  # ParseError, RequestError, pydantic ValidationError: a clear refusal
        assert str(exc).strip(), f"empty message from {type(exc).__name__}"
        event(f"refused: {type(exc).__name__}")
        return
    event(f"decided: {d.state}")
    assert d.state in ("Ready", "Retry", "Rejected", "Pending"), d.state
    assert d.reason and d.message.strip(), d
    if d.state == "Ready":
        assert d.node in JURISDICTION, d.node
        policy_untouched = not any(p[:2] == ("objects", 3) or p[:2] == ("objects", 6) for p, _ in muts)
        ns_untouched = not any(p == ("workload", "metadata", "namespace") for p, _ in muts)
        if policy_untouched and ns_untouched:
            assert JURISDICTION[d.node] == "KR", f"I1: bank-a placed on {d.node}"
    if d.speculative.enabled:
        assert d.predicted_speedup is not None and math.isfinite(d.predicted_speedup)


# ---- through the API -----------------------------------------------------------------------------------

bad_spec_policy = st.one_of(
    st.integers().filter(lambda k: k < 1 or k > 32).map(lambda v: {"kMax": v}),
    st.text(min_size=1, max_size=8).map(lambda v: {"minGain": v}),
    st.text(max_size=8)
    .filter(lambda v: v not in ("min", "mean", "max"))
    .map(lambda v: {"slackAggregation": v}),
    st.floats(min_value=1.0, max_value=1e6).map(lambda v: {"alphaQuantile": v}),
    st.floats(max_value=0.0, allow_nan=False).map(lambda v: {"alphaQuantile": v}),
    st.lists(st.integers(2, 64), min_size=1, max_size=4).map(lambda v: {"batchBreakpoints": v}),
    st.floats(min_value=1.0, max_value=100.0).map(
        lambda v: {"priors": {"eagle3": {"mean": v, "strength": 20}}}
    ),
)
bad_sov_policy = st.one_of(
    st.text(max_size=8)
    .filter(lambda v: v not in ("Shared", "Node"))
    .map(lambda v: {"tenants": ["a"], "jurisdictions": ["KR"], "isolation": v}),
    st.text(max_size=5).map(lambda v: {"tenants": ["a"], "jurisdictions": v}),
    st.just({"jurisdictions": ["KR"]}),
)


def _refused(api: client.ApiClient, kind: str, plural: str, spec: dict[str, Any]) -> str:
    body = {
        "apiVersion": "sovereignspec.io/v1alpha1",
        "kind": kind,
        "metadata": {"name": "fuzz-refused"},
        "spec": spec,
    }
    try:
        client.CustomObjectsApi(api).create_cluster_custom_object(
            "sovereignspec.io", "v1alpha1", plural, body, dry_run="All"
        )
    except ApiException as exc:
        assert exc.status in (400, 422), (exc.status, spec)
        return str(exc.body)
    raise AssertionError(f"{kind} accepted by the API server: {spec}")


@settings(max_examples=40, deadline=None, database=None, suppress_health_check=list(HealthCheck))
@given(spec=bad_spec_policy)
def test_invalid_speculation_policies_are_refused_readably(chaos_stack: Any, spec: dict[str, Any]) -> None:
    msg = _refused(chaos_stack.cluster.api_client, "SpeculationPolicy", "speculationpolicies", spec)
    field = next(iter(spec))
    assert field in msg or "spec" in msg, msg


@settings(max_examples=20, deadline=None, database=None, suppress_health_check=list(HealthCheck))
@given(spec=bad_sov_policy)
def test_invalid_sovereignty_policies_are_refused_readably(chaos_stack: Any, spec: dict[str, Any]) -> None:
    msg = _refused(chaos_stack.cluster.api_client, "SovereigntyPolicy", "sovereigntypolicies", spec)
    assert "spec" in msg, msg


def test_adversarial_annotations_through_the_api_are_all_answered(chaos: Chaos) -> None:
    """Tenants control their templates: every hostile annotation set gets an answer with a reason."""
    pool = chaos.pool
    add_nodes_bulk(pool, [NodeDef(f"n{i}", "DE") for i in range(3)])
    setup_private_queue(pool, chaos.controller)
    ns = pool.tenant("hostile")
    op = chaos.operator()
    op.start()
    op.wait_ready()
    wait_queue_active(pool)
    hostile = [
        {"sovereignspec.io/tpot-slo-ms": "0"},
        {"sovereignspec.io/tpot-slo-ms": "-5"},
        {"sovereignspec.io/tpot-slo-ms": "NaN"},
        {"sovereignspec.io/tpot-slo-ms": "1e309"},
        {"sovereignspec.io/expected-batch": "99999999999999999999"},
        {"sovereignspec.io/expected-batch": "0"},
        {"sovereignspec.io/class": "root"},
        {"sovereignspec.io/spec-method": "medusa"},
        {"sovereignspec.io/draft-model": ""},
        {"sovereignspec.io/target-model": "x" * 300},
        {"sovereignspec.io/speculative-config": '{"method":"eagle3","num_speculative_tokens":64}'},
        {"sovereignspec.io/speculative": "on"},
        {"sovereignspec.io/decision": "someone-else"},
        {"sovereignspec.io/class": "interactive", "sovereignspec.io/tpot-slo-ms": "0.0001"},
    ]
    docs = []
    for i, extra in enumerate(hostile):
        docs.append(yaml.safe_load(jobs_docs([f"h{i:02d}"], ns, {**serving_annotations(), **extra})))
    pool.cluster.kubectl("apply", "-f", "-", input=yaml.safe_dump_all(docs))
    wls = decided(pool, ns, count=len(hostile), states=("Ready", "Retry", "Rejected"))
    assert len(wls) == len(hostile)
    assert op.running and op.starts == 1
    crashes = [r for r in log_records(op) if "exc" in r]
    assert not crashes, crashes[0]["exc"][-2000:]
    violations = check_invariants(pool, [ns])
    assert not violations, "\n".join(violations)
