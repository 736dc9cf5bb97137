"""A local stand-in for the GitHub archive URLs upstream's RayService e2e tests deploy from.

Why: upstream's Serve apps (``fruit.deployment_graph``, ``conditional_dag.serve_dag``,
``microbenchmarks.no_ops:app_builder``) name a ``runtime_env.working_dir`` of
``https://github.com/ray-project/<repo>/archive/<sha>.zip``. Tests must never reach outside this
machine, so the upstream-e2e harness answers those URLs itself, with small Serve apps of our own
that have the import paths, deployment names, ``user_config`` keys and answers the tests expect
(``APPS``); they are not the upstream repositories' code.

How: ``GitHubStandIn``
- makes a CA and a ``github.com`` serving certificate (``PKI.ensure_server``) and a CA bundle
  (the host's trusted CAs, certifi's and ours) that Ray pods get as ``REQUESTS_CA_BUNDLE`` and
  ``SSL_CERT_FILE`` through the image map (Ray downloads https working dirs with ``requests``;
  ``pip`` keeps reaching the package registries through the host's CAs);
- runs a resolver on loopback (``OverrideResolver``) that answers ``github.com`` with the pod
  network's gateway and forwards every other name to the host's resolvers; the plane's cluster
  DNS forwards to it (``PlaneConfig.egress_dns``), from the host's network namespace;
- once the plane runs, serves HTTPS on the gateway's port 443 (``serve``): ``GET`` or ``HEAD``
  ``/ray-project/<repo>/archive/<sha>.zip`` for a repository of ``APPS`` and any hexadecimal sha
  answers a zip with one top-level directory ``<repo>-<sha>/``, as GitHub's archives have (Ray
  strips that directory when it unpacks a remote zip); anything else is 404.

Invariants and failure modes:
- Nothing here reaches outside the machine except forwarded DNS queries, which go where the
  plane's own would have gone (the host's resolvers).
- Before ``serve`` has named the gateway, ``github.com`` is NXDOMAIN (no pod runs yet anyway).
- ``serve`` fails (OSError) when the gateway's port 443 is taken, e.g. by a second harness of
  the same plane network; the harness then stops rather than run tests that would time out.
- The archives are built in memory once per (repository, sha); their bytes are deterministic
  (fixed timestamps), so two downloads of one URL are identical, as Ray's URI cache assumes.
"""

from __future__ import annotations

import asyncio
import io
import os
import re
import socket
import ssl
import sys
import threading
import zipfile
from collections.abc import Mapping
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from textwrap import dedent
from types import TracebackType
from typing import Any

import certifi

from kuberay.devenv.nodeagent.dns import DnsServer, Forwarder, Upstream, host_resolvers
from kuberay.devenv.pki import PKI

HOST = "github.com"

# ---------------------------------------------------------------------- the Serve apps
_FRUIT = '''
"""Fruit stands and a market (import path ``fruit.deployment_graph``).

Each stand sells one fruit at its ``user_config`` ``price``; the market takes a JSON body
``[FRUIT, QUANTITY]`` and answers the stand's total, ``price * quantity``, as plain text.
"""
from ray import serve


class _Stand:
    def __init__(self):
        self.price = 0

    def reconfigure(self, config):
        self.price = config.get("price", 0)

    def total(self, quantity):
        return self.price * quantity


@serve.deployment
class MangoStand(_Stand):
    pass


@serve.deployment
class OrangeStand(_Stand):
    pass


@serve.deployment
class PearStand(_Stand):
    pass


@serve.deployment
class FruitMarket:
    def __init__(self, mango, orange, pear):
        self.stands = {"MANGO": mango, "ORANGE": orange, "PEAR": pear}

    async def quote(self, fruit, quantity):
        stand = self.stands.get(str(fruit).upper())
        if stand is None:
            return f"no stand sells {fruit}"
        return str(await stand.total.remote(quantity))

    async def __call__(self, request):
        fruit, quantity = await request.json()
        return await self.quote(fruit, quantity)


deployment_graph = FruitMarket.bind(MangoStand.bind(), OrangeStand.bind(), PearStand.bind())
'''

_CONDITIONAL = '''
"""A router over two arithmetic deployments (import path ``conditional_dag.serve_dag``).

The JSON body ``[OPERATION, VALUE]`` goes to the Adder (``ADD``: value + ``increment``) or the
Multiplier (``MUL``: value * ``factor``), both set by ``user_config``; the answer is
``"<result> pizzas please!"``.
"""
from ray import serve


@serve.deployment
class Adder:
    def __init__(self):
        self.increment = 0

    def reconfigure(self, config):
        self.increment = config.get("increment", 0)

    def apply(self, value):
        return value + self.increment


@serve.deployment
class Multiplier:
    def __init__(self):
        self.factor = 1

    def reconfigure(self, config):
        self.factor = config.get("factor", 1)

    def apply(self, value):
        return value * self.factor


@serve.deployment
class Router:
    def __init__(self, adder, multiplier):
        self.routes = {"ADD": adder, "MUL": multiplier}

    async def route(self, operation, value):
        handle = self.routes.get(str(operation).upper())
        if handle is None:
            return f"unknown operation {operation}"
        return f"{await handle.apply.remote(value)} pizzas please!"

    async def __call__(self, request):
        operation, value = await request.json()
        return await self.route(operation, value)


serve_dag = Router.bind(Adder.bind(), Multiplier.bind())
'''

