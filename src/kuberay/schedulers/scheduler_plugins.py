"""kubernetes-sigs/scheduler-plugins (coscheduling): pods go to its scheduler, and with gang
scheduling a PodGroup named after the cluster holds them until all can be placed.

The PodGroup asks for every desired pod (workers plus the head) and their summed resources;
like upstream it is created once and never resized, and carries a non-controller owner
reference so it goes away with the cluster. A create is attempted once per cluster object
(uid) in this process: AlreadyExists counts as done, so restarts and stale caches cannot make a
second one, and steady-state reconciles cost no request.
"""

from __future__ import annotations

import contextlib
from typing import Any

from kuberay.api import constants as c
from kuberay.api import resources as res
from kuberay.api.quantity import formatted
from kuberay.runtime.client import KubeClient, Resource
from kuberay.runtime.errors import AlreadyExists
from kuberay.schedulers import common as sc

NAME = "scheduler-plugins"
SCHEDULER_NAME = "scheduler-plugins-scheduler"
LABEL_POD_GROUP = "scheduling.x-k8s.io/pod-group"
PODGROUPS = Resource("scheduling.x-k8s.io", "v1alpha1", "podgroups", kind="PodGroup")


def gang_enabled(cluster: dict[str, Any]) -> bool:
    return c.LABEL_GANG_SCHEDULING_ENABLED in sc.labels_of(cluster)


def build_pod_group(cluster: dict[str, Any]) -> dict[str, Any]:
    meta = sc.as_dict(cluster.get("metadata"))
    return {
        "apiVersion": PODGROUPS.api_version,
        "kind": "PodGroup",
        "metadata": {
            "name": meta.get("name"),
            "namespace": meta.get("namespace"),
            "ownerReferences": [
                {
                    "apiVersion": cluster.get("apiVersion", c.API_VERSION),
                    "kind": cluster.get("kind", c.KIND_RAYCLUSTER),
                    "name": meta.get("name"),
                    "uid": meta.get("uid"),
                }
            ],
        },
        "spec": {
            "minMember": res.total_desired_workers(cluster) + 1,
            "minResources": formatted(res.desired_resources(cluster)),
        },
    }


class SchedulerPluginsScheduler(sc.NoJobLevelObjects):
    name = NAME

    def __init__(self) -> None:
        self._created: set[str] = set()

    async def on_submission(self, client: KubeClient, cluster: dict[str, Any]) -> None:
        if not gang_enabled(cluster):
            return
        meta = sc.as_dict(cluster.get("metadata"))
        uid = str(meta.get("uid") or "")
        if uid in self._created:
            return
        with contextlib.suppress(AlreadyExists):
            await client.create(PODGROUPS, build_pod_group(cluster), meta.get("namespace"))
        self._created.add(uid)

    def add_pod_metadata(
        self, cluster: dict[str, Any], group_name: str, pod: dict[str, Any]
    ) -> None:
        if gang_enabled(cluster):
            meta = pod.setdefault("metadata", {})
            meta.setdefault("labels", {})[LABEL_POD_GROUP] = sc.as_dict(
                cluster.get("metadata")
            ).get("name")
        pod.setdefault("spec", {})["schedulerName"] = SCHEDULER_NAME
