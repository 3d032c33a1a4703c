"""Scale benchmark of the operator on the real local cluster (figures, not a timed test).

Setup: N KWOK GPU nodes in four jurisdictions (one tenant per jurisdiction, one of them isolated),
the telemetry simulator feeding a private Prometheus, the operator as a real process pinned to ONE
core, with its own AdmissionCheck controller name (other engineers' operators on the shared cluster
never answer our workloads). W one-GPU Jobs are submitted in bursts; each burst is drained before
the next.

Two arms, in one run on the same cluster and API server: the same bursts go through two ClusterQueues,
one with our AdmissionCheck and one without any (Kueue alone). The arms are interleaved burst by burst,
alternating which arm goes first (alone, check, check, alone, ...), so the machine's drift and each
burst's tail of pod-start events fall on both arms alike. The Kueue-alone arm has KWOK nodes of its own
(GPU capacity but no `nvidia.com/gpu.product` label, so the telemetry simulator leaves them out): its
pods must never land next to the isolated tenant's. Per arm: time from Workload creation to Admitted,
as an independent watcher observes them (first event of the Workload -> first event with Admitted=True;
the server's creationTimestamp / Admitted lastTransitionTime, 1 s resolution, are printed as a
cross-check), and admitted workloads per second of burst time.

Measured:
- decision latency: the operator's own sample per decision (`durationMs` on its `decided` log line,
  the `sovereignspec_decision_duration_seconds` sample): our entry seen Pending → status apply
  acknowledged; and, as a cross-check, an independent watcher's "entry seen Pending (quota reserved)"
  → "entry seen Ready/Retry";
- decisions per second: wall (first Pending seen → last answer seen, per burst, summed) and per
  operator CPU-second (the "on one core" figure: the operator is pinned to one core);
- operator RSS (max sampled) and CPU from /proc;
- Prometheus queries per refresh, per phase (idle, each burst), from the operator's counters;
- API requests per decision: the API server's APF counter for a FlowSchema matching only the
  operator's own client-certificate user;
- the API server's own round trip for a status apply: the bench re-applies an operator's Ready entry
  (same field manager, a no-op apply through the same admission webhooks), in the same run;
- the operator's CPU per watch event in the same run (`event_floor`: `make bench-floor`'s loop, label
  patches on held objects, the whole process and its main thread), beside its main thread's CPU per
  decision in the check bursts.

The output ends with one JSON line. `--quick` runs a small size for a busy machine.
"""

from __future__ import annotations

import argparse
import json
import os
import signal
import statistics
import subprocess
import sys
import tempfile
import threading
import time
import uuid
from collections import defaultdict
from collections.abc import Callable
from datetime import datetime
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from event_cost import event_cost, idle_rates  # noqa: E402
from kubernetes import client, watch  # noqa: E402

from sovereignspec.operator.metrics import DRIFT_STAGES  # noqa: E402
from sovereignspec.operator.settings import OperatorSettings  # noqa: E402
from tests.chaos.harness import (  # noqa: E402
    add_nodes_bulk,
    check_invariants,
    jobs_docs,
    log_records,
    operator,
    setup_private_queue,
    unique_controller,
    wait_queue_active,
)
from tests.e2e.pool import (  # noqa: E402
    POOL_LABEL,
    NodeDef,
    Pool,
    new_pool,
    node_manifest,
    our_entry,
    serving_annotations,
)
from tests.e2e.processes import SimulatorProcess  # noqa: E402
from tests.harness.cluster import LocalCluster, cluster_running  # noqa: E402
from tests.harness.queues import cluster_queue, local_queue, resource_flavor  # noqa: E402
from tests.harness.wait import wait_until  # noqa: E402
from tests.telemetry.promproc import PrometheusProcess  # noqa: E402

JURISDICTIONS = ["DE", "FR", "KR", "US"]
GC_SECONDS = "sovereignspec_gc_seconds_total"
"""The operator's CPU in Python's cyclic garbage collector, all generations (operator/collector.py)."""
GC_COLLECTIONS = "sovereignspec_gc_collections_total"
"""The collections it ran, by generation."""
DRIFT_INTERVAL: float = OperatorSettings.model_fields["drift_interval_seconds"].default
"""The operator's default drift interval, as shipped: the bench measures the sweep a user runs."""
GOALS = {"p99Ms": 50.0, "decisionsPerSecond": 100.0, "rssMb": 300.0}


def wait_quiet(api: client.ApiClient, timeout: float = 900.0) -> float:
    """Wait until no namespace is terminating, and return how long that took: a run started while an
    earlier run's pods are still being deleted measures that deletion too (its pod events, and the API
    server's and etcd's CPU beside the operator)."""
    core, t0 = client.CoreV1Api(api), time.monotonic()
    wait_until(
        lambda: not any(ns.status.phase == "Terminating" for ns in core.list_namespace().items),
        timeout=timeout,
        interval=2,
        what="no namespace terminating",
    )
    return time.monotonic() - t0


def pct(xs: list[float], q: float) -> float:
    if not xs:
        return float("nan")
    s = sorted(xs)
    return s[min(len(s) - 1, max(0, round(q * (len(s) - 1))))]


# ---- the operator's own API identity, counted by the API server (APF) --------------------------------


class CountedIdentity:
    """A client certificate for a user only the operator uses, and a FlowSchema matching that user:
    `apiserver_flowcontrol_dispatched_requests_total{flow_schema=...}` then counts its requests."""

    def __init__(self, cluster: LocalCluster) -> None:
        self.cluster = cluster
        self.user = f"sovereignspec-bench-{uuid.uuid4().hex[:6]}"
        self.dir = Path(tempfile.mkdtemp(prefix="sovspec-bench-id-"))
        self.kubeconfig = self.dir / "kubeconfig"

    def create(self) -> LocalCluster:
        pki = Path(self.cluster.env.get("KUBE_CA_FILE", "")).parent
        key, csr, crt = self.dir / "u.key", self.dir / "u.csr", self.dir / "u.crt"
        run = lambda *a: subprocess.run(a, check=True, capture_output=True)  # noqa: E731
        run("openssl", "genrsa", "-out", str(key), "2048")
        run("openssl", "req", "-new", "-key", str(key), "-subj", f"/CN={self.user}", "-out", str(csr))
        run(
            "openssl", "x509", "-req", "-in", str(csr), "-CA", str(pki / "ca.crt"), "-CAkey",
            str(pki / "ca.key"), "-CAcreateserial", "-CAserial", str(self.dir / "ca.srl"), "-days", "1",
            "-out", str(crt),
        )  # fmt: skip
        kc = self.cluster.kubectl
        base = ["--kubeconfig", str(self.kubeconfig)]
        self.kubeconfig.write_text(kc("config", "view", "--raw", "--minify", "--flatten").stdout)
        user = kc("config", "view", "--raw", "--minify", "-o", "jsonpath={.users[0].name}").stdout
        subprocess.run(
            [str(self.cluster.kubectl_path), *base, "config", "set-credentials", user,
             f"--client-certificate={crt}", f"--client-key={key}", "--embed-certs=true"],
            check=True, capture_output=True,
        )  # fmt: skip
        kc("create", "clusterrolebinding", self.user, "--clusterrole=cluster-admin", f"--user={self.user}")
        fs = {
            "apiVersion": "flowcontrol.apiserver.k8s.io/v1",
            "kind": "FlowSchema",
            "metadata": {"name": self.user},
            "spec": {
                "matchingPrecedence": 50,
                "priorityLevelConfiguration": {"name": "workload-high"},
                "distinguisherMethod": {"type": "ByUser"},
                "rules": [
                    {
                        "subjects": [{"kind": "User", "user": {"name": self.user}}],
                        "resourceRules": [
                            {
                                "verbs": ["*"],
                                "apiGroups": ["*"],
                                "resources": ["*"],
                                "clusterScope": True,
                                "namespaces": ["*"],
                            }
                        ],
                        "nonResourceRules": [{"verbs": ["*"], "nonResourceURLs": ["*"]}],
                    }
                ],
            },
        }
        kc("apply", "-f", "-", input=json.dumps(fs))
        return LocalCluster(env={**self.cluster.env, "KUBECONFIG": str(self.kubeconfig)})

    def requests(self) -> float:
        raw = self.cluster.kubectl("get", "--raw", "/metrics").stdout
        total = 0.0
        for line in raw.splitlines():
            if line.startswith("apiserver_flowcontrol_dispatched_requests_total{") and (
                f'flow_schema="{self.user}"' in line
            ):
                total += float(line.rsplit(" ", 1)[1])
        return total

    def delete(self) -> None:
        self.cluster.kubectl("delete", "flowschema", self.user, "--ignore-not-found", check=False)
        self.cluster.kubectl("delete", "clusterrolebinding", self.user, "--ignore-not-found", check=False)


