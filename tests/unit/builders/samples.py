"""Realistic RayCluster dicts (as read from the apiserver, defaults applied) for builder tests.

Each function returns a fresh object, so tests may modify what they get.
"""

from __future__ import annotations

import copy
from typing import Any

RAY_IMAGE = "rayproject/ray:2.46.0"


def head_container(**overrides: Any) -> dict[str, Any]:
    container: dict[str, Any] = {
        "name": "ray-head",
        "image": RAY_IMAGE,
        "resources": {
            "limits": {"cpu": "1", "memory": "2G"},
            "requests": {"cpu": "1", "memory": "2G"},
        },
        "ports": [
            {"containerPort": 6379, "name": "gcs-server"},
            {"containerPort": 8265, "name": "dashboard"},
            {"containerPort": 10001, "name": "client"},
        ],
    }
    container.update(overrides)
    return container


def worker_group(name: str = "small-group", **overrides: Any) -> dict[str, Any]:
    group: dict[str, Any] = {
        "groupName": name,
        "replicas": 1,
        "minReplicas": 1,
        "maxReplicas": 5,
        "numOfHosts": 1,
        "rayStartParams": {},
        "scaleStrategy": {},
        "template": {
            "spec": {
                "containers": [
                    {
                        "name": "ray-worker",
                        "image": RAY_IMAGE,
                        "resources": {
                            "limits": {"cpu": "1", "memory": "1Gi"},
                            "requests": {"cpu": "500m", "memory": "1Gi"},
                        },
                    }
                ]
            }
        },
    }
    group.update(overrides)
    return group


def cluster(name: str = "raycluster-kuberay", **spec_overrides: Any) -> dict[str, Any]:
    obj: dict[str, Any] = {
        "apiVersion": "ray.io/v1",
        "kind": "RayCluster",
        "metadata": {
            "name": name,
            "namespace": "default",
            "uid": "6b6e3c5a-0d7e-4a51-9c64-2f1b2f9f0a11",
            "generation": 1,
        },
        "spec": {
            "rayVersion": "2.46.0",
            "headGroupSpec": {
                "rayStartParams": {},
                "template": {"spec": {"containers": [head_container()]}},
            },
            "workerGroupSpecs": [worker_group()],
        },
    }
    obj["spec"].update(spec_overrides)
    return obj


def autoscaling_cluster(version: str | None = None) -> dict[str, Any]:
    obj = cluster(enableInTreeAutoscaling=True)
    if version is not None:
        obj["spec"]["autoscalerOptions"] = {"version": version}
    return obj


def redis_ft_cluster(**options: Any) -> dict[str, Any]:
    ft: dict[str, Any] = {"redisAddress": "redis:6379"}
    ft.update(options)
    return cluster(gcsFaultToleranceOptions=ft)


def deep(obj: dict[str, Any]) -> dict[str, Any]:
    return copy.deepcopy(obj)


def ray_container(pod: dict[str, Any]) -> dict[str, Any]:
    result: dict[str, Any] = pod["spec"]["containers"][0]
    return result


def env_names(container: dict[str, Any]) -> list[str]:
    return [e["name"] for e in container.get("env", [])]


def env_value(container: dict[str, Any], name: str) -> Any:
    for entry in container.get("env", []):
        if entry["name"] == name:
            return entry.get("value", entry.get("valueFrom"))
    raise KeyError(name)
