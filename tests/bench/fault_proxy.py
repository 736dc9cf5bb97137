"""A fault-injecting reverse proxy between Kubernetes clients and one apiserver (loopback only).

    .venv/bin/python tests/bench/fault_proxy.py --upstream https://127.0.0.1:6443 \\
        --ca pki/ca.crt --cert pki/admin.crt --key pki/admin.key --port 0 --rate 0.1 \\
        --port-file /tmp/proxy.port

Clients talk plain HTTP to ``127.0.0.1:<port>`` with no credentials (a kubeconfig whose server is
``http://127.0.0.1:<port>``); the proxy forwards to the apiserver over TLS with the given client
certificate. Each request is faulted with probability ``rate``; the kind is drawn from the ones
that fit the request:

- ``429``: Too Many Requests with ``Retry-After: 1`` (nothing forwarded);
- ``500`` / ``503``: a server error Status (nothing forwarded);
- ``slow``: the answer is held back 0.5-3 s (before forwarding);
- ``reset``: the connection is closed without an answer, before forwarding the request or,
  for writes, half the time after it (the write happened, its answer is lost);
- ``cut``: watches only: the stream is cut (connection closed) after 1-20 s;
- ``gone``: watches and lists with a resourceVersion: 410 Gone, as an HTTP Status or (watches,
  half the time) a watch ERROR event with code 410 (reason Expired).

Control (never faulted): ``GET /__chaos/stats`` gives counts per kind, ``POST /__chaos/config``
with ``{"rate": 0.2, "enabled": false}`` changes the settings. Every loop here is bounded by the
client's requests; nothing listens beyond 127.0.0.1.
"""

from __future__ import annotations

import argparse
import asyncio
import random
import signal
import ssl
import sys
import time
from collections import Counter
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import aiohttp
import orjson
from aiohttp import web

KINDS = ("429", "500", "503", "slow", "reset", "cut", "gone")
WRITES = frozenset({"POST", "PUT", "PATCH", "DELETE"})
CONTROL_PREFIX = "/__chaos/"
# Request headers not passed on: hop-by-hop ones, and Accept-Encoding (the proxy hands bodies on
# decoded, so it must not ask for them compressed).
_DROP_REQUEST = frozenset(
    {"host", "connection", "keep-alive", "transfer-encoding", "content-length", "accept-encoding"}
)
_KEEP_RESPONSE = ("Content-Type", "Retry-After", "Audit-Id", "Warning", "Cache-Control")


@dataclass(frozen=True)
class Fault:
    kind: str
    delay: float = 0.0  # slow: seconds held back; cut: seconds until the stream is cut
    after: bool = False  # reset: after the request reached the apiserver
    as_event: bool = False  # gone on a watch: an ERROR event instead of an HTTP 410


@dataclass
class FaultConfig:
    rate: float = 0.1
    enabled: bool = True
    weights: dict[str, float] = field(default_factory=lambda: dict.fromkeys(KINDS, 1.0))
    slow: tuple[float, float] = (0.5, 3.0)
    cut_after: tuple[float, float] = (1.0, 20.0)


def is_watch(query: Mapping[str, str]) -> bool:
    return query.get("watch", "").lower() in ("true", "1")


def kinds_for(method: str, query: Mapping[str, str]) -> list[str]:
    """The fault kinds that make sense for one request."""
    kinds = ["429", "500", "503", "slow", "reset"]
    if is_watch(query):
        kinds += ["cut", "gone"]
    elif method == "GET" and query.get("resourceVersion", "") not in ("", "0"):
        kinds.append("gone")
    return kinds


def decide(
    config: FaultConfig, method: str, path: str, query: Mapping[str, str], rng: random.Random
) -> Fault | None:
    """Whether and how to fault one request (the proxy's whole policy; unit-tested)."""
    if not config.enabled or path.startswith(CONTROL_PREFIX) or rng.random() >= config.rate:
        return None
    kinds = [k for k in kinds_for(method, query) if config.weights.get(k, 0.0) > 0]
    if not kinds:
        return None
    kind = rng.choices(kinds, weights=[config.weights[k] for k in kinds])[0]
    if kind == "slow":
        return Fault(kind, delay=rng.uniform(*config.slow))
    if kind == "cut":
        return Fault(kind, delay=rng.uniform(*config.cut_after))
    if kind == "reset":
        return Fault(kind, after=method in WRITES and rng.random() < 0.5)
    if kind == "gone":
        return Fault(kind, as_event=is_watch(query) and rng.random() < 0.5)
    return Fault(kind)


