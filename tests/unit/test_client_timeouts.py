"""KubeClient timeouts against a scripted aiohttp server on 127.0.0.1: the timeout bounds the
server's silence, not the time a request spends queued for a pooled connection."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator

import pytest
from aiohttp import web

from kuberay.runtime.client import ClientConfig, KubeClient
from kuberay.runtime.errors import ApiError


@pytest.fixture
async def slow_server() -> AsyncIterator[str]:
    async def handle(request: web.Request) -> web.Response:
        await asyncio.sleep(float(request.query.get("sleep", "0")))
        return web.json_response({"kind": "Status", "status": "Success"})

    app = web.Application()
    app.router.add_get("/slow", handle)
    runner = web.AppRunner(app)
    await runner.setup()
    site = web.TCPSite(runner, "127.0.0.1", 0)
    await site.start()
    port = site._server.sockets[0].getsockname()[1]  # type: ignore[union-attr]
    try:
        yield f"http://127.0.0.1:{port}"
    finally:
        await runner.cleanup()


async def test_queueing_for_a_pooled_connection_does_not_count(slow_server: str) -> None:
    # One connection, four requests of 0.3 s each: the last waits ~0.9 s for the connection,
    # longer than the 0.6 s timeout, yet its own exchange is quick.
    client = KubeClient(ClientConfig(server=slow_server, timeout=0.6, max_connections=1))
    try:
        answers = await asyncio.gather(
            *(client.request("GET", "/slow", params={"sleep": "0.3"}) for _ in range(4))
        )
    finally:
        await client.close()
    assert [a["status"] for a in answers] == ["Success"] * 4


async def test_a_silent_server_still_times_out(slow_server: str) -> None:
    client = KubeClient(ClientConfig(server=slow_server, timeout=0.3))
    try:
        with pytest.raises(ApiError) as info:
            await client.request("GET", "/slow", params={"sleep": "0.8"})
    finally:
        await client.close()
    assert info.value.status == 0


async def test_the_pool_wait_has_its_own_bound(slow_server: str) -> None:
    client = KubeClient(
        ClientConfig(server=slow_server, timeout=0.3, max_connections=1, pool_wait=0.1)
    )
    try:
        # The first request holds the only connection for 1 s (its own timeout is 2 s); the
        # second gives up after pool_wait + timeout = 0.4 s.
        first = asyncio.create_task(
            client.request("GET", "/slow", params={"sleep": "1.0"}, timeout=2.0)
        )
        await asyncio.sleep(0.05)
        with pytest.raises(ApiError):
            await client.request("GET", "/slow")
        await first
    finally:
        await client.close()
