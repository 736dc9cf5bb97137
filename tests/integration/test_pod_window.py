"""The operator-wide start window on the real plane: pods, heads included, are created only
while few enough of the operator's pods wait for a kubelet to start them.

The pods go to a node no kubelet serves (KWOK manages only annotated nodes), so they stay bound
and unstarted until the test starts them itself by writing their status, as a kubelet would.
"""

from __future__ import annotations

import contextlib
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest
from operator_fixture import OperatorProcess, install_crds

from kuberay.api.constants import RAYCLUSTERS
from kuberay.devenv.plane import Plane
from kuberay.devenv.testing import wait_until
from kuberay.runtime import rfc3339
from kuberay.runtime.client import NODES, PODS, KubeClient
from kuberay.runtime.errors import NotFound

WINDOW = 4
WORKERS = 10
SILENT = "kuberay-test/silent"


@pytest.fixture
async def silent_node(kube: KubeClient, namespace: str) -> AsyncIterator[str]:
    """A Ready node with room, tainted so that only this test's pods (which tolerate
    everything) land there, and served by no kubelet."""
    name = f"silent-{namespace}"[:63].rstrip("-")
    await kube.create(
        NODES,
        {
            "metadata": {"name": name, "labels": {SILENT: namespace}},
            "spec": {"taints": [{"key": SILENT, "value": namespace, "effect": "NoSchedule"}]},
        },
    )
    room = {"cpu": "64", "memory": "256Gi", "pods": "110"}
    await kube.patch(
        NODES,
        name,
        {
            "status": {
                "capacity": room,
                "allocatable": room,
                "conditions": [{"type": "Ready", "status": "True", "reason": "KubeletReady"}],
            }
        },
        subresource="status",
    )
    try:
        yield name
    finally:
        with contextlib.suppress(NotFound):
            await kube.delete(NODES, name)


def cluster(name: str, namespace: str) -> dict[str, Any]:
    def template(container: str) -> dict[str, Any]:
        return {
            "spec": {
                "nodeSelector": {SILENT: namespace},
                "tolerations": [{"operator": "Exists"}],
                "containers": [
                    {
                        "name": container,
                        "image": "rayproject/ray:2.52.0",
                        "resources": {"requests": {"cpu": "100m", "memory": "128Mi"}},
                    }
                ],
            }
        }

    return {
        "apiVersion": "ray.io/v1",
        "kind": "RayCluster",
        "metadata": {"name": name},
        "spec": {
            "headGroupSpec": {"rayStartParams": {}, "template": template("ray-head")},
            "workerGroupSpecs": [
                {
                    "groupName": "workers",
                    "replicas": WORKERS,
                    "minReplicas": 0,
                    "maxReplicas": WORKERS,
                    "rayStartParams": {},
                    "template": template("ray-worker"),
                }
            ],
        },
    }


async def pods(kube: KubeClient, namespace: str) -> list[dict[str, Any]]:
    items: list[dict[str, Any]] = (await kube.list(PODS, namespace))["items"]
    return items


async def wait_pods(kube: KubeClient, namespace: str, count: int) -> None:
    async def enough() -> bool:
        return len(await pods(kube, namespace)) >= count

    await wait_until(enough, timeout=60, what=f"{count} pods")


async def start(kube: KubeClient, pod: dict[str, Any]) -> None:
    """What a kubelet reports first: it took the pod."""
    meta = pod["metadata"]
    await kube.patch(
        PODS,
        meta["name"],
        {"status": {"phase": "Running", "startTime": rfc3339.now()}},
        meta["namespace"],
        subresource="status",
    )


async def bound_unstarted(kube: KubeClient, namespace: str) -> list[dict[str, Any]]:
    async def all_bound() -> bool:
        return all(p["spec"].get("nodeName") for p in await pods(kube, namespace))

    await wait_until(all_bound, timeout=30, what="every pod bound to the silent node")
    return [p for p in await pods(kube, namespace) if not p["status"].get("startTime")]


async def test_workers_are_created_as_the_plane_starts_pods(
    plane: Plane, kube: KubeClient, namespace: str, silent_node: str, tmp_path: Path
) -> None:
    await install_crds(kube)
    op = OperatorProcess(
        plane,
        tmp_path,
        f"--watch-namespace={namespace}",
        env={"KUBERAY_MAX_UNSTARTED_PODS": str(WINDOW)},
        trace=True,
    )
    assert op.trace is not None
    op.start()
    try:
        await kube.create(RAYCLUSTERS, cluster("paced", namespace), namespace)
        # The head and a first batch of workers fill the window together, in one pass.
        await wait_pods(kube, namespace, WINDOW)
        mark = op.trace.mark()
        await op.trace.wait_reconciled("raycluster", namespace, "paced", after=mark)
        waiting = await bound_unstarted(kube, namespace)
        assert len(waiting) == WINDOW
        assert len(await pods(kube, namespace)) == WINDOW
        # A cluster that arrives now waits for room, its head too.
        mark = op.trace.mark()
        await kube.create(RAYCLUSTERS, cluster("later", namespace), namespace)
        await op.trace.wait_reconciled("raycluster", namespace, "later", after=mark)
        assert len(await pods(kube, namespace)) == WINDOW

        # Two start: room for two, less than a whole batch (the window less a head's place),
        # so no worker yet.
        for pod in waiting[:2]:
            await start(kube, pod)
        mark = op.trace.mark()
        await op.trace.wait_reconciled("raycluster", namespace, "paced", after=mark)
        assert len(await pods(kube, namespace)) == WINDOW
        # A third: a whole batch for the first in line.
        await start(kube, waiting[2])
        await wait_pods(kube, namespace, 2 * WINDOW - 1)
        mark = op.trace.mark()
        await op.trace.wait_reconciled("raycluster", namespace, "paced", after=mark)
        assert len(await pods(kube, namespace)) == 2 * WINDOW - 1
        assert len(await bound_unstarted(kube, namespace)) == WINDOW

        # Starting whatever waits lets the rest through, never more than the window at once.
        async def all_created_and_started() -> bool:
            waiting = await bound_unstarted(kube, namespace)
            assert len(waiting) <= WINDOW
            for pod in waiting:
                await start(kube, pod)
            return not waiting and len(await pods(kube, namespace)) == 2 * (1 + WORKERS)

        await wait_until(all_created_and_started, timeout=90, what="every pod created and started")
    finally:
        op.stop()
