"""RayClusterMTLS with the real cert-manager on the KWOK plane.

A TLS RayCluster gets upstream's two Issuers and three Certificates; while cert-manager has not
issued them the cluster has no pods and ``status.reason`` says what it waits for; once the
Secrets exist the pods are created, and the leaf Certificates' IP SANs (and the issued
certificates themselves) follow the pods' IPs, including after a scale-down.

The operator runs as its ServiceAccount under exactly the generated RBAC. cert-manager's CRDs are
installed on the shared session plane for this module only and removed afterwards (other modules
check the operator's behaviour without cert-manager's API).
"""

from __future__ import annotations

import base64
import ipaddress
import time
from collections.abc import AsyncIterator, Iterator
from pathlib import Path
from typing import Any

import pytest
from cryptography import x509
from operator_fixture import OperatorProcess, install_crds
from test_install_rbac import _install_rbac, _service_account_kubeconfig

from kuberay.api.constants import CM_CERTIFICATES, CM_ISSUERS, RAYCLUSTERS
from kuberay.devenv import certmanager
from kuberay.devenv.plane import Plane
from kuberay.devenv.testing import create_namespace, delete_namespace, unique_name, wait_until
from kuberay.runtime.client import PODS, SECRETS, KubeClient
from kuberay.runtime.errors import NotFound
from kuberay.runtime.events import EVENTS_V1

NAME = "mtls"
HEAD_CERT, WORKER_CERT = f"ray-head-cert-{NAME}", f"ray-worker-cert-{NAME}"
HEAD_SECRET, WORKER_SECRET = f"ray-head-secret-{NAME}", f"ray-worker-secret-{NAME}"
ISSUE_TIMEOUT = 120.0  # a 4096-bit CA key on two busy cores


def tls_cluster(workers: int) -> dict[str, Any]:
    image = "rayproject/ray:2.52.0"
    return {
        "apiVersion": "ray.io/v1",
        "kind": "RayCluster",
        "metadata": {"name": NAME},
        "spec": {
            "tlsOptions": {"enabled": True},
            "headGroupSpec": {
                "rayStartParams": {},
                "template": {"spec": {"containers": [{"name": "ray-head", "image": image}]}},
            },
            "workerGroupSpecs": [
                {
                    "groupName": "small",
                    "replicas": workers,
                    "minReplicas": 0,
                    "maxReplicas": 4,
                    "rayStartParams": {},
                    "template": {"spec": {"containers": [{"name": "ray-worker", "image": image}]}},
                }
            ],
        },
    }


@pytest.fixture(scope="module")
async def cert_manager_crds(kube: KubeClient) -> AsyncIterator[None]:
    await certmanager.install_crds(kube)
    try:
        yield
    finally:
        await certmanager.remove_crds(kube)


@pytest.fixture
def cert_manager(plane: Plane) -> Iterator[certmanager.CertManager]:
    """Not started: the test starts it when it has seen the cluster wait."""
    cm = certmanager.CertManager(plane)
    yield cm
    cm.stop()


@pytest.fixture
async def mtls_operator(
    plane: Plane, kube: KubeClient, namespace: str, tmp_path: Path, cert_manager_crds: None
) -> AsyncIterator[OperatorProcess]:
    """The operator as its ServiceAccount bound to exactly the generated ``deploy/rbac`` rules,
    so the mTLS controller's permissions are checked by the real authorizer."""
    await install_crds(kube)
    install_ns = unique_name("kuberay-system")
    await create_namespace(kube, install_ns)
    cluster_scoped = await _install_rbac(kube, install_ns, install_ns)
    kubeconfig = await _service_account_kubeconfig(kube, plane, install_ns, tmp_path)
    op = OperatorProcess(
        plane,
        tmp_path,
        f"--kubeconfig={kubeconfig}",
        # History too: the repository's mTLS sample also has a history collector.
        "--feature-gates=RayClusterMTLS=true,RayClusterHistoryServer=true",
        f"--watch-namespace={namespace}",
    )
    op.start()
    try:
        yield op
        assert "forbidden" not in op.log_path.read_text().lower(), op.tail()
    finally:
        op.stop()
        for res, name in cluster_scoped:
            await kube.delete(res, name)
        await delete_namespace(kube, install_ns)


