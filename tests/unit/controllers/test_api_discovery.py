"""OpenShift and cert-manager detection at start-up, through the real client over HTTP: a
discovery answer decides, and a failing discovery means "neither" with a warning, as upstream's
discovery does, never a crash of the operator's start."""

from __future__ import annotations

from collections.abc import AsyncIterator

import pytest
from aiohttp import web

from kuberay.controllers.raycluster import detect_cert_manager, detect_openshift
from kuberay.runtime.client import ClientConfig, KubeClient


async def _serve(status: int, groups: list[str]) -> tuple[web.AppRunner, str]:
    async def apis(_req: web.Request) -> web.Response:
        if status != 200:
            return web.json_response({"kind": "Status", "message": "boom"}, status=status)
        return web.json_response({"groups": [{"name": g} for g in groups]})

    app = web.Application()
    app.router.add_get("/apis", apis)
    runner = web.AppRunner(app)
    await runner.setup()
    site = web.TCPSite(runner, "127.0.0.1", 0)
    await site.start()
    port = site._server.sockets[0].getsockname()[1]  # type: ignore[union-attr]
    return runner, f"http://127.0.0.1:{port}"


@pytest.fixture
async def server(request: pytest.FixtureRequest) -> AsyncIterator[KubeClient]:
    status, groups = request.param
    runner, url = await _serve(status, groups)
    async with KubeClient(ClientConfig(server=url)) as client:
        yield client
    await runner.cleanup()


@pytest.mark.parametrize(
    ("server", "openshift", "cert_manager"),
    [
        ((200, ["apps", "route.openshift.io"]), True, False),
        ((200, ["apps", "cert-manager.io"]), False, True),
        ((500, []), False, False),
        ((403, []), False, False),
    ],
    indirect=["server"],
)
async def test_discovery_decides_and_failures_mean_neither(
    server: KubeClient, openshift: bool, cert_manager: bool, caplog: pytest.LogCaptureFixture
) -> None:
    assert await detect_openshift(server, env={}) is openshift
    assert await detect_cert_manager(server) is cert_manager
    failed = [r for r in caplog.records if "API discovery failed" in r.getMessage()]
    assert bool(failed) is (not openshift and not cert_manager)
