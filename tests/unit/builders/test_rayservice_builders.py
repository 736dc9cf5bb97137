"""Pure RayService builders: names, the RayCluster a RayService owns, the hashes that decide
between an in-place update and a new cluster, the head / serve Services, serve endpoints and
application statuses (upstream: ray-operator/controllers/ray/rayservice_controller.go)."""

from __future__ import annotations

import copy
from typing import Any

import pytest

from kuberay.api import constants as c
from kuberay.builders import rayservice as rsb
from kuberay.builders.errors import BuildError
from kuberay.builders.options import BuildOptions

SERVE = "applications:\n  - name: app\n    import_path: mod:app\n"


def cluster_spec(workers: int = 1, *, ports: bool = True) -> dict[str, Any]:
    head: dict[str, Any] = {"name": "ray-head", "image": "rayproject/ray:2.52.0"}
    if ports:
        head["ports"] = [
            {"name": "dashboard", "containerPort": 8265},
            {"name": "serve", "containerPort": 8000},
        ]
    return {
        "rayVersion": "2.52.0",
        "headGroupSpec": {"rayStartParams": {}, "template": {"spec": {"containers": [head]}}},
        "workerGroupSpecs": [
            {
                "groupName": "g1",
                "replicas": workers,
                "minReplicas": 0,
                "maxReplicas": 5,
                "rayStartParams": {},
                "template": {"spec": {"containers": [{"name": "w", "image": "img"}]}},
            }
        ],
    }


def rayservice(**spec: Any) -> dict[str, Any]:
    body: dict[str, Any] = {"serveConfigV2": SERVE, "rayClusterConfig": cluster_spec()}
    body.update(spec)
    return {
        "apiVersion": "ray.io/v1",
        "kind": "RayService",
        "metadata": {
            "name": "svc",
            "namespace": "ns",
            "uid": "uid-1",
            "labels": {"team": "a"},
            "annotations": {"note": "x"},
        },
        "spec": body,
    }


def test_names() -> None:
    svc = rayservice()
    assert rsb.cluster_name_for("svc", "abcde") == "svc-abcde"
    assert rsb.rayservice_head_service_name("svc") == "svc-head-svc"
    assert rsb.serve_service_name(svc) == "svc-serve-svc"
    custom = rayservice(serveService={"metadata": {"name": "mine"}})
    assert rsb.serve_service_name(custom) == "mine"


def test_build_cluster_labels_annotations_owner() -> None:
    svc = rayservice()
    cluster = rsb.build_cluster(svc, "svc-abcde")
    meta = cluster["metadata"]
    assert meta["name"] == "svc-abcde"
    assert meta["namespace"] == "ns"
    assert meta["labels"] == {
        "team": "a",
        c.LABEL_ORIGINATED_FROM_CR_NAME: "svc",
        c.LABEL_ORIGINATED_FROM_CRD: "RayService",
    }
    assert meta["annotations"]["note"] == "x"
    assert meta["annotations"][c.ANNOTATION_HASH_WITHOUT_REPLICAS] == rsb.goal_hash(svc)
    assert meta["annotations"][c.ANNOTATION_NUM_WORKER_GROUPS] == "1"
    assert meta["annotations"][c.ANNOTATION_KUBERAY_VERSION] == c.KUBERAY_VERSION
    owner = meta["ownerReferences"][0]
    assert owner["kind"] == "RayService"
    assert owner["uid"] == "uid-1"
    assert owner["controller"] is True
    assert cluster["spec"] == svc["spec"]["rayClusterConfig"]
    assert cluster["spec"] is not svc["spec"]["rayClusterConfig"]


def test_hash_ignores_replicas_and_suspend() -> None:
    svc = rayservice()
    cluster = rsb.build_cluster(svc, "svc-abcde")
    scaled = rayservice(rayClusterConfig=cluster_spec(workers=4))
    assert rsb.matches_goal(scaled, cluster)
    suspended = copy.deepcopy(svc)
    suspended["spec"]["rayClusterConfig"]["suspend"] = True
    assert rsb.matches_goal(suspended, cluster)
    changed = copy.deepcopy(svc)
    changed["spec"]["rayClusterConfig"]["headGroupSpec"]["template"]["spec"]["containers"][0][
        "image"
    ] = "rayproject/ray:2.53.0"
    assert not rsb.matches_goal(changed, cluster)
    assert not rsb.only_groups_appended(changed, cluster)
    assert not rsb.needs_in_place_update(changed, cluster)