async def get_or_none(kube: KubeClient, res: Any, name: str, ns: str) -> dict[str, Any] | None:
    try:
        return await kube.get(res, name, ns)
    except NotFound:
        return None


async def cluster_pods(kube: KubeClient, ns: str) -> list[dict[str, Any]]:
    return list((await kube.list(PODS, ns, label_selector=f"ray.io/cluster={NAME}"))["items"])


def cert_ips(secret: dict[str, Any]) -> set[str]:
    """The IP SANs of the certificate cert-manager issued into ``secret``."""
    pem = base64.b64decode(secret["data"]["tls.crt"])
    cert = x509.load_pem_x509_certificate(pem)
    san = cert.extensions.get_extension_for_class(x509.SubjectAlternativeName).value
    return {str(ip) for ip in san.get_values_for_type(x509.IPAddress)}


async def test_pods_wait_for_issued_secrets_and_sans_follow_pods(  # noqa: C901, PLR0915
    kube: KubeClient,
    namespace: str,
    mtls_operator: OperatorProcess,
    cert_manager: certmanager.CertManager,
) -> None:
    ns = namespace
    created = await kube.create(RAYCLUSTERS, tls_cluster(workers=2), ns)
    uid8 = created["metadata"]["uid"][:8]
    ca_secret = f"{NAME}-ca-secret-{uid8}"

    # 1. The PKI objects appear with upstream's names; nothing issues them yet.
    names = {
        CM_ISSUERS: [f"ray-selfsigned-issuer-{NAME}", f"ray-ca-issuer-{NAME}"],
        CM_CERTIFICATES: [f"ray-ca-certificate-{NAME}", HEAD_CERT, WORKER_CERT],
    }

    async def pki_made() -> bool:
        for res, wanted in names.items():
            for name in wanted:
                if await get_or_none(kube, res, name, ns) is None:
                    return False
        return True

    await wait_until(pki_made, timeout=60, what=f"Issuers and Certificates\n{mtls_operator.tail()}")
    ca_cert = await kube.get(CM_CERTIFICATES, f"ray-ca-certificate-{NAME}", ns)
    assert ca_cert["spec"]["secretName"] == ca_secret
    assert ca_cert["spec"]["isCA"] is True
    assert ca_cert["metadata"]["ownerReferences"][0]["uid"] == created["metadata"]["uid"]
    ca_issuer = await kube.get(CM_ISSUERS, f"ray-ca-issuer-{NAME}", ns)
    assert ca_issuer["spec"] == {"ca": {"secretName": ca_secret}}
    head_cert = await kube.get(CM_CERTIFICATES, HEAD_CERT, ns)
    assert head_cert["spec"]["dnsNames"] == [
        "localhost",
        f"{NAME}-head-svc.{ns}.svc.cluster.local",
    ]
    assert head_cert["spec"]["ipAddresses"] == ["127.0.0.1"]
    assert head_cert["spec"]["issuerRef"]["name"] == f"ray-ca-issuer-{NAME}"

    # 2. The cluster waits, says why, and has no pods.
    async def waiting() -> bool:
        rc = await kube.get(RAYCLUSTERS, NAME, ns)
        return str((rc.get("status") or {}).get("reason", "")).startswith(
            "mTLS secrets not ready: certificate"
        )

    await wait_until(waiting, timeout=60, what=f"status.reason\n{mtls_operator.tail()}")
    assert await cluster_pods(kube, ns) == []
    events = (await kube.list(EVENTS_V1, ns))["items"]
    assert "MTLSCertsNotReady" in {e["reason"] for e in events}

    # 3. The real cert-manager issues the Secrets; only then are pods created.
    cert_manager.start()
    issued_at = time.monotonic()

    async def secrets_issued() -> bool:
        for name in (ca_secret, HEAD_SECRET, WORKER_SECRET):
            secret = await get_or_none(kube, SECRETS, name, ns)
            if secret is None or not {"tls.crt", "tls.key", "ca.crt"} <= set(secret["data"]):
                return False
        return True

    await wait_until(
        secrets_issued, timeout=ISSUE_TIMEOUT, what=f"issued Secrets\n{cert_manager.tail()}"
    )
    print(f"cert-manager issued the three Secrets in {time.monotonic() - issued_at:.1f}s")

    async def three_pods() -> bool:
        return len(await cluster_pods(kube, ns)) == 3

    await wait_until(three_pods, timeout=60, what=f"head and 2 workers\n{mtls_operator.tail()}")

    # The pass that created the pods writes the status without the wait's reason after them.
    async def reason_cleared() -> bool:
        rc = await kube.get(RAYCLUSTERS, NAME, ns)
        return "reason" not in (rc.get("status") or {})

    await wait_until(reason_cleared, timeout=30, what="status.reason cleared once pods exist")
    for pod in await cluster_pods(kube, ns):
        kind = pod["metadata"]["labels"]["ray.io/node-type"]
        volume = next(v for v in pod["spec"]["volumes"] if v["name"] == "ray-tls")
        assert volume["secret"]["secretName"] == f"ray-{kind}-secret-{NAME}"

    # 4. SANs follow the pod IPs: in the Certificate and in the certificate cert-manager issued.
    async def sans_cover_pods() -> bool:
        pods = await cluster_pods(kube, ns)
        want = {
            kind: {
                p["status"]["podIP"]
                for p in pods
                if p["metadata"]["labels"]["ray.io/node-type"] == kind
                and p.get("status", {}).get("podIP")
            }
            | {"127.0.0.1"}
            for kind in ("head", "worker")
        }
        if len(want["worker"]) != 3 or len(want["head"]) != 2:
            return False  # IPs not all assigned yet
        for kind, cert_name, secret_name in (
            ("head", HEAD_CERT, HEAD_SECRET),
            ("worker", WORKER_CERT, WORKER_SECRET),
        ):
            cert = await kube.get(CM_CERTIFICATES, cert_name, ns)
            if set(cert["spec"]["ipAddresses"]) != want[kind]:
                return False
            if cert_ips(await kube.get(SECRETS, secret_name, ns)) != want[kind]:
                return False
        return True

    await wait_until(
        sans_cover_pods,
        timeout=ISSUE_TIMEOUT,
        what="pod IPs in the Certificates and issued certificates",
        explain=lambda: _explain(kube, ns, cert_manager),
    )
    worker_cert = await kube.get(CM_CERTIFICATES, WORKER_CERT, ns)
    assert worker_cert["spec"]["ipAddresses"] == sorted(worker_cert["spec"]["ipAddresses"])
    events = (await kube.list(EVENTS_V1, ns))["items"]
    reasons = {e["reason"] for e in events if e["regarding"]["name"] == NAME}
    assert {"MTLSCertificatesUpdated", "MTLSPKIReady"} <= reasons, reasons
    # Each Secret is owned by its Certificate (so deleting the cluster collects the keys).
    for secret_name, cert_name in (
        (HEAD_SECRET, HEAD_CERT),
        (WORKER_SECRET, WORKER_CERT),
        (ca_secret, f"ray-ca-certificate-{NAME}"),
    ):

        async def owned(secret_name: str = secret_name, cert_name: str = cert_name) -> bool:
            secret = await kube.get(SECRETS, secret_name, ns)
            refs = secret["metadata"].get("ownerReferences") or []
            return any(r["kind"] == "Certificate" and r["name"] == cert_name for r in refs)

        await wait_until(owned, timeout=90, what=f"{secret_name} owned by {cert_name}")

    # 5. Rotation on scale-down: the removed worker's IP leaves the SANs and the issued cert.
    await kube.patch(
        RAYCLUSTERS,
        NAME,
        {"spec": {"workerGroupSpecs": [{**tls_cluster(1)["spec"]["workerGroupSpecs"][0]}]}},
        ns,
    )

    async def one_worker_ip() -> bool:
        pods = [
            p
            for p in await cluster_pods(kube, ns)
            if p["metadata"]["labels"]["ray.io/node-type"] == "worker"
            and not p["metadata"].get("deletionTimestamp")
        ]
        if len(pods) != 1 or not pods[0].get("status", {}).get("podIP"):
            return False
        want = {pods[0]["status"]["podIP"], "127.0.0.1"}
        cert = await kube.get(CM_CERTIFICATES, WORKER_CERT, ns)
        secret = await kube.get(SECRETS, WORKER_SECRET, ns)
        return set(cert["spec"]["ipAddresses"]) == want and cert_ips(secret) == want

    await wait_until(one_worker_ip, timeout=ISSUE_TIMEOUT, what="worker SANs after scale-down")
    for ip in (await kube.get(CM_CERTIFICATES, WORKER_CERT, ns))["spec"]["ipAddresses"]:
        ipaddress.ip_address(ip)


