"""SpeculationPolicy `placement`: the default RelativeSpeedup picks the highest S_real (with the default
`keepCapacity`, a node within minGain of it: tests/unit/test_keep_capacity.py); the opt-in Throughput ranks
interactive candidates by S_real(k*, B) / t_u(B); plain placement is the same in both modes."""

from __future__ import annotations

import copy
import os
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from pydantic import ValidationError

from sovereignspec.api.speculation_policy import SpeculationPolicySpec
from sovereignspec.cli.decide import decide_scenario, load_scenario
from sovereignspec.model.cluster import ClusterSnapshot, FlavorInfo, NamespaceInfo, NodeInfo, PodInfo
from sovereignspec.model.profiles import DEFAULT_PROFILES, ProfileBook
from sovereignspec.model.steptime import StepCurve, stretched
from sovereignspec.model.telemetry import AcceptanceSample, EngineSample, GpuSample, PodRef, TelemetrySnapshot
from sovereignspec.model.workload import CheckEntry, PodSetAssignment, PodSetInfo, WorkloadInfo
from sovereignspec.policy.decide import decide
from sovereignspec.policy.decision import Decision, decision_status
from sovereignspec.policy.request import AdmissionRequest, Policies

SCENARIOS = Path(__file__).resolve().parents[1] / "scenarios"
NOW = datetime(2026, 11, 29, 10, 0, 5, tzinfo=UTC)
PRODUCTS = ("NVIDIA-A100-SXM4-80GB", "NVIDIA-H100-80GB-HBM3", "NVIDIA-H200", "NVIDIA-GeForce-RTX-4090")
TARGET = "llama-3.1-8b"
FAST = settings(
    max_examples=int(os.environ.get("SOVEREIGNSPEC_HYPOTHESIS_EXAMPLES", "60")),
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow],
)


def _with_placement(data: dict[str, Any], mode: str | None) -> dict[str, Any]:
    out = copy.deepcopy(data)
    for obj in out["objects"]:
        if obj["kind"] == "SpeculationPolicy":
            obj.setdefault("spec", {}).pop("placement", None)
            if mode is not None:
                obj["spec"]["placement"] = mode
    return out


def _scenario(name: str) -> dict[str, Any]:
    return load_scenario((SCENARIOS / f"{name}.yaml").read_text(encoding="utf-8"))


def _t_u(product: str, u: float, batch: int) -> float:
    """t_u(B) recomputed from the built-in profile, independently of decide()."""
    prof = ProfileBook(list(DEFAULT_PROFILES)).find(product, TARGET)
    assert prof is not None
    c = StepCurve.from_profile(prof)
    return float(stretched(c.t0, c.g(batch), u))


def test_policy_field_default_and_rejects_unknown_modes() -> None:
    assert SpeculationPolicySpec().placement == "RelativeSpeedup"
    assert SpeculationPolicySpec.model_validate({"placement": "Throughput"}).placement == "Throughput"
    with pytest.raises(ValidationError, match="placement"):
        SpeculationPolicySpec.model_validate({"placement": "Fastest"})


def test_heterogeneous_pair_modes_pick_different_nodes() -> None:
    """tests/scenarios/placement-throughput.yaml: the idle RTX 4090 has the higher relative speed-up, the
    busy H100 the higher decode rate; each mode picks its own, and records what it ranked by."""
    data = _scenario("placement-throughput")
    tp = decide_scenario(data)
    rel = decide_scenario(_with_placement(data, None))
    assert (tp.node, rel.node) == ("kr-h100", "kr-rtx4090")
    assert tp.speculative.enabled and rel.speculative.enabled
    by_node = {c.node: c for c in tp.candidates}
    assert by_node["kr-rtx4090"].predicted_speedup > by_node["kr-h100"].predicted_speedup
    for c in tp.candidates:  # the recorded rate is S_real / t_u(B) at the expected batch
        product = "NVIDIA-H100-80GB-HBM3" if c.node == "kr-h100" else "NVIDIA-GeForce-RTX-4090"
        assert c.load is not None and c.predicted_speedup is not None and c.predicted_rate is not None
        want = c.predicted_speedup / _t_u(product, c.load, 8)
        assert c.predicted_rate == pytest.approx(want, rel=1e-5)
    assert [c.node for c in tp.candidates] == ["kr-h100", "kr-rtx4090"]
    assert tp.inputs is not None and tp.inputs.placement == "Throughput"
    assert "placement Throughput" in tp.message
    # the default records nothing new: its wire form has neither key
    assert rel.inputs is not None and rel.inputs.placement is None
    assert all(c.predicted_rate is None for c in rel.candidates)
    wire = str(decision_status(rel).wire())
    assert "placement" not in wire and "predictedRate" not in wire


