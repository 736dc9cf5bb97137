"""Certificates and keys for a local control plane.

The apiserver runs with TLS, client-certificate authentication and RBAC on, exactly like a real
cluster, so that the operator exercises the same authentication and authorisation paths it will
meet in production. Every identity gets its own client certificate; the admin one is in
``system:masters``.

Invariants: the files are written once per plane directory and reused, so a kubeconfig handed to a
user stays valid across restarts; private keys are written with mode 0600. Serving certificates
name every address the apiserver may be reached at (loopback, the in-cluster service names and
the first service IP, plus any extra address such as a bridge the process node runtime uses).
"""

from __future__ import annotations

import datetime as dt
import ipaddress
import os
from dataclasses import dataclass
from pathlib import Path

from cryptography import x509
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec, rsa
from cryptography.x509.oid import ExtendedKeyUsageOID, NameOID

_VALIDITY = dt.timedelta(days=3650)

CLUSTER_DOMAIN = "cluster.local"


@dataclass(frozen=True)
class Identity:
    """A client identity: file stem, common name (user) and organisations (groups)."""

    stem: str
    common_name: str
    organizations: tuple[str, ...] = ()


ADMIN = Identity("admin", "kuberay-admin", ("system:masters",))
# The controller-manager runs every controller under its own identity (no per-controller service
# account credentials), so it needs cluster-admin rights on a local plane.
CONTROLLER_MANAGER = Identity(
    "controller-manager", "system:kube-controller-manager", ("system:masters",)
)
SCHEDULER = Identity("scheduler", "system:kube-scheduler")
KWOK = Identity("kwok", "kuberay-kwok", ("system:masters",))
# The apiserver's identity towards kubelets (logs, exec, attach, port-forward), as kubeadm names it.
KUBELET_CLIENT = Identity(
    "apiserver-kubelet-client", "kube-apiserver-kubelet-client", ("system:masters",)
)
CLIENT_IDENTITIES = (ADMIN, CONTROLLER_MANAGER, SCHEDULER, KWOK, KUBELET_CLIENT)


def _write_private(path: Path, data: bytes) -> None:
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    with os.fdopen(fd, "wb") as fh:
        fh.write(data)


def _key_pem(key: ec.EllipticCurvePrivateKey | rsa.RSAPrivateKey) -> bytes:
    return key.private_bytes(
        serialization.Encoding.PEM,
        serialization.PrivateFormat.PKCS8,
        serialization.NoEncryption(),
    )


def _name(cn: str, orgs: tuple[str, ...] = ()) -> x509.Name:
    attrs = [x509.NameAttribute(NameOID.ORGANIZATION_NAME, o) for o in orgs]
    attrs.append(x509.NameAttribute(NameOID.COMMON_NAME, cn))
    return x509.Name(attrs)


def _general_names(names: tuple[str, ...]) -> list[x509.GeneralName]:
    out: list[x509.GeneralName] = []
    for s in names:
        try:
            out.append(x509.IPAddress(ipaddress.ip_address(s)))
        except ValueError:
            out.append(x509.DNSName(s))
    return out


def _covers(cert_path: Path, key_path: Path, names: tuple[str, ...]) -> bool:
    """Whether a serving certificate exists and names every one of ``names``."""
    if not (cert_path.exists() and key_path.exists()):
        return False
    cert = x509.load_pem_x509_certificate(cert_path.read_bytes())
    ext = cert.extensions.get_extension_for_class(x509.SubjectAlternativeName).value
    have = {str(v) for v in ext.get_values_for_type(x509.DNSName)}
    have |= {str(v) for v in ext.get_values_for_type(x509.IPAddress)}
    return all(s in have for s in names)


