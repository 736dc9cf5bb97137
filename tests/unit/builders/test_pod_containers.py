"""Autoscaler sidecar, init container, volumes, operator sidecars and ports (upstream:
common/pod.go)."""

from __future__ import annotations

from typing import Any

from kuberay.builders.options import BuildOptions
from kuberay.builders.pod import build_head_pod, build_worker_pod

from . import samples

OPTS = BuildOptions()
AUTOSCALER_CMD = (
    "ray kuberay-autoscaler --cluster-name $(RAY_CLUSTER_NAME) "
    "--cluster-namespace $(RAY_CLUSTER_NAMESPACE)"
)


def _container(pod: dict[str, Any], name: str) -> dict[str, Any]:
    result: dict[str, Any] = next(c for c in pod["spec"]["containers"] if c["name"] == name)
    return result


def test_autoscaler_sidecar_defaults() -> None:
    pod = build_head_pod(samples.autoscaling_cluster(), OPTS)
    assert [c["name"] for c in pod["spec"]["containers"]] == ["ray-head", "autoscaler"]
    autoscaler = _container(pod, "autoscaler")
    assert autoscaler["image"] == samples.RAY_IMAGE
    assert autoscaler["imagePullPolicy"] == "IfNotPresent"
    assert autoscaler["command"] == ["/bin/bash", "-c", "--"]
    assert autoscaler["args"] == [AUTOSCALER_CMD]
    assert samples.env_names(autoscaler) == [
        "RAY_CLUSTER_NAME",
        "RAY_CLUSTER_NAMESPACE",
        "RAY_HEAD_POD_NAME",
        "KUBERAY_CRD_VER",
        "KUBERAY_GEN_AUTOSCALER_START_CMD",
    ]
    assert samples.env_value(autoscaler, "KUBERAY_CRD_VER") == "v1"
    assert samples.env_value(autoscaler, "KUBERAY_GEN_AUTOSCALER_START_CMD") == AUTOSCALER_CMD
    assert autoscaler["resources"] == {
        "limits": {"cpu": "500m", "memory": "512Mi"},
        "requests": {"cpu": "500m", "memory": "512Mi"},
    }
    assert pod["spec"]["serviceAccountName"] == "raycluster-kuberay"


def test_autoscaler_overrides() -> None:
    rc = samples.autoscaling_cluster()
    rc["spec"]["autoscalerOptions"] = {
        "image": "my/autoscaler:1",
        "imagePullPolicy": "Always",
        "resources": {"limits": {"cpu": "1"}},
        "env": [{"name": "EXTRA", "value": "1"}],
        "envFrom": [{"configMapRef": {"name": "cm"}}],
        "volumeMounts": [{"name": "v", "mountPath": "/v"}],
        "securityContext": {"runAsNonRoot": True},
        "command": ["run"],
        "args": ["--x"],
    }
    rc["spec"]["headGroupSpec"]["template"]["spec"]["serviceAccountName"] = "custom-sa"
    pod = build_head_pod(rc, OPTS)
    autoscaler = _container(pod, "autoscaler")
    assert autoscaler["image"] == "my/autoscaler:1"
    assert autoscaler["imagePullPolicy"] == "Always"
    assert autoscaler["resources"] == {"limits": {"cpu": "1"}}
    assert samples.env_names(autoscaler)[-1] == "EXTRA"
    assert autoscaler["envFrom"] == [{"configMapRef": {"name": "cm"}}]
    assert autoscaler["volumeMounts"][0] == {"name": "v", "mountPath": "/v"}
    assert {"mountPath": "/tmp/ray", "name": "ray-logs"} in autoscaler["volumeMounts"]
    assert autoscaler["securityContext"] == {"runAsNonRoot": True}
    assert autoscaler["command"] == ["run"]
    assert autoscaler["args"] == ["--x"]
    assert pod["spec"]["serviceAccountName"] == "custom-sa"


def test_ray_logs_volume_shared_with_autoscaler_only_on_head() -> None:
    rc = samples.autoscaling_cluster()
    pod = build_head_pod(rc, OPTS)
    assert {"name": "ray-logs", "emptyDir": {}} in pod["spec"]["volumes"]
    for name in ("ray-head", "autoscaler"):
        assert {"mountPath": "/tmp/ray", "name": "ray-logs"} in _container(pod, name)[
            "volumeMounts"
        ]
    worker = build_worker_pod(rc, rc["spec"]["workerGroupSpecs"][0], OPTS)
    assert all(v["name"] != "ray-logs" for v in worker["spec"]["volumes"])
    plain = build_head_pod(samples.cluster(), OPTS)
    assert all(v["name"] != "ray-logs" for v in plain["spec"]["volumes"])


