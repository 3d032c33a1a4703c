"""Workloads of Kueue's plain-Pod integration carry no template metadata: the Pod holds the claims.

Kueue builds such a Workload's single podSet from the Pod's spec only (no labels, no annotations),
while the serving annotations (`sovereignspec.io/class`, `draft-model`, ...) and any keys our
podSetUpdates must not contradict live on the Pod itself. We read them from the owning Pod.
"""

from __future__ import annotations

import copy
from collections.abc import Mapping
from typing import Any


def owner_pod(body: Mapping[str, Any]) -> tuple[str, str] | None:
    """(namespace, name) of the Pod that owns a pod-integration Workload, else None."""
    meta = body.get("metadata") or {}
    for ref in meta.get("ownerReferences") or []:
        if isinstance(ref, Mapping) and ref.get("kind") == "Pod" and ref.get("apiVersion") == "v1":
            return str(meta.get("namespace") or "default"), str(ref.get("name"))
    return None


def with_pod_metadata(
    body: Mapping[str, Any], labels: Mapping[str, str], annotations: Mapping[str, str]
) -> dict[str, Any]:
    """A copy of the Workload whose podSets' template metadata holds the Pod's labels and annotations
    (template values, where Kueue ever sets them, win)."""
    out = copy.deepcopy(dict(body))
    for ps in (out.get("spec") or {}).get("podSets") or []:
        tmpl = ps.setdefault("template", {})
        meta = tmpl.setdefault("metadata", {}) or {}
        tmpl["metadata"] = meta
        meta["labels"] = {**labels, **(meta.get("labels") or {})}
        meta["annotations"] = {**annotations, **(meta.get("annotations") or {})}
    return out
