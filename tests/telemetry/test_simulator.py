"""The simulator's load model, device assignment and metric shapes, without processes."""

from __future__ import annotations

import json
import math
from typing import Any

import pytest
from prometheus_client import CollectorRegistry, generate_latest
from prometheus_client.parser import text_string_to_metric_families

from sovereignspec.telemetry.sim.exposition import SimCollector
from sovereignspec.telemetry.sim.kube import node_spec_from, pod_spec_from
from sovereignspec.telemetry.sim.scenario import (
    AcceptanceCurve,
    NodeSpec,
    PodSpec,
    Scenario,
    ScenarioError,
    load_scenario,
)
from sovereignspec.telemetry.sim.simulator import Simulator, parse_spec_config
from tests.support import set_overrides
from tests.telemetry.conftest import SCENARIOS

SPEC4 = json.dumps({"method": "eagle3", "model": "d", "num_speculative_tokens": 4})


def scenario(base_load: float = 0.0, rate: float = 2.0, spec: str | None = None, **node: Any) -> Scenario:
    ann = {"sovereignspec.io/speculative-config": spec} if spec else {}
    return Scenario(
        seed=1,
        noise=0.0,
        nodes=[NodeSpec(name="n", gpus=1, base_load=base_load, **node)],
        pods=[PodSpec(namespace="t", name="p", node="n", request_rate=rate, annotations=ann)],
    )


def settle(sim: Simulator, ticks: int = 15) -> Simulator:
    for _ in range(ticks):
        sim.tick()
    return sim


def samples(sim: Simulator) -> dict[tuple[str, tuple[tuple[str, str], ...]], float]:
    reg = CollectorRegistry()
    reg.register(SimCollector(sim))
    out = {}
    for fam in text_string_to_metric_families(generate_latest(reg).decode()):
        for s in fam.samples:
            out[(s.name, tuple(sorted(s.labels.items())))] = s.value
    return out


def test_same_seed_same_metrics_other_seed_differs() -> None:
    sc = load_scenario(SCENARIOS / "small.yaml").model_copy(update={"noise": 0.02})
    a, b = settle(Simulator(sc)), settle(Simulator(sc))
    c = settle(Simulator(sc.model_copy(update={"seed": 99})))
    assert samples(a) == samples(b)
    assert samples(a) != samples(c)


def test_counters_are_monotone_and_histograms_cumulative() -> None:
    sim = Simulator(load_scenario(SCENARIOS / "small.yaml"))
    prev: dict[Any, float] = {}
    for _ in range(10):
        sim.tick()
        cur = samples(sim)
        for key, v in cur.items():
            if key[0].endswith(("_total", "_bucket", "_count", "_sum")) and key in prev:
                assert v >= prev[key], key
        prev = cur
    buckets: dict[Any, list[tuple[float, float]]] = {}
    for (name, labels), v in prev.items():
        if name.endswith("_bucket"):
            d = dict(labels)
            le = float(d.pop("le"))
            buckets.setdefault(tuple(sorted(d.items())), []).append((le, v))
    assert buckets
    for key, bs in buckets.items():
        counts = [v for _, v in sorted(bs)]
        assert counts == sorted(counts) and math.isinf(sorted(bs)[-1][0])
        assert counts[-1] == prev[("vllm:request_time_per_output_token_seconds_count", key)]


def test_speculation_helps_on_an_idle_gpu_and_hurts_on_a_saturated_one() -> None:
    idle_plain = settle(Simulator(scenario(0.0))).engines[("t", "p")]
    idle_spec = settle(Simulator(scenario(0.0, spec=SPEC4))).engines[("t", "p")]
    assert idle_spec.tpot < idle_plain.tpot / 1.5
    busy_plain = settle(Simulator(scenario(0.9, rate=20))).engines[("t", "p")]
    busy_spec = settle(Simulator(scenario(0.9, rate=20, spec=SPEC4))).engines[("t", "p")]
    assert busy_spec.tpot > busy_plain.tpot  # verification costs full tokens without slack
    assert busy_spec.share > busy_plain.share  # and adds tensor load for the neighbours


def test_speculation_raises_the_gpu_tensor_activity() -> None:
    plain = settle(Simulator(scenario(0.2, rate=8)))
    spec = settle(Simulator(scenario(0.2, rate=8, spec=SPEC4)))
    assert spec.devices[0].tensor_active > plain.devices[0].tensor_active > 0.2


