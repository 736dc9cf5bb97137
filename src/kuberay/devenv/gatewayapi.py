"""Gateway API CRDs for the local plane, taken from the Go module the repository pins.

The incremental RayService upgrade writes ``gateway.networking.k8s.io/v1`` Gateways and
HTTPRoutes, so the tests need the real CRDs (their defaulting and validation, not an
approximation). ``controlplane/gateway-api/`` pins the release; ``go mod download`` fetches it
through the module proxy (checked against the committed ``go.sum``) and the CRD YAML is read
from the module directory it reports.

Failure modes: ``GatewayApiUnavailable`` when Go is not installed (callers skip) or the download
fails (callers fail: a pinned, checksummed module that cannot be fetched is a real problem).
"""

from __future__ import annotations

import json
import shutil
import subprocess
from pathlib import Path

from kuberay.devenv.manifests import REPO_ROOT, install_crds_from
from kuberay.runtime.client import KubeClient

MODULE_DIR = REPO_ROOT / "controlplane" / "gateway-api"
MODULE = "sigs.k8s.io/gateway-api"
# What the operator writes (Gateway, HTTPRoute) and what a Gateway refers to (GatewayClass).
CRD_FILES = (
    "gateway.networking.k8s.io_gatewayclasses.yaml",
    "gateway.networking.k8s.io_gateways.yaml",
    "gateway.networking.k8s.io_httproutes.yaml",
)


class GatewayApiUnavailable(RuntimeError):
    def __init__(self, message: str, *, no_go: bool = False) -> None:
        super().__init__(message)
        self.no_go = no_go


def pinned_version(module_dir: Path = MODULE_DIR, module: str = MODULE) -> str:
    """The version of ``module`` that ``go.mod`` requires (the single source of the pin)."""
    for line in (module_dir / "go.mod").read_text().splitlines():
        parts = line.split("//")[0].split()
        if parts[:1] == ["require"]:
            parts = parts[1:]
        if len(parts) == 2 and parts[0] == module:
            return parts[1]
    raise GatewayApiUnavailable(f"{module_dir / 'go.mod'} does not require {module}")


def module_dir(module_dir: Path = MODULE_DIR, timeout: float = 300.0, module: str = MODULE) -> Path:
    """Downloads (or finds in the module cache) the pinned release of ``module`` (Gateway API
    unless told otherwise; cert-manager's CRDs come the same way); returns its directory."""
    go = shutil.which("go")
    if go is None:
        raise GatewayApiUnavailable("Go is not installed", no_go=True)
    version = pinned_version(module_dir, module)
    proc = subprocess.run(
        [go, "mod", "download", "-json", f"{module}@{version}"],
        cwd=module_dir,
        capture_output=True,
        text=True,
        timeout=timeout,
        check=False,
    )
    try:
        info = json.loads(proc.stdout or "{}")
    except json.JSONDecodeError:
        info = {}
    if proc.returncode != 0 or not info.get("Dir"):
        detail = info.get("Error") or proc.stderr.strip() or proc.stdout.strip()
        raise GatewayApiUnavailable(f"go mod download {module}@{version} failed: {detail}")
    return Path(info["Dir"])


def crd_paths(root: Path) -> list[Path]:
    base = root / "config" / "crd" / "standard"
    paths = [base / name for name in CRD_FILES]
    missing = [str(p) for p in paths if not p.is_file()]
    if missing:
        raise GatewayApiUnavailable(f"Gateway API CRDs missing from the module: {missing}")
    return paths


async def install_gateway_api(kube: KubeClient, timeout: float = 180.0) -> None:
    """Installs the pinned Gateway API CRDs (server-side apply) and waits until Established."""
    await install_crds_from(kube, crd_paths(module_dir()), timeout=timeout)
