"""A real cert-manager beside the dev plane: its CRDs and its certificate-issuing controller.

KubeRay's RayClusterMTLS feature creates cert-manager Issuers and Certificates and waits for the
Secrets cert-manager issues, so the mTLS tests run the real thing instead of playing it.

- CRDs: read at run time from the cert-manager module that ``controlplane/cert-manager/go.mod``
  pins (``deploy/crds`` of ``github.com/cert-manager/cert-manager``, fetched through the module
  proxy into the module cache), never copied into this repository. In v1.21 those files are
  plain YAML (no Helm template lines).
- Controller: ``cert-manager-controller``, built on demand from the wrapper module's own main
  package (``kuberay.devenv.binaries``): cert-manager's library controllers for Issuers,
  CertificateRequests (selfSigned and ca) and Certificates. The webhook and the cainjector are
  not run: issuance does not need them (objects are checked by the CRD schemas only, and no
  webhook configuration needs a CA bundle injected).

Invariants and failure modes:
- ``CertManager.start`` returns once the controller logged that its controllers run, or raises
  ``PlaneError`` with the log tail; the child dies with its parent and ``stop`` is bounded.
- The CRDs are cluster-wide: whoever installs them on a shared plane removes them afterwards
  (``remove_crds``), since the operator's cert-manager detection reads discovery at startup.
"""

from __future__ import annotations

import subprocess
import time
from pathlib import Path
from typing import Final

from kuberay.devenv import binaries, gatewayapi
from kuberay.devenv.manifests import REPO_ROOT, install_crds_from, load_documents
from kuberay.devenv.plane import Plane, PlaneError, _terminate, spawn_logged
from kuberay.devenv.testing import wait_gone
from kuberay.runtime.client import CRDS, KubeClient
from kuberay.runtime.errors import NotFound

MODULE_DIR: Final = REPO_ROOT / "controlplane" / "cert-manager"
MODULE: Final = "github.com/cert-manager/cert-manager"
# The cert-manager.io kinds the controllers watch (ACME's orders/challenges are not run).
CRD_FILES: Final = (
    "cert-manager.io_certificaterequests.yaml",
    "cert-manager.io_certificates.yaml",
    "cert-manager.io_clusterissuers.yaml",
    "cert-manager.io_issuers.yaml",
)
READY_LINE: Final = "cert-manager-controller: running"


def crd_paths() -> list[Path]:
    root = gatewayapi.module_dir(MODULE_DIR, module=MODULE) / "deploy" / "crds"
    paths = [root / name for name in CRD_FILES]
    missing = [str(p) for p in paths if not p.is_file()]
    if missing:
        raise gatewayapi.GatewayApiUnavailable(f"cert-manager CRDs missing: {missing}")
    return paths


async def install_crds(kube: KubeClient, timeout: float = 180.0) -> None:
    """Applies cert-manager's CRDs (server-side) and waits until they are served."""
    await install_crds_from(kube, crd_paths(), timeout=timeout)


async def remove_crds(kube: KubeClient, timeout: float = 120.0) -> None:
    """Deletes cert-manager's CRDs (and so every Issuer and Certificate) and waits until gone."""
    for crd in load_documents(crd_paths()):
        name = crd["metadata"]["name"]
        try:
            await kube.delete(CRDS, name)
        except NotFound:
            continue
        await wait_gone(kube, CRDS, name, None, timeout=timeout)


class CertManager:
    """One cert-manager controller process for one plane (``with CertManager(plane):``)."""

    def __init__(self, plane: Plane) -> None:
        self.plane = plane
        self.dir = plane.dir / "cert-manager"
        self.proc: subprocess.Popen[bytes] | None = None

    @property
    def log_path(self) -> Path:
        return self.plane.logs / "cert-manager.log"

    def __enter__(self) -> CertManager:
        self.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.stop()

    def start(self, timeout: float = 60.0) -> None:
        binary = binaries.cert_manager_binary()
        self.dir.mkdir(parents=True, exist_ok=True)
        offset = self.log_path.stat().st_size if self.log_path.exists() else 0
        argv = [str(binary), f"--kubeconfig={self.plane.kubeconfig}"]
        self.proc = spawn_logged(argv, self.log_path, self.dir)
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if self.proc.poll() is not None:
                raise PlaneError(
                    f"cert-manager exited with code {self.proc.returncode}; "
                    f"log {self.log_path}:\n{self.tail()}"
                )
            with open(self.log_path, "rb") as log:
                log.seek(offset)
                if READY_LINE.encode() in log.read():
                    return
            time.sleep(0.2)
        self.stop()
        raise PlaneError(f"cert-manager did not start within {timeout:.0f}s:\n{self.tail()}")

    def stop(self) -> None:
        if self.proc is not None:
            _terminate(self.proc, 10.0)
            self.proc = None

    def tail(self, lines: int = 25) -> str:
        if not self.log_path.exists():
            return ""
        return "\n".join(self.log_path.read_text(errors="replace").splitlines()[-lines:])
