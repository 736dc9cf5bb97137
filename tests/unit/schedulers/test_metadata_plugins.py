"""Batch-scheduler plugins: what they add to a pod about to be created, and the PodGroup the
scheduler-plugins one asks for (pure)."""

from __future__ import annotations

import copy
from typing import Any

import orjson
import pytest

from kuberay.schedulers import UnknownScheduler, get_scheduler, volcano
from kuberay.schedulers.kai import KaiScheduler
from kuberay.schedulers.scheduler_plugins import SchedulerPluginsScheduler, build_pod_group
from kuberay.schedulers.yunikorn import YuniKornScheduler, task_groups


def cluster(labels: dict[str, str], annotations: dict[str, str] | None = None) -> dict[str, Any]:
    head = {
        "spec": {
            "containers": [
                {"name": "ray-head", "resources": {"requests": {"cpu": "1", "memory": "2Gi"}}}
            ],
            "nodeSelector": {"pool": "cpu"},
        }
    }
    worker = {
        "spec": {
            "containers": [
                {
                    "name": "ray-worker",
                    "resources": {"limits": {"cpu": "2", "nvidia.com/gpu": "1"}},
                },
                {"name": "sidecar", "resources": {"requests": {"cpu": "500m"}}},
            ],
            "tolerations": [{"key": "gpu", "operator": "Exists"}],
        }
    }
    return {
        "metadata": {
            "name": "rc",
            "namespace": "ns",
            "labels": labels,
            "annotations": annotations or {},
        },
        "spec": {
            "headGroupSpec": {"template": head},
            "workerGroupSpecs": [
                {"groupName": "gpu", "minReplicas": 2, "numOfHosts": 2, "template": worker}
            ],
        },
    }


def pod() -> dict[str, Any]:
    return {"metadata": {"labels": {"ray.io/cluster": "rc"}}, "spec": {"containers": []}}


def test_yunikorn_labels_and_scheduler_name_without_gang() -> None:
    p = pod()
    rc = cluster({"yunikorn.apache.org/app-id": "app-1", "yunikorn.apache.org/queue": "root.a"})
    YuniKornScheduler().add_pod_metadata(rc, "headgroup", p)
    assert p["spec"]["schedulerName"] == "yunikorn"
    assert p["metadata"]["labels"]["applicationId"] == "app-1"
    assert p["metadata"]["labels"]["queue"] == "root.a"
    assert "annotations" not in p["metadata"]


def test_yunikorn_gang_task_groups() -> None:
    p = pod()
    rc = cluster({"ray.io/gang-scheduling-enabled": "true"})
    YuniKornScheduler().add_pod_metadata(rc, "gpu", p)
    annotations = p["metadata"]["annotations"]
    assert annotations["yunikorn.apache.org/task-group-name"] == "gpu"
    groups = orjson.loads(annotations["yunikorn.apache.org/task-groups"])
    assert groups == [
        {
            "name": "headgroup",
            "minMember": 1,
            "minResource": {"cpu": "1", "memory": "2Gi"},
            "nodeSelector": {"pool": "cpu"},
        },
        {
            "name": "gpu",
            "minMember": 4,  # minReplicas x numOfHosts
            "minResource": {"cpu": "2500m", "nvidia.com/gpu": "1"},
            "tolerations": [{"key": "gpu", "operator": "Exists"}],
        },
    ]
    assert groups == task_groups(rc["spec"])


def test_yunikorn_passes_on_given_task_groups() -> None:
    given = '[{"name":"headgroup","minMember":1,"minResource":{}}]'
    p = pod()
    rc = cluster(
        {"ray.io/gang-scheduling-enabled": "true"}, {"yunikorn.apache.org/task-groups": given}
    )
    YuniKornScheduler().add_pod_metadata(rc, "headgroup", p)
    assert p["metadata"]["annotations"]["yunikorn.apache.org/task-groups"] == given


def test_kai_queue_label_and_scheduler_name() -> None:
    p = pod()
    KaiScheduler().add_pod_metadata(cluster({"kai.scheduler/queue": "team-a"}), "gpu", p)
    assert p["spec"]["schedulerName"] == "kai-scheduler"
    assert p["metadata"]["labels"]["kai.scheduler/queue"] == "team-a"
    bare = pod()
    before = copy.deepcopy(bare["metadata"])
    KaiScheduler().add_pod_metadata(cluster({}), "gpu", bare)
    assert bare["metadata"] == before  # no queue: nothing invented (KAI keeps it pending)
    assert bare["spec"]["schedulerName"] == "kai-scheduler"


