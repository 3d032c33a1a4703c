"""Unit test (no cluster) of deploy/local/render_kueue.py: every Kueue webhook is rewritten to a
loopback URL with our CA, none is dropped, and the conversion webhook lands on the patched CRDs."""

from __future__ import annotations

import base64
import importlib.util
from pathlib import Path
from types import ModuleType
from typing import Any

import pytest
import yaml

SCRIPT = Path(__file__).resolve().parents[2] / "deploy" / "local" / "render_kueue.py"


def load_renderer() -> ModuleType:
    spec = importlib.util.spec_from_file_location("render_kueue", SCRIPT)
    assert spec and spec.loader
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def crd(name: str) -> dict[str, Any]:
    return {
        "apiVersion": "apiextensions.k8s.io/v1",
        "kind": "CustomResourceDefinition",
        "metadata": {"name": name},
        "spec": {"group": "kueue.x-k8s.io", "versions": []},
    }


def webhook(name: str, group: str, path: str) -> dict[str, Any]:
    return {
        "name": name,
        "failurePolicy": "Fail",
        "clientConfig": {"service": {"name": "webhook-service", "namespace": "system", "path": path}},
        "rules": [{"apiGroups": [group], "resources": ["x"], "operations": ["CREATE"]}],
    }


def write_share(root: Path) -> None:
    bases = root / "crd" / "bases"
    patches = root / "crd" / "patches"
    bases.mkdir(parents=True)
    patches.mkdir()
    (root / "webhook").mkdir()
    for name in ("workloads.kueue.x-k8s.io", "resourceflavors.kueue.x-k8s.io"):
        (bases / f"{name}.yaml").write_text(yaml.safe_dump(crd(name)))
    (patches / "webhook_in_workloads.yaml").write_text(yaml.safe_dump(crd("workloads.kueue.x-k8s.io")))
    (patches / "webhook_in_resourceflavors.yaml").write_text(
        yaml.safe_dump(crd("resourceflavors.kueue.x-k8s.io"))
    )
    # As upstream: the resourceflavors conversion patch exists but is commented out.
    (root / "crd" / "kustomization.yaml").write_text(
        "resources: []\npatches:\n- path: patches/webhook_in_workloads.yaml\n"
        "#- path: patches/webhook_in_resourceflavors.yaml\n"
    )
    configs = [
        {
            "apiVersion": "admissionregistration.k8s.io/v1",
            "kind": "MutatingWebhookConfiguration",
            "metadata": {"name": "mutating-webhook-configuration"},
            "webhooks": [webhook("mjob.kb.io", "batch", "/mutate-batch-v1-job")],
        },
        {
            "apiVersion": "admissionregistration.k8s.io/v1",
            "kind": "ValidatingWebhookConfiguration",
            "metadata": {"name": "validating-webhook-configuration"},
            "webhooks": [
                webhook("vworkload.kb.io", "kueue.x-k8s.io", "/validate-kueue-x-k8s-io-v1beta2-workload"),
                webhook("vpod.kb.io", "", "/validate--v1-pod"),
            ],
        },
    ]
    (root / "webhook" / "manifests.yaml").write_text(yaml.safe_dump_all(configs))


def test_render_rewrites_every_webhook_to_loopback(tmp_path: Path) -> None:
    share, ca = tmp_path / "share", tmp_path / "ca.crt"
    write_share(share)
    ca.write_bytes(b"-----BEGIN CERTIFICATE-----\nfake\n-----END CERTIFICATE-----\n")
    out_crds, out_hooks = tmp_path / "crds.yaml", tmp_path / "hooks.yaml"
    renderer = load_renderer()
    argv = ["render_kueue.py", str(share), "24306", str(ca), str(out_crds), str(out_hooks)]
    assert renderer.main(argv) == 0
    bundle = base64.b64encode(ca.read_bytes()).decode()

    crds = {c["metadata"]["name"]: c for c in yaml.safe_load_all(out_crds.read_text())}
    conversion = crds["workloads.kueue.x-k8s.io"]["spec"]["conversion"]
    assert conversion["strategy"] == "Webhook"
    assert conversion["webhook"]["clientConfig"] == {
        "url": "https://127.0.0.1:24306/convert",
        "caBundle": bundle,
    }
    assert "conversion" not in crds["resourceflavors.kueue.x-k8s.io"]["spec"]

    configs = list(yaml.safe_load_all(out_hooks.read_text()))
    assert [c["metadata"]["name"] for c in configs] == [
        "kueue-mutating-webhook-configuration",
        "kueue-validating-webhook-configuration",
    ]
    hooks = {h["name"]: h for c in configs for h in c["webhooks"]}
    assert set(hooks) == {"mjob.kb.io", "vworkload.kb.io", "vpod.kb.io"}
    assert hooks["vworkload.kb.io"]["clientConfig"] == {
        "url": "https://127.0.0.1:24306/validate-kueue-x-k8s-io-v1beta2-workload",
        "caBundle": bundle,
    }
    assert all("service" not in h["clientConfig"] for h in hooks.values())
    # Job-framework webhooks skip system namespaces; Kueue's own API webhooks apply everywhere.
    excluded = hooks["vpod.kb.io"]["namespaceSelector"]["matchExpressions"][0]
    assert excluded["operator"] == "NotIn" and set(excluded["values"]) == {"kube-system", "kueue-system"}
    assert "namespaceSelector" in hooks["mjob.kb.io"]
    assert "namespaceSelector" not in hooks["vworkload.kb.io"]


def test_render_refuses_wrong_arguments(capsys: pytest.CaptureFixture[str]) -> None:
    assert load_renderer().main(["render_kueue.py"]) == 2
    assert "Usage: render_kueue.py SHARE_DIR" in capsys.readouterr().err
