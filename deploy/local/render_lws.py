"""Render LeaderWorkerSet's CRDs and webhook configurations for an LWS manager running on loopback.

LWS ships `config/crd` and `config/webhook` for an in-cluster Deployment: the webhooks point at a
Service, and kustomize JSON patches (`mutating-patch.yaml`, `validating-patch.yaml`) narrow its pod
webhooks to pods labelled `leaderworkerset.sigs.k8s.io/name`. Here the manager is a local process, so
those patches are applied as kustomize would, and every `clientConfig.service` becomes
`clientConfig.url: https://127.0.0.1:PORT/...` with our CA, exactly as render_kueue.py does for Kueue.
Nothing is dropped: LWS's webhooks fail closed and must be reachable.

Usage: render_lws.py SHARE_DIR WEBHOOK_PORT CA_FILE OUT_CRDS OUT_WEBHOOKS
"""

from __future__ import annotations

import copy
import sys
from pathlib import Path
from typing import Any

import yaml

# render_kueue.py sits next to this script (sys.path[0] when run as a script).
sys.path.insert(0, str(Path(__file__).resolve().parent))
from render_kueue import render_main, to_loopback

# kustomize names the objects after the namePrefix of config/default ("lws-").
NAME_PREFIX = "lws-"


def json_patch(doc: dict[str, Any], ops: list[dict[str, Any]]) -> dict[str, Any]:
    """Apply the RFC 6902 ops LWS's kustomization uses (replace/add/remove on /webhooks/N)."""
    out = copy.deepcopy(doc)
    for op in ops:
        parts = [p for p in op["path"].split("/") if p]
        parent: Any = out
        for key in parts[:-1]:
            parent = parent[int(key)] if isinstance(parent, list) else parent[key]
        last = parts[-1]
        kind = op["op"]
        if isinstance(parent, list):
            index = len(parent) if last == "-" else int(last)
            if kind == "replace":
                parent[index] = op["value"]
            elif kind == "add":
                parent.insert(index, op["value"])
            elif kind == "remove":
                del parent[index]
            else:
                raise SystemExit(f"unsupported JSON patch op {kind!r} at {op['path']}")
        elif kind in ("replace", "add"):
            parent[last] = op["value"]
        elif kind == "remove":
            del parent[last]
        else:
            raise SystemExit(f"unsupported JSON patch op {kind!r} at {op['path']}")
    return out


def kustomize_patches(webhook_dir: Path) -> dict[tuple[str, str], list[dict[str, Any]]]:
    """(kind, name) -> JSON patch ops, from the webhook kustomization's `patches` with a target."""
    kustomization = yaml.safe_load((webhook_dir / "kustomization.yaml").read_text())
    patches: dict[tuple[str, str], list[dict[str, Any]]] = {}
    for patch in kustomization.get("patches", []):
        target = patch.get("target")
        if not target or "path" not in patch:
            raise SystemExit(f"unsupported kustomize patch in {webhook_dir}: {patch}")
        ops = yaml.safe_load((webhook_dir / patch["path"]).read_text())
        patches.setdefault((target["kind"], target["name"]), []).extend(ops)
    return patches


def render_webhooks(webhook_dir: Path, port: int, ca_bundle: str) -> list[dict[str, Any]]:
    docs = [d for d in yaml.safe_load_all((webhook_dir / "manifests.yaml").read_text()) if d]
    patches = kustomize_patches(webhook_dir)
    applied = set()
    out = []
    for doc in docs:
        key = (doc["kind"], doc["metadata"]["name"])
        if key in patches:
            doc = json_patch(doc, patches[key])
            applied.add(key)
        to_loopback(doc, NAME_PREFIX, port, ca_bundle)
        out.append(doc)
    missing = set(patches) - applied
    if missing:
        raise SystemExit(f"kustomize patches target objects that are not shipped: {sorted(missing)}")
    return out


def main(argv: list[str]) -> int:
    return render_main(argv, str(__doc__), "lws", render_webhooks)


if __name__ == "__main__":
    sys.exit(main(sys.argv))
