"""Benchmark of decide(): 500 candidate nodes, kMax 8, 9 batch ranges, 4 neighbours per node.

Prints median and p99 (figures, not a timed test). "warm" reuses one ClusterSnapshot (its per-node
index built once, as the operator does between cache refreshes); "cold" includes building that index;
"patched" is a new snapshot with one pod (or one node's labels) changed that carries the previous index,
as the operator does after a pod or node event: facts about untouched nodes are kept, and facts about
many nodes at once are patched on the touched ones. "compared" finds the changed pod by comparing every
pod; "tracked" is handed the changed key, as the operator's pod mirror does.
Runs on one core (sched_setaffinity) with numpy's threads limited to one.
"""

from __future__ import annotations

import os

os.environ.setdefault("OMP_NUM_THREADS", "1")
os.environ.setdefault("OPENBLAS_NUM_THREADS", "1")

import statistics
import sys
import time
from dataclasses import replace
from datetime import UTC, datetime, timedelta

from sovereignspec.api.meta import ANNOTATION_CLASS, ANNOTATION_EXPECTED_BATCH, ObjectMeta
from sovereignspec.api.sovereignty_policy import SovereigntyPolicy, SovereigntyPolicySpec
from sovereignspec.api.speculation_policy import SpeculationPolicySpec
from sovereignspec.model.cluster import ClusterSnapshot, NamespaceInfo, NodeInfo, PodInfo
from sovereignspec.model.telemetry import (
    AcceptanceSample,
    EngineSample,
    GpuSample,
    PodRef,
    TelemetrySnapshot,
)
from sovereignspec.model.workload import CheckEntry, PodSetAssignment, PodSetInfo, WorkloadInfo
from sovereignspec.policy.cache import carry_index, drop_index, index_of
from sovereignspec.policy.decide import decide
from sovereignspec.policy.request import AdmissionRequest, Policies

PRODUCTS = ["NVIDIA-H100-80GB-HBM3", "NVIDIA-A100-SXM4-80GB", "NVIDIA-H200"]
NOW = datetime(2026, 11, 29, 10, 0, 5, tzinfo=UTC)
TENANTS = ("bank-a", "bank-b", "bank-c", "bank-d")


