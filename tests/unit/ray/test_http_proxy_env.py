"""The dashboard client honours HTTP_PROXY/NO_PROXY from the environment, as upstream's Go client
(Go's default transport) does: an operator outside the cluster network can reach each cluster's
dashboard through an HTTP proxy without ``--use-kubernetes-proxy``."""

from __future__ import annotations

from collections.abc import AsyncIterator

import pytest
from aiohttp import web

from kuberay.ray.http_client import HttpDashboardClient, HttpDashboardFactory

DASHBOARD = "http://rc-head-svc.team.svc.cluster.local:8265"


@pytest.fixture
async def proxy() -> AsyncIterator[tuple[str, list[tuple[str, str, str]]]]:
    """An HTTP proxy on 127.0.0.1 that answers every request itself and records the
    absolute-form target it was sent."""
    seen: list[tuple[str, str, str]] = []

    async def handle(request: web.Request) -> web.Response:
        seen.append((request.method, request.raw_path, request.headers.get("Host", "")))
        if request.path == "/api/jobs/":
            return web.json_response([])
        return web.json_response({"submission_id": "abc", "status": "RUNNING"})

    app = web.Application()
    app.router.add_route("*", "/{tail:.*}", handle)
    runner = web.AppRunner(app)
    await runner.setup()
    site = web.TCPSite(runner, "127.0.0.1", 0)
    await site.start()
    port = runner.addresses[0][1]
    try:
        yield f"http://127.0.0.1:{port}", seen
    finally:
        await runner.cleanup()


def _clear_proxy_env(monkeypatch: pytest.MonkeyPatch) -> None:
    for name in ("HTTP_PROXY", "http_proxy", "HTTPS_PROXY", "https_proxy", "NO_PROXY", "no_proxy"):
        monkeypatch.delenv(name, raising=False)


async def test_client_goes_through_http_proxy_from_environment(
    proxy: tuple[str, list[tuple[str, str, str]]], monkeypatch: pytest.MonkeyPatch
) -> None:
    url, seen = proxy
    _clear_proxy_env(monkeypatch)
    monkeypatch.setenv("HTTP_PROXY", url)
    async with HttpDashboardClient(DASHBOARD, attempts=1) as client:
        info = await client.get_job_info("abc")
    assert info is not None
    assert info.status == "RUNNING"
    assert seen == [("GET", f"{DASHBOARD}/api/jobs/abc", "rc-head-svc.team.svc.cluster.local:8265")]


async def test_factory_clients_go_through_http_proxy(
    proxy: tuple[str, list[tuple[str, str, str]]], monkeypatch: pytest.MonkeyPatch
) -> None:
    url, seen = proxy
    _clear_proxy_env(monkeypatch)
    monkeypatch.setenv("http_proxy", url)
    factory = HttpDashboardFactory(attempts=1)
    try:
        await factory(DASHBOARD).list_jobs()
    finally:
        await factory.close()
    assert [(m, p) for m, p, _ in seen] == [("GET", f"{DASHBOARD}/api/jobs/")]


async def test_no_proxy_is_honoured(
    proxy: tuple[str, list[tuple[str, str, str]]], monkeypatch: pytest.MonkeyPatch
) -> None:
    url, seen = proxy
    _clear_proxy_env(monkeypatch)
    monkeypatch.setenv("HTTP_PROXY", "http://127.0.0.1:9")  # discard port: nothing listens
    monkeypatch.setenv("NO_PROXY", "127.0.0.1")
    async with HttpDashboardClient(url, attempts=1) as client:
        assert await client.get_job_info("abc") is not None
    assert [(m, p) for m, p, _ in seen] == [("GET", "/api/jobs/abc")]
