"""`kuberay operator` startup checks against the real API server: clear errors, exit code 2."""

from __future__ import annotations

import subprocess
import sys

import pytest

from kuberay.cli.operator import SettingsError, require_kubernetes
from kuberay.devenv.plane import Plane
from kuberay.runtime.client import KubeClient


async def test_kubernetes_version_requirement(kube: KubeClient) -> None:
    await require_kubernetes(kube, (1, 34), "this test")
    with pytest.raises(
        SettingsError, match=r"needs Kubernetes 1\.35 or newer; the API server is v1\.34"
    ):
        await require_kubernetes(kube, (1, 35), "the SidecarSubmitterRestart feature gate")


@pytest.mark.parametrize(
    ("flag", "message"),
    [
        (
            "--feature-gates=SidecarSubmitterRestart=true",
            "SidecarSubmitterRestart feature gate needs Kubernetes 1.35",
        ),
        ("--feature-gates=NoSuchGate=true", "unrecognized feature gate: NoSuchGate"),
        ("--batch-scheduler=nonexistent", "unsupported --batch-scheduler 'nonexistent'"),
    ],
)
def test_operator_refuses_to_start_with_a_reason(plane: Plane, flag: str, message: str) -> None:
    proc = subprocess.run(
        [
            sys.executable,
            "-m",
            "kuberay.cli.main",
            "operator",
            f"--kubeconfig={plane.kubeconfig}",
            "--enable-leader-election=false",
            "--metrics-addr=127.0.0.1:0",
            "--health-probe-bind-address=127.0.0.1:0",
            flag,
        ],
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    assert proc.returncode == 2, proc.stderr
    assert message in proc.stderr
