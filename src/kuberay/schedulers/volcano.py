"""Volcano: one PodGroup per gang, ``ray-<owner>-pg``, and pods that name it.

The owner is the RayCluster, or, for a cluster a RayJob made, the RayJob: its PodGroup covers
the cluster and reserves room for the submitter, and the cluster's own reconcile leaves it
alone (two PodGroups for one set of pods would never both fill). The PodGroup asks for every
desired pod (the head included) and their resources, or for an autoscaling cluster the minimum
(head plus every group's minReplicas) so the autoscaler can grow past it. A RayJob's submitter
adds its resources but not a member: the submitter waits for the cluster, so counting it would
hold the gang forever.

The PodGroup follows the spec: a size or resource change rewrites it (quantities compared by
value). When a RayJob ends (or retries, or suspends) its PodGroup shrinks to what the live
cluster still holds, or to nothing once the cluster is gone, so Volcano stops reserving for
it. Queue, priority class and network topology come from the owner's labels; the owner's
annotations are copied onto it; a controller owner reference removes it with the owner. A
failed read or write raises: the caller reports it and retries, and pods are never created
for a gang whose PodGroup could not be written.
"""

from __future__ import annotations

import contextlib
from typing import Any

from kuberay.api import constants as c
from kuberay.api import resources as res
from kuberay.api.constants import RAYCLUSTERS
from kuberay.api.quantity import formatted, pod_resources, same_amount
from kuberay.runtime.client import KubeClient, Resource
from kuberay.runtime.errors import AlreadyExists, NotFound
from kuberay.schedulers import common as sc

NAME = "volcano"
PODGROUPS = Resource("scheduling.volcano.sh", "v1beta1", "podgroups", kind="PodGroup")
LABEL_QUEUE = "volcano.sh/queue-name"
LABEL_TOPOLOGY_MODE = "volcano.sh/network-topology-mode"
LABEL_TOPOLOGY_TIER = "volcano.sh/network-topology-highest-tier-allowed"


def _from_rayjob(obj: dict[str, Any]) -> str | None:
    """The RayJob that made this cluster, if one did."""
    labels = sc.labels_of(obj)
    if labels.get(c.LABEL_ORIGINATED_FROM_CRD) == c.KIND_RAYJOB:
        return labels.get(c.LABEL_ORIGINATED_FROM_CR_NAME) or None
    return None


def pod_group_name(obj: dict[str, Any]) -> str:
    """``ray-<name>-pg`` of the gang's owner: the RayJob for a cluster a RayJob made."""
    name = _from_rayjob(obj) or sc.as_dict(obj.get("metadata")).get("name")
    return f"ray-{name}-pg"


def gang_size(cluster: dict[str, Any]) -> tuple[int, dict[str, Any]]:
    """(minMember, minResources as quantities) for a cluster as its spec stands."""
    if sc.as_dict(cluster.get("spec")).get("enableInTreeAutoscaling") is True:
        return res.min_worker_replicas(cluster) + 1, res.minimum_resources(cluster)
    return res.total_desired_workers(cluster) + 1, res.desired_resources(cluster)


def _amounts(*parts: dict[str, Any]) -> dict[str, str]:
    total: dict[str, Any] = {}
    for part in parts:
        for key, quantity in part.items():
            total[key] = total[key] + quantity if key in total else quantity
    return formatted(total)


def build_pod_group(owner: dict[str, Any], members: int, amounts: dict[str, str]) -> dict[str, Any]:
    meta = sc.as_dict(owner.get("metadata"))
    labels = sc.labels_of(owner)
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
            "name": pod_group_name(owner),
            "namespace": meta.get("namespace"),
            "ownerReferences": [res.owner_reference(owner, owner.get("kind") or c.KIND_RAYCLUSTER)],
        },
        "spec": spec,
    }
    annotations = sc.annotations_of(owner)
    if annotations:
        body["metadata"]["annotations"] = dict(annotations)
    return body


def cluster_pod_group(cluster: dict[str, Any]) -> dict[str, Any]:
    members, amounts = gang_size(cluster)
    return build_pod_group(cluster, members, _amounts(amounts))


def job_pod_group(job: dict[str, Any], submitter_template: dict[str, Any] | None) -> dict[str, Any]:
    cluster = {"spec": sc.as_dict(sc.as_dict(job.get("spec")).get("rayClusterSpec"))}
    members, amounts = gang_size(cluster)
    submitter = pod_resources(submitter_template) if submitter_template else {}
    return build_pod_group(job, members, _amounts(amounts, submitter))


