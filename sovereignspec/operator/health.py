"""Liveness (/healthz) and readiness (/readyz) endpoints on a small aiohttp server."""

from __future__ import annotations

import time
from dataclasses import dataclass, field

from aiohttp import web


@dataclass
class HealthState:
    """Readiness: connected to the API server and either leading with warm indexes, or standing by."""

    ready: bool = False
    leading: bool = False
    last_loop_tick: float = field(default_factory=time.monotonic)
    reasons: list[str] = field(default_factory=list)


async def start_health_server(state: HealthState, host: str, port: int) -> web.AppRunner:
    async def healthz(_: web.Request) -> web.Response:
        state.last_loop_tick = time.monotonic()  # answering at all proves the event loop is alive
        return web.json_response({"status": "ok"})

    async def readyz(_: web.Request) -> web.Response:
        body = {"ready": state.ready, "leading": state.leading, "reasons": state.reasons}
        return web.json_response(body, status=200 if state.ready else 503)

    app = web.Application()
    app.router.add_get("/healthz", healthz)
    app.router.add_get("/readyz", readyz)
    runner = web.AppRunner(app, access_log=None)
    await runner.setup()
    await web.TCPSite(runner, host, port).start()
    return runner
