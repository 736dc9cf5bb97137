"""A tiny synchronous HTTPS client for the plane's own bootstrapping (readiness, nodes, etcd).

The plane starts before any event loop exists (CLI, pytest session fixtures), so it does not use
the operator's asyncio client. Errors are returned as ``HTTPError`` with the server's body so that
a failed start says why.
"""

from __future__ import annotations

import json
import ssl
import urllib.error
import urllib.request
from typing import Any


class HTTPError(RuntimeError):
    def __init__(self, status: int, body: str) -> None:
        super().__init__(f"HTTP {status}: {body[:500]}")
        self.status = status
        self.body = body


def client_context(
    ca: str | None, cert: str | None = None, key: str | None = None
) -> ssl.SSLContext:
    """TLS context that verifies against ``ca`` (or nothing when None), with a client cert."""
    if ca is None:
        ctx = ssl.create_default_context()
        ctx.check_hostname = False
        ctx.verify_mode = ssl.CERT_NONE
    else:
        ctx = ssl.create_default_context(cafile=ca)
    if cert and key:
        ctx.load_cert_chain(cert, key)
    return ctx


def request(
    method: str,
    url: str,
    body: Any = None,
    *,
    context: ssl.SSLContext | None = None,
    timeout: float = 10.0,
    content_type: str = "application/json",
) -> Any:
    data = None if body is None else json.dumps(body).encode()
    req = urllib.request.Request(url, data=data, method=method)
    if data is not None:
        req.add_header("Content-Type", content_type)
    req.add_header("Accept", "application/json")
    try:
        with urllib.request.urlopen(req, timeout=timeout, context=context) as resp:
            raw = resp.read()
    except urllib.error.HTTPError as exc:
        raise HTTPError(exc.code, exc.read().decode(errors="replace")) from None
    if not raw:
        return None
    try:
        return json.loads(raw)
    except ValueError:
        return raw.decode(errors="replace")
