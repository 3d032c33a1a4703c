"""The operator runs with the chart's ServiceAccount identity (TokenRequest token, leader election on)
and decides a workload end to end: the chart's RBAC is enough. Then every PromQL expression of the
chart's dashboard and alerts runs against a real Prometheus scraping that operator and the telemetry
simulator, and returns data."""

from __future__ import annotations

import json
import re
import time
import uuid
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.e2e.pool import NodeDef, Pool, decided, decisions, job, new_pool, serving_annotations
from tests.e2e.processes import OperatorProcess, SimulatorProcess, log_records
from tests.harness.cluster import LocalCluster
from tests.packaging.chart import ALL_ON, CHART, helm, render, sa_kubeconfig
from tests.telemetry.promproc import PrometheusProcess

pytestmark = [pytest.mark.e2e, pytest.mark.prometheus]
ALERT = re.compile(r"^\((?P<signal>.+)\)\s*(<|>|<=|>=|==|!=)\s*[0-9.]+$", re.S)


@pytest.fixture
def installed(local_cluster: LocalCluster) -> Iterator[tuple[str, str, str]]:
    """(release, namespace, ServiceAccount) of a chart install without the cluster-wide defaults."""
    suffix = uuid.uuid4().hex[:6]
    name, ns = f"ss-{suffix}", f"ss-sa-{suffix}"
    local_cluster.kubectl("apply", "--server-side", "--force-conflicts", "-f", str(CHART / "crds"))
    helm(
        local_cluster, "install", name, str(CHART), "-n", ns, "--create-namespace", "--wait=false",
        "--set", "defaults.admissionCheck.enabled=false", "--set", "defaults.speculationPolicy.enabled=false",
        "--set", "replicas=1", "--set", "podDisruptionBudget.enabled=false",
        "--set-string", "nodeSelector.sovereignspec\\.io/no-such-node=true",
    )  # fmt: skip
    yield name, ns, f"{name}-sovereignspec"
    helm(local_cluster, "uninstall", name, "-n", ns, "--wait", "--timeout", "60s", check=False)
    local_cluster.kubectl("delete", "namespace", ns, "--ignore-not-found", "--wait=false", check=False)


def _queue(pool: Pool, controller: str) -> None:
    """Like Pool.setup_queue, with our own controllerName: only the operator under test answers."""
    n = pool.name
    pool.apply(
        {"apiVersion": "sovereignspec.io/v1alpha1", "kind": "SpeculationPolicy", "metadata": {"name": n},
         "spec": {"telemetry": {"window": "30s", "stalenessSeconds": 30, "cacheTtlSeconds": 1}}},
        {"apiVersion": "kueue.x-k8s.io/v1beta2", "kind": "ResourceFlavor", "metadata": {"name": n},
         "spec": {"nodeLabels": {"e2e.sovereignspec.io/pool": n}}},
        {"apiVersion": "kueue.x-k8s.io/v1beta2", "kind": "AdmissionCheck", "metadata": {"name": n},
         "spec": {"controllerName": controller,
                  "parameters": {"apiGroup": "sovereignspec.io", "kind": "SpeculationPolicy", "name": n}}},
        {"apiVersion": "kueue.x-k8s.io/v1beta2", "kind": "ClusterQueue", "metadata": {"name": n},
         "spec": {"namespaceSelector": {"matchLabels": {"e2e.sovereignspec.io/pool": n}},
                  "resourceGroups": [{"coveredResources": ["cpu", "memory", "nvidia.com/gpu"], "flavors": [
                      {"name": n, "resources": [{"name": "cpu", "nominalQuota": "100"},
                                                {"name": "memory", "nominalQuota": "1Ti"},
                                                {"name": "nvidia.com/gpu", "nominalQuota": "16"}]}]}],
                  "admissionChecksStrategy": {"admissionChecks": [{"name": n}]}}},
    )  # fmt: skip
    pool.cluster_objects += [
        ("speculationpolicies.sovereignspec.io", n), ("resourceflavors.kueue.x-k8s.io", n),
        ("admissionchecks.kueue.x-k8s.io", n), ("clusterqueues.kueue.x-k8s.io", n),
    ]  # fmt: skip


def _rbac_gap(record: dict[str, object]) -> bool:
    """A permission problem in one JSON log record, read from its fields: our API-error records carry
    the HTTP status; kopf starts its missing-grant warnings with "Not enough" (list/watch, RBAC), puts
    the status code of a failed Event post in that record's message, and raises APIForbiddenError.
    (A substring test of the whole log once failed on '"speedup":1.791403'.)"""
    msg, exc = str(record.get("msg", "")), str(record.get("exc", ""))
    event_denied = msg.startswith("Failed to post an event") and "Code: 403." in msg
    return (
        record.get("httpStatus") == 403
        or msg.startswith("Not enough")
        or event_denied
        or "APIForbiddenError" in exc
    )


