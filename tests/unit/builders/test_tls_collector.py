"""mTLS pod wiring (gate RayClusterMTLS) and the history collector (RayClusterHistoryServer)."""

from __future__ import annotations

from typing import Any

from kuberay.builders.options import BuildOptions
from kuberay.builders.pod import build_head_pod, build_worker_pod
from kuberay.builders.redis_cleanup import build_redis_cleanup_job

from . import samples

TLS = BuildOptions(mtls=True)
TLS_ENV = ["RAY_USE_TLS", "RAY_TLS_SERVER_CERT", "RAY_TLS_SERVER_KEY", "RAY_TLS_CA_CERT"]
TLS_MOUNT = {"name": "ray-tls", "mountPath": "/etc/ray/tls", "readOnly": True}


def test_tls_needs_gate_and_spec() -> None:
    rc = samples.cluster(tlsOptions={"enabled": True})
    assert "RAY_USE_TLS" not in samples.env_names(
        samples.ray_container(build_head_pod(rc, BuildOptions()))
    )
    plain = samples.cluster()
    assert "RAY_USE_TLS" not in samples.env_names(samples.ray_container(build_head_pod(plain, TLS)))


def test_tls_head_pod() -> None:
    rc = samples.autoscaling_cluster()
    rc["metadata"]["name"] = "demo"
    rc["spec"]["tlsOptions"] = {"enabled": True}
    pod = build_head_pod(rc, TLS)
    ray = samples.ray_container(pod)
    assert samples.env_names(ray)[:4] == TLS_ENV
    assert samples.env_value(ray, "RAY_TLS_CA_CERT") == "/etc/ray/tls/ca.crt"
    assert TLS_MOUNT in ray["volumeMounts"]
    autoscaler = pod["spec"]["containers"][1]
    assert TLS_MOUNT in autoscaler["volumeMounts"]
    assert samples.env_value(autoscaler, "RAY_USE_TLS") == "1"
    assert {"name": "ray-tls", "secret": {"secretName": "ray-head-secret-demo"}} in pod["spec"][
        "volumes"
    ]
    init = pod["spec"]["initContainers"][0]
    assert init["name"] == "wait-for-tls-ip-san"
    assert init["command"] == ["sh", "-c"]
    assert "openssl x509" in init["args"][0]
    assert samples.env_names(init) == ["POD_IP", "FQ_RAY_IP", "RAY_IP"]
    assert init["volumeMounts"] == [TLS_MOUNT]
    assert init["resources"]["limits"] == {"cpu": "50m", "memory": "64Mi"}


def test_tls_worker_pod_prepends_wait_and_configures_gcs_wait() -> None:
    rc = samples.cluster("demo", tlsOptions={"enabled": True})
    pod = build_worker_pod(rc, rc["spec"]["workerGroupSpecs"][0], TLS)
    names = [i["name"] for i in pod["spec"]["initContainers"]]
    assert names == ["wait-for-tls-ip-san", "wait-gcs-ready"]
    wait_gcs = pod["spec"]["initContainers"][1]
    assert [n for n in samples.env_names(wait_gcs) if n.startswith("RAY_")][:4] == TLS_ENV
    assert {"name": "ray-tls", "secret": {"secretName": "ray-worker-secret-demo"}} in pod["spec"][
        "volumes"
    ]


def test_redis_cleanup_drops_tls_wait() -> None:
    rc = samples.redis_ft_cluster(redisPassword={"value": "p"})
    rc["spec"]["tlsOptions"] = {"enabled": True}
    job = build_redis_cleanup_job(rc, TLS)
    assert "initContainers" not in job["spec"]["template"]["spec"]


HISTORY = BuildOptions(history_server=True)


def _history_cluster() -> dict[str, Any]:
    rc = samples.cluster("demo")
    rc["metadata"]["labels"] = {
        "ray.io/originated-from-crd": "RayJob",
        "ray.io/originated-from-cr-name": "job",
    }
    rc["spec"]["historyServerOptions"] = {
        "collectorOptions": {
            "image": "collector:1",
            "env": [{"name": "STORAGE_BACKEND", "value": "S3"}],
        }
    }
    return rc


def test_history_collector_head() -> None:
    rc = _history_cluster()
    pod = build_head_pod(rc, HISTORY)
    collector = pod["spec"]["containers"][1]
    assert collector["name"] == "ray-history-collector"
    assert collector["image"] == "collector:1"
    assert collector["imagePullPolicy"] == "IfNotPresent"
    assert collector["resources"] == {
        "limits": {"cpu": "200m", "memory": "256Mi"},
        "requests": {"cpu": "50m", "memory": "64Mi"},
    }
    assert samples.env_names(collector) == [
        "POD_IP",
        "RAY_CLUSTER_NAME",
        "RAY_CLUSTER_NAMESPACE",
        "RAY_ROLE",
        "EVENTS_PORT",
        "FQ_RAY_IP",
        "OWNER_KIND",
        "OWNER_NAME",
        "RAY_DASHBOARD_ADDRESS",
        "STORAGE_BACKEND",
    ]
    assert samples.env_value(collector, "RAY_ROLE") == "Head"
    assert samples.env_value(collector, "OWNER_KIND") == "RayJob"
    assert {"mountPath": "/tmp/ray", "name": "ray-logs"} in collector["volumeMounts"]
    ray = samples.ray_container(pod)
    assert samples.env_names(ray)[-5:] == [
        "RAY_enable_ray_event",
        "RAY_enable_core_worker_ray_event_to_aggregator",
        "RAY_DASHBOARD_AGGREGATOR_AGENT_EVENTS_EXPORT_ADDR",
        "RAY_DASHBOARD_AGGREGATOR_AGENT_EXPOSABLE_EVENT_TYPES",
        "RAY_DASHBOARD_AGGREGATOR_AGENT_PUBLISHER_HTTP_ENDPOINT_EXPOSABLE_EVENT_TYPES",
    ]
    assert samples.env_value(ray, "RAY_DASHBOARD_AGGREGATOR_AGENT_EVENTS_EXPORT_ADDR") == (
        "http://localhost:8084/v1/events"
    )


def test_history_collector_worker_and_gate_off() -> None:
    rc = _history_cluster()
    worker = build_worker_pod(rc, rc["spec"]["workerGroupSpecs"][0], HISTORY)
    collector = worker["spec"]["containers"][1]
    assert samples.env_value(collector, "RAY_ROLE") == "Worker"
    assert "RAY_DASHBOARD_ADDRESS" not in samples.env_names(collector)
    off = build_head_pod(rc, BuildOptions())
    assert len(off["spec"]["containers"]) == 1
    assert "RAY_enable_ray_event" not in samples.env_names(samples.ray_container(off))