@pytest.mark.parametrize("path", sorted(SCENARIOS.glob("*.yaml")), ids=lambda p: p.stem)
def test_explicit_relative_speedup_equals_the_default(path: Path) -> None:
    data = load_scenario(path.read_text(encoding="utf-8"))
    default = decide_scenario(_with_placement(data, None))
    explicit = decide_scenario(_with_placement(data, "RelativeSpeedup"))
    assert explicit.output() == default.output()
    assert "predictedRate" not in str(decision_status(default).wire())


@st.composite
def pools(draw: st.DrawFn) -> tuple[AdmissionRequest, ClusterSnapshot, str]:
    """One tenant, 1-6 single-GPU nodes of mixed products, random load, free memory and neighbours."""
    nodes, pods, gpus, engines = [], [], [], []
    for i in range(draw(st.integers(1, 6))):
        name = f"n{i}"
        product = draw(st.sampled_from(PRODUCTS))
        replicas = draw(st.integers(1, 2))
        nodes.append(
            NodeInfo(
                name=name,
                labels={"kubernetes.io/hostname": name, "nvidia.com/gpu.product": product},
                gpu_allocatable=replicas,
            )
        )
        refs = []
        if replicas == 2 and draw(st.booleans()):
            pod = f"nb{i}"
            pods.append(
                PodInfo(
                    namespace="bank",
                    name=pod,
                    node=name,
                    phase="Running",
                    gpu_request=1,
                    annotations={"sovereignspec.io/tpot-slo-ms": "80"},
                )
            )
            engines.append(
                EngineSample(
                    namespace="bank",
                    pod=pod,
                    tpot_seconds=draw(st.floats(0.01, 0.09)),
                    running=draw(st.sampled_from([1.0, 8.0, 64.0])),
                )
            )
            refs.append(PodRef(namespace="bank", name=pod))
        gpus.append(
            GpuSample(
                node=name,
                uuid=f"g{i}",
                tensor_active=draw(st.floats(0.0, 0.98)),
                fb_free_mib=draw(st.sampled_from([0.0, 3000.0, 40000.0])),
                pods=refs,
            )
        )
    snapshot = ClusterSnapshot(
        nodes=nodes,
        pods=pods,
        namespaces=[NamespaceInfo(name="bank")],
        flavors=[FlavorInfo(name="f")],
        telemetry=TelemetrySnapshot(
            time=NOW - timedelta(seconds=5),
            gpus=gpus,
            engines=engines,
            acceptance=[
                AcceptanceSample(
                    target_model=TARGET,
                    draft_model="d",
                    method="eagle3",
                    drafts=1000,
                    accepted_per_position=draw(st.sampled_from([[850, 700, 560], [500, 250, 120]])),
                )
            ],
        ),
    )
    cls = draw(st.sampled_from(["interactive", "batch"]))
    batch = draw(st.sampled_from([1, 8, 64]))
    wl = WorkloadInfo(
        namespace="bank",
        name="w",
        pod_sets=[
            PodSetInfo(
                name="main",
                count=1,
                gpus_per_pod=1,
                annotations={
                    "sovereignspec.io/spec-method": "eagle3",
                    "sovereignspec.io/draft-model": "d",
                    "sovereignspec.io/target-model": TARGET,
                    "sovereignspec.io/class": cls,
                    "sovereignspec.io/expected-batch": str(batch),
                },
            )
        ],
        quota_reserved=True,
        assignments=[PodSetAssignment(name="main", flavors={"nvidia.com/gpu": "f"})],
        checks=[CheckEntry(name="c", state="Pending")],
    )
    return AdmissionRequest(workload=wl, check="c"), snapshot, cls