# ---- /proc and the operator's /metrics -------------------------------------------------------------


def proc_cpu_seconds(pid: int, thread: int | None = None) -> float:
    """CPU-seconds of process `pid`, or of its thread `thread` (the main thread's id is the pid)."""
    stat = Path(f"/proc/{pid}/stat" if thread is None else f"/proc/{pid}/task/{thread}/stat")
    fields = stat.read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def event_floor(
    api: client.ApiClient,
    op: Any,
    tenants: list[str],
    say: Callable[[str], None],
    n: int = 200,
    quiet_s: float = 15.0,
    rounds: int = 3,
) -> dict[str, Any]:
    """The operator's CPU per watch event in this run, by `make bench-floor`'s own loop (`event_cost`):
    label patches on `n` held pods and `n` Workloads of the check arm, one event each, `rounds` rounds.

    Here the operator holds the run's heap, indexes and telemetry, on the same machine in the same
    minutes as the bursts it is compared with. Two clocks, each less its own rate over `quiet_s` before
    (node updates, timers, the telemetry refresh): the whole process, as the floor bench counts, and its
    main thread alone (kopf's event loop, where the handlers run; the telemetry refresh, the drift sweep
    and the writes run in other threads, and their time-paced work is noise on the process clock)."""
    pid = op.proc.pid
    clocks = {"process": lambda: proc_cpu_seconds(pid), "main": lambda: proc_cpu_seconds(pid, pid)}
    idle = idle_rates(clocks, quiet_s)
    core, co = client.CoreV1Api(api), client.CustomObjectsApi(api)
    pods = [
        (p.metadata.namespace, p.metadata.name)
        for ns in tenants
        for p in core.list_namespaced_pod(ns).items
        if p.spec.node_name and p.status.phase == "Running"
    ][:n]
    workloads = [
        (ns, w["metadata"]["name"])
        for ns in tenants
        for w in co.list_namespaced_custom_object("kueue.x-k8s.io", "v1beta2", ns, "workloads")["items"]
    ][:n]

    def label(value: str) -> dict[str, Any]:
        return {"metadata": {"labels": {"sovereignspec-bench-probe": value}}}

    def patch_pod(i: int, value: str) -> None:
        core.patch_namespaced_pod(pods[i][1], pods[i][0], label(value), _preload_content=False)

    def patch_workload(i: int, value: str) -> None:
        ns, name = workloads[i]
        co.patch_namespaced_custom_object("kueue.x-k8s.io", "v1beta2", ns, "workloads", name, label(value))

    costs = event_cost(
        {"pods": (len(pods), patch_pod), "workloads": (len(workloads), patch_workload)},
        lambda kind: watch_events(op.metrics()).get(kind, 0.0),
        clocks,
        idle,
        rounds=rounds,
        say=say,
    )
    return {
        "idleMsPerS": {c: 1000 * r for c, r in idle.items()},
        "n": {"pods": len(pods), "workloads": len(workloads)},
        **costs,
    }


def proc_rss_mb(pid: int) -> float:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1]) / 1024
    return float("nan")


def settle(
    op: Any,
    quiet_per_s: float = 2.0,
    step_s: float = 5.0,
    limit_s: float = 240.0,
    resource: str | None = None,
) -> dict[str, Any]:
    """Wait until the operator's watch events (of `resource`, or all) fall below `quiet_per_s`.

    After the bursts: the Job controller creates the last bursts' pods, KWOK starts them and Kueue
    marks the Workloads PodsReady for tens of seconds after admission, and an idle window that begins
    before then counts that per-workload work as time-paced background. Before them (`nodes`): the
    controller manager labels and untaints hundreds of just-registered nodes at a few per second for
    minutes, which a cluster whose nodes registered long ago does not do."""

    def count() -> float:
        ev = watch_events(op.metrics())
        return ev.get(resource, 0.0) if resource else sum(ev.values())

    c0, t0 = proc_cpu_seconds(op.proc.pid), time.monotonic()
    first = last = count()
    quiet = False
    while time.monotonic() - t0 < limit_s:
        time.sleep(step_s)
        now = count()
        if now - last < quiet_per_s * step_s:
            quiet = True
            break
        last = now
    return {
        "wall": time.monotonic() - t0,
        "cpu": proc_cpu_seconds(op.proc.pid) - c0,
        "events": last - first,
        "quiet": quiet,
    }


def gc_by_generation(text: str) -> list[tuple[float, float]]:
    """(collections, CPU-seconds) of the operator's garbage collector per generation (0, 1, 2 = full)."""
    return [
        (
            metric_sum(text, f'{GC_COLLECTIONS}{{generation="{g}"}}'),
            metric_sum(text, f'{GC_SECONDS}{{generation="{g}"}}'),
        )
        for g in range(3)
    ]


def watch_events(text: str) -> dict[str, float]:
    """`sovereignspec_watch_events_total` by resource."""
    out: dict[str, float] = {}
    for line in text.splitlines():
        if line.startswith('sovereignspec_watch_events_total{resource="'):
            out[line.split('"')[1]] = float(line.rsplit(" ", 1)[1])
    return out


def metric_sum(text: str, name: str) -> float:
    """Sum of a metric's samples; `name` may carry a full label set (`m{a="b"}`) to pick one."""
    total = 0.0
    for line in text.splitlines():
        if line.startswith(name + "{") or line.startswith(name + " "):
            total += float(line.rsplit(" ", 1)[1])
    return total


def drift_cpu(text: str) -> dict[str, float]:
    """The drift sweep's CPU by stage (`sovereignspec_drift_cpu_seconds_total`)."""
    return {
        stage: metric_sum(text, f'sovereignspec_drift_cpu_seconds_total{{stage="{stage}"}}')
        for stage in DRIFT_STAGES
    }


class Sampler(threading.Thread):
    """Max RSS of the operator every 0.5 s."""

    def __init__(self, pid: int) -> None:
        super().__init__(daemon=True)
        self.pid, self.max_rss, self.stop = pid, 0.0, threading.Event()

    def run(self) -> None:
        while not self.stop.wait(0.5):
            try:
                self.max_rss = max(self.max_rss, proc_rss_mb(self.pid))
            except OSError:
                return


# ---- an independent watcher of our entries ---------------------------------------------------------


class Watcher(threading.Thread):
    def __init__(self, api: client.ApiClient, check: str, namespaces: set[str]) -> None:
        super().__init__(daemon=True)
        self.api, self.check, self.namespaces = api, check, namespaces
        self.pending: dict[str, float] = {}
        self.answered: dict[str, tuple[float, str]] = {}
        self.created: dict[str, float] = {}  # first event seen of each Workload
        self.admitted: dict[str, float] = {}  # first event seen with Admitted=True
        self.server: dict[str, float] = {}  # Admitted lastTransitionTime - creationTimestamp, seconds
        self.stop = threading.Event()
        self.lock = threading.Lock()

    def run(self) -> None:
        co = client.CustomObjectsApi(self.api)
        rv = None
        while not self.stop.is_set():
            w = watch.Watch()
            try:
                kw: dict[str, Any] = {"timeout_seconds": 30, "allow_watch_bookmarks": False}
                if rv:
                    kw["resource_version"] = rv
                for ev in w.stream(
                    co.list_cluster_custom_object, "kueue.x-k8s.io", "v1beta2", "workloads", **kw
                ):
                    obj = ev["object"]
                    rv = obj["metadata"].get("resourceVersion", rv)
                    self._see(obj, time.monotonic())
                    if self.stop.is_set():
                        break
            except Exception:  # a watch may expire (410) or drop; start over from now
                rv = None
                time.sleep(0.2)

    def _see(self, obj: dict[str, Any], t: float) -> None:
        md = obj["metadata"]
        if md.get("namespace") not in self.namespaces:
            return
        key = f"{md['namespace']}/{md['name']}"
        entry = our_entry(obj, self.check) or {}
        conds = {c["type"]: c["status"] for c in (obj.get("status") or {}).get("conditions") or []}
        with self.lock:
            self.created.setdefault(key, t)
            if conds.get("Admitted") == "True" and key not in self.admitted:
                self.admitted[key] = t
                conditions = obj["status"]["conditions"]
                lt = next((c.get("lastTransitionTime") for c in conditions if c["type"] == "Admitted"), None)
                if lt and md.get("creationTimestamp"):
                    self.server[key] = _ts(lt) - _ts(md["creationTimestamp"])
            if entry.get("state") == "Pending" and conds.get("QuotaReserved") == "True":
                self.pending.setdefault(key, t)
            elif entry.get("state") in ("Ready", "Retry", "Rejected") and key not in self.answered:
                self.answered[key] = (t, entry["state"])

    def done_count(self, keys: set[str]) -> int:
        """Admitted, or answered other than Ready by our check (then Kueue does not admit it)."""
        with self.lock:
            return sum(
                1
                for k in keys
                if k in self.admitted or (k in self.answered and self.answered[k][1] != "Ready")
            )

    def answered_count(self, keys: set[str]) -> int:
        with self.lock:
            return sum(1 for k in keys if k in self.answered)


