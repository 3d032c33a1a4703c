"""One namespace per test: created with a unique name, ready for pods, deleted afterwards."""

from __future__ import annotations

import re
import uuid
from collections.abc import Iterator
from contextlib import contextmanager

from .cluster import LocalCluster
from .wait import wait_until


def unique_name(prefix: str) -> str:
    """A DNS-1123 label: the sanitised prefix plus a random suffix."""
    base = re.sub(r"[^a-z0-9-]+", "-", prefix.lower()).strip("-")[:40] or "t"
    return f"{base}-{uuid.uuid4().hex[:6]}"


def create_namespace(
    cluster: LocalCluster, prefix: str, labels: dict[str, str] | None = None, timeout: float = 60
) -> str:
    """Create a namespace and wait for its `default` ServiceAccount (pods are refused before it)."""
    from kubernetes import client

    name = unique_name(prefix)
    core = client.CoreV1Api(cluster.api_client)
    core.create_namespace(
        client.V1Namespace(
            metadata=client.V1ObjectMeta(
                name=name, labels={"sovereignspec.io/test": "true", **(labels or {})}
            )
        )
    )

    def has_default_sa() -> bool:
        accounts = core.list_namespaced_service_account(name, field_selector="metadata.name=default")
        return bool(accounts.items)

    wait_until(has_default_sa, timeout=timeout, what=f"ServiceAccount default in namespace {name}")
    return name


def delete_namespace(cluster: LocalCluster, name: str) -> None:
    """Delete without waiting: the namespace controller finalises it in the background."""
    from kubernetes import client
    from kubernetes.client.exceptions import ApiException

    try:
        client.CoreV1Api(cluster.api_client).delete_namespace(name)
    except ApiException as exc:
        if exc.status != 404:
            raise


@contextmanager
def namespace(cluster: LocalCluster, prefix: str, labels: dict[str, str] | None = None) -> Iterator[str]:
    """`with namespace(cluster, "smoke") as ns:` — a fresh namespace for the block."""
    name = create_namespace(cluster, prefix, labels)
    try:
        yield name
    finally:
        delete_namespace(cluster, name)
