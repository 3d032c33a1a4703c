"""Every write the operator makes goes through here: server-side apply with our field manager.

Kueue's `Workload.status.admissionChecks` is a map list keyed by `name` shared by several check
controllers; a merge patch would replace the whole list, so we only ever apply our own entry.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, cast

from kubernetes import client

APPLY = "application/apply-patch+yaml"
KUEUE_GROUP = "kueue.x-k8s.io"
KUEUE_VERSION = "v1beta2"
SS_GROUP = "sovereignspec.io"
SS_VERSION = "v1alpha1"


def _apply_status(
    api: client.ApiClient, plural: str, body: Mapping[str, Any], field_manager: str
) -> dict[str, Any]:
    """Forced server-side apply of `body` on the `/status` of a custom object: namespaced when the
    body's metadata names a namespace; group and version come from its apiVersion."""
    group, version = str(body["apiVersion"]).split("/")
    meta, payload = body["metadata"], dict(body)
    co = client.CustomObjectsApi(api)
    opts: dict[str, Any] = {"field_manager": field_manager, "force": True, "_content_type": APPLY}
    if meta.get("namespace"):
        result = co.patch_namespaced_custom_object_status(
            group, version, meta["namespace"], plural, meta["name"], payload, **opts
        )
    else:
        result = co.patch_cluster_custom_object_status(group, version, plural, meta["name"], payload, **opts)
    return cast(dict[str, Any], result)


def apply_workload_check(
    api: client.ApiClient,
    *,
    namespace: str,
    name: str,
    entry: Mapping[str, Any],
    field_manager: str,
    resource_version: str | None = None,
) -> dict[str, Any]:
    """Apply exactly one `status.admissionChecks` entry of a Workload (ours); others stay untouched.

    With `resource_version` the apply is conditional: the API server answers 409 Conflict when the
    Workload changed since the version the answer was computed from (e.g. Kueue evicted it meanwhile),
    so a stale answer never lands on a newer state.
    """
    metadata: dict[str, Any] = {"name": name, "namespace": namespace}
    if resource_version:
        metadata["resourceVersion"] = resource_version
    body = {
        "apiVersion": f"{KUEUE_GROUP}/{KUEUE_VERSION}",
        "kind": "Workload",
        "metadata": metadata,
        "status": {"admissionChecks": [dict(entry)]},
    }
    return _apply_status(api, "workloads", body, field_manager)


def apply_admission_check_condition(
    api: client.ApiClient, *, name: str, condition: Mapping[str, Any], field_manager: str
) -> dict[str, Any]:
    """Apply our condition (type `Active`) on an AdmissionCheck's status; other conditions stay."""
    body = {
        "apiVersion": f"{KUEUE_GROUP}/{KUEUE_VERSION}",
        "kind": "AdmissionCheck",
        "metadata": {"name": name},
        "status": {"conditions": [dict(condition)]},
    }
    return _apply_status(api, "admissionchecks", body, field_manager)


def apply_decision(api: client.ApiClient, *, obj: Mapping[str, Any], field_manager: str) -> dict[str, Any]:
    """Create or update a SpeculationDecision, metadata, spec and status, in one forced server-side
    apply (no status subresource: status is applied with the rest of the object)."""
    meta = obj["metadata"]
    result = client.CustomObjectsApi(api).patch_namespaced_custom_object(
        SS_GROUP,
        SS_VERSION,
        meta["namespace"],
        "speculationdecisions",
        meta["name"],
        dict(obj),
        field_manager=field_manager,
        force=True,
        _content_type=APPLY,
    )
    return cast(dict[str, Any], result)


def apply_decision_conditions(
    api: client.ApiClient,
    *,
    namespace: str,
    name: str,
    conditions: list[Mapping[str, Any]],
    field_manager: str,
) -> dict[str, Any]:
    """Apply only `status.conditions` entries of a SpeculationDecision, under a manager of their own
    (the decision writer's manager owns the rest of the status and must not lose it)."""
    body = {
        "apiVersion": f"{SS_GROUP}/{SS_VERSION}",
        "kind": "SpeculationDecision",
        "metadata": {"name": name, "namespace": namespace},
        "status": {"conditions": [dict(c) for c in conditions]},
    }
    return apply_decision(api, obj=body, field_manager=field_manager)
