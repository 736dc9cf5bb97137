"""Injected env vars in upstream's order, GCS FT and auth env (upstream: common/pod.go)."""

from __future__ import annotations

from kuberay.builders.options import BuildOptions
from kuberay.builders.pod import build_head_pod, build_worker_pod

from . import samples

OPTS = BuildOptions()
HEAD_ORDER = [
    "RAY_CLUSTER_NAME",
    "RAY_CLUSTER_NAMESPACE",
    "RAY_CLOUD_INSTANCE_ID",
    "RAY_NODE_TYPE_NAME",
    "KUBERAY_GEN_RAY_START_CMD",
    "RAY_PORT",
    "RAY_ADDRESS",
    "RAY_USAGE_STATS_KUBERAY_IN_USE",
    "RAY_USAGE_STATS_EXTRA_TAGS",
    "RAY_DASHBOARD_ENABLE_K8S_DISK_USAGE",
]


def test_head_env_order_and_values() -> None:
    rc = samples.cluster()
    ray = samples.ray_container(build_head_pod(rc, OPTS))
    assert samples.env_names(ray) == HEAD_ORDER
    assert samples.env_value(ray, "RAY_CLUSTER_NAME") == {
        "fieldRef": {"fieldPath": "metadata.labels['ray.io/cluster']"}
    }
    assert samples.env_value(ray, "RAY_CLUSTER_NAMESPACE") == {
        "fieldRef": {"fieldPath": "metadata.namespace"}
    }
    assert samples.env_value(ray, "RAY_CLOUD_INSTANCE_ID") == {
        "fieldRef": {"fieldPath": "metadata.name"}
    }
    assert samples.env_value(ray, "RAY_NODE_TYPE_NAME") == {
        "fieldRef": {"fieldPath": "metadata.labels['ray.io/group']"}
    }
    assert samples.env_value(ray, "RAY_PORT") == "6379"
    assert samples.env_value(ray, "RAY_ADDRESS") == "127.0.0.1:6379"
    assert samples.env_value(ray, "RAY_USAGE_STATS_EXTRA_TAGS") == (
        "kuberay_version=v1.7.0;kuberay_crd=RayCluster"
    )


def test_worker_env_order_and_values() -> None:
    rc = samples.cluster("demo")
    ray = samples.ray_container(build_worker_pod(rc, rc["spec"]["workerGroupSpecs"][0], OPTS))
    expected = ["FQ_RAY_IP", "RAY_IP", *HEAD_ORDER]
    expected.remove("RAY_USAGE_STATS_EXTRA_TAGS")
    assert samples.env_names(ray) == expected
    fqdn = "demo-head-svc.default.svc.cluster.local"
    assert samples.env_value(ray, "FQ_RAY_IP") == fqdn
    assert samples.env_value(ray, "RAY_IP") == "demo-head-svc"
    assert samples.env_value(ray, "RAY_ADDRESS") == f"{fqdn}:6379"


def test_user_env_first_and_not_duplicated() -> None:
    rc = samples.cluster()
    container = rc["spec"]["headGroupSpec"]["template"]["spec"]["containers"][0]
    container["env"] = [
        {"name": "RAY_ADDRESS", "value": "custom:1"},
        {"name": "RAY_PORT", "value": "1"},
    ]
    ray = samples.ray_container(build_head_pod(rc, OPTS))
    names = samples.env_names(ray)
    assert names[:2] == ["RAY_ADDRESS", "RAY_PORT"]
    assert names.count("RAY_ADDRESS") == 1
    assert names.count("RAY_PORT") == 1
    assert samples.env_value(ray, "RAY_ADDRESS") == "custom:1"


def test_default_container_envs_come_first_unless_user_set() -> None:
    rc = samples.cluster()
    container = rc["spec"]["headGroupSpec"]["template"]["spec"]["containers"][0]
    container["env"] = [{"name": "A", "value": "user"}]
    opts = BuildOptions(
        default_container_envs=({"name": "A", "value": "op"}, {"name": "B", "value": "op"})
    )
    ray = samples.ray_container(build_head_pod(rc, opts))
    assert samples.env_names(ray)[:3] == ["A", "B", "RAY_CLUSTER_NAME"]
    assert samples.env_value(ray, "A") == "user"