_NO_OPS = '''
"""A do-nothing endpoint for load tests (import path ``microbenchmarks.no_ops:app_builder``).

``app_builder(args)``: the ``NoOp`` deployment answers every request with an empty 200;
``num_forwards`` (default 0) puts that many ``Forward<i>`` hops in front of it.
"""
from ray import serve


@serve.deployment
class NoOp:
    def noop(self):
        return ""

    async def __call__(self, request):
        return self.noop()


@serve.deployment
class Forward:
    def __init__(self, downstream):
        self.downstream = downstream

    async def noop(self):
        return await self.downstream.noop.remote()

    async def __call__(self, request):
        return await self.noop()


def app_builder(args):
    app = NoOp.bind()
    for i in range(int((args or {}).get("num_forwards", 0))):
        app = Forward.options(name=f"Forward{i}").bind(app)
    return app
'''

# repository (under github.com/ray-project) -> file path in the archive -> source
APPS: dict[str, dict[str, str]] = {
    "test_dag": {"fruit.py": _FRUIT, "conditional_dag.py": _CONDITIONAL},
    "serve_workloads": {"microbenchmarks/__init__.py": "", "microbenchmarks/no_ops.py": _NO_OPS},
}

_ARCHIVE_PATH = re.compile(r"^/ray-project/([A-Za-z0-9_.-]+)/archive/([0-9a-fA-F]{7,40})\.zip$")
_EPOCH = (1980, 1, 1, 0, 0, 0)  # zip's earliest date: fixed, so the bytes are deterministic


def archive(repo: str, sha: str) -> bytes:
    """The zip GitHub would serve for ``repo`` at ``sha``: every file under ``<repo>-<sha>/``,
    directory entries included."""
    top = f"{repo}-{sha}/"
    buf = io.BytesIO()
    with zipfile.ZipFile(buf, "w", zipfile.ZIP_DEFLATED) as zf:
        dirs = {top}
        for path in APPS[repo]:
            parts = path.split("/")[:-1]
            dirs.update(top + "/".join(parts[: i + 1]) + "/" for i in range(len(parts)))
        for name in sorted(dirs):
            zf.writestr(zipfile.ZipInfo(name, _EPOCH), b"")
        for path, source in sorted(APPS[repo].items()):
            info = zipfile.ZipInfo(top + path, _EPOCH)
            info.compress_type = zipfile.ZIP_DEFLATED
            info.external_attr = 0o644 << 16
            zf.writestr(info, dedent(source).lstrip())
    return buf.getvalue()


def archive_for(path: str, cache: dict[tuple[str, str], bytes] | None = None) -> bytes | None:
    """The archive a request path names, or None (not an archive URL of a repository we have)."""
    match = _ARCHIVE_PATH.match(path.split("?", 1)[0])
    if match is None or match.group(1) not in APPS:
        return None
    key = (match.group(1), match.group(2))
    if cache is None:
        return archive(*key)
    if key not in cache:
        cache[key] = archive(*key)
    return cache[key]


# ---------------------------------------------------------------------- DNS
class OverrideResolver:
    """A DNS server on loopback: ``overrides`` names get their address, the rest is forwarded.

    Runs its own event loop in a daemon thread (the harness around it is synchronous). An
    override whose address is still None is NXDOMAIN.
    """

    def __init__(self, overrides: Mapping[str, str | None], upstreams: list[Upstream]) -> None:
        self.overrides: dict[str, str | None] = {k.lower(): v for k, v in overrides.items()}
        self.upstreams = upstreams
        self.port = 0
        self._loop = asyncio.new_event_loop()
        self._thread = threading.Thread(target=self._loop.run_forever, daemon=True)
        self._server: DnsServer | None = None

    @property
    def address(self) -> str:
        """``127.0.0.1:PORT``, as ``PlaneConfig.egress_dns`` takes it."""
        return f"127.0.0.1:{self.port}"

    def lookup(self, name: str) -> list[str] | None:
        address = self.overrides.get(name)
        return [address] if address else None

    def start(self) -> None:
        resolver = self

        class _Forward(Forwarder):
            def wants(self, name: str) -> bool:
                if name.lower().rstrip(".") in resolver.overrides:
                    return False
                return super().wants(name)

        self._server = DnsServer("127.0.0.1", 0, self.lookup, _Forward(self.upstreams))
        self._thread.start()
        asyncio.run_coroutine_threadsafe(self._server.start(), self._loop).result(10)
        self.port = self._server.port

    def stop(self) -> None:
        if self._server is not None:
            asyncio.run_coroutine_threadsafe(self._server.stop(), self._loop).result(10)
            self._server = None
        if self._thread.is_alive():
            self._loop.call_soon_threadsafe(self._loop.stop)
            self._thread.join(10)
        self._loop.close()