class PKI:
    """Files of one plane's PKI under ``directory``; ``ensure()`` creates what is missing."""

    def __init__(self, directory: Path, extra_sans: tuple[str, ...] = ()) -> None:
        self.dir = directory
        self.extra_sans = extra_sans

    @property
    def ca_cert(self) -> Path:
        return self.dir / "ca.crt"

    @property
    def ca_key(self) -> Path:
        return self.dir / "ca.key"

    @property
    def serving_cert(self) -> Path:
        return self.dir / "apiserver.crt"

    @property
    def serving_key(self) -> Path:
        return self.dir / "apiserver.key"

    @property
    def sa_key(self) -> Path:
        return self.dir / "sa.key"

    @property
    def sa_pub(self) -> Path:
        return self.dir / "sa.pub"

    def client_cert(self, ident: Identity) -> Path:
        return self.dir / f"{ident.stem}.crt"

    def client_key(self, ident: Identity) -> Path:
        return self.dir / f"{ident.stem}.key"

    def ensure(self) -> None:
        self.dir.mkdir(parents=True, exist_ok=True)
        if not (self.ca_cert.exists() and self.ca_key.exists()):
            self._make_ca()
        ca, ca_key = self._load_ca()
        if not self._serving_covers_sans():
            self._make_serving(ca, ca_key)
        for ident in CLIENT_IDENTITIES:
            if not self.client_cert(ident).exists():
                self._issue(
                    ca,
                    ca_key,
                    _name(ident.common_name, ident.organizations),
                    self.client_cert(ident),
                    self.client_key(ident),
                    client=True,
                )
        if not self.sa_key.exists():
            key = rsa.generate_private_key(public_exponent=65537, key_size=2048)
            _write_private(self.sa_key, _key_pem(key))
            self.sa_pub.write_bytes(
                key.public_key().public_bytes(
                    serialization.Encoding.PEM, serialization.PublicFormat.SubjectPublicKeyInfo
                )
            )

    @property
    def kubelet_cert(self) -> Path:
        return self.dir / "kubelet.crt"

    @property
    def kubelet_key(self) -> Path:
        return self.dir / "kubelet.key"

    def ensure_kubelet_serving(self, names: tuple[str, ...]) -> None:
        """The process runtime's kubelet serving certificate, for the node address(es) and
        names; reissued when it does not cover them all."""
        if _covers(self.kubelet_cert, self.kubelet_key, names):
            return
        ca, ca_key = self._load_ca()
        self._issue(
            ca,
            ca_key,
            _name(f"kubelet-{names[0]}", ("system:nodes",)),
            self.kubelet_cert,
            self.kubelet_key,
            client=False,
            sans=_general_names(names),
        )

    def ensure_server(self, stem: str, names: tuple[str, ...]) -> tuple[Path, Path]:
        """``<stem>.crt``/``<stem>.key``: a serving certificate for ``names`` from this CA (made
        first if missing), for a host service other than the apiserver, such as a local stand-in
        for an outside host; reissued when it does not cover every name."""
        self.dir.mkdir(parents=True, exist_ok=True)
        if not (self.ca_cert.exists() and self.ca_key.exists()):
            self._make_ca()
        cert, key = self.dir / f"{stem}.crt", self.dir / f"{stem}.key"
        if not _covers(cert, key, names):
            ca, ca_key = self._load_ca()
            self._issue(
                ca, ca_key, _name(names[0]), cert, key, client=False, sans=_general_names(names)
            )
        return cert, key

    def _load_ca(self) -> tuple[x509.Certificate, ec.EllipticCurvePrivateKey]:
        ca_key = serialization.load_pem_private_key(self.ca_key.read_bytes(), None)
        assert isinstance(ca_key, ec.EllipticCurvePrivateKey)
        return x509.load_pem_x509_certificate(self.ca_cert.read_bytes()), ca_key

    def _sans(self) -> list[str]:
        names = [
            "localhost",
            "kubernetes",
            "kubernetes.default",
            "kubernetes.default.svc",
            f"kubernetes.default.svc.{CLUSTER_DOMAIN}",
            "127.0.0.1",
            "10.96.0.1",
        ]
        names.extend(s for s in self.extra_sans if s not in names)
        return names

    def _serving_covers_sans(self) -> bool:
        return _covers(self.serving_cert, self.serving_key, tuple(self._sans()))

    def _make_ca(self) -> None:
        key = ec.generate_private_key(ec.SECP256R1())
        name = _name("kuberay-local-ca")
        now = dt.datetime.now(dt.UTC)
        cert = (
            x509.CertificateBuilder()
            .subject_name(name)
            .issuer_name(name)
            .public_key(key.public_key())
            .serial_number(x509.random_serial_number())
            .not_valid_before(now - dt.timedelta(minutes=5))
            .not_valid_after(now + _VALIDITY)
            .add_extension(x509.BasicConstraints(ca=True, path_length=None), critical=True)
            .add_extension(
                x509.KeyUsage(
                    digital_signature=True,
                    key_cert_sign=True,
                    crl_sign=True,
                    content_commitment=False,
                    key_encipherment=False,
                    data_encipherment=False,
                    key_agreement=False,
                    encipher_only=False,
                    decipher_only=False,
                ),
                critical=True,
            )
            .sign(key, hashes.SHA256())
        )
        _write_private(self.ca_key, _key_pem(key))
        self.ca_cert.write_bytes(cert.public_bytes(serialization.Encoding.PEM))

    def _make_serving(self, ca: x509.Certificate, ca_key: ec.EllipticCurvePrivateKey) -> None:
        sans = _general_names(tuple(self._sans()))
        self._issue(
            ca,
            ca_key,
            _name("kube-apiserver"),
            self.serving_cert,
            self.serving_key,
            client=False,
            sans=sans,
        )

    @staticmethod
    def _issue(
        ca: x509.Certificate,
        ca_key: ec.EllipticCurvePrivateKey,
        subject: x509.Name,
        cert_path: Path,
        key_path: Path,
        *,
        client: bool,
        sans: list[x509.GeneralName] | None = None,
    ) -> None:
        key = ec.generate_private_key(ec.SECP256R1())
        now = dt.datetime.now(dt.UTC)
        usage = ExtendedKeyUsageOID.CLIENT_AUTH if client else ExtendedKeyUsageOID.SERVER_AUTH
        builder = (
            x509.CertificateBuilder()
            .subject_name(subject)
            .issuer_name(ca.subject)
            .public_key(key.public_key())
            .serial_number(x509.random_serial_number())
            .not_valid_before(now - dt.timedelta(minutes=5))
            .not_valid_after(now + _VALIDITY)
            .add_extension(x509.BasicConstraints(ca=False, path_length=None), critical=True)
            .add_extension(x509.ExtendedKeyUsage([usage]), critical=False)
        )
        if sans:
            builder = builder.add_extension(x509.SubjectAlternativeName(sans), critical=False)
        cert = builder.sign(ca_key, hashes.SHA256())
        _write_private(key_path, _key_pem(key))
        cert_path.write_bytes(cert.public_bytes(serialization.Encoding.PEM))