def _decide(req: AdmissionRequest, snap: ClusterSnapshot, spec: SpeculationPolicySpec) -> Decision:
    return decide(req, snap, Policies(spec, None, ()), NOW)


@FAST
@given(pools())
def test_modes_on_generated_heterogeneous_pools(case: tuple[AdmissionRequest, ClusterSnapshot, str]) -> None:
    req, snap, cls = case
    default = _decide(req, snap, SpeculationPolicySpec())
    rel = _decide(req, snap, SpeculationPolicySpec(placement="RelativeSpeedup"))
    tp = _decide(req, snap, SpeculationPolicySpec(placement="Throughput"))
    assert rel.output() == default.output()  # the default is RelativeSpeedup, decision for decision
    assert default.state == tp.state == "Ready"
    interactive = cls == "interactive" and not any(
        r.type in ("WeakDraft", "BatchClass") for r in default.reasons
    )
    if not interactive:  # plain placement: the same in both modes, only the recorded mode differs
        assert tp.inputs is not None and tp.inputs.placement == "Throughput"
        same = tp.model_copy(update={"inputs": tp.inputs.model_copy(update={"placement": None})})
        assert same.output() == default.output()
        return
    # RelativeSpeedup: the chosen node has the highest predicted S_real among the candidates; with
    # keepCapacity and without spareWholeGpus (the session-8 rules) one within minGain of it when the best
    # reaches 1 + minGain. spareWholeGpus (the default) ranks by rates too (test_spare_whole_gpus.py)
    best_s = max(c.predicted_speedup or 0.0 for c in default.candidates)
    assert default.candidates[0].node == default.node
    kc = _decide(req, snap, SpeculationPolicySpec(keepCapacity=True, spareWholeGpus=False))
    chosen_s = kc.candidates[0].predicted_speedup or 0.0
    assert kc.candidates[0].node == kc.node
    assert chosen_s >= (best_s / 1.05 if best_s >= 1.05 else best_s) - 1e-6
    highest = _decide(req, snap, SpeculationPolicySpec(keepCapacity=False, spareWholeGpus=False))
    assert highest.candidates[0].node == highest.node
    assert (highest.candidates[0].predicted_speedup or 0.0) >= best_s - 1e-6
    # Throughput: every candidate carries S_real / t_u(B); the chosen one has the highest
    batch = int(req.workload.pod_sets[0].annotations["sovereignspec.io/expected-batch"])
    products = {n.name: n.labels["nvidia.com/gpu.product"] for n in snap.nodes}
    for c in tp.candidates:
        assert c.predicted_rate is not None and c.load is not None and c.predicted_speedup is not None
        want = c.predicted_speedup / _t_u(products[c.node], c.load, batch)
        # The recorded load is rounded to 6 decimals (|du| <= 5e-7), and t_u moves by up to du / (1 - u)
        # relative to itself: near a full GPU that is more than the figures' own rounding.
        assert c.predicted_rate == pytest.approx(want, rel=1e-5 + 5e-7 / max(1 - c.load, 1e-6))
    rates = [c.predicted_rate or 0.0 for c in tp.candidates]
    assert tp.candidates[0].node == tp.node and rates[0] >= max(rates) - 1e-6
    # and each mode is best at its own key
    rate_of = {c.node: c.predicted_rate or 0.0 for c in tp.candidates}
    speedup_of = {c.node: c.predicted_speedup or 0.0 for c in default.candidates}
    assert highest.node is not None and tp.node is not None
    assert rate_of[tp.node] >= rate_of[highest.node] - 1e-6
    assert speedup_of[highest.node] >= speedup_of[tp.node] - 1e-6
