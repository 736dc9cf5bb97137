"""Batch-scheduler plugins on the real plane: the operator started with ``--batch-scheduler``
creates pods carrying what that scheduler reads. No YuniKorn or KAI runs here, so the pods stay
Pending (the default scheduler leaves pods that name another scheduler alone); what is checked
is exactly what the API stores."""

from __future__ import annotations

from collections.abc import AsyncIterator, Callable
from pathlib import Path
from typing import Any

import orjson
import pytest
from operator_fixture import OperatorProcess, install_crds

from kuberay.api.constants import RAYCLUSTERS, RAYJOBS
from kuberay.devenv.plane import Plane
from kuberay.devenv.testing import condition, install_loose_crd, wait_for, wait_until
from kuberay.runtime.client import JSON_PATCH, PODS, KubeClient
from kuberay.runtime.events import EVENTS_V1
from kuberay.schedulers import volcano
from kuberay.schedulers.scheduler_plugins import PODGROUPS

Start = Callable[[str], OperatorProcess]


def gang_cluster(name: str, labels: dict[str, str]) -> dict[str, Any]:
    container = {
        "name": "ray-head",
        "image": "rayproject/ray:2.52.0",
        "resources": {"requests": {"cpu": "1", "memory": "1Gi"}},
    }
    worker = {**container, "name": "ray-worker"}
    return {
        "apiVersion": "ray.io/v1",
        "kind": "RayCluster",
        "metadata": {"name": name, "labels": labels},
        "spec": {
            "headGroupSpec": {
                "rayStartParams": {},
                "template": {"spec": {"containers": [container]}},
            },
            "workerGroupSpecs": [
                {
                    "groupName": "workers",
                    "replicas": 2,
                    "minReplicas": 2,
                    "maxReplicas": 4,
                    "rayStartParams": {},
                    "template": {"spec": {"containers": [worker]}},
                }
            ],
        },
    }


@pytest.fixture
async def start_operator(
    plane: Plane, kube: KubeClient, namespace: str, tmp_path: Path
) -> AsyncIterator[Start]:
    await install_crds(kube)
    started: list[OperatorProcess] = []

    def start(scheduler: str) -> OperatorProcess:
        op = OperatorProcess(
            plane, tmp_path, f"--batch-scheduler={scheduler}", f"--watch-namespace={namespace}"
        )
        op.start()
        started.append(op)
        return op

    try:
        yield start
    finally:
        for op in started:
            op.stop()


async def all_pods(kube: KubeClient, namespace: str, cluster: str, count: int) -> list[Any]:
    pods: list[Any] = []

    async def created() -> bool:
        nonlocal pods
        pods = (await kube.list(PODS, namespace, label_selector=f"ray.io/cluster={cluster}"))[
            "items"
        ]
        return len(pods) == count

    await wait_until(created, timeout=30, what=f"{count} pods of {cluster}")
    return pods


async def test_yunikorn_gang_metadata(
    kube: KubeClient, namespace: str, start_operator: Start
) -> None:
    op = start_operator("yunikorn")
    labels = {
        "yunikorn.apache.org/app-id": "app-7",
        "yunikorn.apache.org/queue": "root.research",
        "ray.io/gang-scheduling-enabled": "true",
    }
    await kube.create(RAYCLUSTERS, gang_cluster("yk", labels), namespace)
    pods = await all_pods(kube, namespace, "yk", 3)
    groups = set()
    for pod in pods:
        assert pod["spec"]["schedulerName"] == "yunikorn", op.tail()
        assert pod["metadata"]["labels"]["applicationId"] == "app-7"
        assert pod["metadata"]["labels"]["queue"] == "root.research"
        annotations = pod["metadata"]["annotations"]
        task_groups = orjson.loads(annotations["yunikorn.apache.org/task-groups"])
        assert [(g["name"], g["minMember"]) for g in task_groups] == [
            ("headgroup", 1),
            ("workers", 2),
        ]
        assert task_groups[1]["minResource"] == {"cpu": "1", "memory": "1Gi"}
        groups.add(annotations["yunikorn.apache.org/task-group-name"])
    assert groups == {"headgroup", "workers"}
    # No YuniKorn runs here: the status says what the pods wait for.
    await wait_for(
        kube,
        RAYCLUSTERS,
        "yk",
        namespace,
        lambda o: (
            "not yet scheduled by yunikorn"
            in str((condition(o, "RayClusterProvisioned") or {}).get("message"))
        ),
        what="the stall reason in RayClusterProvisioned",
    )


