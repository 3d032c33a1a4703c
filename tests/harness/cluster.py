"""Handle on the local test bed started by deploy/local/cluster.sh (etcd, kube-apiserver, KWOK, Kueue,
Prometheus on loopback). The script writes `$SOVEREIGNSPEC_CACHE/run/env`; this module reads it, so
tests never hard-code ports or paths."""

from __future__ import annotations

import os
import subprocess
import time
from collections.abc import Sequence
from dataclasses import dataclass, field
from functools import cached_property
from pathlib import Path
from typing import Any

import yaml

REPO_ROOT = Path(__file__).resolve().parents[2]
CLUSTER_SH = REPO_ROOT / "deploy" / "local" / "cluster.sh"


class ClusterError(RuntimeError):
    """The local cluster could not be started or reached."""


def cache_dir() -> Path:
    return Path(os.environ.get("SOVEREIGNSPEC_CACHE", Path.home() / ".cache" / "sovereignspec"))


def env_file() -> Path:
    return cache_dir() / "run" / "env"


def read_env(path: Path) -> dict[str, str]:
    """Parse the KEY=VALUE file written by `cluster.sh up` (no quoting, # comments)."""
    values: dict[str, str] = {}
    for raw in path.read_text().splitlines():
        line = raw.strip()
        if not line or line.startswith("#"):
            continue
        key, sep, value = line.partition("=")
        if not sep:
            raise ClusterError(f"{path}: malformed line {raw!r}")
        values[key] = value
    return values


def run_cluster_script(action: str, *, timeout: float = 3600) -> subprocess.CompletedProcess[str]:
    """Run `deploy/local/cluster.sh ACTION`; its progress goes to our stderr."""
    return subprocess.run(
        [str(CLUSTER_SH), action], text=True, stdout=subprocess.PIPE, timeout=timeout, check=False
    )


def cluster_running() -> bool:
    """True when every component of the test bed runs (per `cluster.sh status`)."""
    return run_cluster_script("status", timeout=60).returncode == 0 and env_file().exists()


@dataclass(frozen=True)
class LocalCluster:
    """Paths, URLs and ports of a running local cluster, plus small helpers around them."""

    env: dict[str, str] = field(repr=False)

    @classmethod
    def from_env_file(cls, path: Path | None = None) -> LocalCluster:
        path = path or env_file()
        if not path.exists():
            raise ClusterError(f"{path} does not exist: run `make cluster-up` (deploy/local/cluster.sh up)")
        return cls(env=read_env(path))

    @classmethod
    def ensure_up(cls) -> LocalCluster:
        """Start the cluster (or reuse the running one) and return its handle. Raises on failure."""
        result = run_cluster_script("up")
        if result.returncode != 0:
            raise ClusterError(
                f"deploy/local/cluster.sh up failed with exit code {result.returncode}; "
                f"see the output above and the logs in {cache_dir() / 'logs'}"
            )
        return cls.from_env_file()

    def _get(self, key: str) -> str:
        try:
            return self.env[key]
        except KeyError:
            raise ClusterError(f"{key} missing from {env_file()}; re-run `make cluster-up`") from None

    @property
    def kubeconfig(self) -> Path:
        return Path(self._get("KUBECONFIG"))

    @property
    def api_url(self) -> str:
        return self._get("KUBE_API_URL")

    @property
    def prometheus_url(self) -> str:
        return self._get("PROMETHEUS_URL")

    @property
    def prometheus_targets_dir(self) -> Path:
        return Path(self._get("PROMETHEUS_TARGETS_DIR"))

    @property
    def kubectl_path(self) -> Path:
        return Path(self._get("KUBECTL"))

    @property
    def helm_path(self) -> Path:
        return Path(self._get("HELM"))

    @property
    def nodes_file(self) -> Path:
        return Path(self._get("NODES_FILE"))

    def port(self, name: str) -> int:
        """A published port, e.g. port("KUEUE_WEBHOOK") for KUEUE_WEBHOOK_PORT."""
        return int(self._get(f"{name.upper()}_PORT"))

    @property
    def free_ports(self) -> range:
        """Loopback ports reserved for later components and tests (inclusive block from the env)."""
        return range(int(self._get("FREE_PORT_FIRST")), int(self._get("FREE_PORT_LAST")) + 1)

    def subprocess_env(self) -> dict[str, str]:
        """os.environ plus KUBECONFIG, for child processes (operator, kubectl, helm)."""
        return {**os.environ, "KUBECONFIG": str(self.kubeconfig)}

    def wait_established(self, crds: Path, timeout: float = 60) -> None:
        """Every CRD under `crds` Established. `kubectl wait` exits at once (".status.conditions
        accessor error") on a CRD whose status the API server has not written yet, so it is retried."""
        deadline = time.monotonic() + timeout
        while True:
            wait = ("wait", "--for", "condition=Established", "--timeout", "10s", "-f", str(crds))
            result = self.kubectl(*wait, check=False, timeout=30)
            if result.returncode == 0:
                return
            if time.monotonic() > deadline:
                raise ClusterError(
                    f"CRDs of {crds} not Established after {timeout:g}s: {result.stderr.strip()}"
                )
            time.sleep(1)

    def kubectl(
        self,
        *args: str,
        input: str | None = None,
        check: bool = True,
        timeout: float = 120,
    ) -> subprocess.CompletedProcess[str]:
        """Run the pinned kubectl against this cluster; raises ClusterError with stderr on failure."""
        cmd: Sequence[str] = [str(self.kubectl_path), "--kubeconfig", str(self.kubeconfig), *args]
        result = subprocess.run(
            cmd, input=input, text=True, capture_output=True, timeout=timeout, check=False
        )
        if check and result.returncode != 0:
            raise ClusterError(
                f"kubectl {' '.join(args)} failed ({result.returncode}): {result.stderr.strip()}"
            )
        return result

    @cached_property
    def api_client(self) -> Any:
        """A `kubernetes.client.ApiClient` for this cluster (admin credentials)."""
        from kubernetes import client, config

        configuration = client.Configuration()
        config.load_kube_config(  # type: ignore[no-untyped-call]
            config_file=str(self.kubeconfig), client_configuration=configuration
        )
        return client.ApiClient(configuration)

    def fake_nodes(self) -> list[dict[str, Any]]:
        """The KWOK Node manifests applied by cluster.sh (deploy/local/nodes.yaml)."""
        docs = yaml.safe_load_all(self.nodes_file.read_text())
        return [d for d in docs if d and d.get("kind") == "Node"]
