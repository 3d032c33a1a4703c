"""The operator and the telemetry simulator as real child processes, with start/stop/kill/restart."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import tempfile
import time
import urllib.error
import urllib.request
from pathlib import Path
from typing import Any

from tests.harness.cluster import LocalCluster
from tests.telemetry.promproc import free_port


class Child:
    """A `python -m sovereignspec ...` child with its log in a temp file."""

    def __init__(self, name: str, args: list[str], env: dict[str, str]) -> None:
        self.name = name
        self.args = args
        self.env = env
        self.dir = Path(tempfile.mkdtemp(prefix=f"sovspec-{name}-"))
        self.log_path = self.dir / f"{name}.log"
        self.proc: subprocess.Popen[bytes] | None = None
        self.starts = 0
        self.profile_path: Path | None = None
        """Run the child under cProfile, its statistics written here when it exits (benchmarks)."""

    def start(self) -> None:
        self.starts += 1
        log = open(self.log_path, "ab")  # noqa: SIM115 - owned by the child
        profiled = ["-m", "cProfile", "-o", str(self.profile_path)] if self.profile_path else []
        self.proc = subprocess.Popen(
            [sys.executable, *profiled, "-m", "sovereignspec", *self.args],
            env=self.env,
            stdout=log,
            stderr=subprocess.STDOUT,
            start_new_session=True,
        )

    @property
    def running(self) -> bool:
        return self.proc is not None and self.proc.poll() is None

    def stop(self, timeout: float = 15) -> None:
        if self.proc is None:
            return
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
            try:
                self.proc.wait(timeout=timeout)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()
        self.proc = None

    def kill(self) -> None:
        """kill -9: no shutdown path runs."""
        if self.proc is not None and self.proc.poll() is None:
            os.kill(self.proc.pid, signal.SIGKILL)
            self.proc.wait()
        self.proc = None

    def log_tail(self, chars: int = 4000) -> str:
        return self.log_path.read_text(errors="replace")[-chars:] if self.log_path.exists() else ""


def log_records(op: Child, msg: str | None = None) -> list[dict[str, Any]]:
    """The operator's JSON log lines (all restarts append to one file), optionally one message."""
    out = []
    for line in op.log_path.read_text(errors="replace").splitlines():
        if not line.startswith("{"):
            continue
        try:
            rec = json.loads(line)
        except ValueError:
            continue
        if msg is None or rec.get("msg") == msg:
            out.append(rec)
    return out


def _get(url: str, timeout: float = 1.0) -> tuple[int, str]:
    try:
        with urllib.request.urlopen(url, timeout=timeout) as r:
            return r.status, r.read().decode()
    except urllib.error.HTTPError as exc:
        return exc.code, exc.read().decode(errors="replace")
    except (urllib.error.URLError, OSError):
        return 0, ""


class OperatorProcess(Child):
    def __init__(
        self,
        cluster: LocalCluster,
        prometheus_url: str | None,
        *,
        leader_election: bool = False,
        identity: str | None = None,
        lease_namespace: str = "default",
        extra_env: dict[str, str] | None = None,
    ) -> None:
        self.metrics_port = free_port()
        self.health_port = free_port()
        args = [
            "run",
            "--kubeconfig",
            str(cluster.kubeconfig),
            "--metrics-port",
            str(self.metrics_port),
            "--health-port",
            str(self.health_port),
            "--bind-address",
            "127.0.0.1",
            "--log-format",
            "json",
        ]
        if prometheus_url:
            args += ["--prometheus-url", prometheus_url]
        if leader_election:
            args += ["--lease-namespace", lease_namespace]
            if identity:
                args += ["--identity", identity]
        else:
            args.append("--no-leader-election")
        env = {
            **cluster.subprocess_env(),
            "SOVEREIGNSPEC_TELEMETRY_REFRESH_SECONDS": "1",
            "SOVEREIGNSPEC_RESYNC_SECONDS": "2",
            "SOVEREIGNSPEC_DRIFT_INTERVAL_SECONDS": "2",
            "SOVEREIGNSPEC_LEASE_DURATION_SECONDS": "6",
            "SOVEREIGNSPEC_LEASE_RENEW_DEADLINE_SECONDS": "4",
            "SOVEREIGNSPEC_LEASE_RETRY_PERIOD_SECONDS": "1",
            **(extra_env or {}),
        }
        super().__init__(identity or "operator", args, env)

    def readyz(self) -> dict[str, object] | None:
        code, body = _get(f"http://127.0.0.1:{self.health_port}/readyz")
        if code == 0:
            return None
        data = json.loads(body) if body.startswith("{") else {}
        data["code"] = code
        return data

    def wait_ready(self, timeout: float = 60, leading: bool = True) -> None:
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if not self.running:
                raise RuntimeError(f"operator exited: {self.log_tail()}")
            r = self.readyz()
            if r is not None and r.get("code") == 200 and (r.get("leading") or not leading):
                return
            time.sleep(0.2)
        raise RuntimeError(f"operator not ready after {timeout}s: {self.log_tail()}")

    def metrics(self, deadline: float = 15.0) -> str:
        """The operator's /metrics text. A busy operator can take over a second to answer: retried
        until `deadline`, then an error (an empty text read as zero counters made the scale bench print
        negative queries per refresh, and would let a test wait for a counter against a zero base)."""
        end = time.monotonic() + deadline
        while True:
            status, text = _get(f"http://127.0.0.1:{self.metrics_port}/metrics", timeout=5.0)
            if status == 200:
                return text
            if time.monotonic() > end:
                raise RuntimeError(f"operator /metrics did not answer (status {status})")
            time.sleep(0.2)


class SimulatorProcess(Child):
    """`sovereignspec telemetry-sim --kubeconfig`: dcgm/vLLM metrics for the cluster's GPU pods."""

    def __init__(self, cluster: LocalCluster) -> None:
        self.port = free_port()
        args = [
            "telemetry-sim",
            "--kubeconfig",
            str(cluster.kubeconfig),
            "--port",
            str(self.port),
            "--tick",
            "1",
        ]
        super().__init__("telemetry-sim", args, cluster.subprocess_env())

    def wait_ready(self, timeout: float = 30) -> None:
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if not self.running:
                raise RuntimeError(f"simulator exited: {self.log_tail()}")
            code, _ = _get(f"http://127.0.0.1:{self.port}/metrics")
            if code == 200:
                return
            time.sleep(0.2)
        raise RuntimeError(f"simulator not serving after {timeout}s: {self.log_tail()}")
