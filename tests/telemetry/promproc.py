"""A real Prometheus process for the telemetry tests: loopback port, temp data dir, fast scrapes."""

from __future__ import annotations

import json
import shutil
import socket
import subprocess
import tempfile
import threading
import time
import urllib.error
import urllib.parse
import urllib.request
from pathlib import Path
from typing import Any

_HANDED_OUT: set[int] = set()
_HANDED_OUT_LOCK = threading.Lock()


def free_port() -> int:
    """A loopback port nothing listens on now and never handed out before in this test process.

    bind(0) alone repeats itself (302 repeats in 3,000 calls here): two children started together once
    got the same port, so the second operator replica's health server failed to bind while its readiness
    probe read the first one's, and tests/chaos/test_leader.py saw two leaders in CI."""
    with _HANDED_OUT_LOCK:
        for _ in range(1000):
            with socket.socket() as s:
                s.bind(("127.0.0.1", 0))
                port = int(s.getsockname()[1])
            if port not in _HANDED_OUT:
                _HANDED_OUT.add(port)
                return port
    raise RuntimeError("no loopback port left that this test process has not handed out already")


def prometheus_binary() -> str:
    exe = shutil.which("prometheus") or (
        "/usr/bin/prometheus" if Path("/usr/bin/prometheus").exists() else None
    )
    if exe is None:
        raise RuntimeError("Debian's prometheus is not installed: apt-get install -y prometheus")
    return exe


class PrometheusProcess:
    """`prometheus` scraping `targets` (host:port) every `scrape_interval` seconds."""

    def __init__(self, targets: list[str], scrape_interval: float = 1.0) -> None:
        self.targets = targets
        self.scrape_interval = scrape_interval
        self.port = free_port()
        self.url = f"http://127.0.0.1:{self.port}"
        self._dir = Path(tempfile.mkdtemp(prefix="sovspec-prom-"))
        self._proc: subprocess.Popen[bytes] | None = None

    def start(self, timeout: float = 30.0) -> PrometheusProcess:
        iv = f"{int(self.scrape_interval * 1000)}ms"
        cfg = self._dir / "prometheus.yml"
        jobs = (
            [
                {
                    "job_name": "sim",
                    "scrape_interval": iv,
                    "scrape_timeout": iv,
                    "static_configs": [{"targets": self.targets}],
                }
            ]
            if self.targets
            else []
        )
        cfg.write_text(
            json.dumps(
                {"global": {"scrape_interval": iv, "evaluation_interval": "15s"}, "scrape_configs": jobs}
            )
        )
        log = open(self._dir / "prometheus.log", "wb")  # noqa: SIM115 - owned by the process
        self._proc = subprocess.Popen(
            [
                prometheus_binary(),
                f"--config.file={cfg}",
                f"--storage.tsdb.path={self._dir / 'data'}",
                f"--web.listen-address=127.0.0.1:{self.port}",
                "--web.enable-lifecycle",
                "--log.level=warn",
            ],
            stdout=log,
            stderr=subprocess.STDOUT,
        )
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if self._proc.poll() is not None:
                raise RuntimeError(f"prometheus exited: {self.log_tail()}")
            try:
                with urllib.request.urlopen(f"{self.url}/-/ready", timeout=1) as r:
                    if r.status == 200:
                        return self
            except (urllib.error.URLError, OSError):
                pass
            time.sleep(0.2)
        self.stop()
        raise RuntimeError(f"prometheus not ready after {timeout}s: {self.log_tail()}")

    def log_tail(self) -> str:
        p = self._dir / "prometheus.log"
        return p.read_text(errors="replace")[-2000:] if p.exists() else ""

    def query(self, promql: str, at: float | None = None) -> list[dict[str, Any]]:
        """An instant query, now or at the Unix time `at`."""
        qs = urllib.parse.urlencode({"query": promql} if at is None else {"query": promql, "time": at})
        with urllib.request.urlopen(f"{self.url}/api/v1/query?{qs}", timeout=5) as r:
            body = json.loads(r.read())
        result: list[dict[str, Any]] = body["data"]["result"]
        return result

    def wait_for(self, promql: str, min_series: int = 1, timeout: float = 30.0) -> list[dict[str, Any]]:
        """Poll until the query returns at least `min_series` series."""
        deadline = time.monotonic() + timeout
        result: list[dict[str, Any]] = []
        while time.monotonic() < deadline:
            result = self.query(promql)
            if len(result) >= min_series:
                return result
            time.sleep(0.25)
        raise AssertionError(f"{promql!r}: {len(result)} series after {timeout}s; log: {self.log_tail()}")

    def stop(self) -> None:
        if self._proc is not None and self._proc.poll() is None:
            self._proc.terminate()
            try:
                self._proc.wait(timeout=10)
            except subprocess.TimeoutExpired:
                self._proc.kill()
                self._proc.wait()
        self._proc = None

    def cleanup(self) -> None:
        self.stop()
        shutil.rmtree(self._dir, ignore_errors=True)
