"""The Helm chart: lint, schema validation against the local Kubernetes 1.36 API's own OpenAPI, RBAC
without wildcards, CRDs identical to the generated ones, and an install into the local API server."""

from __future__ import annotations

import subprocess
import uuid
from collections.abc import Iterator
from pathlib import Path

import pytest
import yaml

from sovereignspec.api.crdgen import render as render_crds
from tests.harness.cluster import LocalCluster
from tests.packaging.chart import (
    ALL_ON,
    CHART,
    KUBE_VERSION,
    NOT_SERVED,
    helm,
    kubeconform,
    render,
    schemas_from_openapi,
)


def test_chart_crds_match_generator() -> None:
    """The chart ships exactly what `make crds` generates (unit test: no cluster, no helm)."""
    expected = render_crds()
    present = {p.name for p in (CHART / "crds").glob("*.yaml")}
    assert present == set(expected), "chart crds/ differs from the generator's file set: run `make crds`"
    for name, text in expected.items():
        assert (CHART / "crds" / name).read_text(encoding="utf-8") == text, (
            f"chart crds/{name} is stale: make crds"
        )


@pytest.mark.cluster
def test_helm_lint_strict(local_cluster: LocalCluster) -> None:
    helm(local_cluster, "lint", "--strict", str(CHART), "--kube-version", KUBE_VERSION)
    helm(local_cluster, "lint", "--strict", str(CHART), "--kube-version", KUBE_VERSION, *ALL_ON)


@pytest.mark.cluster
def test_values_schema_rejects_bad_values(local_cluster: LocalCluster) -> None:
    r = helm(local_cluster, "template", "t", str(CHART), "--set", "replicas=0", check=False)
    assert r.returncode != 0 and "replicas" in r.stderr
    r = helm(local_cluster, "template", "t", str(CHART), "--set", "operator.logFormat=xml", check=False)
    assert r.returncode != 0 and "logFormat" in r.stderr


@pytest.mark.cluster
def test_template_validates_against_kubernetes_136_schemas(
    local_cluster: LocalCluster, tmp_path: Path
) -> None:
    """kubeconform (built from its Go module) with JSON schemas derived from the local kube-apiserver
    v1.36's /openapi/v3 (built-in kinds, Kueue and our CRDs); strict: unknown fields fail. Only the
    prometheus-operator kinds, whose CRDs this cluster does not serve, are skipped by name."""
    schemas = tmp_path / "schemas"
    assert schemas_from_openapi(local_cluster, schemas) > 100
    rendered = helm(
        local_cluster, "template", "t", str(CHART), "-n", "sovereignspec-system",
        "--kube-version", KUBE_VERSION, "--include-crds", *ALL_ON,
    ).stdout  # fmt: skip
    kinds = {d["kind"] for d in yaml.safe_load_all(rendered) if d}
    location = f"{schemas}/{{{{ .ResourceKind }}}}-{{{{ .Group }}}}-{{{{ .ResourceAPIVersion }}}}.json"
    r = subprocess.run(
        [str(kubeconform()), "-strict", "-summary", "-output", "text",
         "-schema-location", location, "-skip", ",".join(NOT_SERVED), "-"],
        input=rendered, capture_output=True, text=True, timeout=120,
    )  # fmt: skip
    assert r.returncode == 0, r.stdout + r.stderr
    n_docs = len([d for d in yaml.safe_load_all(rendered) if d])
    assert f"Valid: {n_docs - len(NOT_SERVED)}," in r.stdout, r.stdout
    assert "Invalid: 0, Errors: 0" in r.stdout and f"Skipped: {len(NOT_SERVED)}" in r.stdout, r.stdout
    assert {
        "Deployment",
        "ClusterRole",
        "CustomResourceDefinition",
        "AdmissionCheck",
        "SpeculationPolicy",
        "ValidatingAdmissionPolicy",
        "ValidatingAdmissionPolicyBinding",
    } <= kinds
    # The validation is real: an unknown field in the pod spec fails.
    bad = rendered.replace(
        "readOnlyRootFilesystem: true", "readOnlyRootFilesystem: true\n            bogus: 1"
    )
    r = subprocess.run(
        [str(kubeconform()), "-strict", "-schema-location", location,
         "-skip", ",".join(NOT_SERVED), "-"],
        input=bad, capture_output=True, text=True, timeout=120,
    )  # fmt: skip
    assert r.returncode != 0 and "bogus" in r.stdout