# ---------------------------------------------------------------------- HTTPS
class _Handler(BaseHTTPRequestHandler):
    server: _ArchiveServer

    def do_GET(self) -> None:
        self._answer(body=True)

    def do_HEAD(self) -> None:
        self._answer(body=False)

    def _answer(self, *, body: bool) -> None:
        data = archive_for(self.path, self.server.cache)
        if data is None:
            self.send_error(404, "Not Found")
            return
        self.send_response(200)
        self.send_header("Content-Type", "application/zip")
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        if body:
            self.wfile.write(data)

    def log_message(self, format: str, *args: Any) -> None:
        self.server.requests.append(
            f"{self.command} {self.path} {args[1] if len(args) > 1 else ''}"
        )


class _ArchiveServer(ThreadingHTTPServer):
    """HTTPS with the TLS handshake in each request's own thread (bounded by a timeout), so
    that a client that connects and stalls never holds up the accepting thread."""

    daemon_threads = True

    def __init__(
        self, address: tuple[str, int], context: ssl.SSLContext, requests: list[str]
    ) -> None:
        super().__init__(address, _Handler)
        self.context = context
        self.cache: dict[tuple[str, str], bytes] = {}
        self.requests = requests  # what was asked, for the harness's log

    def get_request(self) -> tuple[socket.socket, Any]:
        raw, peer = self.socket.accept()
        raw.settimeout(30)
        return self.context.wrap_socket(raw, server_side=True, do_handshake_on_connect=False), peer

    def finish_request(self, request: Any, client_address: Any) -> None:
        request.do_handshake()
        super().finish_request(request, client_address)

    def handle_error(self, request: Any, client_address: Any) -> None:
        exc = sys.exc_info()[1]
        self.requests.append(f"error from {client_address[0]}: {exc!r}")


def ca_bundle(ca_cert: Path, out: Path) -> Path:
    """``out``: the CAs this host trusts (its OpenSSL default file, ``$SSL_CERT_FILE``,
    ``$REQUESTS_CA_BUNDLE``, certifi's), then ``ca_cert``. A pod that trusts the bundle reaches
    both the stand-in and what the host reaches (through a TLS-inspecting proxy too)."""
    sources: list[str] = []
    for candidate in (
        ssl.get_default_verify_paths().cafile,
        os.environ.get("SSL_CERT_FILE"),
        os.environ.get("REQUESTS_CA_BUNDLE"),
        certifi.where(),
    ):
        if candidate and Path(candidate).is_file() and candidate not in sources:
            sources.append(candidate)
    pems = [Path(s).read_text().strip() for s in sources] + [ca_cert.read_text().strip()]
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text("\n".join(pems) + "\n")
    return out


class GitHubStandIn:
    """The stand-in's pieces for one harness run; ``directory`` keeps its PKI.

    ``start()`` before the plane (the plane needs ``resolver.address`` and ``pod_env``),
    ``serve(gateway)`` once it runs, ``stop()`` after it stopped.
    """

    def __init__(self, directory: Path, bundle: Path) -> None:
        self.pki = PKI(directory)
        self.bundle = bundle
        self.resolver = OverrideResolver({HOST: None}, host_resolvers())
        self.requests: list[str] = []  # "METHOD PATH STATUS" of every request served
        self._https: _ArchiveServer | None = None
        self._thread: threading.Thread | None = None

    @property
    def pod_env(self) -> dict[str, str]:
        """What Ray pods need to trust the stand-in (image-map ``env``)."""
        return {"REQUESTS_CA_BUNDLE": str(self.bundle), "SSL_CERT_FILE": str(self.bundle)}

    def start(self) -> None:
        self.pki.ensure_server("github", (HOST,))
        ca_bundle(self.pki.ca_cert, self.bundle)
        self.resolver.start()

    def serve(self, address: str, port: int = 443) -> None:
        cert, key = self.pki.ensure_server("github", (HOST,))
        context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
        context.load_cert_chain(cert, key)
        self._https = _ArchiveServer((address, port), context, self.requests)
        self._thread = threading.Thread(target=self._https.serve_forever, daemon=True)
        self._thread.start()
        self.resolver.overrides[HOST] = address

    @property
    def port(self) -> int:
        assert self._https is not None
        return int(self._https.server_address[1])

    def stop(self) -> None:
        if self._https is not None:
            self._https.shutdown()
            self._https.server_close()
            self._https = None
        self.resolver.stop()

    def __enter__(self) -> GitHubStandIn:
        self.start()
        return self

    def __exit__(
        self, kind: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        self.stop()