def test_a_cluster_stamped_by_another_operator_is_judged_by_its_spec() -> None:
    """Takeover: the Go operator's hash annotation can never equal ours, so its cluster is
    compared by its spec (Go's empty structs included) and then re-stamped in place."""
    svc = rayservice()
    cluster = rsb.build_cluster(svc, "svc-abcde")
    annotations = cluster["metadata"]["annotations"]
    annotations[c.ANNOTATION_KUBERAY_VERSION] = "v1.6.1"
    annotations[c.ANNOTATION_HASH_WITHOUT_REPLICAS] = "GOHASHGOHASHGOHASHGOHASHGOHASH00"
    cluster["spec"]["headGroupSpec"]["template"]["metadata"] = {}
    assert rsb.matches_goal(svc, cluster)
    assert rsb.needs_in_place_update(svc, cluster)
    restamped = rsb.updated_cluster(svc, cluster)
    assert restamped["metadata"]["annotations"][c.ANNOTATION_KUBERAY_VERSION] == c.KUBERAY_VERSION
    assert rsb.matches_goal(svc, restamped)
    changed = copy.deepcopy(svc)
    changed["spec"]["rayClusterConfig"]["rayVersion"] = "2.53.0"
    assert not rsb.matches_goal(changed, cluster)


def test_in_place_update_for_replicas_and_appended_groups() -> None:
    svc = rayservice()
    cluster = rsb.build_cluster(svc, "svc-abcde")
    assert not rsb.needs_in_place_update(svc, cluster)
    scaled = rayservice(rayClusterConfig=cluster_spec(workers=3))
    assert rsb.needs_in_place_update(scaled, cluster)
    appended = copy.deepcopy(svc)
    group = copy.deepcopy(appended["spec"]["rayClusterConfig"]["workerGroupSpecs"][0])
    group["groupName"] = "g2"
    appended["spec"]["rayClusterConfig"]["workerGroupSpecs"].append(group)
    assert rsb.only_groups_appended(appended, cluster)
    assert rsb.needs_in_place_update(appended, cluster)
    prepended = copy.deepcopy(svc)
    prepended["spec"]["rayClusterConfig"]["workerGroupSpecs"].insert(0, group)
    assert not rsb.only_groups_appended(prepended, cluster)


def test_in_place_update_leaves_autoscaled_replicas_alone() -> None:
    spec = cluster_spec()
    spec["enableInTreeAutoscaling"] = True
    svc = rayservice(rayClusterConfig=spec)
    cluster = rsb.build_cluster(svc, "svc-abcde")
    cluster["spec"]["workerGroupSpecs"][0]["replicas"] = 4  # the autoscaler's choice
    assert not rsb.needs_in_place_update(svc, cluster)


def test_operator_version_change_updates_in_place() -> None:
    svc = rayservice()
    cluster = rsb.build_cluster(svc, "svc-abcde")
    cluster["metadata"]["annotations"][c.ANNOTATION_KUBERAY_VERSION] = "v1.6.0"
    assert rsb.needs_in_place_update(svc, cluster)


def test_updated_cluster_keeps_version_and_our_annotations() -> None:
    svc = rayservice(rayClusterConfig=cluster_spec(workers=3))
    existing = rsb.build_cluster(rayservice(), "svc-abcde")
    existing["metadata"]["resourceVersion"] = "42"
    existing["metadata"]["annotations"]["ray.io/serve-config-hash"] = "H"
    out = rsb.updated_cluster(svc, existing)
    assert out["metadata"]["resourceVersion"] == "42"
    assert out["metadata"]["annotations"]["ray.io/serve-config-hash"] == "H"
    assert out["spec"]["workerGroupSpecs"][0]["replicas"] == 3


def test_suspend_toggle_is_an_in_place_update_to_the_goals_value() -> None:
    """Kueue admits (or preempts) a RayService by flipping ``rayClusterConfig.suspend``: the
    existing cluster follows in place, never a new cluster (upstream: shouldUpdateCluster)."""
    queued = rayservice()
    queued["spec"]["rayClusterConfig"]["suspend"] = True
    cluster = rsb.build_cluster(queued, "svc-abcde")
    assert cluster["spec"]["suspend"] is True
    assert not rsb.needs_in_place_update(queued, cluster)
    admitted = copy.deepcopy(queued)
    admitted["spec"]["rayClusterConfig"]["suspend"] = False
    assert rsb.matches_goal(admitted, cluster)
    assert rsb.needs_in_place_update(admitted, cluster)
    resumed = rsb.updated_cluster(admitted, cluster)
    assert resumed["spec"]["suspend"] is False
    assert not rsb.needs_in_place_update(admitted, resumed)
    assert rsb.needs_in_place_update(queued, resumed)
    assert rsb.updated_cluster(queued, resumed)["spec"]["suspend"] is True


