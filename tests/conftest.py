"""Shared pytest wiring.

Tests marked `cluster`, `e2e` or `chaos` get the local test bed (deploy/local/cluster.sh): the
session fixture `local_cluster` starts it, or reuses one that already runs, the first time such a
test runs. Unit tests never touch it. If the cluster cannot start, those tests fail loudly; they
are never skipped.
"""

from __future__ import annotations

import os
from collections.abc import Iterator

import pytest

from tests.harness.cluster import ClusterError, LocalCluster, cluster_running, run_cluster_script

CLUSTER_MARKERS = ("cluster", "e2e", "chaos")


@pytest.fixture(scope="session")
def local_cluster() -> Iterator[LocalCluster]:
    """The running local cluster, started here if it was not running. It is left running for the
    next session (and for other sessions sharing the cache); with SOVEREIGNSPEC_STOP_CLUSTER=1
    (set by .ci/run) a cluster this session started is stopped at the end."""
    if os.environ.get("SOVEREIGNSPEC_EXTERNAL_CLUSTER") == "1":
        # Someone else's cluster (e.g. kind, see README): use its env file, start and stop nothing.
        try:
            yield LocalCluster.from_env_file()
        except ClusterError as exc:
            pytest.fail(f"external cluster unavailable: {exc}", pytrace=False)
        return
    was_running = cluster_running()
    try:
        cluster = LocalCluster.from_env_file() if was_running else LocalCluster.ensure_up()
    except ClusterError as exc:
        pytest.fail(f"local cluster unavailable: {exc}", pytrace=False)
    yield cluster
    if not was_running and os.environ.get("SOVEREIGNSPEC_STOP_CLUSTER") == "1":
        run_cluster_script("down", timeout=300)


@pytest.fixture(autouse=True)
def _cluster_for_marked_tests(request: pytest.FixtureRequest) -> None:
    """Bring the cluster up lazily, only for tests that carry a cluster-needing marker."""
    if any(request.node.get_closest_marker(m) for m in CLUSTER_MARKERS):
        request.getfixturevalue("local_cluster")