def status_body(code: int, reason: str, message: str) -> bytes:
    return orjson.dumps(
        {
            "kind": "Status",
            "apiVersion": "v1",
            "metadata": {},
            "status": "Failure",
            "message": message,
            "reason": reason,
            "code": code,
        }
    )


_CANNED = {
    "429": (429, "TooManyRequests", "injected: too many requests, please try again later"),
    "500": (500, "InternalError", "injected: internal error"),
    "503": (503, "ServiceUnavailable", "injected: the server is currently unable to handle it"),
    "gone": (410, "Expired", "injected: too old resource version"),
}


class FaultProxy:
    def __init__(
        self,
        upstream: str,
        ssl_context: ssl.SSLContext | None,
        config: FaultConfig,
        seed: int | None = None,
    ) -> None:
        self.upstream = upstream.rstrip("/")
        self.ssl_context = ssl_context
        self.config = config
        self.rng = random.Random(seed)
        self.stats: Counter[str] = Counter()
        self.session: aiohttp.ClientSession | None = None
        self.runner: web.AppRunner | None = None
        self.port = 0

    async def start(self, host: str = "127.0.0.1", port: int = 0) -> int:
        self.session = aiohttp.ClientSession(
            connector=aiohttp.TCPConnector(ssl=self.ssl_context or False, limit=0),
            auto_decompress=True,
        )
        app = web.Application(client_max_size=64 * 1024 * 1024)
        app.router.add_route("*", "/{tail:.*}", self.handle)
        self.runner = web.AppRunner(app, access_log=None, handler_cancellation=True)
        await self.runner.setup()
        site = web.TCPSite(self.runner, host, port)
        await site.start()
        self.port = int(self.runner.addresses[0][1])
        return self.port

    async def stop(self) -> None:
        if self.runner is not None:
            await self.runner.cleanup()
        if self.session is not None:
            await self.session.close()

    # ------------------------------------------------------------------ control
    async def control(self, request: web.Request) -> web.StreamResponse:
        if request.path == CONTROL_PREFIX + "config" and request.method == "POST":
            body = await request.json()
            if "rate" in body:
                self.config.rate = float(body["rate"])
            if "enabled" in body:
                self.config.enabled = bool(body["enabled"])
        out = {"rate": self.config.rate, "enabled": self.config.enabled, "stats": self.stats}
        return web.json_response(out)

    # ------------------------------------------------------------------ proxying
    async def handle(self, request: web.Request) -> web.StreamResponse:
        if request.path.startswith(CONTROL_PREFIX):
            return await self.control(request)
        query = dict(request.query)
        watch = is_watch(query)
        self.stats["requests"] += 1
        if watch:
            self.stats["watches"] += 1
        fault = decide(self.config, request.method, request.path, query, self.rng)
        if fault is not None:
            key = fault.kind + ("_after" if fault.after else "")
            key += "_event" if fault.as_event else ""
            self.stats["fault_" + key] += 1
        if fault is not None and fault.kind in _CANNED and not fault.as_event:
            code, reason, message = _CANNED[fault.kind]
            headers = {"Retry-After": "1"} if code == 429 else {}
            return web.Response(
                status=code,
                body=status_body(code, reason, message),
                content_type="application/json",
                headers=headers,
            )
        if fault is not None and fault.kind == "gone":  # as a watch ERROR event
            event = {"type": "ERROR", "object": orjson.loads(status_body(*_CANNED["gone"]))}
            return web.Response(
                status=200, body=orjson.dumps(event) + b"\n", content_type="application/json"
            )
        if fault is not None and fault.kind == "reset" and not fault.after:
            await request.read()
            return self._reset(request)
        if fault is not None and fault.kind == "slow":
            await asyncio.sleep(fault.delay)
        return await self._forward(request, watch, fault)

    @staticmethod
    def _reset(request: web.Request) -> web.StreamResponse:
        if request.transport is not None:
            request.transport.abort()
        raise asyncio.CancelledError  # aiohttp drops the request without writing an answer

    async def _forward(
        self, request: web.Request, watch: bool, fault: Fault | None
    ) -> web.StreamResponse:
        assert self.session is not None
        body = await request.read()
        headers = {k: v for k, v in request.headers.items() if k.lower() not in _DROP_REQUEST}
        timeout = aiohttp.ClientTimeout(
            total=None, sock_connect=10, sock_read=None if watch else 90
        )
        try:
            upstream = await self.session.request(
                request.method,
                self.upstream + request.path_qs,
                data=body or None,
                headers=headers,
                timeout=timeout,
                allow_redirects=False,
            )
        except (aiohttp.ClientError, TimeoutError, OSError):
            # The apiserver is down (restart, paused etcd): the client sees a refused or broken
            # connection, as it would without the proxy.
            self.stats["upstream_unreachable"] += 1
            return self._reset(request)
        try:
            out_headers = {k: upstream.headers[k] for k in _KEEP_RESPONSE if k in upstream.headers}
            if not watch:
                data = await upstream.read()
                if fault is not None and fault.kind == "reset":  # after: the answer is lost
                    return self._reset(request)
                return web.Response(status=upstream.status, body=data, headers=out_headers)
            response = web.StreamResponse(status=upstream.status, headers=out_headers)
            await response.prepare(request)
            deadline = time.monotonic() + fault.delay if fault and fault.kind == "cut" else None
            try:
                async for chunk in self._chunks(upstream, deadline):
                    await response.write(chunk)
            except (aiohttp.ClientError, ConnectionError, TimeoutError):
                return self._reset(request)
            if deadline is not None and time.monotonic() >= deadline:
                return self._reset(request)  # cut: the stream ends without a clean close
            await response.write_eof()
            return response
        finally:
            upstream.release()

    @staticmethod
    async def _chunks(upstream: aiohttp.ClientResponse, deadline: float | None) -> Any:
        """The upstream body as it arrives; stops at ``deadline`` (a cut watch)."""
        iterator = upstream.content.iter_any().__aiter__()
        while True:
            wait = None if deadline is None else deadline - time.monotonic()
            if wait is not None and wait <= 0:
                return
            try:
                chunk = await asyncio.wait_for(iterator.__anext__(), wait)
            except StopAsyncIteration:
                return
            except TimeoutError:
                if deadline is not None and time.monotonic() >= deadline:
                    return
                raise
            yield chunk