def test_shared_memory_volume_size_from_limit_then_request() -> None:
    rc = samples.cluster()
    pod = build_head_pod(rc, OPTS)
    assert pod["spec"]["volumes"][0] == {
        "name": "shared-mem",
        "emptyDir": {"medium": "Memory", "sizeLimit": "2G"},
    }
    assert {"mountPath": "/dev/shm", "name": "shared-mem"} in samples.ray_container(pod)[
        "volumeMounts"
    ]
    container = rc["spec"]["headGroupSpec"]["template"]["spec"]["containers"][0]
    container["resources"] = {"requests": {"memory": "1024Mi"}}
    pod = build_head_pod(rc, OPTS)
    assert pod["spec"]["volumes"][0]["emptyDir"] == {"medium": "Memory", "sizeLimit": "1Gi"}
    container["resources"] = {}
    assert build_head_pod(rc, OPTS)["spec"]["volumes"][0]["emptyDir"] == {"medium": "Memory"}


def test_shared_memory_skipped_when_mounted_or_plasma_directory() -> None:
    rc = samples.cluster()
    container = rc["spec"]["headGroupSpec"]["template"]["spec"]["containers"][0]
    container["volumeMounts"] = [{"name": "mine", "mountPath": "/dev/shm"}]
    pod = build_head_pod(rc, OPTS)
    assert "volumes" not in pod["spec"]
    rc2 = samples.cluster()
    rc2["spec"]["headGroupSpec"]["rayStartParams"] = {"plasma-directory": "/plasma"}
    assert "volumes" not in build_head_pod(rc2, OPTS)["spec"]


def test_metrics_container_port_added_once() -> None:
    rc = samples.cluster()
    ray = samples.ray_container(build_head_pod(rc, OPTS))
    assert ray["ports"][-1] == {"name": "metrics", "containerPort": 8080}
    container = rc["spec"]["headGroupSpec"]["template"]["spec"]["containers"][0]
    container["ports"].append({"name": "metrics", "containerPort": 9090})
    ray = samples.ray_container(build_head_pod(rc, OPTS))
    assert [p for p in ray["ports"] if p["name"] == "metrics"] == [
        {"name": "metrics", "containerPort": 9090}
    ]


def test_wait_gcs_ready_init_container() -> None:
    rc = samples.cluster("demo")
    group = rc["spec"]["workerGroupSpecs"][0]
    ray_template = group["template"]["spec"]["containers"][0]
    ray_template["imagePullPolicy"] = "Always"
    ray_template["securityContext"] = {"runAsUser": 1000}
    ray_template["env"] = [{"name": "USER_VAR", "value": "1"}]
    ray_template["volumeMounts"] = [{"name": "certs", "mountPath": "/certs"}]
    group["template"]["spec"]["initContainers"] = [{"name": "user-init", "image": "busybox"}]
    pod = build_worker_pod(rc, group, OPTS)
    user_init, init = pod["spec"]["initContainers"]
    assert user_init["name"] == "user-init"
    assert init["name"] == "wait-gcs-ready"
    assert init["image"] == samples.RAY_IMAGE
    assert init["imagePullPolicy"] == "Always"
    assert init["command"] == ["/bin/bash", "-c", "--"]
    script = init["args"][0]
    assert "ray health-check --address" in script
    assert "demo-head-svc.default.svc.cluster.local:6379" in script
    assert "sleep 5" in script
    assert "120" in script
    assert init["securityContext"] == {"runAsUser": 1000}
    assert samples.env_names(init) == ["USER_VAR", "FQ_RAY_IP", "RAY_IP"]
    assert init["volumeMounts"] == [{"name": "certs", "mountPath": "/certs"}]
    assert init["resources"] == {
        "limits": {"cpu": "200m", "memory": "256Mi"},
        "requests": {"cpu": "200m", "memory": "256Mi"},
    }
    head = build_head_pod(rc, OPTS)
    assert "initContainers" not in head["spec"]
    off = build_worker_pod(rc, group, BuildOptions(enable_init_container_injection=False))
    assert [i["name"] for i in off["spec"]["initContainers"]] == ["user-init"]


def test_operator_sidecars_appended() -> None:
    rc = samples.autoscaling_cluster()
    opts = BuildOptions(
        head_sidecar_containers=({"name": "head-logger", "image": "fluent"},),
        worker_sidecar_containers=({"name": "worker-logger", "image": "fluent"},),
    )
    head = build_head_pod(rc, opts)
    assert [c["name"] for c in head["spec"]["containers"]] == [
        "ray-head",
        "autoscaler",
        "head-logger",
    ]
    worker = build_worker_pod(rc, rc["spec"]["workerGroupSpecs"][0], opts)
    assert [c["name"] for c in worker["spec"]["containers"]] == ["ray-worker", "worker-logger"]
    assert "env" not in worker["spec"]["containers"][1]
