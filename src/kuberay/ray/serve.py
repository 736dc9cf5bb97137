"""The Ray Serve proxy health check: one ``GET /-/healthz`` against a node's serve port.

upstream: ``RayHttpProxyClient.CheckProxyActorHealth`` (ray-operator/controllers/ray/utils).

Invariants and failure modes:
- Only an HTTP 200 is healthy. Any other status line, and no answer at all (connection refused,
  reset, timeout), is unhealthy, as upstream counts it: a head whose Ray is up but whose Serve
  proxy is not yet listening must not get the ``ray.io/serve=true`` label, or the serve Service
  would send traffic to a port that refuses it. Runs without processes behind pod IPs (KWOK
  tests) configure no probe at all; the controller then falls back to the apps' status.
- Every step is bounded by ``timeout`` (connect, and reading the status line), and the
  connection is always closed, so a hung proxy can delay a reconcile by at most twice the
  timeout and never leaks a socket. Only the status line is read; the body is ignored.
- Nothing here raises for network trouble; only programming errors escape.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import Awaitable, Callable

HEALTHZ_PATH = "/-/healthz"

# (pod IP, serve port) -> healthy
HealthProbe = Callable[[str, int], Awaitable[bool]]


async def proxy_healthz(ip: str, port: int, timeout: float = 2.0) -> bool:
    """Probes the Serve proxy at ``ip:port``: True only on a 200 answer."""
    try:
        reader, writer = await asyncio.wait_for(asyncio.open_connection(ip, port), timeout)
    except (OSError, TimeoutError):
        return False
    try:
        request = f"GET {HEALTHZ_PATH} HTTP/1.1\r\nHost: {ip}\r\nConnection: close\r\n\r\n"
        writer.write(request.encode())
        await writer.drain()
        line = await asyncio.wait_for(reader.readline(), timeout)
        parts = line.decode(errors="replace").split()
        return len(parts) >= 2 and parts[1] == "200"
    except (OSError, TimeoutError):
        return False
    finally:
        writer.close()
        with contextlib.suppress(OSError):
            await writer.wait_closed()
