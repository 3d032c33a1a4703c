"""Typed, dict-shaped reads of cluster objects, so tests compare plain JSON (camelCase keys, as
`kubectl get -o json` shows) instead of the generated client's Optional-laden model classes."""

from __future__ import annotations

from typing import Any

from kubernetes import client


def as_dict(value: object) -> dict[str, Any]:
    """Narrow an API answer to a JSON object; anything else is a harness bug, said clearly."""
    if not isinstance(value, dict):
        raise TypeError(f"expected a JSON object from the API, got {type(value).__name__}")
    return value


def to_json(api: client.ApiClient, model: object) -> dict[str, Any]:
    """A generated model (V1Pod, V1Job, ...) as the JSON the API server sent."""
    return as_dict(api.sanitize_for_serialization(model))  # type: ignore[no-untyped-call]


def get_custom(
    api: client.ApiClient, group: str, version: str, plural: str, name: str, namespace: str | None = None
) -> dict[str, Any]:
    objects = client.CustomObjectsApi(api)
    if namespace is None:
        return as_dict(objects.get_cluster_custom_object(group, version, plural, name))
    return as_dict(objects.get_namespaced_custom_object(group, version, namespace, plural, name))


def list_custom(
    api: client.ApiClient, group: str, version: str, plural: str, namespace: str | None = None
) -> list[dict[str, Any]]:
    objects = client.CustomObjectsApi(api)
    if namespace is None:
        answer = as_dict(objects.list_cluster_custom_object(group, version, plural))
    else:
        answer = as_dict(objects.list_namespaced_custom_object(group, version, namespace, plural))
    return [as_dict(item) for item in answer.get("items", [])]


def list_pods(api: client.ApiClient, namespace: str, label_selector: str = "") -> list[dict[str, Any]]:
    pods = client.CoreV1Api(api).list_namespaced_pod(namespace, label_selector=label_selector)
    return [as_dict(p) for p in to_json(api, pods).get("items", [])]


def get_job(api: client.ApiClient, namespace: str, name: str) -> dict[str, Any]:
    return to_json(api, client.BatchV1Api(api).read_namespaced_job(name, namespace))


def condition_status(obj: dict[str, Any], kind: str) -> str | None:
    """status.conditions[type=kind].status, or None when the condition is absent."""
    for cond in obj.get("status", {}).get("conditions", []) or []:
        if cond.get("type") == kind:
            return str(cond.get("status"))
    return None
