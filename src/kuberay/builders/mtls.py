"""The cert-manager objects behind a RayCluster's mTLS (gate RayClusterMTLS), as pure functions.

Per TLS-enabled cluster, all in its namespace and owned (controller reference) by it: a
self-signed Issuer, a CA Certificate issued by it, a CA Issuer signing with that CA's Secret,
and two leaf Certificates, one for the head and one shared by every worker. cert-manager writes
the three Secrets; pods mount ``ray-head-secret-<c>`` / ``ray-worker-secret-<c>``
(``builders.pod.tls_secret_name``).

Invariants:
- Names are upstream's, untruncated (upstream applies no length check to them either); the CA
  Secret carries the first 8 characters of the cluster's uid so that a re-created cluster of the
  same name never trusts the old CA.
- A leaf Certificate's IP SANs are the primary IPs of the live pods of its node type plus
  ``127.0.0.1``, de-duplicated and sorted as strings, so the same pods always give the same
  list and an unchanged set never causes a write. The head's DNS SANs are ``localhost`` and the
  head Service's FQDN; the workers' only ``localhost``.
- ``certificate_needs_update`` looks only at labels and the two SAN sets, as upstream does:
  other drift (durations, usages) is left alone.
- ``secrets_wait_reason`` is the single predicate for "may this cluster get pods yet": both leaf
  Certificates Ready at their current generation and both Secrets holding all three keys.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any, Final

from kuberay.api import constants as c
from kuberay.api.resources import owner_reference
from kuberay.builders.common import as_dict, as_list
from kuberay.builders.names import head_fqdn
from kuberay.builders.options import BuildOptions
from kuberay.builders.pod import tls_secret_name

JsonDict = dict[str, Any]

CERT_MANAGER_API_VERSION: Final = "cert-manager.io/v1"
CERT_MANAGER_GROUP: Final = "cert-manager.io"
KIND_ISSUER: Final = "Issuer"
KIND_CERTIFICATE: Final = "Certificate"
SECRET_KEYS: Final = ("tls.crt", "tls.key", "ca.crt")
LOOPBACK_IP: Final = "127.0.0.1"
# Go's metav1.Duration rendering of upstream's lifetimes: CA 10 years, renewed 30 days ahead;
# leaves 90 days, renewed 15 days ahead.
CA_DURATION: Final = "87600h0m0s"
CA_RENEW_BEFORE: Final = "720h0m0s"
LEAF_DURATION: Final = "2160h0m0s"
LEAF_RENEW_BEFORE: Final = "360h0m0s"
LEAF_USAGES: Final = ("digital signature", "key encipherment", "server auth", "client auth")


def selfsigned_issuer_name(cluster: str) -> str:
    """upstream: GetSelfSignedIssuerName."""
    return f"ray-selfsigned-issuer-{cluster}"


def ca_certificate_name(cluster: str) -> str:
    """upstream: GetCACertName."""
    return f"ray-ca-certificate-{cluster}"


def ca_issuer_name(cluster: str) -> str:
    """upstream: GetCAIssuerName."""
    return f"ray-ca-issuer-{cluster}"


def ca_secret_name(cluster: str, uid: str) -> str:
    """upstream: GetCASecretName."""
    return f"{cluster}-ca-secret-{uid[:8]}"


def leaf_certificate_name(cluster: str, node_type: str) -> str:
    """``node_type`` is ``head`` or ``worker``. upstream: GetTLSCertName."""
    return f"ray-{node_type}-cert-{cluster}"


def _metadata(cluster: JsonDict, name: str, component: str) -> JsonDict:
    """upstream: tlsResourceLabels (plus the owner reference every object gets)."""
    meta = as_dict(cluster.get("metadata"))
    return {
        "name": name,
        "namespace": meta.get("namespace"),
        "labels": {
            c.LABEL_APP_NAME: c.APP_NAME,
            c.LABEL_CREATED_BY: c.CREATED_BY,
            c.LABEL_COMPONENT: component,
            c.LABEL_CLUSTER: meta.get("name"),
        },
        "ownerReferences": [owner_reference(cluster)],
    }


def _issuer_ref(name: str) -> JsonDict:
    return {"name": name, "kind": KIND_ISSUER, "group": CERT_MANAGER_GROUP}


def _object(cluster: JsonDict, kind: str, name: str, component: str, spec: JsonDict) -> JsonDict:
    return {
        "apiVersion": CERT_MANAGER_API_VERSION,
        "kind": kind,
        "metadata": _metadata(cluster, name, component),
        "spec": spec,
    }


def _names(cluster: JsonDict) -> tuple[str, str]:
    """The cluster's name and its CA Secret's name."""
    meta = as_dict(cluster.get("metadata"))
    name = str(meta.get("name"))
    return name, ca_secret_name(name, str(meta.get("uid") or ""))


def selfsigned_issuer(cluster: JsonDict) -> JsonDict:
    name, _ = _names(cluster)
    return _object(
        cluster, KIND_ISSUER, selfsigned_issuer_name(name), "selfsigned-issuer", {"selfSigned": {}}
    )


def ca_certificate(cluster: JsonDict) -> JsonDict:
    name, secret = _names(cluster)
    spec = {
        "secretName": secret,
        "isCA": True,
        "commonName": f"ray-ca-{name}",
        "privateKey": {"algorithm": "RSA", "size": 4096},
        "duration": CA_DURATION,
        "renewBefore": CA_RENEW_BEFORE,
        "usages": ["cert sign", "crl sign"],
        "issuerRef": _issuer_ref(selfsigned_issuer_name(name)),
    }
    return _object(cluster, KIND_CERTIFICATE, ca_certificate_name(name), "ca-certificate", spec)


def ca_issuer(cluster: JsonDict) -> JsonDict:
    name, secret = _names(cluster)
    spec = {"ca": {"secretName": secret}}
    return _object(cluster, KIND_ISSUER, ca_issuer_name(name), "ca-issuer", spec)


def pod_ips(pods: Iterable[JsonDict], cluster: str, node_type: str) -> list[str]:
    """The IP SANs a leaf Certificate must carry for ``pods``: the primary IP of each live pod
    of ``cluster`` and ``node_type`` (not deleting, not Succeeded/Failed), with ``127.0.0.1``,
    de-duplicated and sorted. upstream: getPodIPs + normalizeIPs."""
    ips = {LOOPBACK_IP}
    for pod in pods:
        meta = as_dict(pod.get("metadata"))
        labels = as_dict(meta.get("labels"))
        if labels.get(c.LABEL_CLUSTER) != cluster or labels.get(c.LABEL_NODE_TYPE) != node_type:
            continue
        status = as_dict(pod.get("status"))
        if meta.get("deletionTimestamp") or status.get("phase") in ("Succeeded", "Failed"):
            continue
        if status.get("podIP"):
            ips.add(str(status["podIP"]))
    return sorted(ips)


def leaf_certificate(
    cluster: JsonDict, node_type: str, ips: list[str], options: BuildOptions
) -> JsonDict:
    """The head (``node_type="head"``) or shared worker Certificate for the given IP SANs."""
    name = str(as_dict(cluster.get("metadata")).get("name"))
    dns = ["localhost"]
    if node_type == c.NODE_TYPE_HEAD:
        dns = sorted({"localhost", head_fqdn(cluster, options)})
    spec = {
        "secretName": tls_secret_name(name, node_type),
        "duration": LEAF_DURATION,
        "renewBefore": LEAF_RENEW_BEFORE,
        "dnsNames": dns,
        "ipAddresses": list(ips),
        "usages": list(LEAF_USAGES),
        "issuerRef": _issuer_ref(ca_issuer_name(name)),
    }
    return _object(
        cluster,
        KIND_CERTIFICATE,
        leaf_certificate_name(name, node_type),
        f"{node_type}-certificate",
        spec,
    )


def certificate_needs_update(want: JsonDict, have: JsonDict) -> bool:
    """upstream: certificateNeedsUpdate (labels exactly, SANs as sets, nothing else)."""
    if as_dict(as_dict(have.get("metadata")).get("labels")) != as_dict(
        as_dict(want.get("metadata")).get("labels")
    ):
        return True
    wspec, hspec = as_dict(want.get("spec")), as_dict(have.get("spec"))
    return any(
        {str(x) for x in as_list(wspec.get(key))} != {str(x) for x in as_list(hspec.get(key))}
        for key in ("dnsNames", "ipAddresses")
    )


def certificate_ready(cert: JsonDict | None) -> bool:
    """Ready=True observed at the Certificate's current generation. upstream: isCertificateReady."""
    if cert is None:
        return False
    generation = as_dict(cert.get("metadata")).get("generation")
    for cond in as_list(as_dict(cert.get("status")).get("conditions")):
        cond = as_dict(cond)
        if cond.get("type") == "Ready":
            return cond.get("status") == "True" and cond.get("observedGeneration") == generation
    return False


