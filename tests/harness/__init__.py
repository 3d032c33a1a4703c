"""Helpers for tests that run against the local test bed (deploy/local/cluster.sh)."""

from .cluster import ClusterError, LocalCluster, cluster_running, env_file
from .namespaces import create_namespace, delete_namespace, namespace, unique_name
from .objects import as_dict, condition_status, get_custom, get_job, list_custom, list_pods, to_json
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
    "as_dict",
    "cluster_running",
    "condition_status",
    "create_namespace",
    "delete_namespace",
    "env_file",
    "get_custom",
    "get_job",
    "list_custom",
    "list_pods",
    "namespace",
    "reload",
    "remove_scrape_target",
    "to_json",
    "unique_name",
    "wait_until",
]
