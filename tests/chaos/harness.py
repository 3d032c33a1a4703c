"""Helpers shared by the chaos tests and bench/scale_bench.py.

Every run gets its own AdmissionCheck controller name, so an operator started by another engineer's
test session (same shared cluster, default controller name) never answers our workloads: what we
measure or break is our operator alone.
"""

from __future__ import annotations

import subprocess
import sys
import uuid
from collections import Counter, defaultdict
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import yaml
from kubernetes import client

from tests.e2e.pool import POOL_LABEL, NodeDef, Pool, node_manifest, our_entry
from tests.e2e.processes import OperatorProcess, log_records
from tests.harness.cluster import LocalCluster
from tests.harness.wait import wait_until

__all__ = ["log_records"]  # the chaos tests read the operator's JSON log through this module

JURISDICTION = "sovereignspec.io/jurisdiction"
HOSTNAME = "kubernetes.io/hostname"


def unique_controller(prefix: str) -> str:
    return f"sovereignspec.io/{prefix}-{uuid.uuid4().hex[:6]}"


def add_nodes_bulk(pool: Pool, defs: Iterable[NodeDef], timeout: float = 300) -> list[str]:
    """Many KWOK nodes in one apply (pool.add_nodes runs one kubectl per node), then wait Ready."""
    manifests = [node_manifest(f"{pool.name}-{d.suffix}", pool.name, d) for d in defs]
    names = [m["metadata"]["name"] for m in manifests]
    for i in range(0, len(manifests), 100):
        pool.apply(*manifests[i : i + 100])
    pool.nodes += names
    core = client.CoreV1Api(pool.api)

    def ready() -> bool:
        items = core.list_node(label_selector=f"{POOL_LABEL}={pool.name}").items
        ok = sum(
            1
            for n in items
            if any(c.type == "Ready" and c.status == "True" for c in n.status.conditions or [])
        )
        return ok >= len(names)

    wait_until(ready, timeout=timeout, interval=2, what=f"{len(names)} KWOK nodes Ready")
    return names


def setup_private_queue(
    pool: Pool, controller: str, *, policy_spec: dict[str, Any] | None = None, gpu_quota: int = 64
) -> None:
    """Pool.setup_queue with our own controller name on the AdmissionCheck, ample cpu and memory, and no
    wait (the ClusterQueue turns Active once the test's operator runs)."""
    pool.setup_queue(
        policy_spec=policy_spec,
        gpu_quota=gpu_quota,
        controller=controller,
        wait=False,
        cpu="100000",
        memory="1000Ti",
    )


def wait_queue_active(pool: Pool, timeout: float = 90) -> None:
    """Active needs our operator (it sets the AdmissionCheck's Active condition)."""
    wait_until(
        pool._cq_active, timeout=timeout, what=f"ClusterQueue {pool.name} Active", describe=pool._cq_state
    )


class ProfiledOperator(OperatorProcess):
    """The operator under cProfile; the profile is written when it stops (SIGTERM is a clean exit)."""

    profile_path: Path | None = None

    def start(self) -> None:
        if self.profile_path is None:
            super().start()
            return
        self.starts += 1
        log = open(self.log_path, "ab")  # noqa: SIM115 - owned by the child
        cmd = [sys.executable, "-m", "cProfile", "-o", str(self.profile_path), "-m", "sovereignspec"]
        self.proc = subprocess.Popen(
            [*cmd, *self.args], env=self.env, stdout=log, stderr=subprocess.STDOUT, start_new_session=True
        )


def operator(
    cluster: LocalCluster,
    prometheus_url: str | None,
    controller: str,
    *,
    identity: str | None = None,
    leader_election: bool = False,
    extra_env: Mapping[str, str] | None = None,
) -> ProfiledOperator:
    env = {"SOVEREIGNSPEC_CONTROLLER_NAME": controller, **(extra_env or {})}
    return ProfiledOperator(
        cluster, prometheus_url, leader_election=leader_election, identity=identity, extra_env=env
    )


