"""The chaos benchmark's fault proxy (tests/bench/fault_proxy.py): its decision policy, and each
fault as a client sees it, against a small plain-HTTP stand-in for the apiserver."""

from __future__ import annotations

import asyncio
import random
import sys
from collections import Counter
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import aiohttp
import orjson
import pytest
from aiohttp import web

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "bench"))
from fault_proxy import KINDS, FaultConfig, FaultProxy, decide, kinds_for

from kuberay.runtime.client import PODS, ClientConfig, KubeClient
from kuberay.runtime.errors import ServerError

WATCH = {"watch": "true", "resourceVersion": "10"}


def test_rate_zero_and_disabled_never_fault() -> None:
    rng = random.Random(1)
    off = FaultConfig(rate=0.0)
    disabled = FaultConfig(rate=1.0, enabled=False)
    for _ in range(1000):
        assert decide(off, "GET", "/api/v1/pods", {}, rng) is None
        assert decide(disabled, "POST", "/api/v1/pods", {}, rng) is None


def test_control_paths_are_never_faulted() -> None:
    rng = random.Random(2)
    for _ in range(200):
        assert decide(FaultConfig(rate=1.0), "GET", "/__chaos/stats", {}, rng) is None


@pytest.mark.parametrize("rate", [0.05, 0.1, 0.2])
def test_fault_frequency_follows_the_rate(rate: float) -> None:
    rng = random.Random(3)
    config = FaultConfig(rate=rate)
    n = 20000
    faulted = sum(decide(config, "GET", "/api/v1/pods", {}, rng) is not None for _ in range(n))
    assert abs(faulted / n - rate) < 0.01


def test_kinds_fit_the_request() -> None:
    assert set(kinds_for("GET", WATCH)) == set(KINDS)
    assert "cut" not in kinds_for("GET", {"resourceVersion": "5"})
    assert "gone" in kinds_for("GET", {"resourceVersion": "5"})
    assert "gone" not in kinds_for("GET", {"resourceVersion": "0"})
    assert not {"cut", "gone"} & set(kinds_for("POST", {}))
    rng = random.Random(4)
    config = FaultConfig(rate=1.0)
    seen: Counter[str] = Counter()
    for _ in range(5000):
        fault = decide(config, "POST", "/api/v1/namespaces/a/pods", {}, rng)
        assert fault is not None
        seen[fault.kind + ("_after" if fault.after else "")] += 1
        if fault.kind == "slow":
            assert 0.5 <= fault.delay <= 3.0
    assert set(seen) == {"429", "500", "503", "slow", "reset", "reset_after"}
    for _ in range(2000):
        fault = decide(config, "GET", "/api/v1/pods", WATCH, rng)
        assert fault is not None
        assert not fault.after, "only writes lose their answer after the fact"
        if fault.kind == "cut":
            assert 1.0 <= fault.delay <= 20.0


def test_weights_select_kinds() -> None:
    rng = random.Random(5)
    config = FaultConfig(rate=1.0, weights={"gone": 1.0})
    assert decide(config, "GET", "/api/v1/pods", {}, rng) is None
    fault = decide(config, "GET", "/api/v1/pods", WATCH, rng)
    assert fault is not None
    assert fault.kind == "gone"


# --------------------------------------------------------------------------- the proxy itself


@pytest.fixture
async def upstream() -> AsyncIterator[tuple[str, list[str]]]:
    """A stand-in apiserver: echoes requests, and streams two watch events a second apart."""
    writes: list[str] = []

    async def handle(request: web.Request) -> web.StreamResponse:
        if request.query.get("watch") == "true":
            resp = web.StreamResponse()
            await resp.prepare(request)
            for i in range(2):
                obj = {"metadata": {"name": f"p{i}", "resourceVersion": str(i)}}
                await resp.write(orjson.dumps({"type": "ADDED", "object": obj}) + b"\n")
                await asyncio.sleep(1.0)
            await resp.write_eof()
            return resp
        if request.method == "POST":
            writes.append(await request.text())
        return web.json_response({"path": request.path_qs, "method": request.method})

    app = web.Application()
    app.router.add_route("*", "/{tail:.*}", handle)
    runner = web.AppRunner(app)
    await runner.setup()
    site = web.TCPSite(runner, "127.0.0.1", 0)
    await site.start()
    try:
        yield f"http://127.0.0.1:{runner.addresses[0][1]}", writes
    finally:
        await runner.cleanup()


async def _proxy(upstream: str, **weights: float) -> FaultProxy:
    config = FaultConfig(rate=1.0 if weights else 0.0, weights=weights or dict.fromkeys(KINDS, 1))
    proxy = FaultProxy(upstream, None, config, seed=7)
    await proxy.start()
    return proxy


async def _get(url: str, **kw: Any) -> tuple[int, bytes]:
    async with aiohttp.ClientSession() as session, session.request(url=url, **kw) as resp:
        return resp.status, await resp.read()


async def _read_lines(resp: aiohttp.ClientResponse, into: list[bytes]) -> None:
    async for line in resp.content:
        into.append(line)