@pytest.mark.cluster
def test_rbac_has_no_wildcards_and_least_privilege(local_cluster: LocalCluster) -> None:
    docs = render(local_cluster, *ALL_ON)
    roles = [d for d in docs if d["kind"] in ("ClusterRole", "Role")]
    assert roles
    for role in roles:
        for rule in role.get("rules", []):
            for field in ("apiGroups", "resources", "verbs", "resourceNames", "nonResourceURLs"):
                for v in rule.get(field) or []:
                    assert "*" not in v, f"{role['metadata']['name']}: wildcard in {field}: {rule}"
            assert (
                "escalate" not in rule["verbs"]
                and "bind" not in rule["verbs"]
                and "impersonate" not in rule["verbs"]
            )
    op = next(r for r in roles if r["kind"] == "ClusterRole" and not r["metadata"]["name"].endswith("viewer"))
    grants = {(g, res, v) for rule in op["rules"] for g in rule["apiGroups"] for res in rule["resources"]
              for v in rule["verbs"]}  # fmt: skip
    # nothing that deletes, nothing on secrets, no writes to spec of Kueue objects
    assert not {g for g in grants if g[2] in ("delete", "deletecollection")}
    assert not {g for g in grants if g[1] in ("secrets", "configmaps")}
    assert ("kueue.x-k8s.io", "workloads", "patch") not in grants
    assert ("kueue.x-k8s.io", "workloads/status", "patch") in grants
    viewer = next(r for r in roles if r["metadata"]["name"].endswith("decision-viewer"))
    assert {v for rule in viewer["rules"] for v in rule["verbs"]} == {"get", "list", "watch"}


@pytest.mark.cluster
def test_deployment_hardening(local_cluster: LocalCluster) -> None:
    docs = render(local_cluster)
    dep = next(d for d in docs if d["kind"] == "Deployment")
    pod = dep["spec"]["template"]["spec"]
    (c,) = pod["containers"]
    assert (
        pod["securityContext"]["runAsNonRoot"]
        and pod["securityContext"]["seccompProfile"]["type"] == "RuntimeDefault"
    )
    sc = c["securityContext"]
    assert (
        sc["readOnlyRootFilesystem"]
        and not sc["allowPrivilegeEscalation"]
        and sc["capabilities"]["drop"] == ["ALL"]
    )
    assert c["resources"]["requests"] and c["resources"]["limits"]
    assert (
        c["livenessProbe"]["httpGet"]["path"] == "/healthz"
        and c["readinessProbe"]["httpGet"]["path"] == "/readyz"
    )
    env = {e["name"]: e for e in c["env"]}
    assert env["SOVEREIGNSPEC_IDENTITY"]["valueFrom"]["fieldRef"]["fieldPath"] == "metadata.name"
    assert dep["spec"]["replicas"] == 2
    assert any(d["kind"] == "PodDisruptionBudget" for d in docs)
    assert "command" not in c and "args" not in c  # the image's entrypoint is `sovereignspec run`


@pytest.fixture
def release(local_cluster: LocalCluster) -> Iterator[tuple[str, str]]:
    suffix = uuid.uuid4().hex[:6]
    name, ns = f"ss-{suffix}", f"ss-pkg-{suffix}"
    yield name, ns
    helm(local_cluster, "uninstall", name, "-n", ns, "--wait", "--timeout", "60s", check=False)
    local_cluster.kubectl("delete", "namespace", ns, "--ignore-not-found", "--wait=false", check=False)


@pytest.mark.cluster
def test_helm_install_into_local_api_server(local_cluster: LocalCluster, release: tuple[str, str]) -> None:
    name, ns = release
    helm(
        local_cluster, "install", name, str(CHART), "-n", ns, "--create-namespace",
        # unique cluster-scoped defaults (the cluster is shared); the pods never land on a fake GPU node
        "--set", f"defaults.admissionCheck.name={name}", "--set", f"defaults.speculationPolicy.name={name}",
        "--set-string", "nodeSelector.sovereignspec\\.io/no-such-node=true",
        "--wait=false", "--timeout", "120s",
    )  # fmt: skip
    st = helm(local_cluster, "status", name, "-n", ns, "-o", "yaml").stdout
    assert yaml.safe_load(st)["info"]["status"] == "deployed"
    for kind in ("deployment", "serviceaccount", "service", "poddisruptionbudget", "role", "rolebinding"):
        local_cluster.kubectl("get", kind, "-n", ns, "-l", f"app.kubernetes.io/instance={name}", "-o", "name")
    local_cluster.kubectl("get", "clusterrole", f"{name}-sovereignspec")
    local_cluster.kubectl("get", "admissionchecks.kueue.x-k8s.io", name)
    local_cluster.kubectl("get", "speculationpolicies.sovereignspec.io", name)
    for crd in render_crds():
        plural_group = crd.removesuffix(".yaml").split("_", 1)
        local_cluster.kubectl("get", "crd", f"{plural_group[1]}.{plural_group[0]}")
    helm(local_cluster, "uninstall", name, "-n", ns, "--wait", "--timeout", "60s")
    r = local_cluster.kubectl("get", "admissionchecks.kueue.x-k8s.io", name, check=False)
    assert r.returncode != 0  # uninstall removes the cluster-scoped defaults too
