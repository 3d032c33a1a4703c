"""What a decision costs the operator at the least, in this stack (figures, not a timed test).

The scale bench divides all of the operator's CPU by its decisions. This bench measures the two costs
that no code of ours removes while the operator is a kopf operator on the Python Kubernetes client:
- the client's CPU per write: the SpeculationDecision apply, our Workload entry's status apply and the
  Event, made here one after another;
- the operator's CPU per watch event it handles: the real operator, pinned to one core, is fed label
  patches on pods bound to a KWOK node and on Workloads. Each patch is one event, counted by the
  operator's `sovereignspec_watch_events_total`, and the CPU comes from /proc, less the idle rate, for
  the whole process and for its main thread (kopf's event loop) apart. The loop is `event_cost.py`'s,
  which the scale bench also runs inside its own run.
With the scale bench's "watch events per decision" (E) and decide()'s own cost (bench/decide_bench.py),
they bound the decisions per CPU-second: 1000 / (E x event + writes + decide) with all three in ms.
Runs against the local cluster (`make cluster-up`).
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import sys
import time
import uuid
from collections.abc import Callable
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "bench"))

from decide_bench import NOW, build, measure  # noqa: E402
from event_cost import event_cost, idle_rates  # noqa: E402
from kubernetes import client  # noqa: E402
from scale_bench import DRIFT_INTERVAL, proc_cpu_seconds, wait_quiet, watch_events  # noqa: E402

from sovereignspec.kube.ssa import apply_decision, apply_workload_check  # noqa: E402
from sovereignspec.policy.decide import decide  # noqa: E402
from sovereignspec.policy.decision import speculation_decision_object  # noqa: E402
from tests.chaos.harness import operator, unique_controller  # noqa: E402
from tests.e2e.pool import OUTSIDE_KUEUE  # noqa: E402
from tests.harness.cluster import LocalCluster, cluster_running  # noqa: E402
from tests.harness.wait import wait_until  # noqa: E402

KUEUE = ("kueue.x-k8s.io", "v1beta2")


def client_cpu_ms(fn: Callable[[int], Any], n: int) -> tuple[float, float]:
    """Median client CPU (this thread: the synchronous client's work) and wall time of fn(0) … fn(n-1),
    in ms, timed by decide_bench's `measure`."""
    i = iter(range(n))
    wall, cpu = measure(lambda: fn(next(i)), n)
    return statistics.median(cpu), statistics.median(wall)


def workload(name: str) -> dict[str, Any]:
    """A Workload with no queue: Kueue leaves it alone, and it carries no check of anyone's."""
    pod = {"containers": [{"name": "c", "image": "x"}], "restartPolicy": "Never"}
    return {
        "apiVersion": "/".join(KUEUE),
        "kind": "Workload",
        "metadata": {"name": name, "labels": {"round": "0"}},
        "spec": {"podSets": [{"name": "main", "count": 1, "template": {"spec": pod}}]},
    }


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("-n", type=int, default=200, help="writes per kind, and objects patched per round")
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--core", type=int, default=None, help="CPU the operator is pinned to (default: last)")
    ap.add_argument(
        "--events-per-decision",
        type=float,
        action="append",
        help="E for the bound (the scale bench prints it); repeatable. Default: 5, 10, 13, 20",
    )
    ap.add_argument("--decide-ms", type=float, default=0.9, help="decide() per decision (decide_bench)")
    args = ap.parse_args()
    n = args.n
    core = args.core if args.core is not None else max(os.sched_getaffinity(0))

    cluster = LocalCluster.from_env_file() if cluster_running() else LocalCluster.ensure_up()
    crds = str(ROOT / "crds")
    cluster.kubectl("apply", "--server-side", "--force-conflicts", "-f", crds)
    cluster.wait_established(ROOT / "crds")
    api = cluster.api_client
    print(f"no namespace terminating after {wait_quiet(api):.0f}s", file=sys.stderr, flush=True)
    core_api, co = client.CoreV1Api(api), client.CustomObjectsApi(api)
    ns = f"floor-bench-{uuid.uuid4().hex[:6]}"
    # Outside Kueue (the local Kueue gates plain pods elsewhere): its pods carry no GPU and no queue.
    meta = client.V1ObjectMeta(name=ns, labels={OUTSIDE_KUEUE: "true"})
    core_api.create_namespace(client.V1Namespace(metadata=meta))
    op = None
    try:
        # ---- client CPU per write --------------------------------------------------------------
        req, snap, pol = build(500)
        obj = speculation_decision_object(decide(req, snap, pol, NOW), None)  # no owner: GC keeps it
        for i in range(n):
            co.create_namespaced_custom_object(*KUEUE, ns, "workloads", workload(f"w-{i}"))

        def write_decision(i: int) -> None:
            o = dict(obj, metadata=dict(obj["metadata"], namespace=ns, name=f"w-{i}"))
            apply_decision(api, obj=dict(o, spec=dict(obj["spec"], workload=f"w-{i}")), field_manager="floor")

        def write_entry(i: int) -> None:
            entry = {
                "name": "floor-check",
                "state": "Pending",
                "message": "floor bench",
                "lastTransitionTime": "2026-11-29T10:00:00Z",
            }
            apply_workload_check(api, namespace=ns, name=f"w-{i}", entry=entry, field_manager="floor")

        def post_event(i: int) -> None:
            # A raw POST of a plain body, as kopf posts it (aiohttp): the client's typed
            # create_namespaced_event validates the body into its models first, about 3 ms more.
            ev = {
                "metadata": {"generateName": f"w-{i}."},
                "involvedObject": {"kind": "Workload", "name": f"w-{i}", "namespace": ns},
                "reason": "SpeculationReady",
                "message": "speculation on: eagle3, k 3 at expected batch 8; S_real 1.9 on node n0001",
                "type": "Normal",
            }
            method, url, headers, body, post = api.param_serialize(
                "POST",
                "/api/v1/namespaces/{namespace}/events",
                path_params={"namespace": ns},
                header_params={"Content-Type": "application/json", "Accept": "application/json"},
                body=ev,
                auth_settings=["BearerToken"],
            )
            resp = api.call_api(method, url, headers, body, post)
            resp.read()
            if resp.status != 201:
                raise RuntimeError(f"Event not created: {resp.status} {resp.data[:200]!r}")

        writes = {
            "SpeculationDecision apply": client_cpu_ms(write_decision, n),
            "Workload entry status apply": client_cpu_ms(write_entry, n),
            "Event create": client_cpu_ms(post_event, n),
        }
        obj_bytes = len(json.dumps(obj))
        for label, (cpu, wall) in writes.items():
            print(f"client CPU per write, {label}: median {cpu:.2f} ms (wall {wall:.1f} ms), n={n}")
        write_ms = sum(cpu for cpu, _ in writes.values())
        print(f"  the decision object is {obj_bytes} bytes of JSON; one decision's writes: {write_ms:.2f} ms")

        # ---- operator CPU per watch event ------------------------------------------------------
        # Bound by the scheduler, not by spec.nodeName (the chart's admission policy refuses that in
        # tenant namespaces): a bound pod is what the operator's pod index parses in full.
        for i in range(n):
            pod = client.V1Pod(
                metadata=client.V1ObjectMeta(name=f"p-{i}", labels={"round": "0"}),
                spec=client.V1PodSpec(
                    containers=[client.V1Container(name="c", image="x")],
                    tolerations=[client.V1Toleration(operator="Exists")],
                ),
            )
            core_api.create_namespaced_pod(ns, pod)
        wait_until(
            lambda: sum(1 for p in core_api.list_namespaced_pod(ns).items if p.spec.node_name) >= n,
            timeout=120,
            what=f"{n} pods bound by the scheduler",
        )
        op = operator(
            cluster,
            None,
            unique_controller("floor"),
            extra_env={
                "SOVEREIGNSPEC_RESYNC_SECONDS": "5",
                "SOVEREIGNSPEC_DRIFT_INTERVAL_SECONDS": str(DRIFT_INTERVAL),
            },
        )
        op.start()
        os.sched_setaffinity(op.proc.pid, {core})
        op.wait_ready(timeout=120)
        pid = op.proc.pid
        time.sleep(10)  # the initial listing and the pods' KWOK status updates settle
        clocks = {"process": lambda: proc_cpu_seconds(pid), "main": lambda: proc_cpu_seconds(pid, pid)}
        idle = idle_rates(clocks, 10.0)
        print(f"operator idle CPU: {1000 * idle['process']:.1f} ms/s (subtracted below)")

        def patch_pod(i: int, value: str) -> None:
            body = {"metadata": {"labels": {"round": value}}}
            core_api.patch_namespaced_pod(f"p-{i}", ns, body, _preload_content=False)

        def patch_workload(i: int, value: str) -> None:
            body = {"metadata": {"labels": {"round": value}}}
            co.patch_namespaced_custom_object(*KUEUE, ns, "workloads", f"w-{i}", body)

        costs = event_cost(
            {"pods": (n, patch_pod), "workloads": (n, patch_workload)},
            lambda kind: watch_events(op.metrics()).get(kind, 0.0),
            clocks,
            idle,
            rounds=args.rounds,
        )
        event_ms = costs["process"]
        for clock, label in (("process", "operator"), ("main", "its main thread")):
            print(
                f"{label}: CPU per watch event (median of rounds): "
                + ", ".join(f"{k} {v:.2f} ms" for k, v in costs[clock].items())
            )
        e_ms = statistics.mean(event_ms.values())
        for e in args.events_per_decision or [5.0, 10.0, 13.0, 20.0]:
            floor = e * e_ms + write_ms + args.decide_ms
            print(
                f"bound at E={e:g} events per decision: {e:g} x {e_ms:.2f} + writes {write_ms:.2f} "
                f"+ decide {args.decide_ms:.2f} = {floor:.1f} ms -> at most {1000 / floor:.0f} decisions "
                "per CPU-second"
            )
        print(
            json.dumps(
                {
                    "clientWriteMs": {k: round(v[0], 3) for k, v in writes.items()},
                    "eventMs": {k: round(v, 3) for k, v in event_ms.items()},
                    "mainThreadEventMs": {k: round(v, 3) for k, v in costs["main"].items()},
                }
            )
        )
    finally:
        if op is not None:
            op.stop()
        core_api.delete_namespace(ns)
    return 0


if __name__ == "__main__":
    sys.exit(main())
