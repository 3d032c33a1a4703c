"""Server-side apply with the Python client: the one write path for Kueue status entries.

Kueue's own admission-check controllers write `Workload.status.admissionChecks[]` by server-side
apply on `/status` with their own field manager and `force=true`. A JSON merge patch would
replace the whole list and clobber other checks, so tests (and the operator) use these helpers.
"""

from __future__ import annotations

from typing import Any

from kubernetes import client

from .objects import as_dict

APPLY_PATCH = "application/apply-patch+yaml"


def apply_status(
    api: client.ApiClient,
    *,
    group: str,
    version: str,
    plural: str,
    name: str,
    body: dict[str, Any],
    field_manager: str,
    namespace: str | None = None,
    force: bool = True,
) -> dict[str, Any]:
    """Server-side apply `body` (a partial object with apiVersion/kind/metadata.name and status)
    to the `/status` subresource of a custom object; returns the object the server stored."""
    objects = client.CustomObjectsApi(api)
    if namespace is None:
        result = objects.patch_cluster_custom_object_status(
            group,
            version,
            plural,
            name,
            body,
            field_manager=field_manager,
            force=force,
            _content_type=APPLY_PATCH,
        )
    else:
        result = objects.patch_namespaced_custom_object_status(
            group,
            version,
            namespace,
            plural,
            name,
            body,
            field_manager=field_manager,
            force=force,
            _content_type=APPLY_PATCH,
        )
    return as_dict(result)


def apply_object(
    api: client.ApiClient,
    *,
    group: str,
    version: str,
    plural: str,
    name: str,
    body: dict[str, Any],
    field_manager: str,
    namespace: str | None = None,
    force: bool = True,
) -> dict[str, Any]:
    """Server-side apply a whole custom object (create or update); returns the stored object."""
    objects = client.CustomObjectsApi(api)
    if namespace is None:
        result = objects.patch_cluster_custom_object(
            group,
            version,
            plural,
            name,
            body,
            field_manager=field_manager,
            force=force,
            _content_type=APPLY_PATCH,
        )
    else:
        result = objects.patch_namespaced_custom_object(
            group,
            version,
            namespace,
            plural,
            name,
            body,
            field_manager=field_manager,
            force=force,
            _content_type=APPLY_PATCH,
        )
    return as_dict(result)
