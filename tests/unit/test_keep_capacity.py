"""Issue 16b's placement rules, the defaults since session 8: `keepCapacity` (a small workload, among
nodes whose S_real is within minGain of the best, does not spend a whole multi-engine GPU or the fast
card) and `batchClass: Model` (the model decides
a batch workload's speculation, judged on the GPU the pod gets; it takes an empty GPU on the fastest
hardware, else packs). `_decide` turns both on unless a test sets them (as the defaults do); the old rules
are `keepCapacity: false, batchClass: Plain`."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import numpy as np
import pytest
from pydantic import ValidationError

from sovereignspec.api.speculation_policy import SpeculationPolicySpec
from sovereignspec.model.cluster import ClusterSnapshot, FlavorInfo, NamespaceInfo, NodeInfo, PodInfo
from sovereignspec.model.steptime import compute_part, stretched
from sovereignspec.model.telemetry import AcceptanceSample, EngineSample, GpuSample, PodRef, TelemetrySnapshot
from sovereignspec.model.workload import CheckEntry, PodSetAssignment, PodSetInfo, WorkloadInfo
from sovereignspec.policy.decide import decide
from sovereignspec.policy.decision import Decision
from sovereignspec.policy.request import AdmissionRequest, Policies

NOW = datetime(2026, 11, 29, 10, 0, 5, tzinfo=UTC)
A100, H100, H200 = "NVIDIA-A100-SXM4-80GB", "NVIDIA-H100-80GB-HBM3", "NVIDIA-H200"
RTX4090 = "NVIDIA-GeForce-RTX-4090"
TARGET = "llama-3.1-8b"

Gpu = tuple[float, list[int]]
"""A GPU: its tensor-active load and the running batch of each engine on it."""


def _snapshot(nodes: list[tuple[str, str, int, list[Gpu]]]) -> ClusterSnapshot:
    """Nodes (name, product, engines per GPU, GPUs); every engine has an SLO and a TPOT far within it."""
    infos, pods, gpus, engines = [], [], [], []
    for name, product, replicas, node_gpus in nodes:
        labels = {"kubernetes.io/hostname": name, "nvidia.com/gpu.product": product}
        infos.append(NodeInfo(name=name, labels=labels, gpu_allocatable=replicas * len(node_gpus)))
        for gi, (u, batches) in enumerate(node_gpus):
            refs = []
            for pi, batch in enumerate(batches):
                pod = f"{name}-g{gi}-p{pi}"
                pods.append(
                    PodInfo(namespace="web", name=pod, node=name, phase="Running", gpu_request=1,
                            annotations={"sovereignspec.io/tpot-slo-ms": "200"})
                )  # fmt: skip
                engines.append(
                    EngineSample(namespace="web", pod=pod, tpot_seconds=0.02, running=float(batch))
                )
                refs.append(PodRef(namespace="web", name=pod))
            gpus.append(
                GpuSample(node=name, uuid=f"{name}-{gi}", tensor_active=u, fb_free_mib=40000.0, pods=refs)
            )
    accepted = AcceptanceSample(
        target_model=TARGET,
        draft_model="d",
        method="eagle3",
        drafts=1000,
        accepted_per_position=[850, 700, 560],
    )
    return ClusterSnapshot(
        nodes=infos,
        pods=pods,
        namespaces=[NamespaceInfo(name="bank"), NamespaceInfo(name="web")],
        flavors=[FlavorInfo(name="f")],
        telemetry=TelemetrySnapshot(
            time=NOW - timedelta(seconds=5), gpus=gpus, engines=engines, acceptance=[accepted]
        ),
    )


def _decide(snap: ClusterSnapshot, cls: str, batch: int, **spec: object) -> Decision:
    annotations = {
        "sovereignspec.io/spec-method": "eagle3",
        "sovereignspec.io/draft-model": "d",
        "sovereignspec.io/target-model": TARGET,
        "sovereignspec.io/class": cls,
        "sovereignspec.io/expected-batch": str(batch),
    }
    wl = WorkloadInfo(
        namespace="bank",
        name="w",
        pod_sets=[PodSetInfo(name="main", count=1, gpus_per_pod=1, annotations=annotations)],
        quota_reserved=True,
        assignments=[PodSetAssignment(name="main", flavors={"nvidia.com/gpu": "f"})],
        checks=[CheckEntry(name="c", state="Pending")],
    )
    policy = SpeculationPolicySpec.model_validate({"keepCapacity": True, "batchClass": "Model", **spec})
    return decide(AdmissionRequest(workload=wl, check="c"), snap, Policies(policy, None, ()), NOW)


def test_compute_part_inverts_stretched() -> None:
    """The band's unloaded step t0 + g(B) is recovered from the evaluation's t_u(B) and slack."""
    rng = np.random.default_rng(7)
    t0, g, u = rng.uniform(1e-3, 2e-2, 500), rng.uniform(0.0, 5e-2, 500), rng.uniform(0.0, 0.99, 500)
    assert np.allclose(compute_part(stretched(t0, g, u), t0, u), g, rtol=1e-9, atol=1e-12)


def test_fields_default_to_the_16b_rules_and_validate() -> None:
    """Defaults: paired over 10 seeds they lose on no pool (docs/decision.md, "Issue 16b")."""
    spec = SpeculationPolicySpec()
    assert spec.keep_capacity is True and spec.batch_class == "Model"
    old = SpeculationPolicySpec.model_validate({"keepCapacity": False, "batchClass": "Plain"})
    assert old.keep_capacity is False and old.batch_class == "Plain"
    with pytest.raises(ValidationError, match="batchClass"):
        SpeculationPolicySpec.model_validate({"batchClass": "Packed"})


# An H100 shared with a light engine, an idle RTX 4090 (one engine per GPU) and an idle H200 that could
# host two engines: a batch-4 interactive workload gains about as much on each.
SMALL = [("h100", H100, 2, [(0.1, [4])]), ("r4090", RTX4090, 1, [(0.0, [])]), ("h200", H200, 2, [(0.0, [])])]


def test_keep_capacity_spends_neither_the_whole_gpu_nor_the_fast_card_on_an_insignificant_gain() -> None:
    snap = _snapshot(SMALL)
    old = _decide(snap, "interactive", 4, keepCapacity=False)
    speedup = {c.node: c.predicted_speedup or 0.0 for c in old.candidates}
    best = max(speedup.values())
    assert old.node == max(speedup, key=lambda n: speedup[n]) == "h100"
    assert all(s >= best / 1.05 for s in speedup.values())  # all three within minGain of the best
    new = _decide(snap, "interactive", 4)
    # h200 would take an empty GPU that can host two engines; of the other two the RTX 4090 is slower
    assert new.node == "r4090" and new.speculative.enabled
    assert [c.node for c in new.candidates][:2] == ["r4090", "h100"]


def test_keep_capacity_leaves_a_large_workload_on_the_highest_speedup() -> None:
    """Above defaultExpectedBatch the band does not apply: a batch-32 workload on the slowest card would
    lose its own absolute rate (heldout-contended seeds 4 and 7: a batch-32 workload sent to an RTX 4090
    lost 6 % of the pool's goodput, docs/decision.md)."""
    snap = _snapshot([("h100", H100, 2, [(0.3, [16])]), ("r4090", RTX4090, 1, [(0.0, [])])])
    large = _decide(snap, "interactive", 32)
    speedup = {c.node: c.predicted_speedup or 0.0 for c in large.candidates}
    assert speedup["r4090"] >= speedup["h100"] / 1.05  # both in the band
    assert large.node == "h100" == max(speedup, key=lambda n: speedup[n])
    assert _decide(snap, "interactive", 32, keepCapacity=False).node == "h100"
    # were the band applied to it (defaultExpectedBatch 32), the batch-32 workload would take the RTX 4090
    assert _decide(snap, "interactive", 32, defaultExpectedBatch=32).node == "r4090"


def test_keep_capacity_ranks_whole_multi_engine_gpus_by_speedup_as_before() -> None:
    """An empty H200 and an empty H100 (no pod; some load), both able to host two engines: either choice
    takes a whole GPU, so the slowest-hardware preference does not apply and the band keeps the old
    order (the first version of the rule picked the slower H100 here)."""
    snap = _snapshot([("h100", H100, 2, [(0.4, [])]), ("h200", H200, 2, [(0.0, [])])])
    old = _decide(snap, "interactive", 8, keepCapacity=False)
    speedup = [c.predicted_speedup or 0.0 for c in old.candidates]
    assert min(speedup) >= max(speedup) / 1.05 and max(speedup) >= 1.05  # both in the band
    new = _decide(snap, "interactive", 8)
    assert old.node == "h200"  # the H100's load (0.4, no pod) costs it a little S_real
    assert new.node == old.node and [c.node for c in new.candidates] == [c.node for c in old.candidates]


def test_keep_capacity_leaves_a_significant_gain_alone() -> None:
    """With minGain 0 the band is the best node alone: the rule decides as highest-S_real does."""
    snap = _snapshot(SMALL)
    assert _decide(snap, "interactive", 4, minGain=0.0).node == "h100"
    assert _decide(snap, "interactive", 4, minGain=0.0, keepCapacity=False).node == "h100"


# An A100 node with a loaded GPU and an empty one, an H200 shared with a loaded engine, an idle H100.
BATCH = [
    ("a100", A100, 2, [(0.8, [64]), (0.0, [])]),
    ("h200", H200, 2, [(0.5, [32])]),
    ("h100", H100, 2, [(0.0, [])]),
]


def test_batch_class_model_takes_an_empty_gpu_on_the_fastest_hardware_and_may_speculate() -> None:
    new = _decide(_snapshot(BATCH), "batch", 64)
    assert new.node == "h100"  # an empty GPU on a100 and h100: the H100 is faster at batch 64
    assert new.speculative.enabled and "BatchClass" not in [r.type for r in new.reasons]
    old = _decide(_snapshot(BATCH), "batch", 64, batchClass="Plain")
    # the most loaded GPU the pod gets, plain: on a100 the device plugin would hand it the empty GPU-1
    assert old.node == "h200" and not old.speculative.enabled
    assert [r.type for r in old.reasons] == ["BatchClass"]
    unknown = _decide(_snapshot(BATCH), "batch", 64, batchClass="Plain", sharedGpuAllocation="Unknown")
    assert unknown.node == "a100"  # every free GPU judged: a100's loaded GPU-0


def test_batch_class_model_takes_the_best_predicted_plain_rate_when_no_gpu_is_empty() -> None:
    """No empty GPU anywhere: the H200 at load 0.5 predicts more tokens/s at batch 64 than the A100 at 0.8,
    where packing onto the most loaded GPU (the rule before session 21) sent it."""
    nodes = [("a100", A100, 2, [(0.8, [64])]), ("h200", H200, 2, [(0.5, [32])])]
    assert _decide(_snapshot(nodes), "batch", 64).node == "h200"
    # a lightly loaded A100 against an H200 near saturation: the A100 predicts more
    busy_h200 = [("a100", A100, 2, [(0.3, [64])]), ("h200", H200, 2, [(0.95, [32])])]
    assert _decide(_snapshot(busy_h200), "batch", 64).node == "a100"


@pytest.mark.parametrize(
    "nodes",
    [
        [("a100", A100, 2, [(0.8, [64])]), ("h200", H200, 2, [(0.5, [32])]), ("h100", H100, 1, [(0.2, [8])])],
        [("a100", A100, 2, [(0.8, [64]), (0.0, [])]), ("h200", H200, 2, []), ("r", RTX4090, 1, [(0.0, [])])],
    ],
    ids=["no-empty-gpu", "empty-gpus"],
)
def test_batch_keys_read_the_evaluations_steps_as_the_per_node_model_does(
    nodes: list[tuple[str, str, int, list[Gpu]]], monkeypatch: pytest.MonkeyPatch
) -> None:
    """The batch keys take the evaluated nodes' plain steps from the evaluation (one vectorised read: the
    per-candidate model call cost a batch decision ~5 ms at 500 nodes, docs/scale.md session 22); they
    must equal B / t_u(B) and B / (t0 + g(B)) from the per-node model on every candidate."""
    from sovereignspec.policy import placement

    seen: list[tuple[np.ndarray, np.ndarray]] = []
    real = placement._batch_keys

    def spy(facts, options, claims, plain):  # type: ignore[no-untyped-def]
        keys = real(facts, options, claims, plain)
        empty = placement._gpu_flags(options)[0]
        ref = plain[0].copy()
        for c in range(len(ref)):
            if empty[c]:
                step = placement._unloaded_step(facts, options, claims, c)
            elif not empty.any():
                step = placement.plain_step(facts, options.cands.nodes[c], claims, options.gpu_info(c)) or 0.0
            else:
                continue
            ref[c] = claims.expected_batch / step if step > 0 else 0.0
        seen.append((keys[1], ref))
        return keys

    monkeypatch.setattr(placement, "_batch_keys", spy)
    _decide(_snapshot(nodes), "batch", 64)
    assert seen and all(np.allclose(got, ref, rtol=1e-12, atol=0.0) for got, ref in seen)


def _k_at(d: Decision, batch: int) -> int:
    return next((k for lo, hi, k in d.speculative.schedule if lo <= batch <= hi), 0)


def test_batch_class_model_judges_the_gpu_the_pod_gets() -> None:
    """On an A100 node with a loaded GPU and an empty one, where the device plugin's choice is not known
    (`sharedGpuAllocation: Unknown`), an interactive workload is judged on the node's minimum slack (the
    loaded GPU, u 0.9); a batch one on the GPU the pod gets (the least loaded, the empty one): its
    recorded load is that GPU's, and its draft budget is that GPU's, not the loaded one's. Under the
    plugin's default allocation both are judged on the empty GPU the plugin hands out."""
    nodes = [("a100", A100, 2, [(0.9, [96]), (0.0, [])])]
    handed = [_decide(_snapshot(nodes), cls, 2) for cls in ("batch", "interactive")]
    assert [[c.load for c in d.candidates] for d in handed] == [[0.0], [0.0]]
    assert handed[0].speculative.schedule == handed[1].speculative.schedule
    judged = _decide(_snapshot(nodes), "batch", 2, sharedGpuAllocation="Unknown")
    as_interactive = _decide(_snapshot(nodes), "interactive", 2, sharedGpuAllocation="Unknown")
    assert judged.node == as_interactive.node == "a100"
    assert [c.load for c in judged.candidates] == [0.0] and [c.load for c in as_interactive.candidates] == [
        0.9
    ]
    assert judged.speculative.enabled and judged.speculative.schedule != as_interactive.speculative.schedule
    assert _k_at(judged, 2) > _k_at(as_interactive, 2)  # small batches: more slack on the empty GPU
    assert (judged.slack or 0.0) > (as_interactive.slack or 0.0)
    assert (judged.predicted_speedup or 0.0) > (as_interactive.predicted_speedup or 0.0)


@pytest.mark.parametrize("spec", [{}, {"keepCapacity": False, "batchClass": "Plain"}])
@pytest.mark.parametrize("cls", ["interactive", "batch"])
def test_a_node_without_gpu_samples_is_a_candidate_not_a_crash(cls: str, spec: dict[str, object]) -> None:
    """A GPU node that dcgm-exporter reports no GPU for (exporter not scraped yet, or down) is still a
    legal candidate (I6: telemetry changes only the speculation mode): the per-row GPU flags must not
    divide by its zero samples. Before the fix every decision raised ZeroDivisionError (the operator
    answered Retry)."""

    def with_bare(nodes: list[tuple[str, str, int, list[Gpu]]]) -> ClusterSnapshot:
        snap = _snapshot([*nodes, ("bare", A100, 2, [])])  # no GpuSample names "bare"
        bare = snap.nodes[-1].model_copy(update={"gpu_allocatable": 2})
        return snap.model_copy(update={"nodes": [*snap.nodes[:-1], bare]})

    d = _decide(with_bare([("h100", H100, 2, [(0.2, [8])])]), cls, 8, **spec)
    assert d.state == "Ready"
    assert {c.node for c in d.candidates} == {"h100", "bare"}
    alone = _decide(with_bare([]), cls, 8, **spec)
    assert alone.state == "Ready" and alone.node == "bare" and not alone.speculative.enabled
