"""HTTP endpoints of the operator process: ``/healthz``, ``/readyz`` and ``/metrics``.

``/healthz`` answers as long as the event loop runs (a wedged loop fails the liveness probe);
``/readyz`` answers 200 only once every registered readiness check passes (caches synced).
Probes and metrics may share one address or use two, as upstream's flags allow.
"""

from __future__ import annotations

from collections.abc import Callable

from aiohttp import web
from prometheus_client import CONTENT_TYPE_LATEST, CollectorRegistry, generate_latest


def _split(addr: str) -> tuple[str, int]:
    host, _, port = addr.rpartition(":")
    return (host or "0.0.0.0"), int(port)


class Endpoints:
    def __init__(self, registry: CollectorRegistry) -> None:
        self.registry = registry
        self.ready_checks: dict[str, Callable[[], bool]] = {}
        self._runners: list[web.AppRunner] = []
        self.bound: list[tuple[str, int]] = []

    async def _healthz(self, request: web.Request) -> web.Response:
        del request
        return web.Response(text="ok")

    async def _readyz(self, request: web.Request) -> web.Response:
        del request
        failing = [name for name, check in self.ready_checks.items() if not check()]
        if failing:
            return web.Response(status=503, text="not ready: " + ", ".join(failing))
        return web.Response(text="ok")

    async def _metrics(self, request: web.Request) -> web.Response:
        del request
        body = generate_latest(self.registry)
        return web.Response(body=body, headers={"Content-Type": CONTENT_TYPE_LATEST})

    async def start(self, probe_addr: str | None, metrics_addr: str | None) -> None:
        """Serves probes on ``probe_addr`` and metrics on ``metrics_addr`` (None or "0" = off)."""
        routes: dict[str, list[web.RouteDef]] = {}
        if probe_addr and probe_addr != "0":
            routes.setdefault(probe_addr, []).extend(
                [web.get("/healthz", self._healthz), web.get("/readyz", self._readyz)]
            )
        if metrics_addr and metrics_addr != "0":
            routes.setdefault(metrics_addr, []).append(web.get("/metrics", self._metrics))
        for addr, defs in routes.items():
            app = web.Application()
            app.add_routes(defs)
            runner = web.AppRunner(app, access_log=None)
            await runner.setup()
            host, port = _split(addr)
            site = web.TCPSite(runner, host, port)
            await site.start()
            server = site._server
            sockets = getattr(server, "sockets", None) or []
            for sock in sockets:
                self.bound.append(sock.getsockname()[:2])
            self._runners.append(runner)

    async def stop(self) -> None:
        for runner in self._runners:
            await runner.cleanup()
        self._runners = []