async def test_forwards_without_faults(upstream: tuple[str, list[str]]) -> None:
    proxy = await _proxy(upstream[0])
    try:
        base = f"http://127.0.0.1:{proxy.port}"
        status, body = await _get(base + "/api/v1/pods?limit=5", method="GET")
        assert status == 200
        assert orjson.loads(body) == {"path": "/api/v1/pods?limit=5", "method": "GET"}
        status, body = await _get(base + "/api/v1/pods?watch=true", method="GET")
        assert [orjson.loads(line)["type"] for line in body.splitlines()] == ["ADDED", "ADDED"]
        status, body = await _get(base + "/__chaos/stats", method="GET")
        assert orjson.loads(body)["stats"]["requests"] == 2
    finally:
        await proxy.stop()


async def test_canned_errors_and_410_event(upstream: tuple[str, list[str]]) -> None:
    proxy = await _proxy(upstream[0], **{"429": 1.0})
    try:
        status, body = await _get(f"http://127.0.0.1:{proxy.port}/api/v1/pods", method="GET")
        assert status == 429
        assert orjson.loads(body)["reason"] == "TooManyRequests"
    finally:
        await proxy.stop()
    proxy = await _proxy(upstream[0], gone=1.0)
    try:
        url = f"http://127.0.0.1:{proxy.port}/api/v1/pods?watch=true&resourceVersion=3"
        answers = [await _get(url, method="GET") for _ in range(20)]
        codes = {status for status, _ in answers}
        assert codes == {200, 410}
        events = [orjson.loads(body) for status, body in answers if status == 200]
        assert all(e["type"] == "ERROR" and e["object"]["code"] == 410 for e in events)
    finally:
        await proxy.stop()


async def test_reset_after_a_write_loses_only_the_answer(upstream: tuple[str, list[str]]) -> None:
    proxy = await _proxy(upstream[0], reset=1.0)
    try:
        url = f"http://127.0.0.1:{proxy.port}/api/v1/namespaces/a/pods"
        failures = 0
        for i in range(20):
            try:
                await _get(url, method="POST", data=f"pod-{i}")
            except aiohttp.ClientError:
                failures += 1
        assert failures == 20, "every request saw its connection reset"
        after = proxy.stats["fault_reset_after"]
        assert 0 < after < 20
        assert len(upstream[1]) == after, "the writes reset after forwarding did happen"
    finally:
        await proxy.stop()


async def test_cut_watch_ends_the_stream_early(upstream: tuple[str, list[str]]) -> None:
    proxy = await _proxy(upstream[0], cut=1.0)
    proxy.config.cut_after = (0.3, 0.5)
    try:
        url = f"http://127.0.0.1:{proxy.port}/api/v1/pods?watch=true"
        async with aiohttp.ClientSession() as session, session.get(url) as resp:
            lines: list[bytes] = []
            with pytest.raises(aiohttp.ClientError):
                await _read_lines(resp, lines)
        assert len(lines) == 1, "the first event came through, the stream was cut before the next"
    finally:
        await proxy.stop()


# --------------------------------------------------------------------------- the operator's client


@pytest.fixture
async def flaky() -> AsyncIterator[tuple[str, Counter[str]]]:
    """A stand-in apiserver answering like the proxy's faults: one pod read fails with a 500
    and then a dropped connection before it succeeds; another read always gets 503; writes
    get 500."""
    seen: Counter[str] = Counter()

    async def handle(request: web.Request) -> web.StreamResponse:
        key = f"{request.method} {request.path}"
        seen[key] += 1
        status = {"kind": "Status", "status": "Failure", "message": "injected"}
        if request.method == "GET" and request.path.endswith("/pods/p"):
            if seen[key] == 1:
                return web.json_response({**status, "code": 500}, status=500)
            if seen[key] == 2:
                assert request.transport is not None
                request.transport.abort()
                raise asyncio.CancelledError
            return web.json_response({"metadata": {"name": "p"}})
        if request.method == "GET":
            return web.json_response({**status, "code": 503}, status=503)
        return web.json_response({**status, "code": 500}, status=500)

    app = web.Application()
    app.router.add_route("*", "/{tail:.*}", handle)
    runner = web.AppRunner(app)
    await runner.setup()
    await web.TCPSite(runner, "127.0.0.1", 0).start()
    try:
        yield f"http://127.0.0.1:{runner.addresses[0][1]}", seen
    finally:
        await runner.cleanup()


async def test_client_retries_reads_not_writes(flaky: tuple[str, Counter[str]]) -> None:
    url, seen = flaky
    async with KubeClient(ClientConfig(server=url, qps=0)) as kube:
        assert (await kube.get(PODS, "p", "a"))["metadata"]["name"] == "p"
        assert seen["GET /api/v1/namespaces/a/pods/p"] == 3
        with pytest.raises(ServerError):
            await kube.get(PODS, "down", "a")
        assert seen["GET /api/v1/namespaces/a/pods/down"] == 1 + KubeClient.READ_RETRIES
        with pytest.raises(ServerError):
            await kube.create(PODS, {"metadata": {"name": "q"}}, "a")
        assert seen["POST /api/v1/namespaces/a/pods"] == 1, "a write is never repeated here"