def _ts(text: str) -> float:
    return datetime.fromisoformat(text.replace("Z", "+00:00")).timestamp()


def wait_arm(
    watcher: Watcher, namespaces: set[str], prefix: str, seen: set[str], n: int, what: str
) -> set[str]:
    """An arm's burst: its n new Workloads, once each is Admitted (or answered other than Ready)."""

    def new_keys() -> set[str]:
        with watcher.lock:
            return {
                k
                for k in watcher.created
                if k.split("/")[0] in namespaces and k.split("/")[1].startswith(prefix) and k not in seen
            }

    wait_until(
        lambda: len(new_keys()) >= n and watcher.done_count(new_keys()) >= n,
        timeout=600,
        interval=0.25,
        what=f"{what}: {n} workloads admitted",
        describe=lambda: f"{len(new_keys())} seen, {watcher.done_count(new_keys())} admitted or refused",
    )
    return new_keys()


def wait_burst(watcher: Watcher, seen: set[str], n: int, burst_no: int) -> set[str]:
    """The burst's n new workloads, once the watcher has seen each Pending and then answered."""

    def new_keys() -> set[str]:
        with watcher.lock:
            return {k for k in watcher.pending if k.split("/")[1].startswith("job-w") and k not in seen}

    wait_until(
        lambda: len(new_keys()) >= n and watcher.answered_count(new_keys()) >= n,
        timeout=600,
        interval=0.5,
        what=f"burst {burst_no}: {n} workloads answered",
        describe=lambda: f"{len(new_keys())} pending seen, {watcher.answered_count(new_keys())} answered",
    )
    return new_keys()


# ---- the Kueue-alone arm ---------------------------------------------------------------------------------


def add_alone_nodes(pool: Pool, defs: list[NodeDef]) -> None:
    """KWOK nodes with GPU capacity but no GPU product label: outside the simulator's telemetry."""
    manifests = []
    for d in defs:
        m = node_manifest(f"{pool.name}-{d.suffix}", pool.name, d)
        m["metadata"]["labels"] = {
            k: v for k, v in m["metadata"]["labels"].items() if not k.startswith("nvidia.com/")
        }
        manifests.append(m)
    for i in range(0, len(manifests), 100):
        pool.apply(*manifests[i : i + 100])
    pool.nodes += [m["metadata"]["name"] for m in manifests]
    core = client.CoreV1Api(pool.api)

    def ready() -> bool:
        items = core.list_node(label_selector=f"{POOL_LABEL}={pool.name}").items
        ready = [
            n
            for n in items
            if any(c.type == "Ready" and c.status == "True" for c in n.status.conditions or [])
        ]
        ok = len(ready)
        return ok >= len(manifests)

    wait_until(ready, timeout=300, interval=2, what=f"{len(manifests)} Kueue-alone KWOK nodes Ready")


def setup_alone_queue(pool: Pool, *, gpu_quota: int) -> None:
    """A ResourceFlavor over the pool's nodes and a ClusterQueue with no admission check at all."""
    n = pool.name
    pool.apply(
        resource_flavor(n, {POOL_LABEL: n}),
        cluster_queue(n, flavor=n, namespace_labels={POOL_LABEL: n}, gpu_quota=gpu_quota),
    )
    pool.cluster_objects += [("resourceflavors.kueue.x-k8s.io", n), ("clusterqueues.kueue.x-k8s.io", n)]


# ---- the queued regime: quota smaller than the demand, Jobs that finish --------------------------------


def setup_queued_cq(pool: Pool, name: str, flavor: str, *, gpu_quota: int, check: str | None) -> None:
    """A second ClusterQueue over an arm's flavor (same nodes) with a small GPU quota; `check`: our
    AdmissionCheck's name, or None for Kueue alone."""
    checks = [check] if check is not None else []
    pool.apply(
        cluster_queue(
            name, flavor=flavor, namespace_labels={POOL_LABEL: pool.name}, gpu_quota=gpu_quota, checks=checks
        )
    )
    pool.cluster_objects.append(("clusterqueues.kueue.x-k8s.io", name))


def wait_cq_active(api: client.ApiClient, name: str) -> None:
    co = client.CustomObjectsApi(api)

    def active() -> bool:
        cq = co.get_cluster_custom_object("kueue.x-k8s.io", "v1beta2", "clusterqueues", name)
        conds = (cq.get("status") or {}).get("conditions") or []
        return any(c["type"] == "Active" and c["status"] == "True" for c in conds)

    wait_until(active, timeout=90, what=f"ClusterQueue {name} Active")


def queued_tenant(pool: Pool, prefix: str, cq: str, tenant_label: str | None = None) -> str:
    """A namespace of the pool with a LocalQueue `lqq` on the queued ClusterQueue `cq`."""
    ns = pool.tenant(prefix, tenant_label=tenant_label)
    pool.apply(local_queue("lqq", ns, cq))
    return ns


def run_queued(
    cluster: LocalCluster,
    watcher: Watcher,
    op: Any,
    ident: CountedIdentity,
    arms: dict[str, tuple[list[str], str]],
    args: argparse.Namespace,
    annotations: tuple[dict[str, str], dict[str, str]],
    say: Any,
) -> dict[str, Any]:
    """Open-loop bursts into both arms' queued ClusterQueues: every `queued_period` seconds one burst per
    arm (the arm submitted first alternates), whatever is still queued; then wait until every Workload
    is Admitted (or answered other than Ready by our check). `arms`: name -> (namespaces, job prefix)."""
    w, b = args.queued_workloads, args.queued_burst
    runtime = (args.runtime, args.runtime_max)
    with watcher.lock:
        for nss, _ in arms.values():
            watcher.namespaces |= set(nss)
    cpu0 = proc_cpu_seconds(op.proc.pid)
    m0 = op.metrics()
    e0 = watch_events(m0)
    d0 = metric_sum(m0, "sovereignspec_drift_checks_total")
    r0 = ident.requests()
    t0 = time.monotonic()
    sent = 0
    burst = 0
    while sent < w:
        n = min(b, w - sent)
        delay = t0 + burst * args.queued_period - time.monotonic()
        if delay > 0:
            time.sleep(delay)
        order = ["alone", "check"] if burst % 2 == 0 else ["check", "alone"]
        for name in order:
            # One `kubectl create` per arm and burst: on the loaded 2-core machine, one kubectl per
            # namespace and class (8 per arm) took up to a minute and the schedule slipped.
            nss, prefix = arms[name]
            per_ns: dict[str, list[str]] = defaultdict(list)
            for i in range(sent, sent + n):
                per_ns[nss[i % len(nss)]].append(f"{prefix}{i:05d}")
            docs = []
            for ns, ws in per_ns.items():
                half = len(ws) // 2
                for part, ann in ((ws[:half], annotations[0]), (ws[half:], annotations[1])):
                    if part:
                        docs.append(jobs_docs(part, ns, ann, queue="lqq", runtime_s=runtime))
            cluster.kubectl("create", "-f", "-", input="---\n".join(docs))
        sent += n
        burst += 1
        say(f"queued: burst {burst} submitted to both arms at {time.monotonic() - t0:.0f}s")

    def keys(name: str) -> set[str]:
        nss, prefix = arms[name]
        with watcher.lock:
            return {
                k
                for k in watcher.created
                if k.split("/")[0] in nss and k.split("/")[1].startswith(f"job-{prefix}")
            }

    def done() -> int:
        return sum(watcher.done_count(keys(a)) for a in arms)

    wait_until(
        lambda: done() >= 2 * w,
        timeout=args.queued_timeout,
        interval=1,
        what=f"queued: {2 * w} workloads admitted",
        describe=lambda: ", ".join(f"{a} {watcher.done_count(keys(a))} of {w}" for a in arms),
    )
    out: dict[str, Any] = {
        "wall": time.monotonic() - t0,
        "cpu": proc_cpu_seconds(op.proc.pid) - cpu0,
        "req": ident.requests() - r0,
        "rss": proc_rss_mb(op.proc.pid),
    }
    m1 = op.metrics()
    e1 = watch_events(m1)
    out["events"] = {r: v - e0.get(r, 0.0) for r, v in e1.items()}
    out["drift"] = metric_sum(m1, "sovereignspec_drift_checks_total") - d0
    arm_keys = {name: sorted(keys(name)) for name in arms}  # keys() takes the watcher's lock itself
    with watcher.lock:
        for name in arms:
            ks = arm_keys[name]
            adm = [k for k in ks if k in watcher.admitted]
            out[name] = [(watcher.admitted[k] - watcher.created[k]) * 1000 for k in adm]
            out[f"{name}Server"] = [watcher.server[k] for k in adm if k in watcher.server]
            first = min(watcher.created[k] for k in ks)
            last = max(watcher.admitted[k] for k in adm) if adm else first
            out[f"{name}Rate"] = len(adm) / (last - first) if last > first else float("nan")
        ck = arm_keys["check"]
        both = [k for k in ck if k in watcher.pending and k in watcher.answered and k in watcher.admitted]
        out["legs"] = {
            "created -> quota reserved, our entry Pending": [
                (watcher.pending[k] - watcher.created[k]) * 1000 for k in both
            ],
            "Pending -> our answer": [(watcher.answered[k][0] - watcher.pending[k]) * 1000 for k in both],
            "our answer -> Admitted": [(watcher.admitted[k] - watcher.answered[k][0]) * 1000 for k in both],
        }
        states: dict[str, int] = defaultdict(int)
        for k in ck:
            states[watcher.answered[k][1] if k in watcher.answered else "unseen"] += 1
        out["states"] = dict(states)
        out["decisions"] = sum(1 for k in ck if k in watcher.answered)
    return out


