"""The Ray Serve proxy health check: one ``GET /-/healthz`` against a node's serve port.

upstream: ``RayHttpProxyClient.CheckProxyActorHealth`` (ray-operator/controllers/ray/utils), which
reports an unreachable proxy as unhealthy; the third value below is ours.

Invariants and failure modes:
- The answer has three values, because the caller treats them differently: True for HTTP 200,
  False for any other status line, None when no HTTP answer came at all (connection refused,
  reset, timeout). None lets the RayService controller fall back to the Serve applications'
  status, which is what it needs for pods without processes (KWOK) or an unreachable network.
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

# (pod IP, serve port) -> healthy / unhealthy / unreachable (None)
HealthProbe = Callable[[str, int], Awaitable[bool | None]]


async def proxy_healthz(ip: str, port: int, timeout: float = 2.0) -> bool | None:
    """Probes the Serve proxy at ``ip:port``: True on 200, False on another answer, None when
    the proxy cannot be reached at all."""
    try:
        reader, writer = await asyncio.wait_for(asyncio.open_connection(ip, port), timeout)
    except (OSError, TimeoutError):
        return None
    try:
        request = f"GET {HEALTHZ_PATH} HTTP/1.1\r\nHost: {ip}\r\nConnection: close\r\n\r\n"
        writer.write(request.encode())
        await writer.drain()
        line = await asyncio.wait_for(reader.readline(), timeout)
        parts = line.decode(errors="replace").split()
        return len(parts) >= 2 and parts[1] == "200"
    except (OSError, TimeoutError):
        return None
    finally:
        writer.close()
        with contextlib.suppress(OSError):
            await writer.wait_closed()
