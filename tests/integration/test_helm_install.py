"""The Helm chart on the real apiserver: ``helm install``, ``helm upgrade``, ``helm uninstall``.

What only a server can say: every object the chart renders (default values, then the
configuration-file mode with a log file) passes the apiserver's validation, an upgrade that
changes the pod template is accepted (the Deployment selector stays the same), and uninstalling
removes the cluster-scoped objects, the user-facing ClusterRoles included. The CRDs are left to
``install_crds`` (``--skip-crds``): Helm would only install them when absent anyway. KWOK runs
no pod, so nothing waits for the operator here (test_operator_pod.py runs it as a pod).
"""

from __future__ import annotations

from pathlib import Path

import pytest
import yaml
from operator_fixture import CHART, install_crds, run_helm

from kuberay.devenv.plane import Plane
from kuberay.runtime.client import CONFIGMAPS, DEPLOYMENTS, KubeClient, Resource
from kuberay.runtime.errors import NotFound

CLUSTERROLES = Resource(
    "rbac.authorization.k8s.io", "v1", "clusterroles", namespaced=False, kind="ClusterRole"
)


async def test_install_upgrade_uninstall(
    helm: Path, plane: Plane, kube: KubeClient, namespace: str, tmp_path: Path
) -> None:
    await install_crds(kube)

    def run(*args: str, values: dict[str, object] | None = None) -> str:
        out: str = run_helm(helm, plane.kubeconfig, tmp_path, *args, values=values)
        return out

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
