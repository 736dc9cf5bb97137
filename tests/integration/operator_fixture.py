"""Runs the operator as a real subprocess against the session's plane, with the CRDs installed.

A subprocess (not an in-process task) so that tests exercise the real entry point and flags, and
can SIGKILL it. Its log is kept beside the plane's logs and printed when a test fails to start.
"""

from __future__ import annotations

import os
import subprocess
from pathlib import Path

import yaml

from kuberay.devenv.manifests import install_crds as install
from kuberay.devenv.operatorproc import OperatorProcess
from kuberay.runtime.client import KubeClient

__all__ = ["CHART", "OperatorProcess", "install_crds", "run_helm"]

CHART = Path(__file__).resolve().parents[2] / "deploy" / "helm" / "kuberay-operator"


def run_helm(
    helm: Path, kubeconfig: Path, home: Path, *args: str, values: dict[str, object] | None = None
) -> str:
    """``helm ARGS`` against a plane, with Helm's cache/config/data kept under ``home`` (never the
    user's) and ``values`` on stdin; fails the test with Helm's stderr."""
    env = dict(os.environ, **{f"HELM_{k}_HOME": str(home / k) for k in ("CACHE", "CONFIG", "DATA")})
    extra = ["--values", "-"] if values is not None else []
    proc = subprocess.run(
        [str(helm), *args, "--kubeconfig", str(kubeconfig), *extra],
        input=yaml.safe_dump(values) if values is not None else None,
        capture_output=True,
        text=True,
        env=env,
        timeout=300,
    )
    assert proc.returncode == 0, proc.stderr
    return proc.stdout


async def install_crds(kube: KubeClient) -> None:
    await install(kube)