def test_rayservice_envs_and_crd_tag() -> None:
    rc = samples.cluster()
    rc["metadata"]["labels"] = {"ray.io/originated-from-crd": "RayService"}
    ray = samples.ray_container(build_head_pod(rc, OPTS))
    names = samples.env_names(ray)
    i = names.index("RAY_PORT")
    assert names[i + 1 : i + 5] == [
        "RAY_timeout_ms_task_wait_for_death_info",
        "RAY_gcs_server_request_timeout_seconds",
        "RAY_SERVE_KV_TIMEOUT_S",
        "RAY_ADDRESS",
    ]
    assert samples.env_value(ray, "RAY_timeout_ms_task_wait_for_death_info") == "0"
    assert samples.env_value(ray, "RAY_USAGE_STATS_EXTRA_TAGS").endswith("kuberay_crd=RayService")


def test_rayjob_crd_tag() -> None:
    rc = samples.cluster()
    rc["metadata"]["labels"] = {"ray.io/originated-from-crd": "RayJob"}
    ray = samples.ray_container(build_head_pod(rc, OPTS))
    assert samples.env_value(ray, "RAY_USAGE_STATS_EXTRA_TAGS").endswith("kuberay_crd=RayJob")
    assert "RAY_SERVE_KV_TIMEOUT_S" not in samples.env_names(ray)


def test_init_containers_get_fq_ray_ip_and_ray_ip() -> None:
    rc = samples.cluster("demo")
    rc["spec"]["headGroupSpec"]["template"]["spec"]["initContainers"] = [
        {"name": "setup", "image": "busybox"}
    ]
    pod = build_head_pod(rc, OPTS)
    init = pod["spec"]["initContainers"][0]
    assert init["env"] == [
        {"name": "FQ_RAY_IP", "value": "demo-head-svc.default.svc.cluster.local"},
        {"name": "RAY_IP", "value": "demo-head-svc"},
    ]


def test_autoscaler_version_env_and_restart_policy() -> None:
    v2 = samples.autoscaling_cluster("v2")
    head = build_head_pod(v2, OPTS)
    ray = samples.ray_container(head)
    assert samples.env_names(ray)[0] == "RAY_enable_autoscaler_v2"
    assert samples.env_value(ray, "RAY_enable_autoscaler_v2") == "true"
    assert head["spec"]["restartPolicy"] == "Never"
    worker = build_worker_pod(v2, v2["spec"]["workerGroupSpecs"][0], OPTS)
    assert worker["spec"]["restartPolicy"] == "Never"
    v1 = build_head_pod(samples.autoscaling_cluster("v1"), OPTS)
    assert samples.env_value(samples.ray_container(v1), "RAY_enable_autoscaler_v2") == "false"
    assert "restartPolicy" not in v1["spec"]
    unset = build_head_pod(samples.autoscaling_cluster(), OPTS)
    assert "RAY_enable_autoscaler_v2" not in samples.env_names(samples.ray_container(unset))


def test_redis_gcs_ft_head_env_and_annotations() -> None:
    rc = samples.redis_ft_cluster(
        redisUsername={"value": "user"},
        redisPassword={"valueFrom": {"secretKeyRef": {"name": "redis", "key": "pw"}}},
    )
    pod = build_head_pod(rc, OPTS)
    ray = samples.ray_container(pod)
    assert samples.env_names(ray)[:4] == [
        "RAY_external_storage_namespace",
        "RAY_REDIS_ADDRESS",
        "REDIS_USERNAME",
        "REDIS_PASSWORD",
    ]
    uid = rc["metadata"]["uid"]
    assert samples.env_value(ray, "RAY_external_storage_namespace") == uid
    assert samples.env_value(ray, "REDIS_USERNAME") == "user"
    assert samples.env_value(ray, "REDIS_PASSWORD") == {
        "secretKeyRef": {"name": "redis", "key": "pw"}
    }
    annotations = pod["metadata"]["annotations"]
    assert annotations["ray.io/ft-enabled"] == "true"
    assert annotations["ray.io/external-storage-namespace"] == uid


def test_external_storage_namespace_precedence() -> None:
    rc = samples.redis_ft_cluster()
    rc["metadata"]["annotations"] = {"ray.io/external-storage-namespace": "from-annotation"}
    pod = build_head_pod(rc, OPTS)
    assert pod["metadata"]["annotations"]["ray.io/external-storage-namespace"] == "from-annotation"
    rc["spec"]["gcsFaultToleranceOptions"]["externalStorageNamespace"] = "from-options"
    ray = samples.ray_container(build_head_pod(rc, OPTS))
    assert samples.env_value(ray, "RAY_external_storage_namespace") == "from-options"


def test_redis_address_written_even_when_empty() -> None:
    rc = samples.cluster(gcsFaultToleranceOptions={})
    ray = samples.ray_container(build_head_pod(rc, OPTS))
    assert samples.env_value(ray, "RAY_REDIS_ADDRESS") == ""


