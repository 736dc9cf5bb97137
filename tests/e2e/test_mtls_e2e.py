"""mTLS end to end: real Ray with TLS on the process runtime, certificates from the real
cert-manager (gate RayClusterMTLS).

The worker joins the head over mutual TLS and runs a task; the head's GCS port accepts a TLS
client that presents the cluster's worker certificate and refuses one without a certificate,
and a plaintext client. Each new pod waits in ``wait-for-tls-ip-san`` until cert-manager has
re-issued its certificate with the pod's IP and the runtime has refreshed the mounted Secret.

The package's shared operator (no gate) is stopped for this module and replaced by one with the
gate, started after cert-manager's CRDs are installed (it detects them at startup); the shared
one is restarted afterwards, and the CRDs are removed.
"""

from __future__ import annotations

import asyncio
import base64
import socket
import ssl
import tempfile
import time
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest

from kuberay.api.constants import RAYCLUSTERS
from kuberay.devenv import certmanager
from kuberay.devenv.operatorproc import OperatorProcess
from kuberay.devenv.plane import Plane, free_port
from kuberay.devenv.testing import create_namespace, delete_namespace, unique_name, wait_for
from kuberay.runtime.client import SECRETS, KubeClient

from .raykube import (
    cluster_spec,
    head_ip,
    raycluster,
    run_job,
    wait_alive_nodes,
    worker_group,
)

pytestmark = [pytest.mark.e2e, pytest.mark.slow]

READY_TIMEOUT = 420.0
GCS_PORT = 6379


@pytest.fixture(scope="module")
async def mtls_ns(
    process_plane: Plane, process_kube: KubeClient, ray_operator: Any
) -> AsyncIterator[str]:
    """A namespace watched by a RayClusterMTLS operator, with cert-manager running."""
    ray_operator.stop()
    await certmanager.install_crds(process_kube)
    cm = certmanager.CertManager(process_plane)
    op = OperatorProcess(
        process_plane,
        process_plane.logs,
        "--use-kubernetes-proxy",
        "--feature-gates=RayClusterMTLS=true",
        f"--metrics-addr=127.0.0.1:{free_port()}",
    )
    name = unique_name("e2e-mtls", 30)
    try:
        cm.start()
        op.start()
        await create_namespace(process_kube, name)
        yield name
    finally:
        await delete_namespace(process_kube, name)
        op.stop()
        cm.stop()
        await certmanager.remove_crds(process_kube)
        ray_operator.start()


def _tls_probe(ip: str, ca: bytes, cert: tuple[bytes, bytes] | None) -> str:
    """One TLS connection to the GCS port: ``"served"`` when the server talked HTTP/2 to us
    (its SETTINGS frame), else the error that ended the connection. The server name checked is
    the head pod's IP (its certificate's IP SAN)."""
    ctx = ssl.create_default_context(ssl.Purpose.SERVER_AUTH)
    ctx.set_alpn_protocols(["h2"])
    with tempfile.TemporaryDirectory() as tmp:
        ca_file = Path(tmp) / "ca.crt"
        ca_file.write_bytes(ca)
        ctx.load_verify_locations(cafile=str(ca_file))
        if cert is not None:
            crt, key = Path(tmp) / "tls.crt", Path(tmp) / "tls.key"
            crt.write_bytes(cert[0])
            key.write_bytes(cert[1])
            ctx.load_cert_chain(str(crt), str(key))
        try:
            with (
                socket.create_connection((ip, GCS_PORT), timeout=10) as raw,
                ctx.wrap_socket(raw, server_hostname=ip) as tls,
            ):
                tls.sendall(b"PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n")
                data = tls.recv(64)
                return "served" if data else "closed"
        except (ssl.SSLError, OSError) as exc:
            return f"refused: {exc}"


def _plaintext_probe(ip: str) -> str:
    try:
        with socket.create_connection((ip, GCS_PORT), timeout=10) as raw:
            raw.sendall(b"PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n" + b"\x00" * 9)
            data = raw.recv(64)
            # A TLS server answers garbage with a TLS alert (0x15) or closes.
            return "served" if data and data[:1] != b"\x15" else "refused"
    except OSError as exc:
        return f"refused: {exc}"


async def test_tls_cluster_runs_a_task_and_refuses_clients_without_a_certificate(
    process_kube: KubeClient, process_plane: Plane, mtls_ns: str
) -> None:
    ns = mtls_ns
    spec = cluster_spec(worker_group("small", 1))
    spec["tlsOptions"] = {"enabled": True}
    started = time.monotonic()
    await process_kube.create(RAYCLUSTERS, raycluster("tls", spec), ns)
    await wait_for(
        process_kube,
        RAYCLUSTERS,
        "tls",
        ns,
        lambda o: (o.get("status") or {}).get("state") == "ready",
        timeout=READY_TIMEOUT,
        what="ready",
    )
    print(f"TLS cluster ready in {time.monotonic() - started:.0f}s")
    ip = await head_ip(process_kube, ns, "tls")
    dashboard = f"http://{ip}:8265"
    await wait_alive_nodes(dashboard, 2)  # the worker joined the head over mTLS
    entry = (
        'python -c "import ray, os, socket; ray.init();'
        " f = ray.remote(num_cpus=1)(lambda: (socket.gethostname(), os.environ['RAY_USE_TLS']));"
        " print('ran-on', *ray.get(f.remote()))\""
    )
    state, logs = await run_job(dashboard, entry)
    assert state == "SUCCEEDED", logs
    ran = [line.split() for line in logs.splitlines() if line.startswith("ran-on ")]
    assert len(ran) == 1, logs
    host, use_tls = ran[0][1:]
    assert host.startswith("tls-small-worker-"), logs  # on the worker, over mTLS
    assert use_tls == "1", logs

    worker = (await process_kube.get(SECRETS, "ray-worker-secret-tls", ns))["data"]
    ca = base64.b64decode(worker["ca.crt"])
    pair = (base64.b64decode(worker["tls.crt"]), base64.b64decode(worker["tls.key"]))
    with_cert = await asyncio.to_thread(_tls_probe, ip, ca, pair)
    without_cert = await asyncio.to_thread(_tls_probe, ip, ca, None)
    plaintext = await asyncio.to_thread(_plaintext_probe, ip)
    print(f"GCS port: with cert {with_cert}; without {without_cert}; plaintext {plaintext}")
    assert with_cert == "served", with_cert
    assert without_cert != "served", without_cert
    assert plaintext != "served", plaintext

    # The worker was created before its IP could be in the shared worker certificate: its
    # wait-for-tls-ip-san init container saw the old certificate, then the re-issued one (the
    # SANs rewritten by the operator, the Secret by cert-manager, the file by the runtime).
    files = sorted(process_plane.pod_logs.glob(f"{ns}_tls-small-worker-*/wait-for-tls-ip-san*"))
    assert files, list(process_plane.pod_logs.glob(f"{ns}_*"))
    init_log = "\n".join(f.read_text(errors="replace") for f in files)
    assert "not in the certificate yet" in init_log, init_log
    assert "The certificate lists IP SAN" in init_log, init_log