def test_acceptance_counters_follow_the_curve() -> None:
    sc = scenario(0.0, rate=5, spec=SPEC4).model_copy(
        update={"acceptance": {"d": AcceptanceCurve(per_position=[0.9, 0.7, 0.5])}}
    )
    e = settle(Simulator(sc), 40).engines[("t", "p")]
    assert len(e.accepted) == 4 and e.draft_tokens == 4 * e.drafts
    ratios = [a / e.drafts for a in e.accepted]
    assert ratios[0] == pytest.approx(0.9, abs=0.02)
    assert ratios[1] == pytest.approx(0.7, abs=0.02)
    assert ratios[2] == pytest.approx(0.5, abs=0.02)
    assert ratios[3] == pytest.approx(0.5 * 0.5 / 0.7, abs=0.02)  # extended geometrically


def test_per_batch_size_schedule_switches_k() -> None:
    cfg = json.dumps(
        {"method": "eagle3", "model": "d", "num_speculative_tokens": 4,
         "num_speculative_tokens_per_batch_size": [[1, 4, 4], [5, 1024, 0]]}
    )  # fmt: skip
    low = settle(Simulator(scenario(0.0, rate=1, spec=cfg))).engines[("t", "p")]
    assert low.batch <= 4 and low.drafts > 0
    sim = settle(Simulator(scenario(0.0, rate=200, spec=cfg)))
    high = sim.engines[("t", "p")]
    before = high.drafts
    settle(sim, 5)
    assert high.batch > 4 and high.drafts == before  # k = 0 at this batch: no drafts


def test_malformed_spec_config_means_off() -> None:
    assert parse_spec_config({"sovereignspec.io/speculative-config": "{nope"}) is None
    assert parse_spec_config({"sovereignspec.io/speculative-config": '{"num_speculative_tokens": 0}'}) is None
    assert parse_spec_config({}) is None
    cfg = parse_spec_config({"sovereignspec.io/speculative-config": SPEC4})
    assert cfg is not None and cfg.k == 4 and cfg.k_at(100) == 4


def test_time_slicing_and_capacity() -> None:
    sc = Scenario(
        nodes=[NodeSpec(name="n", gpus=2, time_slicing_replicas=2)],
        pods=[PodSpec(namespace="t", name=f"p{i}", node="n") for i in range(5)],
    )
    sim = Simulator(sc)
    assert sorted(len(d.pods) for d in sim.devices) == [2, 2]
    assert [k for k, e in sim.engines.items() if not e.devices] == [("t", "p4")]  # no slot left
    sim.remove_pod(("t", "p0"))
    assert len(sim.engines[("t", "p4")].devices) == 1  # the freed slot goes to the waiting pod
    sim.tick()
    # One dcgm series per pod on a time-sliced GPU, same value.
    s = samples(sim)
    per_uuid: dict[str, set[float]] = {}
    for (name, labels), v in s.items():
        if name == "DCGM_FI_PROF_PIPE_TENSOR_ACTIVE":
            per_uuid.setdefault(dict(labels)["UUID"], set()).add(v)
    assert all(len(vals) == 1 for vals in per_uuid.values())


