"""`kuberay operator` against the real API server: startup checks (clear errors, exit code 2)
and what ``--enable-metrics`` serves."""

from __future__ import annotations

import asyncio
import contextlib
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import aiohttp
import pytest

from kuberay.api.constants import RAYCLUSTERS
from kuberay.cli.operator import SettingsError, require_kubernetes
from kuberay.controllers.rayjob import RAYJOBS
from kuberay.controllers.rayservice import RAYSERVICES
from kuberay.devenv.manifests import install_crds
from kuberay.devenv.operatorproc import OperatorProcess
from kuberay.devenv.plane import Plane, free_port
from kuberay.devenv.testing import wait_gone
from kuberay.runtime.client import CRDS, KubeClient
from kuberay.runtime.errors import NotFound


async def test_kubernetes_version_requirement(kube: KubeClient) -> None:
    # The plane is v1.36: the SidecarSubmitterRestart gate's 1.35 minimum is met, a newer
    # minimum is refused with the server's version in the message.
    await require_kubernetes(kube, (1, 35), "the SidecarSubmitterRestart feature gate")
    with pytest.raises(
        SettingsError, match=r"needs Kubernetes 1\.99 or newer; the API server is v1\.36"
    ):
        await require_kubernetes(kube, (1, 99), "a future feature")


def operator_argv(plane: Plane, *flags: str) -> list[str]:
    return [
        sys.executable,
        "-m",
        "kuberay.cli.main",
        "operator",
        f"--kubeconfig={plane.kubeconfig}",
        "--enable-leader-election=false",
        "--metrics-addr=127.0.0.1:0",
        "--health-probe-bind-address=127.0.0.1:0",
        *flags,
    ]


@pytest.mark.parametrize(
    ("flag", "message"),
    [
        ("--feature-gates=NoSuchGate=true", "unrecognized feature gate: NoSuchGate"),
        ("--batch-scheduler=nonexistent", "scheduler is not supported, name=nonexistent"),
        (
            "--enable-batch-scheduler --batch-scheduler=volcano",
            "both feature flags enable-batch-scheduler (deprecated) and batch-scheduler are set",
        ),
    ],
)
def test_operator_refuses_to_start_with_a_reason(plane: Plane, flag: str, message: str) -> None:
    proc = subprocess.run(
        operator_argv(plane, *flag.split()),
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    assert proc.returncode == 2, proc.stderr
    assert message in proc.stderr


async def test_volcano_needs_its_podgroup_api(plane: Plane, kube: KubeClient) -> None:
    with contextlib.suppress(NotFound):
        await kube.delete(CRDS, "podgroups.scheduling.volcano.sh")
    await wait_gone(kube, CRDS, "podgroups.scheduling.volcano.sh", None)
    proc = await asyncio.create_subprocess_exec(
        *operator_argv(plane, "--batch-scheduler=volcano"),
        stderr=asyncio.subprocess.PIPE,
        stdout=asyncio.subprocess.DEVNULL,
    )
    _, err = await asyncio.wait_for(proc.communicate(), 60)
    assert proc.returncode == 2, err
    assert b"--batch-scheduler=volcano needs the podgroups.scheduling.volcano.sh/v1beta1 API" in err


def _cluster_spec() -> dict[str, Any]:
    container = {"name": "ray-head", "image": "rayproject/ray:2.52.0"}
    return {
        "headGroupSpec": {"rayStartParams": {}, "template": {"spec": {"containers": [container]}}},
    }


async def test_enable_metrics_serves_cluster_job_and_service_families(
    plane: Plane, kube: KubeClient, namespace: str, tmp_path: Path
) -> None:
    await install_crds(kube)
    meta = {"name": "m"}
    await kube.create(
        RAYCLUSTERS,
        {
            "apiVersion": "ray.io/v1",
            "kind": "RayCluster",
            "metadata": meta,
            "spec": {**_cluster_spec(), "suspend": True},
        },
        namespace,
    )
    await kube.create(
        RAYJOBS,
        {
            "apiVersion": "ray.io/v1",
            "kind": "RayJob",
            "metadata": meta,
            "spec": {"entrypoint": "true", "suspend": True, "rayClusterSpec": _cluster_spec()},
        },
        namespace,
    )
    await kube.create(
        RAYSERVICES,
        {
            "apiVersion": "ray.io/v1",
            "kind": "RayService",
            "metadata": meta,
            "spec": {"suspend": True, "rayClusterConfig": _cluster_spec()},
        },
        namespace,
    )
    port = free_port()
    op = OperatorProcess(
        plane,
        tmp_path,
        "--enable-metrics",
        f"--metrics-addr=127.0.0.1:{port}",
        f"--watch-namespace={namespace}",
    )
    ident = f'name="m",namespace="{namespace}"'
    wanted = [
        "kuberay_cluster_info{",
        "kuberay_cluster_condition_provisioned{",
        "kuberay_job_info{",
        "kuberay_job_deployment_status{",
        "kuberay_service_info{",
        "kuberay_service_condition_ready{",
        "kuberay_service_condition_upgrade_in_progress{",
    ]
    text = ""
    op.start()
    try:
        deadline = time.monotonic() + 60
        async with aiohttp.ClientSession() as http:
            while time.monotonic() < deadline:
                try:
                    async with http.get(f"http://127.0.0.1:{port}/metrics") as resp:
                        text = await resp.text()
                except aiohttp.ClientError:
                    text = ""
                lines = [x for x in text.splitlines() if ident in x]
                if all(any(x.startswith(w) for x in lines) for w in wanted):
                    break
                await asyncio.sleep(0.5)
    finally:
        op.stop()
    lines = [x for x in text.splitlines() if ident in x]
    missing = [w for w in wanted if not any(x.startswith(w) for x in lines)]
    assert not missing, (missing, op.tail())
    assert "# TYPE kuberay_job_execution_duration_seconds gauge" in text