def jobs_docs(
    names: Iterable[str],
    namespace: str,
    annotations: dict[str, str],
    gpus: int = 1,
    *,
    queue: str = "lq",
    runtime_s: tuple[int, int] = (3600, 3600),
) -> str:
    """Suspended Jobs in LocalQueue `queue`. KWOK completes a Job's pod a uniform random time between
    runtime_s[0] and runtime_s[1] after it is Running (the default, an hour, keeps it Running for any
    test; KWOK's own default would finish it in seconds)."""
    from tests.e2e.pool import job

    docs = []
    for name in names:
        j = job(name, namespace, annotations, gpus)
        j["metadata"]["labels"]["kueue.x-k8s.io/queue-name"] = queue
        j["spec"]["template"]["metadata"]["annotations"].update(
            {
                "pod-complete.stage.kwok.x-k8s.io/delay": f"{runtime_s[0]}s",
                "pod-complete.stage.kwok.x-k8s.io/jitter-delay": f"{runtime_s[1]}s",
            }
        )
        docs.append(j)
    return yaml.safe_dump_all(docs)


def _dense(updates: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """Without empty lists/maps (the API server drops omitempty fields such as `tolerations: []`)."""
    return [{k: v for k, v in u.items() if v not in ([], {}, None)} for u in updates]


# ---- sovereignty invariants over the final cluster state -------------------------------------------


@dataclass
class TenantRules:
    jurisdictions: set[str] | None = None  # None: no policy, any jurisdiction
    isolated: bool = False
    trusted: set[str] = field(default_factory=set)


def tenant_rules(api: client.ApiClient, tenants: Iterable[str]) -> dict[str, TenantRules]:
    """Intersect the SovereigntyPolicies naming each tenant (tests only use `tenants:` lists)."""
    pols = client.CustomObjectsApi(api).list_cluster_custom_object(
        "sovereignspec.io", "v1alpha1", "sovereigntypolicies"
    )["items"]
    out: dict[str, TenantRules] = {}
    for t in tenants:
        r = TenantRules()
        for p in pols:
            spec = p.get("spec") or {}
            if t not in (spec.get("tenants") or []):
                continue
            js = set(spec.get("jurisdictions") or [])
            r.jurisdictions = js if r.jurisdictions is None else r.jurisdictions & js
            if spec.get("isolation") == "Node":
                r.isolated = True
            r.trusted |= set(spec.get("trustedTenants") or [])
        out[t] = r
    return out


def check_invariants(pool: Pool, namespaces: list[str]) -> list[str]:
    """I1-I6 (and one-decision consistency) over what the cluster holds now; returns violations.

    I1 jurisdiction allowed; I2/I3 no untrusted tenant next to an isolated one, either way round;
    I4 the node carries the flavor's nodeLabels (the pool label) and every nodeSelector value we set;
    I5 a tenant with no sovereign node in the pool is never Ready; I6 is I1-I4 holding for decisions
    made with telemetry off as much as on. Also: a Ready entry has exactly one SpeculationDecision, for
    this Workload's uid, whose node, mode and podSetUpdates match the entry; GPUs per node ≤ allocatable.
    """
    co = client.CustomObjectsApi(pool.api)
    core = client.CoreV1Api(pool.api)
    nodes = {n.metadata.name: n for n in core.list_node(label_selector=f"{POOL_LABEL}={pool.name}").items}
    ns_tenant = {}
    for ns in namespaces:
        labels = core.read_namespace(ns).metadata.labels or {}
        ns_tenant[ns] = labels.get("sovereignspec.io/tenant", ns)
    rules = tenant_rules(pool.api, ns_tenant.values())
    bad: list[str] = []
    on_node: dict[str, set[str]] = defaultdict(set)
    gpus: Counter[str] = Counter()
    for ns in namespaces:
        tenant = ns_tenant[ns]
        rule = rules[tenant]
        wls = co.list_namespaced_custom_object("kueue.x-k8s.io", "v1beta2", ns, "workloads")["items"]
        decs = co.list_namespaced_custom_object("sovereignspec.io", "v1alpha1", ns, "speculationdecisions")[
            "items"
        ]
        by_name: dict[str, list[dict[str, Any]]] = defaultdict(list)
        for d in decs:
            by_name[d["metadata"]["name"]].append(d)
        for w in wls:
            name = f"{ns}/{w['metadata']['name']}"
            entry = our_entry(w, pool.name)
            if entry is None or entry.get("state") != "Ready":
                continue
            sovereign = [
                n
                for n, obj in nodes.items()
                if rule.jurisdictions is None
                or (obj.metadata.labels or {}).get(JURISDICTION) in rule.jurisdictions
            ]
            if not sovereign:
                bad.append(f"I5 {name}: Ready although no node of the pool is sovereign for {tenant}")
            ds = by_name.get(w["metadata"]["name"], [])
            if len(ds) != 1:
                bad.append(f"{name}: {len(ds)} SpeculationDecisions for one Ready entry")
                continue
            d = ds[0]
            st = d.get("status") or {}
            if d["spec"].get("workloadUid") != w["metadata"]["uid"]:
                bad.append(
                    f"{name}: decision for uid {d['spec'].get('workloadUid')}, "
                    f"workload is {w['metadata']['uid']}"
                )
            updates = entry.get("podSetUpdates") or []
            if _dense(updates) != _dense(st.get("podSetUpdates") or []):
                bad.append(
                    f"{name}: Kueue entry podSetUpdates {_dense(updates)} differ from the "
                    f"SpeculationDecision's {_dense(st.get('podSetUpdates') or [])}"
                )
            node = st.get("node")
            templates = {
                ps.get("name"): ps.get("template") or {} for ps in (w.get("spec") or {}).get("podSets") or []
            }
            for u in updates:
                tmpl = templates.get(u.get("name")) or {}
                have = {
                    "labels": (tmpl.get("metadata") or {}).get("labels") or {},
                    "annotations": (tmpl.get("metadata") or {}).get("annotations") or {},
                    "nodeSelector": (tmpl.get("spec") or {}).get("nodeSelector") or {},
                }
                for part, existing in have.items():
                    for k, v in (u.get(part) or {}).items():
                        if k in existing and existing[k] != v:
                            bad.append(
                                f"I4 {name}: podSetUpdate {part} {k}={v!r} "
                                f"conflicts with template {existing[k]!r}"
                            )
                sel = u.get("nodeSelector") or {}
                if sel.get(HOSTNAME) != node:
                    bad.append(f"{name}: entry pins {sel.get(HOSTNAME)}, decision says {node}")
                mode = (u.get("labels") or {}).get("sovereignspec.io/speculative")
                if mode != st.get("mode"):
                    bad.append(f"{name}: entry label speculative={mode}, decision mode {st.get('mode')}")
                obj = nodes.get(node or "")
                labels = (obj.metadata.labels or {}) if obj is not None else {}
                for k, v in sel.items():
                    if labels.get(k) != v:
                        bad.append(f"I4 {name}: nodeSelector {k}={v} but node {node} has {labels.get(k)}")
            obj = nodes.get(node or "")
            if obj is None:
                bad.append(f"I4 {name}: node {node} is not in the flavor's pool")
                continue
            labels = obj.metadata.labels or {}
            if rule.jurisdictions is not None and labels.get(JURISDICTION) not in rule.jurisdictions:
                bad.append(
                    f"I1 {name}: node {node} is {labels.get(JURISDICTION)}, "
                    f"allowed {sorted(rule.jurisdictions)}"
                )
            # Occupancy (isolation, GPUs per node) only for workloads still running: a Finished one's
            # decision stays Ready, but its pods are gone (the bench's queued regime finishes Jobs).
            conds = (w.get("status") or {}).get("conditions") or []
            if not any(c.get("type") == "Finished" and c.get("status") == "True" for c in conds):
                on_node[node].add(tenant)
                gpus[node] += int(st.get("gpus") or 0)
    for node, tenants in on_node.items():
        for t in tenants:
            r = rules.get(t)
            if r is None or not r.isolated:
                continue
            for other in tenants - {t}:
                if other not in r.trusted:
                    bad.append(f"I2/I3 node {node}: isolated tenant {t} shares with untrusted {other}")
        alloc = int((nodes[node].status.allocatable or {}).get("nvidia.com/gpu", "0"))
        if gpus[node] > alloc:
            bad.append(f"node {node}: {gpus[node]} GPUs reserved by Ready decisions > {alloc} allocatable")
    return bad
