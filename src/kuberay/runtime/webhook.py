"""A small HTTPS server for admission webhooks, with its own serving certificate.

The server knows nothing about the resources it judges: it maps URL paths to handler callables
(``AdmissionReview`` dict in, ``AdmissionReview`` dict out), so this layer stays free of any
Ray-specific code.

Invariants and failure modes:
- The apiserver only talks TLS to webhooks. If the certificate directory already holds
  ``tls.crt``/``tls.key`` (mounted from a Secret, e.g. by cert-manager) they are used as they
  are; otherwise a private CA and a serving certificate for the given names are generated once
  and written there (keys mode 0600), and the CA is what goes into the webhook configuration's
  ``caBundle``.
- A body that is not JSON gets 400; a handler that raises gets 500 (the apiserver then applies
  the webhook's failurePolicy), and the server keeps serving.
"""

from __future__ import annotations

import datetime as dt
import ipaddress
import logging
import os
import ssl
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import orjson
from aiohttp import web
from cryptography import x509
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec
from cryptography.x509.oid import ExtendedKeyUsageOID, NameOID

log = logging.getLogger(__name__)

Handler = Callable[[dict[str, Any]], dict[str, Any]]
DEFAULT_CERT_DIR = Path("/tmp/k8s-webhook-server/serving-certs")
DEFAULT_PORT = 9443
_VALIDITY = dt.timedelta(days=365)


@dataclass(frozen=True)
class ServingCert:
    cert_pem: bytes
    key_pem: bytes
    ca_pem: bytes

    def ssl_context(self, directory: Path) -> ssl.SSLContext:
        cert, key = directory / "tls.crt", directory / "tls.key"
        ctx = ssl.create_default_context(ssl.Purpose.CLIENT_AUTH)
        ctx.load_cert_chain(cert, key)
        return ctx


def _key_pem(key: ec.EllipticCurvePrivateKey) -> bytes:
    return key.private_bytes(
        serialization.Encoding.PEM,
        serialization.PrivateFormat.PKCS8,
        serialization.NoEncryption(),
    )


def _subject(cn: str) -> x509.Name:
    return x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, cn)])


def self_signed(names: Iterable[str]) -> ServingCert:
    """A fresh CA and a serving certificate for ``names`` (DNS names or IP addresses)."""
    names = list(names)
    now = dt.datetime.now(dt.UTC)
    ca_key = ec.generate_private_key(ec.SECP256R1())
    ca_cert = (
        x509.CertificateBuilder()
        .subject_name(_subject("kuberay-webhook-ca"))
        .issuer_name(_subject("kuberay-webhook-ca"))
        .public_key(ca_key.public_key())
        .serial_number(x509.random_serial_number())
        .not_valid_before(now - dt.timedelta(minutes=5))
        .not_valid_after(now + _VALIDITY)
        .add_extension(x509.BasicConstraints(ca=True, path_length=0), critical=True)
        .add_extension(
            x509.KeyUsage(
                digital_signature=True,
                content_commitment=False,
                key_encipherment=False,
                data_encipherment=False,
                key_agreement=False,
                key_cert_sign=True,
                crl_sign=True,
                encipher_only=False,
                decipher_only=False,
            ),
            critical=True,
        )
        .sign(ca_key, hashes.SHA256())
    )
    sans: list[x509.GeneralName] = []
    for name in names:
        try:
            sans.append(x509.IPAddress(ipaddress.ip_address(name)))
        except ValueError:
            sans.append(x509.DNSName(name))
    key = ec.generate_private_key(ec.SECP256R1())
    cert = (
        x509.CertificateBuilder()
        .subject_name(_subject(names[0] if names else "kuberay-webhook"))
        .issuer_name(ca_cert.subject)
        .public_key(key.public_key())
        .serial_number(x509.random_serial_number())
        .not_valid_before(now - dt.timedelta(minutes=5))
        .not_valid_after(now + _VALIDITY)
        .add_extension(x509.SubjectAlternativeName(sans), critical=False)
        .add_extension(x509.ExtendedKeyUsage([ExtendedKeyUsageOID.SERVER_AUTH]), critical=False)
        .sign(ca_key, hashes.SHA256())
    )
    pem = serialization.Encoding.PEM
    return ServingCert(cert.public_bytes(pem), _key_pem(key), ca_cert.public_bytes(pem))


def load_or_create(directory: Path, names: Iterable[str]) -> ServingCert:
    """Use mounted ``tls.crt``/``tls.key`` (and ``ca.crt`` if any), else generate and write."""
    cert, key, ca = directory / "tls.crt", directory / "tls.key", directory / "ca.crt"
    if cert.exists() and key.exists():
        ca_pem = ca.read_bytes() if ca.exists() else cert.read_bytes()
        return ServingCert(cert.read_bytes(), key.read_bytes(), ca_pem)
    made = self_signed(names)
    directory.mkdir(parents=True, exist_ok=True)
    cert.write_bytes(made.cert_pem)
    ca.write_bytes(made.ca_pem)
    fd = os.open(key, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    with os.fdopen(fd, "wb") as fh:
        fh.write(made.key_pem)
    return made


class WebhookServer:
    """Serves ``handlers`` (path -> callable) over HTTPS until ``stop()``."""

    def __init__(
        self,
        handlers: Mapping[str, Handler],
        *,
        cert_dir: Path = DEFAULT_CERT_DIR,
        names: Iterable[str] = ("localhost", "127.0.0.1"),
        host: str = "0.0.0.0",
        port: int = DEFAULT_PORT,
    ) -> None:
        self.handlers = dict(handlers)
        self.cert_dir = cert_dir
        self.cert = load_or_create(cert_dir, names)
        self.host = host
        self.port = port
        self._runner: web.AppRunner | None = None

    def _app(self) -> web.Application:
        app = web.Application()
        for path, handler in self.handlers.items():
            app.router.add_post(path, self._wrap(handler))
        app.router.add_get("/healthz", self._healthz)
        return app

    @staticmethod
    async def _healthz(_: web.Request) -> web.Response:
        return web.Response(text="ok")

    @staticmethod
    def _wrap(handler: Handler) -> Callable[[web.Request], Any]:
        async def serve(request: web.Request) -> web.Response:
            try:
                review = orjson.loads(await request.read())
            except orjson.JSONDecodeError:
                return web.Response(status=400, text="request body is not JSON")
            if not isinstance(review, dict):
                return web.Response(status=400, text="request body is not a JSON object")
            try:
                answer = handler(review)
            except Exception:
                log.exception("admission handler failed for %s", request.path)
                return web.Response(status=500, text="admission handler failed")
            return web.Response(body=orjson.dumps(answer), content_type="application/json")

        return serve

    async def start(self) -> int:
        """Start listening; returns the bound port (useful with ``port=0``)."""
        self._runner = web.AppRunner(self._app(), access_log=None)
        await self._runner.setup()
        site = web.TCPSite(
            self._runner, self.host, self.port, ssl_context=self.cert.ssl_context(self.cert_dir)
        )
        await site.start()
        server = site._server
        sockets = getattr(server, "sockets", None) or []
        if sockets:
            self.port = int(sockets[0].getsockname()[1])
        return self.port

    async def stop(self) -> None:
        if self._runner is not None:
            await self._runner.cleanup()
            self._runner = None