def secrets_wait_reason(
    cluster: str, certificates: dict[str, JsonDict | None], secrets: dict[str, JsonDict | None]
) -> str | None:
    """Why the cluster's pods must not be created yet, or None when they may be.

    ``certificates`` and ``secrets`` map the leaf Certificate / Secret names of ``cluster`` to
    the objects found (None: absent). upstream: checkMTLSSecretsReady.
    """
    for node_type in (c.NODE_TYPE_HEAD, c.NODE_TYPE_WORKER):
        name = leaf_certificate_name(cluster, node_type)
        cert = certificates.get(name)
        if cert is None:
            return f"certificate {name} not found"
        if not certificate_ready(cert):
            return f"certificate {name} not ready"
    for node_type in (c.NODE_TYPE_HEAD, c.NODE_TYPE_WORKER):
        name = tls_secret_name(cluster, node_type)
        secret = secrets.get(name)
        if secret is None:
            return f"secret {name} not found"
        data = as_dict(secret.get("data"))
        for key in SECRET_KEYS:
            if not data.get(key):
                return f"secret {name} missing required key {key}"
    return None


def pod_has_mtls(pod: JsonDict) -> bool:
    """The pod was built for mTLS: it has the ``wait-for-tls-ip-san`` init container, which
    the builder adds to every TLS pod together with the ``ray-tls`` volume and the TLS env. A
    pod without it predates mTLS and is recreated. upstream: podHasMTLSConfiguration, which
    looks at the volume and ``RAY_USE_TLS=1`` instead; the operator's pod cache keeps init
    container names but not volumes or env (memory), hence this marker."""
    spec = as_dict(pod.get("spec"))
    return any(
        as_dict(i).get("name") == c.WAIT_FOR_TLS_IP_SAN_INIT_CONTAINER
        for i in as_list(spec.get("initContainers"))
    )


def secret_owner_references(secret: JsonDict, certificate: JsonDict) -> list[JsonDict] | None:
    """The Secret's owner references with a (non-controller) reference to the Certificate that
    produced it, or None when that reference is already there. Deleting the RayCluster then
    collects Certificates and, through this reference, their Secrets.
    upstream: ensureSecretOwnedByCertificate (which writes even when nothing changes)."""
    meta = as_dict(certificate.get("metadata"))
    ref = {
        "apiVersion": CERT_MANAGER_API_VERSION,
        "kind": KIND_CERTIFICATE,
        "name": meta.get("name"),
        "uid": meta.get("uid"),
        "blockOwnerDeletion": True,
    }
    refs = [as_dict(r) for r in as_list(as_dict(secret.get("metadata")).get("ownerReferences"))]
    if ref in refs:
        return None
    return [*(r for r in refs if r.get("uid") != ref["uid"]), ref]
