"""Apache YuniKorn: pods carry YuniKorn's scheduler name, application id and queue, and with
gang scheduling the task groups YuniKorn reserves room for before any member is placed.

Nothing is created in the API: YuniKorn reads everything from the pods. The task groups are
computed from the spec that builds the pods (head: one member; each worker group: minReplicas
x numOfHosts members of one pod's resources), unless the cluster already carries a
``yunikorn.apache.org/task-groups`` annotation, which is passed on as written (a RayJob hands
its own groups down that way). Invariant: every pod of one cluster gets the same task groups
and a task group name that is one of them, or YuniKorn would never see the gang complete.
"""

from __future__ import annotations

from typing import Any

import orjson

from kuberay.api import constants as c
from kuberay.api.quantity import formatted, pod_resources
from kuberay.schedulers import SUBMITTER_GROUP
from kuberay.schedulers import common as sc

NAME = "yunikorn"
LABEL_APP_ID = "yunikorn.apache.org/app-id"
LABEL_QUEUE = "yunikorn.apache.org/queue"
POD_LABEL_APP_ID = "applicationId"
POD_LABEL_QUEUE = "queue"


def _task_group(name: str, members: int, template: dict[str, Any]) -> dict[str, Any]:
    spec = sc.as_dict(template.get("spec"))
    group: dict[str, Any] = {
        "name": name,
        "minMember": members,
        "minResource": formatted(pod_resources(template)),
    }
    for key in ("nodeSelector", "tolerations", "affinity"):
        if spec.get(key):
            group[key] = spec[key]
    return group


def task_groups(cluster_spec: dict[str, Any]) -> list[dict[str, Any]]:
    head = sc.as_dict(cluster_spec.get("headGroupSpec"))
    groups = [_task_group(c.HEAD_GROUP_NAME, 1, sc.as_dict(head.get("template")))]
    for worker in sc.as_list(cluster_spec.get("workerGroupSpecs")):
        worker = sc.as_dict(worker)
        members = sc.as_int(worker.get("minReplicas"), 0) * sc.as_int(worker.get("numOfHosts"), 1)
        groups.append(
            _task_group(
                str(worker.get("groupName") or ""), members, sc.as_dict(worker.get("template"))
            )
        )
    return groups


def task_groups_annotation(parent: dict[str, Any], cluster_spec: dict[str, Any]) -> str:
    given = sc.annotations_of(parent).get(c.ANNOTATION_YUNIKORN_TASK_GROUPS)
    if given:
        return given
    return orjson.dumps(task_groups(cluster_spec)).decode()


class YuniKornScheduler(sc.NoJobLevelObjects):
    name = NAME

    async def on_submission(self, client: Any, cluster: dict[str, Any]) -> None:
        """Nothing to create: YuniKorn reads the pods."""

    def add_pod_metadata(
        self, cluster: dict[str, Any], group_name: str, pod: dict[str, Any]
    ) -> None:
        labels = sc.labels_of(cluster)
        meta = pod.setdefault("metadata", {})
        pod_labels = meta.setdefault("labels", {})
        for source, target in ((LABEL_APP_ID, POD_LABEL_APP_ID), (LABEL_QUEUE, POD_LABEL_QUEUE)):
            if labels.get(source):
                pod_labels[target] = labels[source]
        pod.setdefault("spec", {})["schedulerName"] = NAME
        if c.LABEL_GANG_SCHEDULING_ENABLED in labels:
            annotations = meta.setdefault("annotations", {})
            annotations[c.ANNOTATION_YUNIKORN_TASK_GROUPS] = task_groups_annotation(
                cluster, sc.as_dict(cluster.get("spec"))
            )
            annotations[c.ANNOTATION_YUNIKORN_TASK_GROUP_NAME] = group_name

    def add_job_metadata(
        self,
        job: dict[str, Any],
        child: dict[str, Any],
        group_name: str,
        submitter_template: dict[str, Any],
    ) -> None:
        labels = sc.labels_of(job)
        if child.get("kind") == "Job":
            target, pod_spec = sc.job_pod_template(child)
            pod_spec["schedulerName"] = NAME
        else:
            target = child.setdefault("metadata", {})
        target_labels = target.setdefault("labels", {})
        for source, name in ((LABEL_APP_ID, POD_LABEL_APP_ID), (LABEL_QUEUE, POD_LABEL_QUEUE)):
            if labels.get(source):
                target_labels[name] = labels[source]
        if c.LABEL_GANG_SCHEDULING_ENABLED not in labels:
            return
        annotations = target.setdefault("annotations", {})
        given = sc.annotations_of(job).get(c.ANNOTATION_YUNIKORN_TASK_GROUPS)
        if given:
            annotations[c.ANNOTATION_YUNIKORN_TASK_GROUPS] = given
        else:
            cluster_spec = sc.as_dict(sc.as_dict(job.get("spec")).get("rayClusterSpec"))
            groups = [
                *task_groups(cluster_spec),
                _task_group(SUBMITTER_GROUP, 1, submitter_template),
            ]
            annotations[c.ANNOTATION_YUNIKORN_TASK_GROUPS] = orjson.dumps(groups).decode()
        if group_name:
            annotations[c.ANNOTATION_YUNIKORN_TASK_GROUP_NAME] = group_name