async def test_kai_queue_metadata(kube: KubeClient, namespace: str, start_operator: Start) -> None:
    start_operator("kai-scheduler")
    await kube.create(
        RAYCLUSTERS, gang_cluster("kai", {"kai.scheduler/queue": "team-a"}), namespace
    )
    pods = await all_pods(kube, namespace, "kai", 3)
    for pod in pods:
        assert pod["spec"]["schedulerName"] == "kai-scheduler"
        assert pod["metadata"]["labels"]["kai.scheduler/queue"] == "team-a"


async def test_scheduler_plugins_pod_group(
    kube: KubeClient, namespace: str, start_operator: Start
) -> None:
    await install_loose_crd(kube, PODGROUPS, "PodGroup")
    start_operator("scheduler-plugins")
    labels = {"ray.io/gang-scheduling-enabled": "true"}
    await kube.create(RAYCLUSTERS, gang_cluster("coscheduled", labels), namespace)
    pods = await all_pods(kube, namespace, "coscheduled", 3)
    for pod in pods:
        assert pod["spec"]["schedulerName"] == "scheduler-plugins-scheduler"
        assert pod["metadata"]["labels"]["scheduling.x-k8s.io/pod-group"] == "coscheduled"
    group = await kube.get(PODGROUPS, "coscheduled", namespace)
    assert group["spec"] == {"minMember": 3, "minResources": {"cpu": "3", "memory": "3Gi"}}
    owner = group["metadata"]["ownerReferences"][0]
    assert (owner["kind"], owner["name"]) == ("RayCluster", "coscheduled")


async def test_volcano_pod_group_follows_the_spec(
    kube: KubeClient, namespace: str, start_operator: Start
) -> None:
    await install_loose_crd(kube, volcano.PODGROUPS, "PodGroup")
    start_operator("volcano")
    labels = {"volcano.sh/queue-name": "research", "volcano.sh/network-topology-mode": "hard"}
    rc = gang_cluster("vc", labels)
    rc["metadata"]["annotations"] = {"team": "ml"}
    await kube.create(RAYCLUSTERS, rc, namespace)
    pods = await all_pods(kube, namespace, "vc", 3)
    for pod in pods:
        assert pod["spec"]["schedulerName"] == "volcano"
        assert pod["metadata"]["annotations"]["scheduling.k8s.io/group-name"] == "ray-vc-pg"
        assert pod["metadata"]["labels"]["volcano.sh/queue-name"] == "research"
    tasks = {p["metadata"]["annotations"]["volcano.sh/task-spec"] for p in pods}
    assert tasks == {"headgroup", "workers"}
    group = await kube.get(volcano.PODGROUPS, "ray-vc-pg", namespace)
    assert group["spec"] == {
        "minMember": 3,
        "minResources": {"cpu": "3", "memory": "3Gi"},
        "queue": "research",
        "networkTopology": {"mode": "hard"},
    }
    assert group["metadata"]["annotations"]["team"] == "ml"
    assert group["metadata"]["ownerReferences"][0]["controller"] is True

    # Scaling the cluster resizes the gang.
    patch = [{"op": "replace", "path": "/spec/workerGroupSpecs/0/replicas", "value": 3}]
    await kube.patch(RAYCLUSTERS, "vc", patch, namespace, content_type=JSON_PATCH)

    async def resized() -> bool:
        got = await kube.get(volcano.PODGROUPS, "ray-vc-pg", namespace)
        return bool(got["spec"]["minMember"] == 4 and got["spec"]["minResources"]["cpu"] == "4")

    await wait_until(resized, timeout=30, what="the PodGroup resized to 4 members")