def test_a_relist_allocates_in_one_pass_as_pods_arriving_one_by_one_would(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """A re-list of thousands of pods ran one allocation pass per pod over every engine, under the lock
    every scrape waits for. `set_pods` now makes one pass; the devices each pod gets are the same."""
    nodes = [NodeSpec(name=f"n{i}", gpus=4, time_slicing_replicas=2) for i in range(3)]
    pods = [PodSpec(namespace="t", name=f"p{i:02d}", node=f"n{i % 3}", gpus=1 + i % 2) for i in range(30)]
    one_by_one = Simulator(Scenario(nodes=nodes))
    for pod in pods:
        one_by_one.upsert_pod(pod)
    relisted = Simulator(Scenario(nodes=nodes))
    passes = 0
    allocate = Simulator._assign

    def counted(self: Simulator) -> None:
        nonlocal passes
        passes += 1
        allocate(self)

    monkeypatch.setattr(Simulator, "_assign", counted)
    relisted.set_pods(pods)
    assert passes == 1

    def devices(sim: Simulator) -> dict[tuple[str, str], list[str]]:
        return {k: [d.uuid for d in e.devices] for k, e in sim.engines.items()}

    assert devices(relisted) == devices(one_by_one)
    assert any(not e.devices for e in relisted.engines.values())  # more GPUs asked than slots: some wait
    # A pod that leaves frees its slots for a waiting one; a node that changes re-allocates its pods.
    waiting = sorted(k for k, e in relisted.engines.items() if not e.devices and e.spec.node == "n0")
    gone = next(
        k for k, e in relisted.engines.items() if e.spec.gpus == 2 and e.devices and e.spec.node == "n0"
    )
    relisted.set_pods([p for p in pods if p.key != gone])
    assert relisted.engines[waiting[0]].devices
    relisted.set_nodes([*nodes[:2], NodeSpec(name="n2", gpus=8, time_slicing_replicas=2)])
    assert all(e.devices for e in relisted.engines.values() if e.spec.node == "n2")


def test_multi_gpu_pod_takes_distinct_devices() -> None:
    sc = Scenario(
        nodes=[NodeSpec(name="n", gpus=4)], pods=[PodSpec(namespace="t", name="big", node="n", gpus=3)]
    )
    e = Simulator(sc).engines[("t", "big")]
    assert len({d.uuid for d in e.devices}) == 3


def test_mig_instances_are_devices() -> None:
    sim = Simulator(load_scenario(SCENARIOS / "small.yaml"))
    mig = [d for d in sim.devices if d.node == "gpu-c"]
    assert [(d.gi_id, d.mig_profile, d.memory_mib) for d in mig] == [
        ("1", "3g.40gb", 40960.0),
        ("2", "3g.40gb", 40960.0),
    ]
    assert len({d.uuid for d in mig}) == 1


def test_overrides_inject_faults() -> None:
    sim = settle(Simulator(scenario(0.1)), 2)
    uuid = sim.devices[0].uuid
    from sovereignspec.telemetry.sim.scenario import Override

    set_overrides(
        sim, [Override(metric="DCGM_FI_PROF_PIPE_TENSOR_ACTIVE", match={"UUID": uuid}, value=math.nan)]
    )
    vals = [v for (n, _), v in samples(sim).items() if n == "DCGM_FI_PROF_PIPE_TENSOR_ACTIVE"]
    assert vals and all(math.isnan(v) for v in vals)


def test_bad_scenarios_are_clear_errors(tmp_path: Any) -> None:
    p = tmp_path / "s.yaml"
    p.write_text("nodes: [{name: a}]\npods: [{namespace: t, name: x, node: nope}]\n")
    with pytest.raises(ScenarioError, match="unknown nodes"):
        load_scenario(p)
    p.write_text("acceptance: {d: {alpha: 0.5, perPosition: [0.5]}}\n")
    with pytest.raises(ScenarioError, match="exactly one"):
        load_scenario(p)
    p.write_text(": : :")
    with pytest.raises(ScenarioError):
        load_scenario(p)


def k8s_node(name: str, **labels: str) -> dict[str, Any]:
    return {"metadata": {"name": name, "labels": labels}, "status": {"capacity": {"nvidia.com/gpu": "8"}}}


def test_node_and_pod_from_the_api() -> None:
    sc = Scenario(nodes=[NodeSpec(name="g1", base_load=0.3)])
    n = node_spec_from(
        k8s_node("g1", **{"nvidia.com/gpu.product": "NVIDIA-L40S", "nvidia.com/gpu.replicas": "4"}), sc
    )
    assert n is not None and (n.product, n.gpus, n.time_slicing_replicas, n.base_load) == (
        "NVIDIA-L40S",
        2,
        4,
        0.3,
    )
    assert node_spec_from(k8s_node("cpu"), sc) is None
    pod = {
        "metadata": {
            "namespace": "t",
            "name": "p",
            "annotations": {"sovereignspec.io/sim-request-rate": "3", "other/x": "y"},
        },
        "spec": {"nodeName": "g1", "containers": [{"resources": {"limits": {"nvidia.com/gpu": "1"}}}]},
        "status": {"phase": "Running"},
    }
    ps = pod_spec_from(pod, {"g1"})
    assert ps is not None and (ps.node, ps.gpus, ps.request_rate) == ("g1", 1, 3.0)
    assert "other/x" not in ps.annotations
    assert pod_spec_from(pod, {"g2"}) is None  # not a GPU node
    assert pod_spec_from(pod | {"status": {"phase": "Succeeded"}}, {"g1"}) is None
    assert pod_spec_from(pod | {"spec": {"nodeName": "g1", "containers": [{}]}}, {"g1"}) is None
