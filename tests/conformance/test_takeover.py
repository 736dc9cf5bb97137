"""Takeover both ways: objects made under the Go operator are handed to ours and back.

One namespace, one operator at a time (stop one, start the other), as a user migrating does.
After each handover the new operator must have reconciled every object (seen in its reconcile
counters) without recreating a pod, making a second pod, cluster or submitter Job, and must
then act on a change (a scale-up creates exactly the new pods) with the status continuing.
"""

from __future__ import annotations

import re
import socket
import urllib.request
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from conftest import GoOperatorProcess
from kuberay.controllers.common import RAYCLUSTERS
from kuberay.controllers.rayjob import RAYJOBS
from kuberay.controllers.rayservice import RAYSERVICES
from kuberay.devenv.operatorproc import OperatorProcess
from kuberay.devenv.plane import Plane
from kuberay.devenv.testing import wait_for, wait_until
from kuberay.runtime.client import JOBS, NAMESPACES, PODS, KubeClient

NS = "conf-takeover"
IMAGE = "rayproject/ray:2.52.0"


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def _cluster_spec(workers: int) -> dict[str, Any]:
    res = {"limits": {"cpu": "1", "memory": "1Gi"}, "requests": {"cpu": "1", "memory": "1Gi"}}
    head = {"name": "ray-head", "image": IMAGE, "resources": res}
    worker = {"name": "ray-worker", "image": IMAGE, "resources": res}
    return {
        "rayVersion": "2.52.0",
        "headGroupSpec": {"rayStartParams": {}, "template": {"spec": {"containers": [head]}}},
        "workerGroupSpecs": [
            {
                "groupName": "w",
                "replicas": workers,
                "minReplicas": 0,
                "maxReplicas": 10,
                "rayStartParams": {},
                "template": {"spec": {"containers": [worker]}},
            }
        ],
    }


def _reconciles(port: int, controller: str) -> float:
    """The sum of an operator's reconcile counter for one controller (Go and ours export the
    same controller-runtime metric)."""
    text = urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=5).read().decode()
    total = 0.0
    pattern = re.compile(
        r'^controller_runtime_reconcile_total\{[^}]*controller="' + controller + r'"[^}]*\} (\S+)',
        re.M | re.I,
    )
    for match in pattern.finditer(text):
        total += float(match.group(1))
    return total


async def _wait_reconciled(port: int, controllers: dict[str, float], timeout: float = 60) -> None:
    """Until each controller has reconciled at least the given number of times."""

    async def enough() -> bool:
        try:
            return all(_reconciles(port, c) >= n for c, n in controllers.items())
        except OSError:
            return False

    await wait_until(enough, timeout=timeout, what=f"reconciles {controllers}")


async def _state(kube: KubeClient) -> dict[str, Any]:
    pods = (await kube.list(PODS, NS))["items"]
    jobs = (await kube.list(JOBS, NS))["items"]
    clusters = (await kube.list(RAYCLUSTERS, NS))["items"]
    live = [p for p in pods if not p["metadata"].get("deletionTimestamp")]
    return {
        "pods": {p["metadata"]["uid"]: p["metadata"]["name"] for p in live},
        "jobs": {j["metadata"]["uid"]: j["metadata"]["name"] for j in jobs},
        "clusters": {c["metadata"]["uid"]: c["metadata"]["name"] for c in clusters},
    }


def _changes(before: dict[str, Any], after: dict[str, Any]) -> str:
    out = []
    for kind in before:
        gone = sorted(v for k, v in before[kind].items() if k not in after[kind])
        new = sorted(v for k, v in after[kind].items() if k not in before[kind])
        if gone or new:
            out.append(f"{kind}: gone {gone}, new {new}")
    return "; ".join(out)


@pytest.fixture
def solo_go(conf_plane: Plane, go_binary: Path, tmp_path: Path) -> Iterator[GoOperatorProcess]:
    op = GoOperatorProcess(conf_plane, go_binary, tmp_path)
    yield op
    op.stop()


@pytest.fixture
def solo_py(conf_plane: Plane, tmp_path: Path) -> Iterator[OperatorProcess]:
    op = OperatorProcess(conf_plane, tmp_path)
    yield op
    op.stop()