def test_registry_names() -> None:
    assert get_scheduler("") is None
    assert get_scheduler("default") is None
    assert get_scheduler("yunikorn").name == "yunikorn"  # type: ignore[union-attr]
    assert get_scheduler("kai-scheduler").name == "kai-scheduler"  # type: ignore[union-attr]
    with pytest.raises(
        UnknownScheduler, match="available: kai-scheduler, scheduler-plugins, volcano, yunikorn"
    ):
        get_scheduler("nope")


def test_scheduler_plugins_pod_group_and_label() -> None:
    rc = cluster({"ray.io/gang-scheduling-enabled": "true"})
    rc["metadata"]["uid"] = "u1"
    rc["spec"]["workerGroupSpecs"][0]["replicas"] = 3  # 3 replicas x 2 hosts
    group = build_pod_group(rc)
    assert group["spec"]["minMember"] == 7
    assert group["spec"]["minResources"] == {
        "cpu": "16",  # head 1 + 6 x 2.5
        "memory": "2Gi",
        "nvidia.com/gpu": "6",
    }
    assert group["metadata"]["ownerReferences"][0]["uid"] == "u1"
    p = pod()
    SchedulerPluginsScheduler().add_pod_metadata(rc, "gpu", p)
    assert p["metadata"]["labels"]["scheduling.x-k8s.io/pod-group"] == "rc"
    assert p["spec"]["schedulerName"] == "scheduler-plugins-scheduler"
    plain = pod()
    SchedulerPluginsScheduler().add_pod_metadata(cluster({}), "gpu", plain)
    assert "scheduling.x-k8s.io/pod-group" not in plain["metadata"]["labels"]


def test_volcano_sizes_autoscaling_clusters_by_their_minimum() -> None:
    rc = cluster({"ray.io/priority-class-name": "high", "volcano.sh/queue-name": "q"})
    rc["spec"]["workerGroupSpecs"][0]["replicas"] = 5
    fixed = volcano.cluster_pod_group(rc)
    assert fixed["spec"]["minMember"] == 11  # 5 replicas x 2 hosts + head
    rc["spec"]["enableInTreeAutoscaling"] = True
    scaling = volcano.cluster_pod_group(rc)
    assert scaling["spec"]["minMember"] == 5  # minReplicas 2 x 2 hosts + head
    assert scaling["spec"]["minResources"]["nvidia.com/gpu"] == "4"
    assert (scaling["spec"]["queue"], scaling["spec"]["priorityClassName"]) == ("q", "high")
    p = pod()
    volcano.VolcanoScheduler().add_pod_metadata(rc, "gpu", p)
    assert p["spec"]["priorityClassName"] == "high"
    assert p["metadata"]["annotations"]["volcano.sh/task-spec"] == "gpu"


def test_volcano_resize_compares_quantities_by_value() -> None:
    want = {"spec": {"minMember": 3, "minResources": {"cpu": "1500m", "memory": "1Gi"}}}
    same = {"spec": {"minMember": 3, "minResources": {"cpu": "1.5", "memory": "1024Mi"}}}
    assert not volcano.needs_resize(want, same)
    assert volcano.needs_resize(
        want, {"spec": {"minMember": 4, "minResources": same["spec"]["minResources"]}}
    )
    assert volcano.needs_resize(want, {"spec": {"minMember": 3, "minResources": {"cpu": "2"}}})


def rayjob(labels: dict[str, str]) -> dict[str, Any]:
    return {
        "apiVersion": "ray.io/v1",
        "kind": "RayJob",
        "metadata": {"name": "job", "namespace": "ns", "labels": labels},
        "spec": {"rayClusterSpec": cluster({})["spec"]},
    }


SUBMITTER_TEMPLATE = {
    "spec": {
        "containers": [{"name": "ray-job-submitter", "resources": {"requests": {"cpu": "500m"}}}]
    }
}


