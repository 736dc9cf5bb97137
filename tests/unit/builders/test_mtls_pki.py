"""cert-manager objects for RayClusterMTLS: names, fields, SANs, readiness and the pod gate."""

from __future__ import annotations

from typing import Any

import pytest

from kuberay.builders import mtls
from kuberay.builders.options import BuildOptions
from kuberay.builders.pod import build_head_pod, build_worker_pod

from . import samples

UID8 = "6b6e3c5a"
OWNER = {
    "apiVersion": "ray.io/v1",
    "kind": "RayCluster",
    "name": "raycluster-mtls",
    "uid": "6b6e3c5a-0d7e-4a51-9c64-2f1b2f9f0a11",
    "controller": True,
    "blockOwnerDeletion": True,
}


def _rc() -> dict[str, Any]:
    return samples.cluster("raycluster-mtls", tlsOptions={"enabled": True})


def _pod(node_type: str, ip: str, *, cluster: str = "raycluster-mtls", **extra: Any) -> Any:
    meta: dict[str, Any] = {"labels": {"ray.io/cluster": cluster, "ray.io/node-type": node_type}}
    meta.update(extra.pop("meta", {}))
    return {"metadata": meta, "status": {"podIP": ip, "phase": "Running", **extra}}


@pytest.mark.parametrize(
    ("build", "name", "component", "spec"),
    [
        (
            mtls.selfsigned_issuer,
            "ray-selfsigned-issuer-raycluster-mtls",
            "selfsigned-issuer",
            {"selfSigned": {}},
        ),
        (
            mtls.ca_issuer,
            "ray-ca-issuer-raycluster-mtls",
            "ca-issuer",
            {"ca": {"secretName": f"raycluster-mtls-ca-secret-{UID8}"}},
        ),
        (
            mtls.ca_certificate,
            "ray-ca-certificate-raycluster-mtls",
            "ca-certificate",
            {
                "secretName": f"raycluster-mtls-ca-secret-{UID8}",
                "isCA": True,
                "commonName": "ray-ca-raycluster-mtls",
                "privateKey": {"algorithm": "RSA", "size": 4096},
                "duration": "87600h0m0s",
                "renewBefore": "720h0m0s",
                "usages": ["cert sign", "crl sign"],
                "issuerRef": {
                    "name": "ray-selfsigned-issuer-raycluster-mtls",
                    "kind": "Issuer",
                    "group": "cert-manager.io",
                },
            },
        ),
    ],
)
def test_pki_roots(build: Any, name: str, component: str, spec: dict[str, Any]) -> None:
    obj = build(_rc())
    assert obj["apiVersion"] == "cert-manager.io/v1"
    assert obj["metadata"]["name"] == name
    assert obj["metadata"]["namespace"] == "default"
    assert obj["metadata"]["labels"] == {
        "app.kubernetes.io/name": "kuberay",
        "app.kubernetes.io/created-by": "kuberay-operator",
        "app.kubernetes.io/component": component,
        "ray.io/cluster": "raycluster-mtls",
    }
    assert obj["metadata"]["ownerReferences"] == [OWNER]
    assert obj["spec"] == spec


@pytest.mark.parametrize(
    ("node_type", "name", "secret", "dns"),
    [
        (
            "head",
            "ray-head-cert-raycluster-mtls",
            "ray-head-secret-raycluster-mtls",
            ["localhost", "raycluster-mtls-head-svc.default.svc.example.org"],
        ),
        (
            "worker",
            "ray-worker-cert-raycluster-mtls",
            "ray-worker-secret-raycluster-mtls",
            ["localhost"],
        ),
    ],
)
def test_leaf_certificates(node_type: str, name: str, secret: str, dns: list[str]) -> None:
    cert = mtls.leaf_certificate(
        _rc(), node_type, ["10.0.0.2", "127.0.0.1"], BuildOptions(cluster_domain="example.org")
    )
    assert cert["metadata"]["name"] == name
    assert cert["metadata"]["labels"]["app.kubernetes.io/component"] == f"{node_type}-certificate"
    assert cert["spec"] == {
        "secretName": secret,
        "duration": "2160h0m0s",
        "renewBefore": "360h0m0s",
        "dnsNames": dns,
        "ipAddresses": ["10.0.0.2", "127.0.0.1"],
        "usages": ["digital signature", "key encipherment", "server auth", "client auth"],
        "issuerRef": {
            "name": "ray-ca-issuer-raycluster-mtls",
            "kind": "Issuer",
            "group": "cert-manager.io",
        },
    }