def _same_amounts(a: dict[str, Any], b: dict[str, Any]) -> bool:
    return set(a) == set(b) and all(same_amount(a[k], b[k]) for k in a)


def needs_resize(want: dict[str, Any], have: dict[str, Any]) -> bool:
    got = sc.as_dict(have.get("spec"))
    return got.get("minMember") != want["spec"]["minMember"] or not _same_amounts(
        sc.as_dict(got.get("minResources")), want["spec"]["minResources"]
    )


async def sync_pod_group(client: KubeClient, want: dict[str, Any], *, create: bool) -> bool:
    """Makes the PodGroup match ``want`` in size; True when something was written."""
    ns, name = want["metadata"]["namespace"], want["metadata"]["name"]
    try:
        have = await client.get(PODGROUPS, name, ns)
    except NotFound:
        if not create:
            return False
        with contextlib.suppress(AlreadyExists):  # a concurrent pass made it: next one sizes
            await client.create(PODGROUPS, want, ns)
        return True
    if not needs_resize(want, have):
        return False
    have["spec"] = {
        **sc.as_dict(have.get("spec")),
        "minMember": want["spec"]["minMember"],
        "minResources": want["spec"]["minResources"],
    }
    await client.update(PODGROUPS, have)
    return True


class VolcanoScheduler:
    name = NAME
    requires: tuple[Resource, ...] = (PODGROUPS,)

    async def on_submission(self, client: KubeClient, cluster: dict[str, Any]) -> None:
        if _from_rayjob(cluster):
            return  # the RayJob's PodGroup covers these pods
        await sync_pod_group(client, cluster_pod_group(cluster), create=True)

    def add_pod_metadata(
        self, cluster: dict[str, Any], group_name: str, pod: dict[str, Any]
    ) -> None:
        _mark(cluster, pod.setdefault("metadata", {}), pod.setdefault("spec", {}), group_name)

    async def on_job_submission(
        self,
        client: KubeClient,
        job: dict[str, Any],
        submitter_template: dict[str, Any] | None,
    ) -> None:
        await sync_pod_group(client, job_pod_group(job, submitter_template), create=True)

    def add_job_metadata(
        self,
        job: dict[str, Any],
        child: dict[str, Any],
        group_name: str,
        submitter_template: dict[str, Any],
    ) -> None:
        if child.get("kind") == "Job":
            _mark(job, *sc.job_pod_template(child), group_name)
            return
        meta = child.setdefault("metadata", {})
        annotations = meta.setdefault("annotations", {})
        annotations[c.ANNOTATION_VOLCANO_GROUP_NAME] = pod_group_name(job)
        annotations[c.ANNOTATION_VOLCANO_TASK_SPEC] = group_name

    async def on_job_completion(self, client: KubeClient, job: dict[str, Any]) -> bool:
        """Shrinks the RayJob's PodGroup to the live cluster (or to nothing)."""
        spec = sc.as_dict(job.get("spec"))
        cluster_name = sc.as_dict(job.get("status")).get("rayClusterName")
        if spec.get("clusterSelector") or not cluster_name:
            return False
        ns = sc.as_dict(job.get("metadata")).get("namespace")
        members, amounts = 0, dict[str, Any]()
        try:
            cluster = await client.get(RAYCLUSTERS, str(cluster_name), ns)
        except NotFound:
            cluster = None
        if cluster is not None and not sc.as_dict(cluster.get("metadata")).get("deletionTimestamp"):
            members, amounts = gang_size(cluster)
        want = build_pod_group(job, members, _amounts(amounts))
        return await sync_pod_group(client, want, create=False)


def _mark(owner: dict[str, Any], meta: dict[str, Any], spec: dict[str, Any], group: str) -> None:
    """What Volcano reads on a pod (or pod template) of ``owner``'s gang."""
    labels = sc.labels_of(owner)
    annotations = meta.setdefault("annotations", {})
    annotations[c.ANNOTATION_VOLCANO_GROUP_NAME] = pod_group_name(owner)
    annotations[c.ANNOTATION_VOLCANO_TASK_SPEC] = group
    for key in (LABEL_QUEUE, c.LABEL_PRIORITY_CLASS_NAME):
        if labels.get(key):
            meta.setdefault("labels", {})[key] = labels[key]
    if labels.get(c.LABEL_PRIORITY_CLASS_NAME):
        spec["priorityClassName"] = labels[c.LABEL_PRIORITY_CLASS_NAME]
    spec["schedulerName"] = NAME