def _expressions(cluster: LocalCluster) -> list[tuple[str, str]]:
    docs = render(cluster, *ALL_ON)
    out: list[tuple[str, str]] = []
    rule = next(d for d in docs if d["kind"] == "PrometheusRule")
    for group in rule["spec"]["groups"]:
        for r in group["rules"]:
            out.append((f"alert {r['alert']}", str(r["expr"])))
    cm = next(d for d in docs if d["kind"] == "ConfigMap" and d["metadata"]["name"].endswith("dashboard"))
    for panel in json.loads(cm["data"]["sovereignspec.json"])["panels"]:
        for t in panel["targets"]:
            out.append((f"panel {panel['title']!r}", str(t["expr"])))
    return out


def test_operator_as_chart_serviceaccount_and_promql(
    local_cluster: LocalCluster, installed: tuple[str, str, str], tmp_path: Path
) -> None:
    release, ns, sa = installed
    kubeconfig = sa_kubeconfig(local_cluster, ns, sa, tmp_path / "sa.kubeconfig")
    who = local_cluster.kubectl(
        "--kubeconfig", str(kubeconfig), "auth", "whoami", "-o", "jsonpath={.status.userInfo.username}"
    )
    assert who.stdout == f"system:serviceaccount:{ns}:{sa}"

    # A controller name of our own: the e2e session's operator (same test session, default controller
    # name) must not answer this pool's check first. The field manager proves who wrote the decision.
    controller = f"sovereignspec.io/pkg-{release}"
    manager = f"pkg-{release}"
    sim = SimulatorProcess(local_cluster)
    op = OperatorProcess(
        local_cluster, None, leader_election=True, identity=f"{release}-0", lease_namespace=ns,
        extra_env={"SOVEREIGNSPEC_FIELD_MANAGER": manager, "SOVEREIGNSPEC_CONTROLLER_NAME": controller},
    )  # fmt: skip
    # 2 s scrapes: a 1 s scrape timeout was missed now and then on a loaded 2-core machine.
    prom = PrometheusProcess([f"127.0.0.1:{sim.port}", f"127.0.0.1:{op.metrics_port}"], scrape_interval=2.0)
    pool = new_pool(local_cluster, "pkg")
    try:
        sim.start()
        sim.wait_ready()
        prom.start()
        # the chart's identity: the ServiceAccount's token replaces the admin kubeconfig
        i = op.args.index("--kubeconfig")
        op.args[i + 1] = str(kubeconfig)
        op.args += ["--prometheus-url", prom.url]
        op.env["KUBECONFIG"] = str(kubeconfig)
        op.start()
        op.wait_ready(timeout=90)
        (node,) = pool.add_nodes(NodeDef("idle", base_load=0.1))
        _queue(pool, controller)
        prom.wait_for(f'DCGM_FI_PROF_PIPE_TENSOR_ACTIVE{{Hostname="{node}"}}', timeout=60)
        time.sleep(2)
        tenant = pool.tenant("pkg")
        spec = job("chat", tenant, serving_annotations(cls="interactive", batch=4))
        spec["spec"]["template"]["metadata"]["annotations"].update(
            {"pod-complete.stage.kwok.x-k8s.io/delay": "3600s",
             "pod-complete.stage.kwok.x-k8s.io/jitter-delay": "3600s"})  # fmt: skip
        pool.apply(spec)
        decided(pool, tenant)
        (dec,) = decisions(pool, tenant)
        assert dec["status"]["state"] == "Ready" and dec["status"]["node"] == node
        assert dec["status"]["mode"] == "on", dec["status"]
        managers = {f["manager"] for f in dec["metadata"].get("managedFields", [])}
        assert manager in managers, f"decision not written by the operator under test: {managers}"
        gaps = [r for r in log_records(op) if _rbac_gap(r)]
        assert not gaps, f"RBAC gaps in the operator log: {gaps[:5]}"

        # ---- every dashboard and alert expression returns data from the real Prometheus
        exprs = _expressions(local_cluster)
        assert len(exprs) >= 10
        prom.wait_for("vllm:spec_decode_num_drafts_total", timeout=60)
        prom.wait_for("sovereignspec_decisions_total", timeout=90)
        time.sleep(5)
        for what, expr in exprs:
            m = ALERT.match(expr)
            if m:
                prom.query(expr)  # the whole rule evaluates (empty is right when nothing is wrong)
                expr = m.group("signal")
            assert prom.wait_for(expr, timeout=60), f"{what}: no data for {expr}"
    finally:
        op.stop()
        sim.stop()
        prom.cleanup()
        pool.close()
