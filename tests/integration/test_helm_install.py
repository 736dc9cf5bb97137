"""The Helm chart on the real apiserver: ``helm install``, ``helm upgrade``, ``helm uninstall``.

What only a server can say: every object the chart renders (default values, then the
configuration-file mode with a log file) passes the apiserver's validation, an upgrade that
changes the pod template is accepted (the Deployment selector stays the same), and uninstalling
removes the cluster-scoped objects, the user-facing ClusterRoles included. The CRDs are left to
``install_crds`` (``--skip-crds``): Helm would only install them when absent anyway. The operator
image does not exist on the plane, so nothing waits for the pod to run.
"""

from __future__ import annotations

import os
import subprocess
from pathlib import Path

import pytest
import yaml
from operator_fixture import install_crds

from kuberay.devenv.plane import Plane
from kuberay.runtime.client import CONFIGMAPS, DEPLOYMENTS, KubeClient, Resource
from kuberay.runtime.errors import NotFound

CHART = Path(__file__).resolve().parents[2] / "deploy" / "helm" / "kuberay-operator"
CLUSTERROLES = Resource(
    "rbac.authorization.k8s.io", "v1", "clusterroles", namespaced=False, kind="ClusterRole"
)


def _helm(
    helm: Path, plane: Plane, home: Path, *args: str, values: dict[str, object] | None = None
) -> str:
    env = dict(os.environ, **{f"HELM_{k}_HOME": str(home / k) for k in ("CACHE", "CONFIG", "DATA")})
    extra = ["--values", "-"] if values is not None else []
    proc = subprocess.run(
        [str(helm), *args, "--kubeconfig", str(plane.kubeconfig), *extra],
        input=yaml.safe_dump(values) if values is not None else None,
        capture_output=True,
        text=True,
        env=env,
        timeout=300,
    )
    assert proc.returncode == 0, proc.stderr
    return proc.stdout


async def test_install_upgrade_uninstall(
    helm: Path, plane: Plane, kube: KubeClient, namespace: str, tmp_path: Path
) -> None:
    await install_crds(kube)

    def run(*args: str, values: dict[str, object] | None = None) -> str:
        return _helm(helm, plane, tmp_path, *args, values=values)

    run("install", "kr", str(CHART), "-n", namespace, "--skip-crds", "--wait=false")
    dep = await kube.get(DEPLOYMENTS, "kuberay-operator", namespace)
    selector = dep["spec"]["selector"]["matchLabels"]
    assert selector == {
        "app.kubernetes.io/name": "kuberay-operator",
        "app.kubernetes.io/instance": "kr",
    }
    for kind in ("raycluster", "rayjob", "rayservice", "raycronjob"):
        for role in ("editor", "viewer"):
            await kube.get(CLUSTERROLES, f"{kind}-{role}-role")

    run(
        "upgrade",
        "kr",
        str(CHART),
        "-n",
        namespace,
        "--skip-crds",
        values={
            "configuration": {"enabled": True, "defaultPodLabels": {"team": "ml"}},
            "logging": {"baseDir": "/var/log/kuberay", "fileName": "op.log", "sizeLimit": "1Gi"},
        },
    )
    dep = await kube.get(DEPLOYMENTS, "kuberay-operator", namespace)
    assert dep["spec"]["selector"]["matchLabels"] == selector
    (ctr,) = dep["spec"]["template"]["spec"]["containers"]
    assert "--config=/etc/kuberay/config.yaml" in ctr["args"]
    config = await kube.get(CONFIGMAPS, "kuberay-operator-config", namespace)
    assert yaml.safe_load(config["data"]["config.yaml"])["defaultPodLabels"] == {"team": "ml"}

    run("uninstall", "kr", "-n", namespace)
    with pytest.raises(NotFound):
        await kube.get(CLUSTERROLES, "raycluster-editor-role")
    with pytest.raises(NotFound):
        await kube.get(CLUSTERROLES, "kuberay-operator")
