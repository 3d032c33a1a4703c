"""Helpers for tests that run against the local test bed (deploy/local/cluster.sh)."""

from .cluster import ClusterError, LocalCluster, cluster_running, env_file
from .namespaces import create_namespace, delete_namespace, namespace, unique_name
from .prometheus import add_scrape_target, reload, remove_scrape_target
from .ssa import APPLY_PATCH, apply_object, apply_status
from .wait import WaitTimeout, wait_until

__all__ = [
    "APPLY_PATCH",
    "ClusterError",
    "LocalCluster",
    "WaitTimeout",
    "add_scrape_target",
    "apply_object",
    "apply_status",
    "cluster_running",
    "create_namespace",
    "delete_namespace",
    "env_file",
    "namespace",
    "reload",
    "remove_scrape_target",
    "unique_name",
    "wait_until",
]