def test_serve_config_yaml_to_json() -> None:
    assert rsb.serve_config(rayservice()) == {
        "applications": [{"name": "app", "import_path": "mod:app"}]
    }
    assert rsb.serve_config(rayservice(serveConfigV2="")) is None
    with pytest.raises(ValueError, match="mapping"):
        rsb.serve_config(rayservice(serveConfigV2="- a\n- b\n"))
    assert rsb.serve_config_hash(rayservice()) != rsb.serve_config_hash(
        rayservice(serveConfigV2=SERVE + "    route_prefix: /x\n")
    )
    assert rsb.serve_config_hash(rayservice(serveConfigV2="")) == ""


def test_head_service_named_after_rayservice() -> None:
    svc = rayservice()
    cluster = rsb.build_cluster(svc, "svc-abcde")
    out = rsb.build_head_service_for(svc, cluster, BuildOptions())
    assert out["metadata"]["name"] == "svc-head-svc"
    assert out["metadata"]["labels"][c.LABEL_ORIGINATED_FROM_CRD] == "RayService"
    assert out["metadata"]["ownerReferences"][0]["kind"] == "RayService"
    assert out["spec"]["selector"][c.LABEL_CLUSTER] == "svc-abcde"


def test_serve_service_selects_serving_pods_of_the_cluster() -> None:
    svc = rayservice()
    cluster = rsb.build_cluster(svc, "svc-abcde")
    out = rsb.build_serve_service_for(svc, cluster, BuildOptions())
    assert out["metadata"]["name"] == "svc-serve-svc"
    assert out["metadata"]["labels"][c.LABEL_SERVE] == "svc-serve"
    assert out["metadata"]["labels"][c.LABEL_ORIGINATED_FROM_CR_NAME] == "svc"
    assert out["spec"]["selector"] == {c.LABEL_CLUSTER: "svc-abcde", c.LABEL_SERVE: "true"}
    assert out["spec"]["ports"] == [{"name": "serve", "port": 8000}]


def test_custom_serve_service_ports_and_missing_port() -> None:
    custom = {
        "metadata": {"name": "mine", "namespace": "elsewhere", "labels": {"x": "y"}},
        "spec": {"ports": [{"name": "serve", "port": 9000}], "selector": {"a": "b"}},
    }
    svc = rayservice(serveService=custom, rayClusterConfig=cluster_spec(ports=False))
    cluster = rsb.build_cluster(svc, "svc-abcde")
    cluster["spec"]["headGroupSpec"]["template"]["spec"]["containers"][0]["ports"] = [
        {"name": "dashboard", "containerPort": 8265}
    ]
    out = rsb.build_serve_service_for(svc, cluster, BuildOptions())
    assert out["metadata"]["name"] == "mine"
    assert out["metadata"]["namespace"] == "ns"
    assert out["metadata"]["labels"]["x"] == "y"
    assert out["spec"]["ports"] == [{"name": "serve", "port": 9000}]
    assert out["spec"]["selector"] == {c.LABEL_CLUSTER: "svc-abcde", c.LABEL_SERVE: "true"}
    plain = rayservice()
    with pytest.raises(BuildError):
        rsb.build_serve_service_for(plain, cluster, BuildOptions())


def test_deletion_delay_default_and_value() -> None:
    assert rsb.deletion_delay_seconds(rayservice()) == 60
    assert rsb.deletion_delay_seconds(rayservice(rayClusterDeletionDelaySeconds=5)) == 5
    assert rsb.deletion_delay_seconds(rayservice(rayClusterDeletionDelaySeconds=0)) == 0


def test_ready_endpoints_deduplicated_by_pod_uid() -> None:
    def ep(uid: str | None, ready: bool) -> dict[str, Any]:
        out: dict[str, Any] = {"conditions": {"ready": ready}}
        if uid:
            out["targetRef"] = {"kind": "Pod", "uid": uid}
        return out

    slices: list[dict[str, Any]] = [
        {"endpoints": [ep("a", True), ep("b", False), ep("c", True)]},
        {"endpoints": [ep("a", True), ep(None, True)]},  # dual-stack: same pod again
        {"endpoints": None},
    ]
    assert rsb.count_ready_endpoints(slices) == 3
    assert rsb.count_ready_endpoints([]) == 0


def test_app_statuses_from_serve_details() -> None:
    details = {
        "applications": {
            "": {
                "status": "RUNNING",
                "deployments": {"D": {"status": "HEALTHY", "message": ""}},
            },
            "b": {"status": "DEPLOYING", "message": "wait", "deployments": {}},
        }
    }
    apps = rsb.app_statuses(details)
    assert apps == {
        "default": {"status": "RUNNING", "serveDeploymentStatuses": {"D": {"status": "HEALTHY"}}},
        "b": {"status": "DEPLOYING", "message": "wait"},
    }
    assert not rsb.all_apps_running(apps)
    assert rsb.all_apps_running({"default": apps["default"]})
    assert not rsb.all_apps_running({})