async def _explain(kube: KubeClient, ns: str, cm: certmanager.CertManager) -> str:
    certs = (await kube.list(CM_CERTIFICATES, ns))["items"]
    lines = [
        f"{c['metadata']['name']}: {c['spec'].get('ipAddresses')} {c.get('status')}" for c in certs
    ]
    pods = await cluster_pods(kube, ns)
    lines += [f"{p['metadata']['name']}: {p.get('status', {}).get('podIP')}" for p in pods]
    return "\n".join([*lines, cm.tail()])


async def test_turning_tls_on_recreates_pods_with_tls(
    kube: KubeClient,
    namespace: str,
    mtls_operator: OperatorProcess,
    cert_manager: certmanager.CertManager,
) -> None:
    ns = namespace
    cert_manager.start()
    plain = tls_cluster(workers=1)
    del plain["spec"]["tlsOptions"]
    await kube.create(RAYCLUSTERS, plain, ns)

    async def pods_with(tls: bool) -> bool:
        pods = [
            p for p in await cluster_pods(kube, ns) if not p["metadata"].get("deletionTimestamp")
        ]
        volumes = [{v["name"] for v in p["spec"].get("volumes") or []} for p in pods]
        return len(pods) == 2 and all(("ray-tls" in v) is tls for v in volumes)

    await wait_until(lambda: pods_with(False), timeout=60, what="plain head and worker")
    before = {p["metadata"]["uid"] for p in await cluster_pods(kube, ns)}
    await kube.patch(RAYCLUSTERS, NAME, {"spec": {"tlsOptions": {"enabled": True}}}, ns)
    await wait_until(
        lambda: pods_with(True),
        timeout=ISSUE_TIMEOUT,
        what=f"pods recreated with TLS\n{mtls_operator.tail()}",
    )
    after = {p["metadata"]["uid"] for p in await cluster_pods(kube, ns)}
    assert not before & after
    events = (await kube.list(EVENTS_V1, ns))["items"]
    assert "DeletedHeadPod" in {e["reason"] for e in events}


async def test_the_mtls_sample_becomes_ready(
    kube: KubeClient,
    namespace: str,
    mtls_operator: OperatorProcess,
    cert_manager: certmanager.CertManager,
) -> None:
    """deploy/samples/raycluster.mtls-history.yaml (skipped by the generic samples test)."""
    import yaml

    cert_manager.start()
    sample = Path(__file__).resolve().parents[2] / "deploy/samples/raycluster.mtls-history.yaml"
    doc = yaml.safe_load(sample.read_text())
    await kube.create(RAYCLUSTERS, doc, namespace)
    name = doc["metadata"]["name"]

    async def ready() -> bool:
        rc = await kube.get(RAYCLUSTERS, name, namespace)
        return (rc.get("status") or {}).get("state") == "ready"

    await wait_until(ready, timeout=ISSUE_TIMEOUT, what=f"{name} ready\n{mtls_operator.tail()}")
    for kind in ("head", "worker"):
        secret = await kube.get(SECRETS, f"ray-{kind}-secret-{name}", namespace)
        assert {"tls.crt", "tls.key", "ca.crt"} <= set(secret["data"])
