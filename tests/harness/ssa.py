"""Server-side apply with the Python client: the one write path for Kueue status entries.

Kueue's own admission-check controllers write `Workload.status.admissionChecks[]` by server-side
apply on `/status` with their own field manager and `force=true`. A JSON merge patch would
replace the whole list and clobber other checks, so tests (and the operator) use these helpers.
"""

from __future__ import annotations

import functools
from typing import Any

from kubernetes import client

from .objects import as_dict

APPLY_PATCH = "application/apply-patch+yaml"


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
    status: bool = False,
) -> dict[str, Any]:
    """Server-side apply a whole custom object (create or update), or with `status` its `/status`
    subresource (`body`: a partial object with apiVersion/kind/metadata.name and status); returns the
    object the server stored."""
    objects = client.CustomObjectsApi(api)
    if namespace is None:
        patch = objects.patch_cluster_custom_object_status if status else objects.patch_cluster_custom_object
        args: tuple[str, ...] = (group, version, plural, name)
    else:
        patch = (
            objects.patch_namespaced_custom_object_status
            if status
            else objects.patch_namespaced_custom_object
        )
        args = (group, version, namespace, plural, name)
    result = patch(*args, body, field_manager=field_manager, force=force, _content_type=APPLY_PATCH)
    return as_dict(result)


apply_status = functools.partial(apply_object, status=True)
"""`apply_object` to the `/status` subresource: how Kueue's check controllers write their entry."""
