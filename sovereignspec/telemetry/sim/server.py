"""Serve the simulator on loopback and tick it in the background."""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable, Iterable
from socketserver import ThreadingMixIn
from typing import Any
from wsgiref.simple_server import WSGIRequestHandler, WSGIServer, make_server

from prometheus_client import CollectorRegistry, generate_latest

from sovereignspec.telemetry.sim.exposition import SimCollector
from sovereignspec.telemetry.sim.simulator import Simulator

log = logging.getLogger(__name__)
TEXT_FORMAT = "text/plain; version=0.0.4; charset=utf-8"


class _Server(ThreadingMixIn, WSGIServer):
    daemon_threads = True


class _QuietHandler(WSGIRequestHandler):
    def log_message(self, format: str, *args: Any) -> None:
        pass


def metrics_app(registry: CollectorRegistry) -> Callable[..., Iterable[bytes]]:
    """Always the classic text format (0.0.4): prometheus_client's OpenMetrics negotiation escapes
    `vllm:` names to `vllm_`, and vLLM's real names are what the reader must see."""

    def app(environ: dict[str, Any], start_response: Callable[..., Any]) -> Iterable[bytes]:
        if environ.get("PATH_INFO", "/") not in ("/", "/metrics"):
            start_response("404 Not Found", [("Content-Type", "text/plain")])
            return [b"not found\n"]
        body = generate_latest(registry)
        start_response("200 OK", [("Content-Type", TEXT_FORMAT), ("Content-Length", str(len(body)))])
        return [body]

    return app


class SimServer:
    """/metrics on `host:port` from the simulator's own registry; a ticker advances it every tick.

    Ticks advance simulated time by the scenario's tick, so a slow machine slows the simulation
    rather than making it jumpy; the sequence of states is the same for the same seed.
    """

    def __init__(self, sim: Simulator, host: str = "127.0.0.1", port: int = 0) -> None:
        self.sim = sim
        self.registry = CollectorRegistry(auto_describe=False)
        self.registry.register(SimCollector(sim))
        self._host, self._port = host, port
        self._server: WSGIServer | None = None
        self._stop = threading.Event()
        self._ticker: threading.Thread | None = None

    @property
    def port(self) -> int:
        if self._server is None:
            raise RuntimeError("not started")
        return int(self._server.server_port)

    @property
    def url(self) -> str:
        return f"http://{self._host}:{self.port}/metrics"

    def start(self, *, tick: bool = True) -> SimServer:
        self._server = make_server(
            self._host,
            self._port,
            metrics_app(self.registry),
            server_class=_Server,
            handler_class=_QuietHandler,
        )
        threading.Thread(target=self._server.serve_forever, name="sim-http", daemon=True).start()
        if tick:
            self._stop.clear()
            self._ticker = threading.Thread(target=self._run, name="sim-ticker", daemon=True)
            self._ticker.start()
        log.info("telemetry simulator serving %s", self.url)
        return self

    def _run(self) -> None:
        interval = self.sim.scenario.tick_seconds
        while not self._stop.wait(interval):
            try:
                self.sim.tick()
            except Exception:  # keep serving the last state; the log says why
                log.exception("simulator tick failed")

    def stop(self) -> None:
        self._stop.set()
        if self._ticker is not None:
            self._ticker.join(timeout=5)
            self._ticker = None
        if self._server is not None:
            self._server.shutdown()
            self._server.server_close()
            self._server = None
