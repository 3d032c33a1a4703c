"""Unit test (no cluster) of deploy/local/render_lws.py: LWS's kustomize JSON patches are applied
(the pod webhooks keep only LWS-labelled pods), every webhook is rewritten to a loopback URL with our
CA, none is dropped, and the conversion webhook lands on the CRD its kustomization patches."""

from __future__ import annotations

import base64
import importlib.util
import sys
from pathlib import Path
from types import ModuleType
from typing import Any

import pytest
import yaml

SCRIPT = Path(__file__).resolve().parents[2] / "deploy" / "local" / "render_lws.py"
LWS_LABEL = "leaderworkerset.sigs.k8s.io/name"


def load_renderer() -> ModuleType:
    spec = importlib.util.spec_from_file_location("render_lws", SCRIPT)
    assert spec and spec.loader
    module = importlib.util.module_from_spec(spec)
    sys.modules.setdefault("render_lws", module)
    spec.loader.exec_module(module)
    return module


def crd(name: str, group: str) -> dict[str, Any]:
    return {
        "apiVersion": "apiextensions.k8s.io/v1",
        "kind": "CustomResourceDefinition",
        "metadata": {"name": name},
        "spec": {"group": group, "versions": []},
    }


def webhook(name: str, group: str, resource: str, path: str) -> dict[str, Any]:
    return {
        "name": name,
        "failurePolicy": "Fail",
        "clientConfig": {"service": {"name": "webhook-service", "namespace": "system", "path": path}},
        "rules": [{"apiGroups": [group], "resources": [resource], "operations": ["CREATE"]}],
    }


def pod_patch(name: str, path: str) -> list[dict[str, Any]]:
    hook = webhook(name, "", "pods", path)
    hook["objectSelector"] = {"matchExpressions": [{"key": LWS_LABEL, "operator": "Exists"}]}
    return [{"op": "replace", "path": "/webhooks/1", "value": hook}]


def write_share(root: Path) -> None:
    """The shape of sigs.k8s.io/lws@v0.9.0's config/crd and config/webhook."""
    bases, patches, hooks = root / "crd" / "bases", root / "crd" / "patches", root / "webhook"
    bases.mkdir(parents=True)
    patches.mkdir()
    hooks.mkdir()
    lws = "leaderworkersets.leaderworkerset.x-k8s.io"
    dis = "disaggregatedsets.disaggregatedset.x-k8s.io"
    (bases / f"{lws}.yaml").write_text(yaml.safe_dump(crd(lws, "leaderworkerset.x-k8s.io")))
    (bases / f"{dis}.yaml").write_text(yaml.safe_dump(crd(dis, "disaggregatedset.x-k8s.io")))
    (patches / "webhook_in_leaderworkersets.yaml").write_text(
        yaml.safe_dump(crd(lws, "leaderworkerset.x-k8s.io"))
    )
    (root / "crd" / "kustomization.yaml").write_text(
        "resources: []\npatches:\n- path: patches/webhook_in_leaderworkersets.yaml\n"
        "#- path: patches/cainjection_in_leaderworkersets.yaml\n"
    )
    configs = [
        {
            "apiVersion": "admissionregistration.k8s.io/v1",
            "kind": "MutatingWebhookConfiguration",
            "metadata": {"name": "mutating-webhook-configuration"},
            "webhooks": [
                webhook(
                    "mleaderworkerset.kb.io", "leaderworkerset.x-k8s.io", "leaderworkersets", "/mutate-lws"
                ),
                webhook("mpod.kb.io", "", "pods", "/mutate--v1-pod"),
            ],
        },
        {
            "apiVersion": "admissionregistration.k8s.io/v1",
            "kind": "ValidatingWebhookConfiguration",
            "metadata": {"name": "validating-webhook-configuration"},
            "webhooks": [
                webhook(
                    "vleaderworkerset.kb.io", "leaderworkerset.x-k8s.io", "leaderworkersets", "/validate-lws"
                ),
                webhook("vpod.kb.io", "", "pods", "/validate--v1-pod"),
                webhook(
                    "vdisaggregatedset.kb.io", "disaggregatedset.x-k8s.io", "disaggregatedsets", "/v-dis"
                ),
            ],
        },
    ]
    (hooks / "manifests.yaml").write_text(yaml.safe_dump_all(configs))
    (hooks / "mutating-patch.yaml").write_text(yaml.safe_dump(pod_patch("mpod.kb.io", "/mutate--v1-pod")))
    (hooks / "validating-patch.yaml").write_text(yaml.safe_dump(pod_patch("vpod.kb.io", "/validate--v1-pod")))
    target = {"group": "admissionregistration.k8s.io", "version": "v1"}
    (hooks / "kustomization.yaml").write_text(
        yaml.safe_dump(
            {
                "resources": ["manifests.yaml", "service.yaml"],
                "patches": [
                    {
                        "path": "mutating-patch.yaml",
                        "target": {
                            **target,
                            "kind": "MutatingWebhookConfiguration",
                            "name": "mutating-webhook-configuration",
                        },
                    },
                    {
                        "path": "validating-patch.yaml",
                        "target": {
                            **target,
                            "kind": "ValidatingWebhookConfiguration",
                            "name": "validating-webhook-configuration",
                        },
                    },
                ],
            }
        )
    )