def q_fig(queued: dict[str, Any], arm: str, q: float) -> float | None:
    return round(pct(queued[arm], q), 1) if queued.get(arm) else None


def q_ratio(queued: dict[str, Any], q: float) -> float | None:
    if not queued.get("alone") or not queued.get("check") or pct(queued["alone"], q) <= 0:
        return None
    return round(pct(queued["check"], q) / pct(queued["alone"], q), 3)


# ---- the run ------------------------------------------------------------------------------------------


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--quick", action="store_true", help="100 nodes, 200 workloads in bursts of 50")
    ap.add_argument("--nodes", type=int, default=500)
    ap.add_argument("--workloads", type=int, default=1000)
    ap.add_argument("--burst", type=int, default=100)
    ap.add_argument("--core", type=int, default=None, help="CPU the operator is pinned to (default: last)")
    ap.add_argument("--profile", type=Path, help="write a cProfile of the operator to this file")
    ap.add_argument("--keep", action="store_true", help="leave the pool (nodes, namespaces) for inspection")
    ap.add_argument(
        "--backlog", type=int, default=None, help="workloads in the saturation phase (default: --burst)"
    )
    ap.add_argument(
        "--queued-workloads",
        type=int,
        default=None,
        help="Jobs per arm in the queued regime (default: --workloads; 0: skip)",
    )
    ap.add_argument("--queued-burst", type=int, default=None, help="queued regime's burst (default: --burst)")
    ap.add_argument("--queued-period", type=float, default=20.0, help="seconds between queued bursts")
    ap.add_argument(
        "--queued-quota",
        type=int,
        default=None,
        help="GPU quota of each queued ClusterQueue (default 80, quick 40)",
    )
    ap.add_argument(
        "--runtime", type=int, default=30, help="queued Jobs run between --runtime and --runtime-max s"
    )
    ap.add_argument("--runtime-max", type=int, default=40)
    ap.add_argument("--queued-timeout", type=float, default=1800.0)
    ap.add_argument(
        "--idle-seconds", type=float, default=60.0, help="idle window after the ample bursts (background CPU)"
    )
    ap.add_argument(
        "--drift-interval",
        type=float,
        default=DRIFT_INTERVAL,
        help=f"the operator's SOVEREIGNSPEC_DRIFT_INTERVAL_SECONDS (default: its own, {DRIFT_INTERVAL})",
    )
    args = ap.parse_args()
    if args.quick:
        args.nodes, args.workloads, args.burst = 100, 200, 50
    if args.backlog is None:
        args.backlog = args.burst
    if args.queued_workloads is None:
        args.queued_workloads = args.workloads
    if args.queued_burst is None:
        args.queued_burst = args.burst
    if args.queued_quota is None:
        args.queued_quota = 40 if args.quick else 80
    core = args.core if args.core is not None else max(os.sched_getaffinity(0))
    say = lambda *a: print(*a, file=sys.stderr, flush=True)  # noqa: E731

    cluster = LocalCluster.from_env_file() if cluster_running() else LocalCluster.ensure_up()
    crds = str(ROOT / "crds")
    cluster.kubectl("apply", "--server-side", "--force-conflicts", "-f", crds)
    cluster.wait_established(ROOT / "crds")
    say(f"no namespace terminating after {wait_quiet(cluster.api_client):.0f}s")

    ident = CountedIdentity(cluster)
    op_cluster = ident.create()
    pool = new_pool(cluster, "bench")
    alone = Pool(cluster=cluster, name=f"{pool.name}-alone")
    controller = unique_controller("bench")
    sim = SimulatorProcess(cluster)
    prom: PrometheusProcess | None = None
    op = None
    watcher = None
    figures: dict[str, Any] = {}
    try:
        t0 = time.monotonic()
        defs = [
            NodeDef(
                f"n{i:04d}",
                jurisdiction=JURISDICTIONS[i % len(JURISDICTIONS)],
                gpu="h100" if i % 3 else "a100",
                base_load=round((i * 37 % 90) / 100, 2),
            )
            for i in range(args.nodes)
        ]
        add_nodes_bulk(pool, defs)
        say(f"{args.nodes} KWOK nodes Ready in {time.monotonic() - t0:.0f}s")
        setup_private_queue(pool, controller, gpu_quota=args.nodes * 8)
        tenants = []
        for j in JURISDICTIONS:
            label = f"{pool.name}-{j.lower()}"
            ns = pool.tenant(f"bench-{j.lower()}", tenant_label=label)
            spec: dict[str, Any] = {"tenants": [label], "jurisdictions": [j]}
            if j == "KR":
                spec["isolation"] = "Node"
            pool.sovereignty(j.lower(), spec)
            tenants.append(ns)
        # The Kueue-alone arm: its own nodes (no GPU product label: not in the simulator's telemetry, and
        # its pods never share a node with the isolated tenant), flavor and ClusterQueue without checks.
        alone_defs = [NodeDef(f"n{i:04d}") for i in range(max(2, -(-args.workloads * 5 // 32)))]
        add_alone_nodes(alone, alone_defs)
        setup_alone_queue(alone, gpu_quota=len(alone_defs) * 8)
        alone_ns = [alone.tenant(f"alone-{j.lower()}") for j in JURISDICTIONS]
        say(f"Kueue-alone arm: {len(alone_defs)} KWOK nodes, ClusterQueue {alone.name} without checks")
        # The queued regime: per arm a second ClusterQueue over the same flavor (same nodes) whose GPU quota
        # is smaller than a burst, and namespaces of its own (LocalQueue lqq); the check arm's namespaces
        # carry the same tenant labels, so the same SovereigntyPolicies apply.
        q_cq = {"check": f"{pool.name}-q", "alone": f"{alone.name}-q"}
        q_ns: dict[str, list[str]] = {"check": [], "alone": []}
        if args.queued_workloads > 0:
            setup_queued_cq(pool, q_cq["check"], pool.name, gpu_quota=args.queued_quota, check=pool.name)
            setup_queued_cq(alone, q_cq["alone"], alone.name, gpu_quota=args.queued_quota, check=None)
            for j in JURISDICTIONS:
                label = f"{pool.name}-{j.lower()}"
                q_ns["check"].append(queued_tenant(pool, f"benchq-{j.lower()}", q_cq["check"], label))
                q_ns["alone"].append(queued_tenant(alone, f"aloneq-{j.lower()}", q_cq["alone"]))

        sim.start()
        sim.wait_ready()
        # The simulator's exposition grows with the pool: at 500 nodes and 2,000 engines it is 86k lines and
        # about 1 s of CPU (docs/scale.md, session 15), too much for a 2 s scrape on a loaded 2-core machine.
        scrape = 2.0 if args.nodes <= 100 else 5.0
        prom = PrometheusProcess([f"127.0.0.1:{sim.port}"], scrape_interval=scrape).start()
        prom.wait_for(
            f'DCGM_FI_PROF_PIPE_TENSOR_ACTIVE{{Hostname=~"{pool.name}-.*"}}', min_series=1, timeout=60
        )
        op = operator(
            op_cluster,
            prom.url,
            controller,
            extra_env={  # production defaults (OperatorProcess sets test-speed intervals)
                "SOVEREIGNSPEC_TELEMETRY_REFRESH_SECONDS": "10",
                "SOVEREIGNSPEC_RESYNC_SECONDS": "5",
                "SOVEREIGNSPEC_DRIFT_INTERVAL_SECONDS": str(args.drift_interval),
            },
        )
        op.profile_path = args.profile.resolve() if args.profile else None
        op.start()
        assert op.proc is not None
        os.sched_setaffinity(op.proc.pid, {core})
        op.wait_ready(timeout=120)
        wait_queue_active(pool)
        wait_queue_active(alone)
        if args.queued_workloads > 0:
            for name in q_cq.values():
                wait_cq_active(cluster.api_client, name)
        say(f"operator pid {op.proc.pid} pinned to CPU {core}, log {op.log_path}")
        nodes_settled = settle(op, quiet_per_s=1.0, step_s=10.0, limit_s=300.0, resource="nodes")
        say(
            f"nodes settled {nodes_settled['wall']:.0f} s after the operator was ready: "
            f"{nodes_settled['events']:.0f} node events (the controller manager labelling and untainting the "
            f"new nodes), operator CPU {nodes_settled['cpu']:.1f} s"
            + ("" if nodes_settled["quiet"] else "; NOT quiet at the limit: node events fall into the bursts")
        )

        watcher = Watcher(cluster.api_client, pool.name, set(tenants) | set(alone_ns))
        watcher.start()
        sampler = Sampler(op.proc.pid)
        sampler.start()
        time.sleep(12)  # a telemetry refresh with no workload: the idle queries-per-refresh

        def qpr() -> tuple[float, float]:
            text = op.metrics()  # type: ignore[union-attr]
            return (
                metric_sum(text, "sovereignspec_prometheus_queries_total"),
                metric_sum(text, "sovereignspec_telemetry_refresh_seconds_count"),
            )

        phases: list[tuple[str, float | None]] = []  # None: no refresh completed in the phase

        def per_refresh(queries: float, refreshes: float) -> float | None:
            return queries / refreshes if refreshes > 0 else None

        q0, r0 = qpr()
        time.sleep(21)
        q1, r1 = qpr()
        phases.append(("idle", per_refresh(q1 - q0, r1 - r0)))

        ann_i = serving_annotations()
        ann_b = serving_annotations(cls="batch")
        names: list[str] = []  # the check arm's workloads
        alone_names: list[str] = []
        arm = {
            # arm: (namespaces, job-name prefix, spans, CPU-seconds, API requests, watch events)
            # and the wall time over which the CPU was sampled.
            "alone": {
                "ns": alone_ns,
                "prefix": "a",
                "span": 0.0,
                "cpu": 0.0,
                "req": 0.0,
                "events": 0.0,
                "gc": 0.0,
                "drift": 0.0,
                "wall": 0.0,
                "main": 0.0,
            },
            "check": {
                "ns": tenants,
                "prefix": "w",
                "span": 0.0,
                "cpu": 0.0,
                "req": 0.0,
                "events": 0.0,
                "gc": 0.0,
                "drift": 0.0,
                "wall": 0.0,
                "main": 0.0,
            },
        }
        events_by_kind: dict[str, float] = defaultdict(float)
        gc_gens = [[0.0, 0.0] for _ in range(3)]  # the check bursts' collections and CPU by generation
        busy = 0.0
        submitted = 0
        burst_no = 0
        cpu0 = proc_cpu_seconds(op.proc.pid)

        def submit(namespaces: list[str], prefix: str, first: int, n: int) -> None:
            per_ns: dict[str, list[str]] = defaultdict(list)
            for i in range(first, first + n):
                per_ns[namespaces[i % len(namespaces)]].append(f"{prefix}{i:05d}")
            for ns, ws in per_ns.items():
                half = len(ws) // 2
                cluster.kubectl("apply", "-f", "-", input=jobs_docs(ws[:half], ns, ann_i))
                cluster.kubectl("apply", "-f", "-", input=jobs_docs(ws[half:], ns, ann_b))

        while submitted < args.workloads:
            n = min(args.burst, args.workloads - submitted)
            burst_no += 1
            order = ["alone", "check"] if burst_no % 2 else ["check", "alone"]
            qb, rb = qpr()
            for name in order:
                a = arm[name]
                r_a = ident.requests()  # kubectl reads the API server's metrics: before the CPU sample
                m_a = op.metrics()
                e_a, g_a = watch_events(m_a), metric_sum(m_a, GC_SECONDS)
                gens_a = gc_by_generation(m_a) if name == "check" else []  # the check bursts' only
                d_a = sum(drift_cpu(m_a).values())
                c_a, main_a = proc_cpu_seconds(op.proc.pid), proc_cpu_seconds(op.proc.pid, op.proc.pid)
                t_submit = time.monotonic()
                submit(a["ns"], a["prefix"], submitted, n)
                done = names if name == "check" else alone_names
                what = f"burst {burst_no} {name}"
                keys = wait_arm(watcher, set(a["ns"]), f"job-{a['prefix']}", set(done), n, what)
                done += sorted(keys)
                a["cpu"] += proc_cpu_seconds(op.proc.pid) - c_a
                a["main"] += proc_cpu_seconds(op.proc.pid, op.proc.pid) - main_a
                a["wall"] += time.monotonic() - t_submit
                m_b = op.metrics()
                e_b = watch_events(m_b)
                a["gc"] += metric_sum(m_b, GC_SECONDS) - g_a
                if name == "check":
                    gens_b = gc_by_generation(m_b)
                    for g, ((n_b, s_b), (n_a, s_a)) in enumerate(zip(gens_b, gens_a, strict=True)):
                        gc_gens[g][0] += n_b - n_a
                        gc_gens[g][1] += s_b - s_a
                a["drift"] += sum(drift_cpu(m_b).values()) - d_a
                a["req"] += ident.requests() - r_a
                a["events"] += sum(e_b.values()) - sum(e_a.values())
                if name == "check":
                    for r, v in e_b.items():
                        events_by_kind[r] += v - e_a.get(r, 0.0)
                with watcher.lock:
                    first = min(watcher.created[k] for k in keys)
                    last = max(watcher.admitted.get(k, watcher.answered.get(k, (first, ""))[0]) for k in keys)
                a["span"] += last - first
                if name == "check":
                    busy += last - first
                say(
                    f"burst {burst_no} {name}: {n} admitted {last - first:.2f}s after the first Workload "
                    f"({time.monotonic() - t_submit:.1f}s after submit)"
                )
            submitted += n
            qe, re_ = qpr()
            phases.append((f"burst{burst_no}", per_refresh(qe - qb, re_ - rb)))
        cpu_paced = proc_cpu_seconds(op.proc.pid) - cpu0
        sampler.stop.set()
        rss_now = proc_rss_mb(op.proc.pid)
        metrics_text = op.metrics()  # type: ignore[union-attr]
        events = dict(events_by_kind)
        builds = {
            how: metric_sum(metrics_text, f'sovereignspec_snapshot_builds_total{{how="{how}"}}')
            for how in ("reused", "patched", "full")
        }
        drift_paced = metric_sum(metrics_text, "sovereignspec_drift_checks_total")

        # Background: the operator's CPU per second of wall while nothing is submitted, right after the
        # paced bursts (their workloads held, so the drift sweep has its full load; the telemetry refresh
        # runs as in the bursts). It splits the check bursts' CPU into the time-paced part and the part
        # per decision (`decisionsPerMarginalCpuSecond`); `decisionsPerCpuSecond` still counts all of it.
        tail = settle(op)
        say(
            f"settled {tail['wall']:.0f} s after the last burst: {tail['events']:.0f} watch events of its "
            f"tail (pods created, started, marked ready after admission), operator CPU {tail['cpu']:.1f} s"
            + ("" if tail["quiet"] else "; NOT quiet at the limit, the idle window includes a tail")
        )
        idle_c0, idle_t0 = proc_cpu_seconds(op.proc.pid), time.monotonic()
        idle_m0 = op.metrics()
        idle_e0 = watch_events(idle_m0)
        idle_d0, idle_r0 = metric_sum(idle_m0, "sovereignspec_drift_checks_total"), qpr()[1]
        idle_g0 = metric_sum(idle_m0, GC_SECONDS)
        idle_s0 = drift_cpu(idle_m0)
        say(
            f"idle window: {args.idle_seconds:.0f} s from now, nothing submitted (operator pid {op.proc.pid})"
        )
        time.sleep(args.idle_seconds)
        idle_m = op.metrics()
        idle = {
            "cpu": proc_cpu_seconds(op.proc.pid) - idle_c0,
            "wall": time.monotonic() - idle_t0,
            "events": sum(watch_events(idle_m).values()) - sum(idle_e0.values()),
            "by_kind": {k: v - idle_e0.get(k, 0.0) for k, v in sorted(watch_events(idle_m).items())},
            "drift": metric_sum(idle_m, "sovereignspec_drift_checks_total") - idle_d0,
            "refreshes": qpr()[1] - idle_r0,
            "gc": metric_sum(idle_m, GC_SECONDS) - idle_g0,
            "drift_cpu": {k: v - idle_s0[k] for k, v in drift_cpu(idle_m).items()},
        }
        idle_rate = idle["cpu"] / idle["wall"] if idle["wall"] > 0 else float("nan")
        floor_here = event_floor(cluster.api_client, op, tenants, say)
        main_event = floor_here["main"]
        say(
            "the operator's CPU per watch event in this run (label patches on "
            f"{floor_here['n']['pods']} held pods and {floor_here['n']['workloads']} Workloads, median of "
            "rounds; idle "
            + ", ".join(f"{c} {r:.1f} ms/s" for c, r in floor_here["idleMsPerS"].items())
            + " subtracted): "
            + "; ".join(
                f"{c}: " + ", ".join(f"{k} {v:.2f} ms" for k, v in floor_here[c].items())
                for c in ("process", "main")
            )
        )

        decided = [r for r in log_records(op, "decided") if isinstance(r.get("durationMs"), int | float)]
        op_ms = [float(r["durationMs"]) for r in decided]
        watch_ms = [
            (watcher.answered[k][0] - watcher.pending[k]) * 1000
            for k in names
            if k in watcher.answered and k in watcher.pending
        ]
        states: dict[str, int] = defaultdict(int)
        for k in names:
            states[watcher.answered[k][1] if k in watcher.answered else "unseen"] += 1
        decisions = len(names)

        def admit_ms(keys: list[str]) -> list[float]:
            with watcher.lock:
                seen = [k for k in keys if k in watcher.admitted]
                return [(watcher.admitted[k] - watcher.created[k]) * 1000 for k in seen]

        def server_s(keys: list[str]) -> list[float]:
            with watcher.lock:
                return [watcher.server[k] for k in keys if k in watcher.server]

        adm = {"alone": admit_ms(alone_names), "check": admit_ms(names)}
        srv = {"alone": server_s(alone_names), "check": server_s(names)}

        # Saturation: the operator is stopped (SIGSTOP) while Kueue reserves quota for a backlog, then
        # resumed; it drains the backlog as fast as its one core allows (the paced bursts above follow
        # Kueue's admission pace, ~8/s here, and never saturate it).
        sat: dict[str, float] = {}
        if args.backlog > 0:
            back = [f"w{i:05d}" for i in range(submitted, submitted + args.backlog)]
            wanted = set(back)
            os.kill(op.proc.pid, signal.SIGSTOP)
            try:
                for j, ns in enumerate(tenants):
                    mine = back[j :: len(tenants)]
                    half = len(mine) // 2
                    cluster.kubectl("apply", "-f", "-", input=jobs_docs(mine[:half], ns, ann_i))
                    cluster.kubectl("apply", "-f", "-", input=jobs_docs(mine[half:], ns, ann_b))

                def reserved() -> int:
                    with watcher.lock:
                        # Kueue names a Job's Workload job-<job name>-<hash>.
                        return sum(
                            1 for k in watcher.pending if k.split("/")[1][4:].rsplit("-", 1)[0] in wanted
                        )

                wait_until(
                    lambda: reserved() >= len(back),
                    timeout=600,
                    interval=0.5,
                    what="backlog quota-reserved",
                    describe=lambda: f"{reserved()} of {len(back)}",
                )
            finally:
                say(f"backlog of {len(back)} quota-reserved: resuming the operator")
                cpu_b0 = proc_cpu_seconds(op.proc.pid)
                t_resume = time.monotonic()
                os.kill(op.proc.pid, signal.SIGCONT)
            keys = wait_burst(watcher, set(names), len(back), burst_no + 1)
            last = max(watcher.answered[k][0] for k in keys)
            sat = {
                "n": len(keys),
                "wall": last - t_resume,
                "cpu": proc_cpu_seconds(op.proc.pid) - cpu_b0,
            }
            say(f"backlog: {len(keys)} answered {last - t_resume:.2f}s after the operator resumed")

        # The API server's own round trip for a status apply: re-apply operators' Ready entries.
        from sovereignspec.kube.ssa import apply_workload_check

        co = client.CustomObjectsApi(cluster.api_client)
        rtt: list[float] = []
        for ns in tenants:
            for w in co.list_namespaced_custom_object("kueue.x-k8s.io", "v1beta2", ns, "workloads")["items"][
                :15
            ]:
                entry = our_entry(w, pool.name)
                if entry is None or entry.get("state") != "Ready":
                    continue
                s = time.perf_counter()
                apply_workload_check(
                    cluster.api_client,
                    namespace=ns,
                    name=w["metadata"]["name"],
                    entry=entry,
                    field_manager="sovereignspec",
                )
                rtt.append((time.perf_counter() - s) * 1000)
        queued: dict[str, Any] = {}
        if args.queued_workloads > 0:
            say(
                f"queued regime: {args.queued_workloads} Jobs per arm in bursts of {args.queued_burst} every "
                f"{args.queued_period:.0f} s, GPU quota {args.queued_quota} per arm, runtime "
                f"{args.runtime}-{args.runtime_max} s"
            )
            queued = run_queued(
                cluster,
                watcher,
                op,
                ident,
                {"check": (q_ns["check"], "qc"), "alone": (q_ns["alone"], "qa")},
                args,
                (ann_i, ann_b),
                say,
            )
        violations = check_invariants(pool, tenants + q_ns["check"])
        # Which rule answered: a decision on a node without GPU telemetry skips the evaluation there, so a
        # run where most decisions lack it does not measure decide() (session 15: 1,510 of 2,100).
        reasons: dict[str, dict[str, int]] = {
            "ample and backlog": defaultdict(int),
            "queued": defaultdict(int),
        }
        for r in log_records(op, "decided"):
            phase = "queued" if "/job-qc" in str(r.get("workload", "")) else "ample and backlog"
            reasons[phase][str(r.get("reason"))] += 1
        no_telemetry = sum(v.get("NodeTelemetryMissing", 0) for v in reasons.values())
        all_decided = sum(sum(v.values()) for v in reasons.values())

        cpu_s = arm["check"]["cpu"]
        marginal = cpu_s - idle_rate * arm["check"]["wall"]
        req0, req1 = 0.0, arm["check"]["req"]
        ratio = {
            q: round(pct(adm["check"], q) / pct(adm["alone"], q), 3) if pct(adm["alone"], q) > 0 else None
            for q in (0.5, 0.99)
        }
        # The check bursts' main-thread CPU per decision beside what their watch events cost at this run's
        # own per-event cost (`event_floor`; Workload events' cost for the kinds it does not probe).
        main_ms = 1000 * arm["check"]["main"] / max(decisions, 1)
        per_event = {r: main_event.get(r, main_event.get("workloads", 0.0)) for r in events}
        events_ms = sum(n * per_event[r] for r, n in events.items()) / max(decisions, 1)
        figures = {
            "decisionP50Ms": round(pct(op_ms, 0.5), 2),
            "decisionP99Ms": round(pct(op_ms, 0.99), 2),
            # On one core, saturated (the backlog phase); else per CPU-second of the paced bursts.
            "decisionsPerSecond": round(sat["n"] / sat["wall"], 1)
            if sat.get("wall")
            else round(decisions / cpu_s, 1)
            if cpu_s > 0
            else None,
            "operatorRssMb": round(max(sampler.max_rss, rss_now), 1),
            "queriesPerRefresh": round(statistics.median(v for _, v in phases if v is not None), 2),
            "apiRoundTripMs": round(statistics.median(rtt), 2) if rtt else None,
            # The acceptance keys: the queued regime (quota smaller than the demand, Jobs that finish).
            "kueueAloneP50Ms": q_fig(queued, "alone", 0.5),
            "kueueAloneP99Ms": q_fig(queued, "alone", 0.99),
            "withCheckP50Ms": q_fig(queued, "check", 0.5),
            "withCheckP99Ms": q_fig(queued, "check", 0.99),
            "admissionRatioP50": q_ratio(queued, 0.5),
            "admissionRatioP99": q_ratio(queued, 0.99),
            # CPU per decision in the ample-quota regime's check bursts (comparable with bench-floor).
            "decisionsPerCpuSecond": round(decisions / cpu_s, 1) if cpu_s > 0 else None,
            "queuedDecisionsPerCpuSecond": round(queued["decisions"] / queued["cpu"], 1)
            if queued.get("cpu")
            else None,
            "queuedQuotaGpus": args.queued_quota if queued else None,
            "queuedRuntimeS": [args.runtime, args.runtime_max] if queued else None,
            "ampleQuotaKueueAloneP50Ms": round(pct(adm["alone"], 0.5), 1),
            "ampleQuotaKueueAloneP99Ms": round(pct(adm["alone"], 0.99), 1),
            "ampleQuotaWithCheckP50Ms": round(pct(adm["check"], 0.5), 1),
            "ampleQuotaWithCheckP99Ms": round(pct(adm["check"], 0.99), 1),
            "ampleQuotaAdmissionRatioP50": ratio[0.5],
            "ampleQuotaAdmissionRatioP99": ratio[0.99],
            "operatorRssMbAllPhases": round(max(sampler.max_rss, rss_now, queued.get("rss", 0.0)), 1),
            # The operator's CPU per second of wall while idle after the ample bursts (same run), and the
            # check bursts' decisions over their CPU less that rate times their wall time.
            "operatorIdleCpuMsPerS": round(1000 * idle_rate, 1),
            # How long the last bursts' tail of pod and Workload events ran before the idle window began.
            "idleSettleS": round(tail["wall"], 1),
            "nodeSettleS": round(nodes_settled["wall"], 1),
            "decisionsPerMarginalCpuSecond": round(decisions / marginal, 1) if marginal > 0 else None,
            # Share of the operator's CPU in the garbage collector: the check bursts, the idle window.
            "gcShareCheckBursts": round(arm["check"]["gc"] / cpu_s, 3) if cpu_s > 0 else None,
            "gcShareIdle": round(idle["gc"] / idle["cpu"], 3) if idle["cpu"] > 0 else None,
            # The operator's main-thread CPU per watch event in this run (after the idle window), and the
            # share of the check bursts' main-thread CPU per decision that their watch events account for.
            "inRunEventMs": {r: round(v, 3) for r, v in main_event.items()},
            "inRunProcessEventMs": {r: round(v, 3) for r, v in floor_here["process"].items()},
            "mainThreadMsPerDecision": round(main_ms, 2),
            "mainThreadEventShare": round(events_ms / main_ms, 3) if main_ms > 0 else None,
            # Share of the operator's CPU in the check bursts that the drift sweep's own thread took.
            "driftShareCheckBursts": round(arm["check"]["drift"] / cpu_s, 3) if cpu_s > 0 else None,
            "driftIntervalS": args.drift_interval,
            # Share of all decisions made on a node without GPU telemetry (should be about 0).
            "noNodeTelemetryShare": round(no_telemetry / all_decided, 3) if all_decided else None,
        }
        for phase, counts in reasons.items():
            print(f"decision reasons, {phase}: {dict(sorted(counts.items()))}")
        if all_decided and no_telemetry > 0.05 * all_decided:
            print(
                f"WARNING: {no_telemetry} of {all_decided} decisions found no GPU telemetry for their node; "
                "the decision figures of this run do not measure decide() (check the simulator's scrapes)"
            )
        print(
            f"run: {args.nodes} KWOK nodes x 8 GPUs, {len(JURISDICTIONS)} jurisdictions, "
            f"{args.workloads} one-GPU Jobs in bursts of {args.burst}, operator pinned to CPU {core}"
        )
        print(
            "AMPLE QUOTA (nothing waits for quota): arms interleaved burst by burst, alternating which goes "
            "first (alone, check | check, alone ...); each burst drained before the next"
        )
        rate = {k: len(adm[k]) / arm[k]["span"] if arm[k]["span"] else float("nan") for k in arm}
        for name, label in (("alone", "Kueue alone"), ("check", "with our check")):
            a, xs, sv = arm[name], adm[name], srv[name]
            print(
                f"time to Admitted, {label} (watcher: first event of the Workload -> first with "
                f"Admitted=True), n={len(xs)}: p50 {pct(xs, 0.5):.0f} ms, p90 {pct(xs, 0.9):.0f}, "
                f"p99 {pct(xs, 0.99):.0f}, max {max(xs, default=float('nan')):.0f}; "
                f"{rate[name]:.1f} admitted/s over {a['span']:.1f} s of burst time; server timestamps "
                f"(1 s resolution) p50 {pct(sv, 0.5):.0f} s, p99 {pct(sv, 0.99):.0f} s"
            )
        with watcher.lock:
            both = [
                k for k in names if k in watcher.pending and k in watcher.answered and k in watcher.admitted
            ]
            legs = {
                "created -> quota reserved, our entry Pending": [
                    (watcher.pending[k] - watcher.created[k]) * 1000 for k in both
                ],
                "Pending -> our answer": [(watcher.answered[k][0] - watcher.pending[k]) * 1000 for k in both],
                "our answer -> Admitted": [
                    (watcher.admitted[k] - watcher.answered[k][0]) * 1000 for k in both
                ],
            }
        print(
            f"with our check, where the time goes (watcher, n={len(both)}): "
            + "; ".join(
                f"{leg} p50 {pct(xs, 0.5):.0f} ms, p99 {pct(xs, 0.99):.0f}" for leg, xs in legs.items()
            )
        )
        print(
            f"admission ratio (with check / Kueue alone): p50 {ratio[0.5]}, p99 {ratio[0.99]}; "
            f"added by the check: p50 {pct(adm['check'], 0.5) - pct(adm['alone'], 0.5):.0f} ms, "
            f"p99 {pct(adm['check'], 0.99) - pct(adm['alone'], 0.99):.0f} ms; "
            f"admitted/s ratio {rate['check'] / rate['alone'] if rate['alone'] else float('nan'):.2f}"
        )
        print(
            f"operator CPU: {arm['check']['cpu']:.1f} s in the check arm's bursts, "
            f"{arm['alone']['cpu']:.1f} s in the Kueue-alone arm's (watching its workloads, pods and nodes; "
            f"no decision), {cpu_paced:.1f} s over the whole paced phase -> "
            f"{decisions / cpu_paced if cpu_paced else float('nan'):.1f} decisions per CPU-second "
            "counting all of it"
        )
        if queued:
            print(
                f"QUEUED (quota {args.queued_quota} GPUs per arm < burst {args.queued_burst}; Jobs run "
                f"{args.runtime}-{args.runtime_max} s, uniform): {args.queued_workloads} one-GPU Jobs "
                "per arm, "
                f"one burst per arm every {args.queued_period:.0f} s (both arms in the same second, "
                f"alternating which is submitted first), open loop; all admitted {queued['wall']:.0f} s "
                "after the first burst"
            )
            for name, label in (("alone", "Kueue alone"), ("check", "with our check")):
                xs, sv = queued[name], queued[f"{name}Server"]
                print(
                    f"queued: time to Admitted, {label}, n={len(xs)}: p50 {pct(xs, 0.5):.0f} ms, "
                    f"p90 {pct(xs, 0.9):.0f}, p99 {pct(xs, 0.99):.0f}, "
                    f"max {max(xs, default=float('nan')):.0f}, "
                    f"mean {statistics.fmean(xs) if xs else float('nan'):.0f}; {queued[f'{name}Rate']:.2f} "
                    f"admitted/s; server timestamps p50 {pct(sv, 0.5):.0f} s, p99 {pct(sv, 0.99):.0f} s"
                )
            print(
                "queued, with our check, where the time goes: "
                + "; ".join(
                    f"{leg} p50 {pct(xs, 0.5):.0f} ms, p99 {pct(xs, 0.99):.0f}"
                    for leg, xs in queued["legs"].items()
                )
            )
            qa, qc = queued["alone"], queued["check"]
            print(
                f"queued admission ratio (with check / Kueue alone): p50 {q_ratio(queued, 0.5)}, "
                f"p99 {q_ratio(queued, 0.99)}; added by the check: p50 {pct(qc, 0.5) - pct(qa, 0.5):.0f} ms, "
                f"p99 {pct(qc, 0.99) - pct(qa, 0.99):.0f} ms; answers {queued['states']}"
            )
            nq = sum(queued["events"].values())
            per_cpu = queued["decisions"] / queued["cpu"] if queued["cpu"] else float("nan")
            print(
                f"queued: operator CPU {queued['cpu']:.1f} s for {queued['decisions']} decisions (both arms' "
                f"events counted) -> {per_cpu:.1f} "
                f"per CPU-second; watch events {nq:.0f} ("
                + ", ".join(f"{r} {n:.0f}" for r, n in sorted(queued["events"].items()))
                + f"); API requests {queued['req']:.0f}; RSS at the end {queued['rss']:.0f} MB; "
                f"drift evaluations {queued['drift']:.0f} ({queued['drift'] / queued['wall']:.1f}/s)"
            )
        print(f"answers: {dict(states)}; sovereignty/consistency violations: {len(violations)}")
        for v in violations[:10]:
            print("  VIOLATION", v)
        print(
            f"decision latency (operator: entry seen Pending -> status apply acked), n={len(op_ms)}: "
            f"p50 {pct(op_ms, 0.5):.1f} ms, p90 {pct(op_ms, 0.9):.1f}, p99 {pct(op_ms, 0.99):.1f}, "
            f"max {max(op_ms, default=float('nan')):.1f}   goal p99 <= {GOALS['p99Ms']:.0f} ms"
        )
        print(
            f"decision latency (independent watcher: Pending seen -> answer seen), n={len(watch_ms)}: "
            f"p50 {pct(watch_ms, 0.5):.1f} ms, p99 {pct(watch_ms, 0.99):.1f}"
        )
        print(
            f"throughput: {decisions} decisions, operator CPU {cpu_s:.1f} s on one core "
            "in the check arm's bursts -> "
            f"{decisions / cpu_s if cpu_s else float('nan'):.1f} decisions per CPU-second "
            f"(goal >= {GOALS['decisionsPerSecond']:.0f}); "
            f"wall {decisions / busy if busy else float('nan'):.1f}/s "
            f"over {busy:.1f} s of burst time (includes Kueue's admission pace)"
        )
        if sat:
            print(
                f"saturated (backlog of {sat['n']:.0f} quota-reserved while the operator was stopped): "
                f"drained in {sat['wall']:.2f} s -> {sat['n'] / sat['wall']:.1f} decisions/s on one core "
                f"(goal >= {GOALS['decisionsPerSecond']:.0f}), operator CPU {sat['cpu']:.2f} s "
                f"({sat['cpu'] / sat['wall']:.0%} of the core, "
                f"{1000 * sat['cpu'] / sat['n']:.1f} ms per decision)"
            )
        print(f"operator RSS: max {figures['operatorRssMb']} MB (goal <= {GOALS['rssMb']:.0f})")
        print(
            "base snapshots behind the paced decisions: "
            + ", ".join(f"{how} {n:.0f}" for how, n in builds.items())
        )
        print(f"drift evaluations up to the end of the paced bursts: {drift_paced:.0f}")
        print(
            "Prometheus queries per refresh by phase: "
            + ", ".join(f"{p}={'n/a (no refresh)' if v is None else f'{v:.2f}'}" for p, v in phases)
        )
        print(
            f"background (idle {idle['wall']:.0f} s after the ample bursts, their workloads held): operator "
            f"CPU {1000 * idle_rate:.1f} ms per s ({idle['events']:.0f} watch events: "
            + ", ".join(f"{k} {v:.0f}" for k, v in idle["by_kind"].items())  # type: ignore[union-attr]
            + f"; {idle['drift']:.0f} drift "
            f"evaluations, {idle['refreshes']:.0f} telemetry refreshes); the check bursts' "
            f"{arm['check']['wall']:.0f} s at that rate: {idle_rate * arm['check']['wall']:.1f} of "
            f"{cpu_s:.1f} CPU-seconds -> "
            f"{decisions / marginal if marginal > 0 else float('nan'):.1f} decisions per marginal CPU-second"
        )
        per_eval = {k: 1000 * v / max(idle["drift"], 1) for k, v in idle["drift_cpu"].items()}  # type: ignore[union-attr]
        print(
            f"drift sweep in the idle window: {sum(idle['drift_cpu'].values()):.2f} CPU-seconds "  # type: ignore[union-attr]
            f"over {idle['drift']:.0f} evaluations, per evaluation "
            + ", ".join(f"{k} {v:.2f} ms" for k, v in per_eval.items())
            + f" (total {sum(per_eval.values()):.2f} ms)"
        )
        print(
            f"drift sweep in the bursts: {arm['check']['drift']:.2f} of {cpu_s:.1f} CPU-seconds in the check "
            f"arm's, {arm['alone']['drift']:.2f} of {arm['alone']['cpu']:.1f} in the Kueue-alone arm's"
        )
        gc_pct = 100 * arm["check"]["gc"] / cpu_s if cpu_s > 0 else float("nan")
        print(
            f"garbage collector: {arm['check']['gc']:.2f} of {cpu_s:.1f} CPU-seconds in the check arm's "
            f"bursts ({gc_pct:.1f} %), {idle['gc']:.2f} of "
            f"{idle['cpu']:.1f} in the idle window; young threshold "
            f"{os.environ.get('SOVEREIGNSPEC_GC_YOUNG_THRESHOLD', 'default')}"
        )
        print(
            "garbage collector in the check bursts by generation: "
            + ", ".join(
                f"{what} {n:.0f} collections {sec:.2f} s ({1000 * sec / n if n else 0.0:.1f} ms each)"
                for what, (n, sec) in zip(("young", "middle", "full"), gc_gens, strict=True)
            )
        )
        print(
            f"API requests by the operator: {req1 - req0:.0f} -> "
            f"{(req1 - req0) / max(decisions, 1):.2f} per decision "
            f"(APF counter of its own user, watches and events included)"
        )
        n_events = sum(events.values())
        print(
            f"watch events handled in the check arm's bursts: {n_events:.0f} -> "
            f"{n_events / max(decisions, 1):.1f} per decision ("
            + ", ".join(f"{r} {n / max(decisions, 1):.1f}" for r, n in sorted(events.items()))
            + f"); operator CPU per event, all its CPU counted: "
            f"{1000 * cpu_s / n_events if n_events else float('nan'):.2f} ms; in the Kueue-alone arm's "
            f"bursts {arm['alone']['events'] / max(len(alone_names), 1):.1f} per workload"
        )
        print(
            f"main thread in the check arm's bursts: {main_ms:.2f} ms of CPU per decision of "
            f"{1000 * cpu_s / max(decisions, 1):.2f} all threads; its watch events at this run's own cost "
            f"per event (pods {main_event.get('pods', float('nan')):.2f}, workloads "
            f"{main_event.get('workloads', float('nan')):.2f} ms): {events_ms:.2f} ms "
            f"({100 * events_ms / main_ms if main_ms > 0 else float('nan'):.0f} %)"
        )
        print(
            f"API server round trip of a no-op status apply (n={len(rtt)}): p50 {pct(rtt, 0.5):.1f} ms, "
            f"p99 {pct(rtt, 0.99):.1f}; decision p50 / round trip = "
            f"{pct(op_ms, 0.5) / pct(rtt, 0.5) if rtt else float('nan'):.1f}x"
        )
    finally:
        if watcher is not None:
            watcher.stop.set()
        if op is not None:
            op.stop()
        if prom is not None:
            prom.cleanup()
        sim.stop()
        ident.delete()
        if not args.keep:
            for ns in pool.namespaces + alone.namespaces:
                cluster.kubectl("delete", "jobs", "--all", "-n", ns, "--wait=false", check=False)
            # Deleted at once: a graceful deletion waits for the node's kubelet to confirm it, and the
            # KWOK nodes go next, so the namespaces' deletion would wait for the pod GC instead.
            core = client.CoreV1Api(cluster.api_client)
            for ns in pool.namespaces + alone.namespaces:
                try:
                    core.delete_collection_namespaced_pod(ns, grace_period_seconds=0)
                except client.ApiException as exc:  # the namespace's deletion still removes them
                    say(f"cleanup: pods of {ns} not deleted at once: {exc.status} {exc.reason}")
            core.delete_collection_node(label_selector=f"{POOL_LABEL}={pool.name}")
            core.delete_collection_node(label_selector=f"{POOL_LABEL}={alone.name}")
            pool.nodes.clear()
            alone.nodes.clear()
            alone.close()
            pool.close()
            # Wait for the namespaces to go: a run started while a thousand pods are still being deleted
            # measures the cleanup too (a quick run right after a full one: 2.5x the CPU per decision).
            try:
                say(f"cleanup: namespaces gone in {wait_quiet(cluster.api_client, timeout=300):.0f}s")
            except Exception as exc:  # a slow cleanup must not hide the figures
                say(f"cleanup still running: {exc}")
    print(json.dumps(figures, separators=(",", ":")))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
