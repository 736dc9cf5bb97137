"""Volcano: a PodGroup per RayCluster (``ray-<cluster>-pg``) that Volcano fills as a gang, and
pods that name it.

The PodGroup asks for every desired pod (the head included) and their resources, or, for an
autoscaling cluster, for the minimum (head plus every group's minReplicas) so the autoscaler
can grow the cluster past it. It follows the spec: a size or resource change rewrites it (the
quantities are compared by value, so the apiserver's canonical form is not a change). Queue,
priority class and network-topology come from the cluster's labels; the cluster's annotations
are copied onto it. It carries a controller owner reference to the cluster, so it is deleted
with it. A failed read or write raises, which the RayCluster reconcile reports in status and
retries; pods are never created for a cluster whose PodGroup could not be written.
"""

from __future__ import annotations

import contextlib
from typing import Any

from kuberay.api import constants as c
from kuberay.api import resources as res
from kuberay.api.quantity import QuantityError, format_quantity, parse_quantity
from kuberay.runtime.client import KubeClient, Resource
from kuberay.runtime.errors import AlreadyExists, NotFound
from kuberay.schedulers import common as sc

NAME = "volcano"
PODGROUPS = Resource("scheduling.volcano.sh", "v1beta1", "podgroups", kind="PodGroup")
LABEL_QUEUE = "volcano.sh/queue-name"
LABEL_TOPOLOGY_MODE = "volcano.sh/network-topology-mode"
LABEL_TOPOLOGY_TIER = "volcano.sh/network-topology-highest-tier-allowed"


def pod_group_name(cluster: dict[str, Any]) -> str:
    return f"ray-{sc.as_dict(cluster.get('metadata')).get('name')}-pg"


def gang_size(cluster: dict[str, Any]) -> tuple[int, dict[str, str]]:
    """(minMember, minResources) for the cluster as its spec stands."""
    if sc.as_dict(cluster.get("spec")).get("enableInTreeAutoscaling") is True:
        members, amounts = res.min_worker_replicas(cluster) + 1, res.minimum_resources(cluster)
    else:
        members, amounts = res.total_desired_workers(cluster) + 1, res.desired_resources(cluster)
    return members, {key: format_quantity(q) for key, q in amounts.items()}


def build_pod_group(cluster: dict[str, Any]) -> dict[str, Any]:
    meta = sc.as_dict(cluster.get("metadata"))
    labels = sc.labels_of(cluster)
    members, amounts = gang_size(cluster)
    spec: dict[str, Any] = {"minMember": members, "minResources": amounts}
    if labels.get(LABEL_QUEUE):
        spec["queue"] = labels[LABEL_QUEUE]
    if labels.get(c.LABEL_PRIORITY_CLASS_NAME):
        spec["priorityClassName"] = labels[c.LABEL_PRIORITY_CLASS_NAME]
    if labels.get(LABEL_TOPOLOGY_MODE):
        topology: dict[str, Any] = {"mode": labels[LABEL_TOPOLOGY_MODE]}
        tier = labels.get(LABEL_TOPOLOGY_TIER, "")
        if tier.isdigit():
            topology["highestTierAllowed"] = int(tier)
        spec["networkTopology"] = topology
    body: dict[str, Any] = {
        "apiVersion": PODGROUPS.api_version,
        "kind": "PodGroup",
        "metadata": {
            "name": pod_group_name(cluster),
            "namespace": meta.get("namespace"),
            "ownerReferences": [res.owner_reference(cluster)],
        },
        "spec": spec,
    }
    annotations = sc.annotations_of(cluster)
    if annotations:
        body["metadata"]["annotations"] = dict(annotations)
    return body


def _same_amounts(a: dict[str, Any], b: dict[str, Any]) -> bool:
    if set(a) != set(b):
        return False
    try:
        return all(parse_quantity(str(a[k])).value == parse_quantity(str(b[k])).value for k in a)
    except QuantityError:
        return False


def needs_resize(want: dict[str, Any], have: dict[str, Any]) -> bool:
    got = sc.as_dict(have.get("spec"))
    return got.get("minMember") != want["spec"]["minMember"] or not _same_amounts(
        sc.as_dict(got.get("minResources")), want["spec"]["minResources"]
    )


class VolcanoScheduler(sc.ClusterLevelOnly):
    name = NAME
    requires = (PODGROUPS,)  # checked at startup: without it every reconcile would fail

    async def on_submission(self, client: KubeClient, cluster: dict[str, Any]) -> None:
        want = build_pod_group(cluster)
        ns = want["metadata"]["namespace"]
        try:
            have = await client.get(PODGROUPS, want["metadata"]["name"], ns)
        except NotFound:
            with contextlib.suppress(AlreadyExists):  # a concurrent pass made it: next one sizes
                await client.create(PODGROUPS, want, ns)
            return
        if needs_resize(want, have):
            have["spec"] = {
                **sc.as_dict(have.get("spec")),
                "minMember": want["spec"]["minMember"],
                "minResources": want["spec"]["minResources"],
            }
            await client.update(PODGROUPS, have)

    def add_pod_metadata(
        self, cluster: dict[str, Any], group_name: str, pod: dict[str, Any]
    ) -> None:
        labels = sc.labels_of(cluster)
        meta = pod.setdefault("metadata", {})
        annotations = meta.setdefault("annotations", {})
        annotations[c.ANNOTATION_VOLCANO_GROUP_NAME] = pod_group_name(cluster)
        annotations[c.ANNOTATION_VOLCANO_TASK_SPEC] = group_name
        spec = pod.setdefault("spec", {})
        if labels.get(LABEL_QUEUE):
            meta.setdefault("labels", {})[LABEL_QUEUE] = labels[LABEL_QUEUE]
        if labels.get(c.LABEL_PRIORITY_CLASS_NAME):
            spec["priorityClassName"] = labels[c.LABEL_PRIORITY_CLASS_NAME]
        spec["schedulerName"] = NAME