def client_ssl(ca: str | None, cert: str | None, key: str | None) -> ssl.SSLContext:
    ctx = ssl.create_default_context(cafile=ca)
    if cert and key:
        ctx.load_cert_chain(cert, key)
    return ctx


async def serve(args: argparse.Namespace) -> None:
    ctx = client_ssl(args.ca, args.cert, args.key) if args.upstream.startswith("https") else None
    proxy = FaultProxy(args.upstream, ctx, FaultConfig(rate=args.rate), seed=args.seed)
    port = await proxy.start("127.0.0.1", args.port)
    if args.port_file:
        tmp = Path(args.port_file + ".tmp")
        tmp.write_text(str(port))
        tmp.replace(args.port_file)
    print(f"fault proxy on 127.0.0.1:{port} -> {args.upstream}, rate {args.rate}", flush=True)
    stop = asyncio.Event()
    loop = asyncio.get_running_loop()
    for sig in (signal.SIGTERM, signal.SIGINT):
        loop.add_signal_handler(sig, stop.set)
    await stop.wait()
    await proxy.stop()


def main() -> int:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawTextHelpFormatter
    )
    parser.add_argument("--upstream", required=True)
    parser.add_argument("--ca")
    parser.add_argument("--cert")
    parser.add_argument("--key")
    parser.add_argument("--port", type=int, default=0)
    parser.add_argument("--port-file", default="")
    parser.add_argument("--rate", type=float, default=0.1)
    parser.add_argument("--seed", type=int, default=None)
    asyncio.run(serve(parser.parse_args()))
    return 0


if __name__ == "__main__":
    sys.exit(main())
