"""A loopback TCP proxy that holds every connection `delay` seconds before forwarding it."""

from __future__ import annotations

import socket
import socketserver
import threading
import time


class SlowProxy:
    def __init__(self, upstream_port: int, delay: float) -> None:
        self.delay = delay
        self._stop = threading.Event()
        upstream = ("127.0.0.1", upstream_port)
        stop = self._stop

        class Handler(socketserver.BaseRequestHandler):
            def handle(self) -> None:
                if stop.wait(delay):
                    return
                try:
                    with socket.create_connection(upstream, timeout=5) as up:
                        _pump(self.request, up, stop)
                except OSError:
                    pass

        class Server(socketserver.ThreadingTCPServer):
            daemon_threads = True
            allow_reuse_address = True

        self._server = Server(("127.0.0.1", 0), Handler)
        self.port = int(self._server.server_address[1])
        self.url = f"http://127.0.0.1:{self.port}"
        self._thread = threading.Thread(target=self._server.serve_forever, daemon=True)

    def start(self) -> SlowProxy:
        self._thread.start()
        return self

    def stop(self) -> None:
        self._stop.set()
        self._server.shutdown()
        self._server.server_close()


def _pump(a: socket.socket, b: socket.socket, stop: threading.Event) -> None:
    a.settimeout(0.2)
    b.settimeout(0.2)
    deadline = time.monotonic() + 30
    while not stop.is_set() and time.monotonic() < deadline:
        moved = False
        for src, dst in ((a, b), (b, a)):
            try:
                data = src.recv(65536)
            except TimeoutError:
                continue
            except OSError:
                return
            if not data:
                return
            dst.sendall(data)
            moved = True
        if not moved:
            continue