def test_pod_ips_live_pods_of_one_type_plus_loopback() -> None:
    pods = [
        _pod("worker", "10.0.0.9"),
        _pod("worker", "10.0.0.10"),
        _pod("worker", "10.0.0.9"),  # duplicate
        _pod("worker", ""),  # no IP yet
        _pod("worker", "10.0.0.11", phase="Failed"),
        _pod("worker", "10.0.0.12", meta={"deletionTimestamp": "2026-01-01T00:00:00Z"}),
        _pod("worker", "10.0.0.13", cluster="other"),
        _pod("head", "10.0.0.1"),
    ]
    assert mtls.pod_ips(pods, "raycluster-mtls", "worker") == ["10.0.0.10", "10.0.0.9", "127.0.0.1"]
    assert mtls.pod_ips(pods, "raycluster-mtls", "head") == ["10.0.0.1", "127.0.0.1"]
    assert mtls.pod_ips([], "raycluster-mtls", "head") == ["127.0.0.1"]


def test_certificate_needs_update_labels_and_san_sets_only() -> None:
    opts = BuildOptions()
    want = mtls.leaf_certificate(_rc(), "worker", ["10.0.0.2", "127.0.0.1"], opts)
    same = mtls.leaf_certificate(_rc(), "worker", ["10.0.0.2", "127.0.0.1"], opts)
    same["spec"]["ipAddresses"].reverse()
    same["spec"]["duration"] = "1h0m0s"  # other drift is ignored
    assert not mtls.certificate_needs_update(want, same)
    moved = mtls.leaf_certificate(_rc(), "worker", ["10.0.0.3", "127.0.0.1"], opts)
    assert mtls.certificate_needs_update(want, moved)
    relabelled = mtls.leaf_certificate(_rc(), "worker", ["10.0.0.2", "127.0.0.1"], opts)
    relabelled["metadata"]["labels"]["extra"] = "x"
    assert mtls.certificate_needs_update(want, relabelled)


def _cert(ready: str, observed: int, generation: int = 2) -> dict[str, Any]:
    return {
        "metadata": {"generation": generation},
        "status": {
            "conditions": [{"type": "Ready", "status": ready, "observedGeneration": observed}]
        },
    }


@pytest.mark.parametrize(
    ("cert", "ready"),
    [
        (None, False),
        ({"metadata": {"generation": 1}}, False),
        (_cert("True", 2), True),
        (_cert("True", 1), False),  # Ready for an older spec (SANs just changed)
        (_cert("False", 2), False),
    ],
)
def test_certificate_ready(cert: Any, ready: bool) -> None:
    assert mtls.certificate_ready(cert) is ready


def test_secrets_wait_reason() -> None:
    c, ok = "raycluster-mtls", _cert("True", 2)
    full = {"data": {"tls.crt": "eA==", "tls.key": "eA==", "ca.crt": "eA=="}}
    certs: dict[str, Any] = {"ray-head-cert-raycluster-mtls": ok}
    secrets: dict[str, Any] = {}
    assert mtls.secrets_wait_reason(c, certs, secrets) == (
        "certificate ray-worker-cert-raycluster-mtls not found"
    )
    certs["ray-worker-cert-raycluster-mtls"] = _cert("True", 1)
    assert mtls.secrets_wait_reason(c, certs, secrets) == (
        "certificate ray-worker-cert-raycluster-mtls not ready"
    )
    certs["ray-worker-cert-raycluster-mtls"] = ok
    assert mtls.secrets_wait_reason(c, certs, secrets) == (
        "secret ray-head-secret-raycluster-mtls not found"
    )
    secrets["ray-head-secret-raycluster-mtls"] = full
    secrets["ray-worker-secret-raycluster-mtls"] = {"data": {"tls.crt": "eA==", "tls.key": "eA=="}}
    assert mtls.secrets_wait_reason(c, certs, secrets) == (
        "secret ray-worker-secret-raycluster-mtls missing required key ca.crt"
    )
    secrets["ray-worker-secret-raycluster-mtls"] = full
    assert mtls.secrets_wait_reason(c, certs, secrets) is None


def test_pod_has_mtls() -> None:
    rc = _rc()
    assert mtls.pod_has_mtls(build_head_pod(rc, BuildOptions(mtls=True)))
    assert mtls.pod_has_mtls(
        build_worker_pod(rc, rc["spec"]["workerGroupSpecs"][0], BuildOptions(mtls=True))
    )
    assert not mtls.pod_has_mtls(build_head_pod(rc, BuildOptions()))  # gate off: plain pod
    assert not mtls.pod_has_mtls({"spec": {"initContainers": [{"name": "other"}]}})


def test_secret_owner_references_added_once() -> None:
    cert = {"metadata": {"name": "ray-head-cert-x", "uid": "u1"}}
    secret: dict[str, Any] = {"metadata": {"ownerReferences": [{"uid": "other", "kind": "X"}]}}
    refs = mtls.secret_owner_references(secret, cert)
    assert refs == [
        {"uid": "other", "kind": "X"},
        {
            "apiVersion": "cert-manager.io/v1",
            "kind": "Certificate",
            "name": "ray-head-cert-x",
            "uid": "u1",
            "blockOwnerDeletion": True,
        },
    ]
    secret["metadata"]["ownerReferences"] = refs
    assert mtls.secret_owner_references(secret, cert) is None