async def _wait_workers(kube: KubeClient, cluster: str, count: int, who: str) -> None:
    async def reached() -> bool:
        items = (await kube.list(PODS, NS, label_selector=f"ray.io/cluster={cluster}"))["items"]
        live = [
            p
            for p in items
            if p["metadata"]["labels"].get("ray.io/node-type") == "worker"
            and not p["metadata"].get("deletionTimestamp")
        ]
        return len(live) == count

    await wait_until(reached, timeout=30, what=f"{who} scaling {cluster} to {count} workers")


async def _scale(kube: KubeClient, name: str, replicas: int) -> None:
    patch = [{"op": "replace", "path": "/spec/workerGroupSpecs/0/replicas", "value": replicas}]
    from kuberay.runtime.client import JSON_PATCH

    await kube.patch(RAYCLUSTERS, name, patch, NS, content_type=JSON_PATCH)


async def test_takeover_go_to_ours_and_back(
    conf_kube: KubeClient, solo_go: GoOperatorProcess, solo_py: OperatorProcess
) -> None:
    kube = conf_kube
    await kube.create(NAMESPACES, {"metadata": {"name": NS}})
    go_port, py_port = _free_port(), _free_port()
    solo_go.extra = (f"--metrics-addr=127.0.0.1:{go_port}",)
    solo_go.start(NS)
    await kube.create(
        RAYCLUSTERS,
        {"apiVersion": "ray.io/v1", "kind": "RayCluster", "metadata": {"name": "tk"},
         "spec": _cluster_spec(2)},
        NS,
    )  # fmt: skip
    job = {
        "apiVersion": "ray.io/v1",
        "kind": "RayJob",
        "metadata": {"name": "tkjob"},
        "spec": {
            "entrypoint": "python -c 'print(1)'",
            "submissionMode": "K8sJobMode",
            "rayClusterSpec": _cluster_spec(1),
        },
    }
    await kube.create(RAYJOBS, job, NS)
    svc = {
        "apiVersion": "ray.io/v1",
        "kind": "RayService",
        "metadata": {"name": "tksvc"},
        "spec": {
            "serveConfigV2": "applications:\n  - name: a\n    import_path: m:app\n",
            "rayClusterConfig": _cluster_spec(1),
        },
    }
    await kube.create(RAYSERVICES, svc, NS)

    await wait_for(
        kube, RAYCLUSTERS, "tk", NS, lambda o: o.get("status", {}).get("state") == "ready"
    )

    async def go_made_everything() -> bool:
        jobs = (await kube.list(JOBS, NS))["items"]
        clusters = (await kube.list(RAYCLUSTERS, NS))["items"]
        ready = [c for c in clusters if (c.get("status") or {}).get("state") == "ready"]
        return len(jobs) == 1 and len(ready) == 3

    await wait_until(
        go_made_everything, timeout=90, what="the Go operator's submitter and clusters"
    )
    before = await _state(kube)

    # ---- Go -> ours
    solo_go.stop()
    solo_py.extra = (f"--watch-namespace={NS}", f"--metrics-addr=127.0.0.1:{py_port}")
    solo_py.start()
    await _wait_reconciled(py_port, {"raycluster": 6, "rayjob": 2, "rayservice": 2})
    after = await _state(kube)
    assert after == before, _changes(before, after)
    await _scale(kube, "tk", 3)

    await _wait_workers(kube, "tk", 3, "ours")
    obj = await wait_for(
        kube, RAYCLUSTERS, "tk", NS, lambda o: o["status"].get("readyWorkerReplicas") == 3
    )
    assert obj["status"]["state"] == "ready"
    mid = await _state(kube)
    assert set(before["pods"]) < set(mid["pods"])
    assert len(mid["pods"]) == len(before["pods"]) + 1
    assert mid["jobs"] == before["jobs"], "a second submission"

    # ---- ours -> Go
    solo_py.stop()
    solo_go.start(NS)
    await _wait_reconciled(go_port, {"raycluster": 3})
    await _scale(kube, "tk", 4)

    await _wait_workers(kube, "tk", 4, "the Go operator")
    end = await _state(kube)
    assert set(mid["pods"]) < set(end["pods"])
    assert len(end["pods"]) == len(mid["pods"]) + 1
    assert end["jobs"] == before["jobs"]
    assert end["clusters"] == before["clusters"]
