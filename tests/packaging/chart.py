"""Helpers for the chart tests: helm render, kubeconform, JSON schemas derived from the API server's
OpenAPI v3 (kubeconform cannot download schemas here), and a ServiceAccount-token kubeconfig."""

from __future__ import annotations

import json
import os
import re
import subprocess
from pathlib import Path
from typing import Any

import yaml

from tests.harness.cluster import LocalCluster, cache_dir

ROOT = Path(__file__).resolve().parents[2]
CHART = ROOT / "charts" / "sovereignspec"
KUBECONFORM_MODULE = "github.com/yannh/kubeconform/cmd/kubeconform"
KUBECONFORM_VERSION = "v0.8.0"
KUBE_VERSION = "1.36.3"
# Kinds whose CRDs are not served by the local API server (prometheus-operator is not installed).
NOT_SERVED = ("ServiceMonitor", "PrometheusRule")
ALL_ON = [
    "--set", "metrics.prometheusRule.enabled=true",
    "--set", "metrics.dashboard.enabled=true",
    "--set", "metrics.serviceMonitor.enabled=true",
]  # fmt: skip


def helm(cluster: LocalCluster, *args: str, check: bool = True) -> subprocess.CompletedProcess[str]:
    env = {**cluster.subprocess_env(), "HELM_CACHE_HOME": str(cache_dir() / "helm" / "cache"),
           "HELM_CONFIG_HOME": str(cache_dir() / "helm" / "config"),
           "HELM_DATA_HOME": str(cache_dir() / "helm" / "data")}  # fmt: skip
    r = subprocess.run([str(cluster.helm_path), *args], capture_output=True, text=True, env=env, timeout=300)
    if check and r.returncode != 0:
        raise AssertionError(f"helm {' '.join(args)} failed ({r.returncode}):\n{r.stdout}\n{r.stderr}")
    return r


def render(
    cluster: LocalCluster, *extra: str, namespace: str = "sovereignspec-system"
) -> list[dict[str, Any]]:
    out = helm(
        cluster, "template", "t", str(CHART), "-n", namespace, "--kube-version", KUBE_VERSION, *extra
    ).stdout
    return [d for d in yaml.safe_load_all(out) if d]


def kubeconform() -> Path:
    """Build kubeconform from its Go module (pinned) into $SOVEREIGNSPEC_CACHE/bin once."""
    binary = cache_dir() / "bin" / "kubeconform"
    stamp = cache_dir() / "stamps" / "kubeconform"
    if binary.exists() and stamp.exists() and stamp.read_text().strip() == KUBECONFORM_VERSION:
        return binary
    env = {**os.environ, "GOBIN": str(binary.parent), "CGO_ENABLED": "0", "GOTOOLCHAIN": "local"}
    subprocess.run(
        ["go", "install", "-trimpath", "-ldflags=-s -w", f"{KUBECONFORM_MODULE}@{KUBECONFORM_VERSION}"],
        env=env, check=True, timeout=900,
    )  # fmt: skip
    stamp.parent.mkdir(parents=True, exist_ok=True)
    stamp.write_text(KUBECONFORM_VERSION)
    return binary


def _rewrite_refs(node: Any) -> Any:
    if isinstance(node, dict):
        out: dict[str, Any] = {}
        for k, v in node.items():
            if k == "$ref" and isinstance(v, str):
                out[k] = v.replace("#/components/schemas/", "#/definitions/")
            else:
                out[k] = _rewrite_refs(v)
        # Strict like openapi2jsonschema --strict: unknown fields are errors, except maps.
        if (
            "properties" in out
            and "additionalProperties" not in out
            and not out.get("x-kubernetes-preserve-unknown-fields")
        ):
            out["additionalProperties"] = False
        return out
    if isinstance(node, list):
        return [_rewrite_refs(v) for v in node]
    return node


def schemas_from_openapi(cluster: LocalCluster, out: Path) -> int:
    """One standalone JSON schema per served kind, named for kubeconform's -schema-location template
    `{{ .ResourceKind }}-{{ .Group }}-{{ .ResourceAPIVersion }}.json`. Returns the number written."""
    index = json.loads(cluster.kubectl("get", "--raw", "/openapi/v3").stdout)
    out.mkdir(parents=True, exist_ok=True)
    written = 0
    for path, ref in sorted(index["paths"].items()):
        if not (path == "api/v1" or re.fullmatch(r"apis/[^/]+/[^/]+", path)):
            continue
        url = ref["serverRelativeURL"]
        doc = json.loads(cluster.kubectl("get", "--raw", url).stdout)
        comps = _rewrite_refs((doc.get("components") or {}).get("schemas") or {})
        for schema in comps.values():
            for gvk in schema.get("x-kubernetes-group-version-kind") or []:
                gv = f"{gvk['group']}/{gvk['version']}" if gvk["group"] else gvk["version"]
                if path != ("api/v1" if not gvk["group"] else f"apis/{gv}"):
                    continue
                doc_out = {**schema, "definitions": comps}
                # kubeconform's .Group is the apiVersion's first part: "v1" for the core group
                name = f"{gvk['kind'].lower()}-{gvk['group'] or gvk['version']}-{gvk['version']}.json"
                (out / name).write_text(json.dumps(doc_out))
                written += 1
    return written


def sa_kubeconfig(cluster: LocalCluster, namespace: str, sa: str, path: Path) -> Path:
    """A kubeconfig that authenticates as the ServiceAccount (token from the TokenRequest API)."""
    token = cluster.kubectl("create", "token", sa, "-n", namespace, "--duration", "2h").stdout.strip()
    admin = yaml.safe_load(cluster.kubeconfig.read_text())
    cl = admin["clusters"][0]
    cfg = {
        "apiVersion": "v1",
        "kind": "Config",
        "clusters": [cl],
        "users": [{"name": sa, "user": {"token": token}}],
        "contexts": [{"name": sa, "context": {"cluster": cl["name"], "user": sa}}],
        "current-context": sa,
    }
    path.write_text(yaml.safe_dump(cfg))
    path.chmod(0o600)
    return path