def test_legacy_ft_annotation_copies_redis_password_param() -> None:
    rc = samples.cluster()
    rc["metadata"]["annotations"] = {"ray.io/ft-enabled": "true"}
    rc["spec"]["headGroupSpec"]["rayStartParams"] = {"redis-password": "secret"}
    pod = build_head_pod(rc, OPTS)
    ray = samples.ray_container(pod)
    assert samples.env_value(ray, "REDIS_PASSWORD") == "secret"
    assert "RAY_REDIS_ADDRESS" not in samples.env_names(ray)
    assert pod["metadata"]["annotations"]["ray.io/ft-enabled"] == "true"


def test_worker_gcs_reconnect_timeout_any_backend() -> None:
    for rc in (
        samples.redis_ft_cluster(),
        samples.cluster(gcsFaultToleranceOptions={"backend": "rocksdb"}),
    ):
        ray = samples.ray_container(build_worker_pod(rc, rc["spec"]["workerGroupSpecs"][0], OPTS))
        assert samples.env_value(ray, "RAY_gcs_rpc_server_reconnect_timeout_s") == "600"
    plain = samples.cluster()
    ray = samples.ray_container(build_worker_pod(plain, plain["spec"]["workerGroupSpecs"][0], OPTS))
    assert "RAY_gcs_rpc_server_reconnect_timeout_s" not in samples.env_names(ray)


def test_rocksdb_head_env_volume_and_mount() -> None:
    rc = samples.cluster(
        gcsFaultToleranceOptions={"backend": "rocksdb", "storage": {"subPath": "gcs"}}
    )
    pod = build_head_pod(rc, OPTS)
    ray = samples.ray_container(pod)
    assert samples.env_names(ray)[:2] == ["RAY_gcs_storage", "RAY_gcs_storage_path"]
    assert samples.env_value(ray, "RAY_gcs_storage") == "rocksdb"
    assert samples.env_value(ray, "RAY_gcs_storage_path") == "/data/gcs"
    assert {"name": "gcs-storage", "mountPath": "/data/gcs", "subPath": "gcs"} in ray[
        "volumeMounts"
    ]
    assert {
        "name": "gcs-storage",
        "persistentVolumeClaim": {"claimName": "raycluster-kuberay-gcs-pvc"},
    } in pod["spec"]["volumes"]
    assert "ray.io/external-storage-namespace" not in pod["metadata"]["annotations"]
    assert "RAY_REDIS_ADDRESS" not in samples.env_names(ray)


def test_token_auth_env_on_ray_autoscaler_and_wait_gcs_ready() -> None:
    rc = samples.autoscaling_cluster()
    rc["spec"]["authOptions"] = {"mode": "token"}
    head = build_head_pod(rc, OPTS)
    secret_ref = {"secretKeyRef": {"name": "raycluster-kuberay", "key": "auth_token"}}
    for container in head["spec"]["containers"]:
        assert samples.env_value(container, "RAY_AUTH_MODE") == "token"
        assert samples.env_value(container, "RAY_AUTH_TOKEN") == secret_ref
    worker = build_worker_pod(rc, rc["spec"]["workerGroupSpecs"][0], OPTS)
    init = worker["spec"]["initContainers"][0]
    assert samples.env_value(init, "RAY_AUTH_TOKEN") == secret_ref
    rc["spec"]["authOptions"]["secretName"] = "mine"
    ray = samples.ray_container(build_head_pod(rc, OPTS))
    assert samples.env_value(ray, "RAY_AUTH_TOKEN")["secretKeyRef"]["name"] == "mine"


def test_auth_env_requires_mode_token() -> None:
    rc = samples.cluster(authOptions={})
    ray = samples.ray_container(build_head_pod(rc, OPTS))
    assert "RAY_AUTH_MODE" not in samples.env_names(ray)


def test_k8s_token_auth_env_volume_and_mount() -> None:
    rc = samples.cluster(authOptions={"mode": "token", "enableK8sTokenAuth": True})
    pod = build_head_pod(rc, OPTS)
    ray = samples.ray_container(pod)
    assert samples.env_value(ray, "RAY_ENABLE_K8S_TOKEN_AUTH") == "true"
    assert "RAY_AUTH_TOKEN" not in samples.env_names(ray)
    assert {
        "name": "ray-token",
        "mountPath": "/var/run/secrets/ray.io/serviceaccount",
        "readOnly": True,
    } in ray["volumeMounts"]
    assert {
        "name": "ray-token",
        "projected": {"sources": [{"serviceAccountToken": {"path": "token"}}]},
    } in pod["spec"]["volumes"]