def test_yunikorn_rayjob_gang_includes_the_submitter() -> None:
    job = rayjob({"yunikorn.apache.org/app-id": "a1", "ray.io/gang-scheduling-enabled": "true"})
    rc: dict[str, Any] = {"kind": "RayCluster", "metadata": {"name": "job-abc"}}
    yk = YuniKornScheduler()
    yk.add_job_metadata(job, rc, "", SUBMITTER_TEMPLATE)
    groups = orjson.loads(rc["metadata"]["annotations"]["yunikorn.apache.org/task-groups"])
    assert [(g["name"], g["minMember"]) for g in groups] == [
        ("headgroup", 1),
        ("gpu", 4),
        ("submittergroup", 1),
    ]
    assert groups[2]["minResource"] == {"cpu": "500m"}
    assert "yunikorn.apache.org/task-group-name" not in rc["metadata"]["annotations"]
    assert rc["metadata"]["labels"]["applicationId"] == "a1"

    submitter: dict[str, Any] = {
        "kind": "Job",
        "spec": {"template": copy.deepcopy(SUBMITTER_TEMPLATE)},
    }
    yk.add_job_metadata(job, submitter, "submittergroup", SUBMITTER_TEMPLATE)
    template = submitter["spec"]["template"]
    assert template["spec"]["schedulerName"] == "yunikorn"
    assert template["metadata"]["labels"]["applicationId"] == "a1"
    annotations = template["metadata"]["annotations"]
    assert annotations["yunikorn.apache.org/task-group-name"] == "submittergroup"
    assert (
        annotations["yunikorn.apache.org/task-groups"]
        == rc["metadata"]["annotations"]["yunikorn.apache.org/task-groups"]
    )


def test_other_plugins_leave_rayjob_children_alone() -> None:
    job = rayjob({"kai.scheduler/queue": "q", "ray.io/gang-scheduling-enabled": "true"})
    for plugin in (KaiScheduler(), SchedulerPluginsScheduler()):
        rc: dict[str, Any] = {"kind": "RayCluster", "metadata": {"name": "job-abc"}}
        plugin.add_job_metadata(job, rc, "", SUBMITTER_TEMPLATE)
        assert rc == {"kind": "RayCluster", "metadata": {"name": "job-abc"}}


def test_volcano_rayjob_gang_reserves_the_submitter_without_counting_it() -> None:
    job = rayjob({"volcano.sh/queue-name": "q"})
    job["metadata"]["uid"] = "j1"
    job["spec"]["rayClusterSpec"]["workerGroupSpecs"][0]["replicas"] = 2
    group = volcano.job_pod_group(job, SUBMITTER_TEMPLATE)
    assert group["metadata"]["name"] == "ray-job-pg"
    owner = group["metadata"]["ownerReferences"][0]
    assert (owner["kind"], owner["uid"]) == ("RayJob", "j1")
    assert group["spec"]["minMember"] == 5  # head + minReplicas 2 x 2 hosts; no submitter
    assert group["spec"]["minResources"]["cpu"] == "11500m"  # 1 + 4 x 2.5 + 0.5 submitter
    # The cluster the job makes names the job's PodGroup on its pods and skips its own.
    made = {
        "kind": "RayCluster",
        "metadata": {
            "name": "job-x1",
            "labels": {
                "ray.io/originated-from-crd": "RayJob",
                "ray.io/originated-from-cr-name": "job",
                "volcano.sh/queue-name": "q",
            },
        },
    }
    p = pod()
    volcano.VolcanoScheduler().add_pod_metadata(made, "headgroup", p)
    assert p["metadata"]["annotations"]["scheduling.k8s.io/group-name"] == "ray-job-pg"
    submitter: dict[str, Any] = {
        "kind": "Job",
        "spec": {"template": copy.deepcopy(SUBMITTER_TEMPLATE)},
    }
    volcano.VolcanoScheduler().add_job_metadata(
        job, submitter, "submittergroup", SUBMITTER_TEMPLATE
    )
    template = submitter["spec"]["template"]
    assert template["spec"]["schedulerName"] == "volcano"
    assert template["metadata"]["annotations"] == {
        "scheduling.k8s.io/group-name": "ray-job-pg",
        "volcano.sh/task-spec": "submittergroup",
    }
    assert template["metadata"]["labels"]["volcano.sh/queue-name"] == "q"
