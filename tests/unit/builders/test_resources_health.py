"""Status arithmetic (replicas, desired resources) and shouldDeletePod (upstream:
utils/util.go, raycluster_controller.go)."""

from __future__ import annotations

from typing import Any

import pytest

from kuberay.api.resources import (
    INT32_MAX,
    desired_worker_pods,
    desired_worker_replicas,
    max_worker_replicas,
    min_worker_replicas,
    pod_resource_totals,
    total_desired_workers,
)
from kuberay.builders.pod import pod_is_unhealthy

from . import samples


@pytest.mark.parametrize(
    ("group", "expected"),
    [
        ({"replicas": 3, "minReplicas": 1, "maxReplicas": 5}, 3),
        ({"replicas": 0, "minReplicas": 1, "maxReplicas": 5}, 1),
        ({"replicas": 9, "minReplicas": 1, "maxReplicas": 5}, 5),
        ({"replicas": 3, "minReplicas": 6, "maxReplicas": 5}, 5),
        ({"minReplicas": 2, "maxReplicas": 5}, 2),
        ({"replicas": 3, "minReplicas": 1, "maxReplicas": 5, "suspend": True}, 0),
        ({"replicas": 3}, 3),
    ],
)
def test_desired_worker_replicas(group: dict[str, Any], expected: int) -> None:
    assert desired_worker_replicas(group) == expected


def test_cluster_replica_totals_with_hosts_and_suspend() -> None:
    rc = samples.cluster()
    rc["spec"]["workerGroupSpecs"] = [
        samples.worker_group("a", replicas=2, minReplicas=1, maxReplicas=3),
        samples.worker_group("tpu", replicas=2, minReplicas=0, maxReplicas=4, numOfHosts=4),
        samples.worker_group("off", replicas=5, minReplicas=5, maxReplicas=5, suspend=True),
    ]
    assert total_desired_workers(rc) == 2 + 8
    assert [desired_worker_pods(g) for g in rc["spec"]["workerGroupSpecs"]] == [2, 8, 0]
    assert min_worker_replicas(rc) == 1
    assert max_worker_replicas(rc) == 3 + 16
    rc["spec"]["workerGroupSpecs"].append(samples.worker_group("big", maxReplicas=INT32_MAX))
    assert max_worker_replicas(rc) == INT32_MAX


def test_pod_resource_totals() -> None:
    rc = samples.cluster()
    # head: 1 CPU / 2G (requests); worker: requests 500m / 1Gi, limits 1 CPU.
    rc["spec"]["workerGroupSpecs"][0]["replicas"] = 3
    totals = pod_resource_totals(rc)
    assert totals == {
        "desiredCPU": "2500m",
        "desiredMemory": "5221225472",
        "desiredGPU": "0",
        "desiredTPU": "0",
    }


def test_resource_totals_limits_fallback_gpu_tpu_hosts_and_unclamped_replicas() -> None:
    rc = samples.cluster()
    head = rc["spec"]["headGroupSpec"]["template"]["spec"]["containers"][0]
    head["resources"] = {"limits": {"cpu": "2", "memory": "4Gi"}}
    gpu = samples.worker_group("gpu", replicas=10, maxReplicas=2)
    gpu["template"]["spec"]["containers"][0]["resources"] = {
        "limits": {"cpu": "4", "memory": "8Gi", "nvidia.com/gpu": "1"},
        "requests": {"cpu": "4", "memory": "8Gi"},
    }
    gpu["template"]["spec"]["containers"].append(
        {"name": "side", "resources": {"requests": {"cpu": "100m", "amd.com/gpu": "1"}}}
    )
    tpu = samples.worker_group("tpu", replicas=1, numOfHosts=2)
    tpu["template"]["spec"]["containers"][0]["resources"] = {
        "limits": {"cpu": "1", "memory": "1Gi", "google.com/tpu": "4"}
    }
    rc["spec"]["workerGroupSpecs"] = [gpu, tpu]
    totals = pod_resource_totals(rc)
    assert totals["desiredCPU"] == "45"  # 2 + 10 * 4.1 + 2 * 1
    assert totals["desiredMemory"] == "86Gi"  # 4 + 80 + 2
    assert totals["desiredGPU"] == "20"
    assert totals["desiredTPU"] == "8"


def _pod(phase: str, terminated: bool, restart: str | None) -> dict[str, Any]:
    state: dict[str, Any] = {"terminated": {"exitCode": 1}} if terminated else {"running": {}}
    pod: dict[str, Any] = {
        "spec": {"containers": [{"name": "ray-head"}, {"name": "autoscaler"}]},
        "status": {
            "phase": phase,
            "containerStatuses": [
                {"name": "autoscaler", "state": {"running": {}}},
                {"name": "ray-head", "state": state},
            ],
        },
    }
    if restart is not None:
        pod["spec"]["restartPolicy"] = restart
    return pod


@pytest.mark.parametrize(
    ("phase", "terminated", "restart", "expected"),
    [
        ("Failed", False, "Always", True),
        ("Succeeded", False, "Always", True),
        ("Running", True, "Never", True),
        ("Running", True, "Always", False),
        ("Running", True, "OnFailure", False),
        ("Running", False, "Never", False),
        ("Pending", True, "Never", False),
    ],
)
def test_pod_is_unhealthy(phase: str, terminated: bool, restart: str, expected: bool) -> None:
    assert pod_is_unhealthy(_pod(phase, terminated, restart)) is expected


def test_pod_is_unhealthy_uses_container_name() -> None:
    pod = _pod("Running", True, "Never")
    assert pod_is_unhealthy(pod, "autoscaler") is False
    pod["status"]["containerStatuses"] = []
    assert pod_is_unhealthy(pod) is False
