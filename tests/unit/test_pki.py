"""The plane's PKI: identities, SANs, reuse across restarts, private key modes."""

from __future__ import annotations

import ipaddress
import stat
from pathlib import Path

from cryptography import x509
from cryptography.x509.oid import NameOID

from kuberay.devenv.pki import ADMIN, CLIENT_IDENTITIES, PKI, SCHEDULER


def _cert(path: Path) -> x509.Certificate:
    return x509.load_pem_x509_certificate(path.read_bytes())


def test_client_certificates_carry_user_and_groups(tmp_path: Path) -> None:
    pki = PKI(tmp_path)
    pki.ensure()
    admin = _cert(pki.client_cert(ADMIN)).subject
    assert admin.get_attributes_for_oid(NameOID.COMMON_NAME)[0].value == "kuberay-admin"
    assert [a.value for a in admin.get_attributes_for_oid(NameOID.ORGANIZATION_NAME)] == [
        "system:masters"
    ]
    sched = _cert(pki.client_cert(SCHEDULER)).subject
    assert sched.get_attributes_for_oid(NameOID.ORGANIZATION_NAME) == []
    ca = _cert(pki.ca_cert)
    for ident in CLIENT_IDENTITIES:
        assert _cert(pki.client_cert(ident)).issuer == ca.subject


def test_serving_certificate_names_every_address(tmp_path: Path) -> None:
    pki = PKI(tmp_path, extra_sans=("10.250.0.1", "node.local"))
    pki.ensure()
    san = (
        _cert(pki.serving_cert)
        .extensions.get_extension_for_class(x509.SubjectAlternativeName)
        .value
    )
    dns = set(san.get_values_for_type(x509.DNSName))
    ips = set(san.get_values_for_type(x509.IPAddress))
    assert {"localhost", "kubernetes.default.svc.cluster.local", "node.local"} <= dns
    assert {ipaddress.ip_address("127.0.0.1"), ipaddress.ip_address("10.250.0.1")} <= ips


def test_files_are_reused_and_serving_cert_reissued_for_new_sans(tmp_path: Path) -> None:
    PKI(tmp_path).ensure()
    ca_before = (tmp_path / "ca.crt").read_bytes()
    admin_before = (tmp_path / "admin.crt").read_bytes()
    serving_before = (tmp_path / "apiserver.crt").read_bytes()
    PKI(tmp_path).ensure()
    assert (tmp_path / "apiserver.crt").read_bytes() == serving_before
    PKI(tmp_path, extra_sans=("10.250.0.9",)).ensure()
    assert (tmp_path / "ca.crt").read_bytes() == ca_before
    assert (tmp_path / "admin.crt").read_bytes() == admin_before
    assert (tmp_path / "apiserver.crt").read_bytes() != serving_before


def test_private_keys_are_owner_only(tmp_path: Path) -> None:
    pki = PKI(tmp_path)
    pki.ensure()
    for key in tmp_path.glob("*.key"):
        assert stat.S_IMODE(key.stat().st_mode) == 0o600, key
