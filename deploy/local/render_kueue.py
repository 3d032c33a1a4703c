"""Render Kueue's CRDs and webhook configurations for a Kueue manager running on loopback.

Kueue ships its manifests for an in-cluster Deployment: webhooks point at a Service and kustomize
patches add the CRD conversion webhook and namespace selectors. Here the manager is a local
process, so every `clientConfig.service` becomes `clientConfig.url: https://127.0.0.1:PORT/...`
with our CA as `caBundle`. Nothing is dropped: the fail-closed webhooks (e.g. workloads/status)
must be reachable, not missing.

Usage: render_kueue.py SHARE_DIR WEBHOOK_PORT CA_FILE OUT_CRDS OUT_WEBHOOKS
"""

from __future__ import annotations

import base64
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

import yaml

# Same as Kueue's config/components/webhook/kustomization.yaml: job-framework webhooks skip these.
SYSTEM_NAMESPACES = ["kube-system", "kueue-system"]
KUEUE_GROUP = "kueue.x-k8s.io"


def loopback_client_config(port: int, path: str, ca_bundle: str) -> dict[str, Any]:
    return {"url": f"https://127.0.0.1:{port}{path}", "caBundle": ca_bundle}


def conversion_crds(crd_dir: Path) -> set[str]:
    """CRD names that Kueue's kustomization enables the conversion webhook for."""
    kustomization = yaml.safe_load((crd_dir / "kustomization.yaml").read_text())
    names: set[str] = set()
    for patch in kustomization.get("patches", []):
        path = patch.get("path", "")
        if path.startswith("patches/webhook_in_"):
            doc = yaml.safe_load((crd_dir / path).read_text())
            names.add(doc["metadata"]["name"])
    return names


def render_crds(crd_dir: Path, port: int, ca_bundle: str) -> list[dict[str, Any]]:
    with_conversion = conversion_crds(crd_dir)
    crds = []
    for path in sorted((crd_dir / "bases").glob("*.yaml")):
        crd = yaml.safe_load(path.read_text())
        if crd["metadata"]["name"] in with_conversion:
            crd["spec"]["conversion"] = {
                "strategy": "Webhook",
                "webhook": {
                    "clientConfig": loopback_client_config(port, "/convert", ca_bundle),
                    "conversionReviewVersions": ["v1"],
                },
            }
        crds.append(crd)
    missing = with_conversion - {c["metadata"]["name"] for c in crds}
    if missing:
        raise SystemExit(f"conversion patches name CRDs that are not shipped: {sorted(missing)}")
    return crds


def to_loopback(doc: dict[str, Any], name_prefix: str, port: int, ca_bundle: str) -> None:
    """Name a webhook configuration as kustomize's namePrefix does, and point each of its webhooks at
    the manager on loopback instead of its in-cluster Service (render_lws.py uses it too)."""
    doc["metadata"]["name"] = name_prefix + doc["metadata"]["name"]
    for webhook in doc["webhooks"]:
        service = webhook["clientConfig"].pop("service")
        webhook["clientConfig"] = loopback_client_config(port, service["path"], ca_bundle)


def targets_kueue_api(webhook: dict[str, Any]) -> bool:
    return any(KUEUE_GROUP in rule.get("apiGroups", []) for rule in webhook.get("rules", []))


def render_webhooks(manifest: Path, port: int, ca_bundle: str) -> list[dict[str, Any]]:
    docs = [d for d in yaml.safe_load_all(manifest.read_text()) if d]
    for doc in docs:
        to_loopback(doc, "kueue-", port, ca_bundle)
        for webhook in doc["webhooks"]:
            if not targets_kueue_api(webhook):
                webhook["namespaceSelector"] = {
                    "matchExpressions": [
                        {
                            "key": "kubernetes.io/metadata.name",
                            "operator": "NotIn",
                            "values": SYSTEM_NAMESPACES,
                        }
                    ]
                }
    return docs


RenderWebhooks = Callable[[Path, int, str], list[dict[str, Any]]]
"""(the share's webhook folder, port, CA bundle) -> the webhook configurations."""


def render_main(argv: list[str], usage: str, label: str, render_webhooks_in: RenderWebhooks) -> int:
    """The command line both renderers share: SHARE_DIR WEBHOOK_PORT CA_FILE OUT_CRDS OUT_WEBHOOKS."""
    if len(argv) != 6:
        print(usage, file=sys.stderr)
        return 2
    share, port, ca_file = Path(argv[1]), int(argv[2]), Path(argv[3])
    out_crds, out_webhooks = Path(argv[4]), Path(argv[5])
    ca_bundle = base64.b64encode(ca_file.read_bytes()).decode()
    crds = render_crds(share / "crd", port, ca_bundle)
    webhooks = render_webhooks_in(share / "webhook", port, ca_bundle)
    out_crds.write_text(yaml.safe_dump_all(crds, sort_keys=False))
    out_webhooks.write_text(yaml.safe_dump_all(webhooks, sort_keys=False))
    hooks = sum(len(d["webhooks"]) for d in webhooks)
    print(f"{label}: {len(crds)} CRDs, {hooks} webhooks -> https://127.0.0.1:{port}", file=sys.stderr)
    return 0


def main(argv: list[str]) -> int:
    return render_main(
        argv, str(__doc__), "kueue", lambda d, port, ca: render_webhooks(d / "manifests.yaml", port, ca)
    )


if __name__ == "__main__":
    sys.exit(main(sys.argv))