def build(n_nodes: int = 500, neighbours: int = 4) -> tuple[AdmissionRequest, ClusterSnapshot, Policies]:
    nodes, pods, gpus, engines = [], [], [], []
    for i in range(n_nodes):
        name = f"node-{i:04d}"
        nodes.append(
            NodeInfo(
                name=name,
                labels={
                    "kubernetes.io/hostname": name,
                    "sovereignspec.io/jurisdiction": "KR",
                    "nvidia.com/gpu.product": PRODUCTS[i % 3],
                },
                gpu_allocatable=2 * (neighbours // 2 + 1),  # time-sliced: room for one more engine per GPU
            )
        )
        for g in range(2):
            refs = []
            for j in range(neighbours // 2):
                pod = f"eng-{i}-{g}-{j}"
                ns = f"tenant-{(i + j) % 20}"
                pods.append(
                    PodInfo(
                        namespace=ns,
                        name=pod,
                        node=name,
                        phase="Running",
                        gpu_request=1,
                        annotations={"sovereignspec.io/tpot-slo-ms": "80"},
                    )
                )
                engines.append(
                    EngineSample(namespace=ns, pod=pod, tpot_seconds=0.02 + 0.001 * (i % 7), running=16)
                )
                refs.append(PodRef(namespace=ns, name=pod))
            gpus.append(
                GpuSample(
                    node=name, uuid=f"GPU-{i}-{g}", tensor_active=(i % 10) / 20, fb_free_mib=30000, pods=refs
                )
            )
    snapshot = ClusterSnapshot(
        nodes=nodes,
        pods=pods,
        namespaces=[NamespaceInfo(name=f"tenant-{t}") for t in range(20)]
        + [NamespaceInfo(name=t) for t in TENANTS],
        sovereignty_policies=[
            SovereigntyPolicy(
                metadata=ObjectMeta(name="kr"),
                spec=SovereigntyPolicySpec(tenants=list(TENANTS), jurisdictions=["KR"]),
            )
        ],
        telemetry=TelemetrySnapshot(
            time=NOW - timedelta(seconds=5),
            gpus=gpus,
            engines=engines,
            acceptance=[
                AcceptanceSample(
                    target_model="m",
                    draft_model="d",
                    method="eagle3",
                    drafts=1000,
                    draft_tokens=4000,
                    accepted_per_position=[850, 700, 560, 430],
                )
            ],
        ),
    )
    workload = WorkloadInfo(
        namespace="bank-a",
        name="chat",
        uid="uid",
        pod_sets=[
            PodSetInfo(
                name="main",
                count=1,
                gpus_per_pod=1,
                annotations={
                    "sovereignspec.io/target-model": "m",
                    "sovereignspec.io/draft-model": "d",
                    "sovereignspec.io/spec-method": "eagle3",
                },
            )
        ],
        quota_reserved=True,
        assignments=[PodSetAssignment(name="main", flavors={})],
        checks=[CheckEntry(name="sovereignspec", state="Pending")],
    )
    policies = Policies(speculation=SpeculationPolicySpec(k_max=8), sovereignty=snapshot.sovereignty_policies)
    return AdmissionRequest(workload=workload, check="sovereignspec"), snapshot, policies


def measure(fn: object, runs: int) -> tuple[list[float], list[float]]:
    """(wall ms, CPU ms of this thread): on a shared machine the CPU time is the one-core cost."""
    wall, cpu = [], []
    for _ in range(runs):
        t, c = time.perf_counter(), time.thread_time()
        fn()  # type: ignore[operator]
        cpu.append((time.thread_time() - c) * 1000.0)
        wall.append((time.perf_counter() - t) * 1000.0)
    return wall, cpu


def _p99(ms: list[float]) -> float:
    ms = sorted(ms)
    return ms[min(len(ms) - 1, round(0.99 * (len(ms) - 1)))]


def refreshed_telemetry(tel: TelemetrySnapshot, i: int) -> TelemetrySnapshot:
    """The next reading: every GPU's and engine's values move (as DCGM's and vLLM's do between two
    refreshes), the pods they name are the previous reading's objects (the reader reuses its PodRefs)."""
    gpus = [
        GpuSample(
            node=g.node,
            uuid=g.uuid,
            tensor_active=round(((j * 31 + i * 17) % 97) / 200, 4),
            fb_free_mib=30000 - (j + i) % 500,
            pods=g.pods,
        )
        for j, g in enumerate(tel.gpus)
    ]
    engines = [
        EngineSample(
            namespace=e.namespace,
            pod=e.pod,
            tpot_seconds=0.02 + 0.001 * ((j + i) % 13),
            running=8 + (j + i) % 24,
        )
        for j, e in enumerate(tel.engines)
    ]
    # The same reading time: decide()'s clock is fixed here, and a reading from its future turns
    # speculation off (then no node is evaluated at all).
    return tel.model_copy(update={"gpus": gpus, "engines": engines})


def kinds(request: AdmissionRequest) -> list[AdmissionRequest]:
    """The operator's request kinds: 4 tenants x 2 classes (interactive, batch)."""
    out = []
    for ns in TENANTS:
        for cls in ("interactive", "batch"):
            wl = request.workload
            sets = [
                ps.model_copy(update={"annotations": {**ps.annotations, ANNOTATION_CLASS: cls}})
                for ps in wl.pod_sets
            ]
            out.append(
                request.model_copy(
                    update={"workload": wl.model_copy(update={"namespace": ns, "pod_sets": sets})}
                )
            )
    return out


def report(label: str, samples: tuple[list[float], list[float]]) -> None:
    wall, cpu = samples
    print(
        f"{label:<30} wall median {statistics.median(wall):6.2f} ms  p99 {_p99(wall):6.2f} ms | "
        f"cpu median {statistics.median(cpu):6.2f} ms  p99 {_p99(cpu):6.2f} ms  (n={len(wall)})"
    )


CYCLES = int(os.environ.get("BENCH_REFRESH_CYCLES", "30"))


def main() -> int:
    if hasattr(os, "sched_setaffinity"):
        os.sched_setaffinity(0, {min(os.sched_getaffinity(0))})
    request, snapshot, policies = build()
    d = decide(request, snapshot, policies, NOW)
    assert d.state == "Ready", d.message
    print(
        f"decide(): {len(snapshot.nodes)} nodes, kMax {policies.speculation.k_max}, "
        f"{len(policies.speculation.batch_breakpoints)} batch ranges, 4 neighbours/node -> {d.node}, "
        f"k={d.speculative.num_speculative_tokens}, S={d.predicted_speedup}"
    )
    for _ in range(5):
        decide(request, snapshot, policies, NOW)
    report("warm (snapshot index reused)", measure(lambda: decide(request, snapshot, policies, NOW), 300))

    def cold() -> None:
        drop_index(snapshot)  # drops the per-node index and every memo built on it
        decide(request, snapshot, policies, NOW)

    report("cold (index built each call)", measure(cold, 50))

    # The operator after a pod event: a new snapshot with one pod changed carries the previous index
    # (facts about untouched nodes kept, facts about many nodes at once patched on the touched ones).
    state = {"snap": snapshot, "i": 0}

    # Requests that differ in their expected batch are memoised under their own keys, as the operator's
    # tenants and classes are: taking turns, each finds its facts several patches back.
    turns = [
        request.model_copy(update={"workload": request.workload.model_copy(update={"pod_sets": [
            ps.model_copy(update={"annotations": {**ps.annotations, ANNOTATION_EXPECTED_BATCH: str(b)}})
            for ps in request.workload.pod_sets
        ]})})
        for b in (1, 2, 4, 8, 16, 32, 64, 128)
    ]  # fmt: skip

    def patched(tracked: bool, node: bool = False, rotate: bool = False, fresh: bool = False) -> None:
        prev = state["snap"]
        assert isinstance(prev, ClusterSnapshot)
        i = state["i"] = int(state["i"]) + 1  # type: ignore[call-overload]
        update: dict[str, object] = {}
        changed: set[tuple[str, str]] = set()
        if node:  # a label update (KWOK's heartbeat-like node changes)
            nodes = list(prev.nodes)
            k = (i * 7919) % len(nodes)
            nodes[k] = nodes[k].model_copy(update={"labels": {**nodes[k].labels, "bench/beat": str(i)}})
            update["nodes"] = nodes
        else:
            pods = list(prev.pods)
            k = (i * 7919) % len(pods)
            pods[k] = pods[k].model_copy(update={"gpu_request": 2 - pods[k].gpu_request})
            changed.add((pods[k].namespace, pods[k].name))
            update["pods"] = pods
        nxt = prev.model_copy(update=update)
        drop_index(nxt)
        if tracked:  # the operator's way: its pods by key, and the keys it saw change
            by_key = dict(index_of(prev).pod_by_key)
            for key in changed:
                by_key[key] = next(p for p in nxt.pods if (p.namespace, p.name) == key)
            carry_index(nxt, prev, (by_key, changed))
        else:
            carry_index(nxt, prev)
        # fresh: a new Policies per decision with a new tuple of the same SovereigntyPolicy objects, as
        # the operator gets from request_for (select_policies)
        pol = replace(policies, sovereignty=tuple(nxt.sovereignty_policies)) if fresh else policies
        decide(turns[i % len(turns)] if rotate else request, nxt, pol, NOW)
        state["snap"] = nxt

    decide(request, snapshot, policies, NOW)
    report("patched (one pod, compared)", measure(lambda: patched(False), 100))
    report("patched (one pod, tracked)", measure(lambda: patched(True), 100))
    report("patched (one node's labels)", measure(lambda: patched(True, node=True), 100))
    report("patched, 8 requests in turn", measure(lambda: patched(True, rotate=True), 160))
    report("patched, 8 in turn, policies new", measure(lambda: patched(True, rotate=True, fresh=True), 160))
    refreshed(state, kinds(request), policies, CYCLES)
    return 0


def refreshed(
    state: dict[str, object], turns: list[AdmissionRequest], policies: Policies, cycles: int
) -> None:
    """The operator after a telemetry refresh (every 10 s): a new snapshot whose GPU and engine samples
    all changed (same nodes, same pods) carries the previous index, then each request kind (4 tenants x
    2 classes) is decided once in turn. CPU per refresh cycle (all 8) and per decision."""
    per_cycle: tuple[list[float], list[float]] = ([], [])
    per_decision: tuple[list[float], list[float]] = ([], [])
    first: tuple[list[float], list[float]] = ([], [])
    for i in range(1, cycles + 1):
        prev = state["snap"]
        assert isinstance(prev, ClusterSnapshot)
        assert prev.telemetry is not None
        reading = refreshed_telemetry(prev.telemetry, i)  # the reader's work, not the decision core's
        w0, c0 = time.perf_counter(), time.thread_time()
        nxt = prev.model_copy(update={"telemetry": reading})
        drop_index(nxt)
        carry_index(nxt, prev, (dict(index_of(prev).pod_by_key), set()))
        for j, req in enumerate(turns):
            w, c = time.perf_counter(), time.thread_time()
            decide(req, nxt, policies, NOW)
            dc, dw = (time.thread_time() - c) * 1000.0, (time.perf_counter() - w) * 1000.0
            per_decision[0].append(dw)
            per_decision[1].append(dc)
            if j == 0:
                first[0].append(dw)
                first[1].append(dc)
        per_cycle[1].append((time.thread_time() - c0) * 1000.0)
        per_cycle[0].append((time.perf_counter() - w0) * 1000.0)
        state["snap"] = nxt
    report("refreshed, per cycle (8 kinds)", per_cycle)
    report("refreshed, per decision", per_decision)
    report("refreshed, first after refresh", first)


if __name__ == "__main__":
    sys.exit(main())