async def test_yunikorn_rayjob_gang_reserves_the_submitter(
    kube: KubeClient, namespace: str, start_operator: Start
) -> None:
    op = start_operator("yunikorn")
    labels = {"yunikorn.apache.org/app-id": "job-1", "ray.io/gang-scheduling-enabled": "true"}
    job = {
        "apiVersion": "ray.io/v1",
        "kind": "RayJob",
        "metadata": {"name": "ykjob", "labels": labels},
        "spec": {
            "entrypoint": "python -c 'print(1)'",
            "rayClusterSpec": gang_cluster("unused", {})["spec"],
        },
    }
    await kube.create(RAYJOBS, job, namespace)
    named = await wait_for(
        kube,
        RAYJOBS,
        "ykjob",
        namespace,
        lambda o: bool((o.get("status") or {}).get("rayClusterName")),
        what="the RayJob's cluster name",
    )
    cluster = named["status"]["rayClusterName"]
    # As upstream, status names the cluster in one pass and the cluster is created in a later
    # one, so wait for it rather than read it once.
    made = await wait_for(
        kube, RAYCLUSTERS, cluster, namespace, lambda _o: True, what="the RayJob's cluster"
    )
    annotations = made["metadata"]["annotations"]
    assert "submittergroup" in annotations["yunikorn.apache.org/task-groups"]
    pods = await all_pods(kube, namespace, cluster, 3)
    for pod in pods:
        assert pod["spec"]["schedulerName"] == "yunikorn", op.tail()
        groups = orjson.loads(pod["metadata"]["annotations"]["yunikorn.apache.org/task-groups"])
        assert [g["name"] for g in groups] == ["headgroup", "workers", "submittergroup"]
        assert pod["metadata"]["labels"]["applicationId"] == "job-1"


async def test_volcano_rayjob_gang_and_its_release(
    kube: KubeClient, namespace: str, start_operator: Start
) -> None:
    await install_loose_crd(kube, volcano.PODGROUPS, "PodGroup")
    op = start_operator("volcano")
    job = {
        "apiVersion": "ray.io/v1",
        "kind": "RayJob",
        "metadata": {"name": "vcjob", "labels": {"volcano.sh/queue-name": "research"}},
        "spec": {
            "entrypoint": "python -c 'print(1)'",
            "shutdownAfterJobFinishes": True,
            "rayClusterSpec": gang_cluster("unused", {})["spec"],
        },
    }
    await kube.create(RAYJOBS, job, namespace)
    group = await wait_for(
        kube, volcano.PODGROUPS, "ray-vcjob-pg", namespace, lambda _: True, what=op.tail()
    )
    assert group["metadata"]["ownerReferences"][0]["kind"] == "RayJob"
    # Head + 2 workers; the submitter adds its resources (default 1 CPU / 1Gi limits,
    # requests 500m / 200Mi) but no member.
    assert group["spec"]["minMember"] == 3
    assert group["spec"]["minResources"]["cpu"] == "3500m"
    assert group["spec"]["queue"] == "research"
    named = await kube.get(RAYJOBS, "vcjob", namespace)
    cluster = named["status"]["rayClusterName"]
    pods = await all_pods(kube, namespace, cluster, 3)
    for pod in pods:
        assert pod["metadata"]["annotations"]["scheduling.k8s.io/group-name"] == "ray-vcjob-pg"
    groups = await kube.list(volcano.PODGROUPS, namespace)
    assert [g["metadata"]["name"] for g in groups["items"]] == ["ray-vcjob-pg"]

    # Suspending deletes the cluster; the job's PodGroup stops reserving anything.
    await kube.patch(RAYJOBS, "vcjob", {"spec": {"suspend": True}}, namespace)
    await wait_for(
        kube,
        volcano.PODGROUPS,
        "ray-vcjob-pg",
        namespace,
        lambda g: g["spec"]["minMember"] == 0 and not g["spec"]["minResources"],
        timeout=60,
        what="the PodGroup released",
    )
    events = (await kube.list(EVENTS_V1, namespace))["items"]
    cleaned = [e for e in events if e["reason"] == "BatchSchedulerCleanedUp"]
    assert cleaned, [e["reason"] for e in events]
    assert cleaned[0]["regarding"]["name"] == "vcjob"
