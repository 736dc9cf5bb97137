"""What the RayCluster controller asks of the API server, counted at the client: an autoscaling
cluster's ServiceAccount, Role and RoleBinding are created once, and later reconciles (spec
edits, the periodic resync) find them in the cache instead of re-creating them."""

from __future__ import annotations

import asyncio
from collections import Counter
from typing import Any

from operator_fixture import install_crds

from kuberay.api.constants import RAYCLUSTERS
from kuberay.controllers.raycluster import RayClusterConfig
from kuberay.controllers.raycluster import register as register_raycluster
from kuberay.devenv.plane import Plane
from kuberay.devenv.testing import reconcile_trace, wait_for
from kuberay.runtime.client import KubeClient, load_kubeconfig
from kuberay.runtime.manager import Manager, ManagerOptions

RBAC = ("serviceaccounts", "roles", "rolebindings")


def autoscaling_cluster(name: str) -> dict[str, Any]:
    container = {"name": "ray-head", "image": "rayproject/ray:2.52.0"}
    return {
        "apiVersion": "ray.io/v1",
        "kind": "RayCluster",
        "metadata": {"name": name},
        "spec": {
            "enableInTreeAutoscaling": True,
            "headGroupSpec": {
                "rayStartParams": {},
                "template": {"spec": {"containers": [container]}},
            },
        },
    }


async def test_autoscaler_rbac_is_created_once(
    plane: Plane, kube: KubeClient, namespace: str
) -> None:
    await install_crds(kube)
    counted: Counter[tuple[str, str, int]] = Counter()
    client = KubeClient(load_kubeconfig(plane.kubeconfig))
    client.observers.append(lambda method, status, _, res: counted.update([(method, res, status)]))
    trace = reconcile_trace()  # before the Manager: its controllers are traced from creation
    mgr = Manager(client, ManagerOptions(metrics_addr=None, probe_addr=None, leader_election=False))
    register_raycluster(mgr, RayClusterConfig(default_requeue_seconds=0.5), [namespace])
    stop = asyncio.Event()
    task = asyncio.create_task(mgr.run(stop))
    try:
        await kube.create(RAYCLUSTERS, autoscaling_cluster("auto"), namespace)
        await wait_for(
            kube,
            RAYCLUSTERS,
            "auto",
            namespace,
            lambda o: (o.get("status") or {}).get("state") == "ready",
            what="cluster ready",
        )
        # Several more passes: edits plus the (shortened) periodic resync. Each round waits
        # for two finished reconciles that saw the edit (the edit's own and a resync).
        for i in range(3):
            patch = {"metadata": {"annotations": {"touch": str(i)}}}
            touched = await kube.patch(RAYCLUSTERS, "auto", patch, namespace)
            await trace.wait_processed("raycluster", "rayclusters", touched, count=2)
    finally:
        stop.set()
        await asyncio.wait_for(task, 30)
        await client.close()
    for res in RBAC:
        assert counted[("POST", res, 201)] == 1, counted
        assert counted[("POST", res, 409)] == 0, counted
