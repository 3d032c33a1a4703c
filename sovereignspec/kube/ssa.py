"""Every write the operator makes goes through here: server-side apply with our field manager.

Kueue's `Workload.status.admissionChecks` is a map list keyed by `name` shared by several check
controllers; a merge patch would replace the whole list, so we only ever apply our own entry.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from typing import Any, cast
from urllib.parse import quote

from kubernetes import client

APPLY = "application/apply-patch+yaml"

KUEUE_GROUP = "kueue.x-k8s.io"
KUEUE_VERSION = "v1beta2"
SS_GROUP = "sovereignspec.io"
SS_VERSION = "v1alpha1"


def apply_body(body: Mapping[str, Any]) -> bytes:
    """The apply request body: JSON (valid YAML), UTF-8 encoded as is.

    Not the client's own `json.dumps(body)`: its ASCII escapes write a character beyond the BMP (an
    emoji in a model name) as a UTF-16 surrogate pair, `\\ud83d\\ude00`; valid JSON, but this body is read
    as YAML, and YAML's `\\u` escapes name code points, so the API server refused every such apply with
    400 Bad Request ("found invalid Unicode character escape code"). Raw UTF-8 has no escapes to
    misread; bytes go out untouched (a `str` body would be encoded as Latin-1 by http.client)."""
    text = json.dumps(body, ensure_ascii=False, separators=(",", ":"))
    return text.encode("utf-8", errors="replace")  # a lone surrogate (never from the API) becomes "?"


def server_side_apply(
    api: client.ApiClient, path: str, body: Mapping[str, Any], field_manager: str
) -> dict[str, Any]:
    """One forced server-side apply (PATCH `path`, application/apply-patch+yaml) with `apply_body`.

    Sent through the client's own request path (its host, auth, TLS, retries), not through the
    generated `patch_*` methods: those validate `body` as a dict and serialise it with ASCII escapes."""
    query = [("fieldManager", field_manager), ("force", "true")]
    method, url, headers, _, _ = api.param_serialize(
        method="PATCH",
        resource_path=path,
        query_params=query,
        header_params={"Content-Type": APPLY, "Accept": "application/json"},
        auth_settings=["BearerToken"],
    )
    response = api.call_api(method, url, header_params=headers, body=apply_body(body))
    response.read()  # type: ignore[no-untyped-call]
    data = api.response_deserialize(response, {"200": "object", "201": "object"}).data
    return cast(dict[str, Any], data)


def custom_object_path(api_version: str, plural: str, name: str, namespace: str | None = None) -> str:
    group, version = api_version.split("/")
    where = f"/namespaces/{quote(namespace, safe='')}" if namespace else ""
    return f"/apis/{group}/{version}{where}/{plural}/{quote(name, safe='')}"


def _apply_status(
    api: client.ApiClient, plural: str, body: Mapping[str, Any], field_manager: str
) -> dict[str, Any]:
    """Forced server-side apply of `body` on the `/status` of a custom object: namespaced when the
    body's metadata names a namespace; group and version come from its apiVersion."""
    meta = body["metadata"]
    path = custom_object_path(str(body["apiVersion"]), plural, meta["name"], meta.get("namespace"))
    return server_side_apply(api, f"{path}/status", body, field_manager)


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
    api_version = f"{SS_GROUP}/{SS_VERSION}"
    path = custom_object_path(api_version, "speculationdecisions", meta["name"], meta["namespace"])
    return server_side_apply(api, path, obj, field_manager)


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