def test_render_applies_patches_and_rewrites_every_webhook(tmp_path: Path) -> None:
    share, ca = tmp_path / "share", tmp_path / "ca.crt"
    write_share(share)
    ca.write_bytes(b"-----BEGIN CERTIFICATE-----\nfake\n-----END CERTIFICATE-----\n")
    out_crds, out_hooks = tmp_path / "crds.yaml", tmp_path / "hooks.yaml"
    argv = ["render_lws.py", str(share), "24311", str(ca), str(out_crds), str(out_hooks)]
    assert load_renderer().main(argv) == 0
    bundle = base64.b64encode(ca.read_bytes()).decode()

    crds = {c["metadata"]["name"]: c for c in yaml.safe_load_all(out_crds.read_text())}
    conversion = crds["leaderworkersets.leaderworkerset.x-k8s.io"]["spec"]["conversion"]
    assert conversion["webhook"]["clientConfig"] == {
        "url": "https://127.0.0.1:24311/convert",
        "caBundle": bundle,
    }
    assert "conversion" not in crds["disaggregatedsets.disaggregatedset.x-k8s.io"]["spec"]

    configs = list(yaml.safe_load_all(out_hooks.read_text()))
    assert [c["metadata"]["name"] for c in configs] == [
        "lws-mutating-webhook-configuration",
        "lws-validating-webhook-configuration",
    ]
    hooks = {h["name"]: h for c in configs for h in c["webhooks"]}
    assert set(hooks) == {
        "mleaderworkerset.kb.io",
        "mpod.kb.io",
        "vleaderworkerset.kb.io",
        "vpod.kb.io",
        "vdisaggregatedset.kb.io",
    }
    assert all(set(h["clientConfig"]) == {"url", "caBundle"} for h in hooks.values())
    assert hooks["vpod.kb.io"]["clientConfig"]["url"] == "https://127.0.0.1:24311/validate--v1-pod"
    # The patches narrowed both pod webhooks to LWS pods; the LWS webhooks have no object selector.
    for name in ("mpod.kb.io", "vpod.kb.io"):
        assert hooks[name]["objectSelector"]["matchExpressions"][0]["key"] == LWS_LABEL
    assert "objectSelector" not in hooks["mleaderworkerset.kb.io"]


def test_render_refuses_a_patch_for_an_object_not_shipped(tmp_path: Path) -> None:
    share, ca = tmp_path / "share", tmp_path / "ca.crt"
    write_share(share)
    ca.write_bytes(b"x")
    manifests = share / "webhook" / "manifests.yaml"
    docs = list(yaml.safe_load_all(manifests.read_text()))
    manifests.write_text(yaml.safe_dump_all(docs[:1]))
    argv = ["render_lws.py", str(share), "24311", str(ca), str(tmp_path / "c"), str(tmp_path / "h")]
    with pytest.raises(SystemExit, match="not shipped"):
        load_renderer().main(argv)


def test_json_patch_ops() -> None:
    patch = load_renderer().json_patch
    doc = {"webhooks": [{"name": "a"}, {"name": "b"}]}
    assert patch(doc, [{"op": "replace", "path": "/webhooks/1", "value": {"name": "c"}}]) == {
        "webhooks": [{"name": "a"}, {"name": "c"}]
    }
    assert patch(doc, [{"op": "remove", "path": "/webhooks/0"}]) == {"webhooks": [{"name": "b"}]}
    assert patch(doc, [{"op": "add", "path": "/webhooks/-", "value": {"name": "d"}}])["webhooks"][-1] == {
        "name": "d"
    }
    assert doc == {"webhooks": [{"name": "a"}, {"name": "b"}]}  # the input is not modified
