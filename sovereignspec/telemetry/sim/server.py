"""Serve the simulator on loopback and tick it in the background."""

from __future__ import annotations

import logging
import threading
from wsgiref.simple_server import WSGIServer

from prometheus_client import CollectorRegistry, start_http_server

from sovereignspec.telemetry.sim.exposition import SimCollector
from sovereignspec.telemetry.sim.simulator import Simulator

log = logging.getLogger(__name__)


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
        self._server, _ = start_http_server(self._port, addr=self._host, registry=self.registry)
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
