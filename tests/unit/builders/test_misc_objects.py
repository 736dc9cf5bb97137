"""RBAC, Ingress, the auth Secret, the GCS PVC and the Redis cleanup Job (upstream: common/rbac.go,
common/ingress.go, raycluster_controller.go)."""

from __future__ import annotations

from kuberay.builders.auth import build_auth_secret, wants_auth_secret
from kuberay.builders.ingress import build_head_ingress, build_head_route
from kuberay.builders.options import BuildOptions
from kuberay.builders.rbac import (
    build_autoscaler_role,
    build_autoscaler_role_binding,
    build_autoscaler_service_account,
)
from kuberay.builders.redis_cleanup import build_redis_cleanup_job
from kuberay.builders.storage import build_gcs_pvc, uses_user_claim

from . import samples

OPTS = BuildOptions()
COMMON_LABELS = {
    "ray.io/cluster": "demo",
    "app.kubernetes.io/name": "kuberay",
    "app.kubernetes.io/created-by": "kuberay-operator",
}


def test_rbac_objects() -> None:
    rc = samples.autoscaling_cluster()
    rc["metadata"]["name"] = "demo"
    sa = build_autoscaler_service_account(rc)
    role = build_autoscaler_role(rc)
    binding = build_autoscaler_role_binding(rc)
    for obj in (sa, role, binding):
        assert obj["metadata"]["name"] == "demo"
        assert obj["metadata"]["namespace"] == "default"
        assert obj["metadata"]["labels"] == COMMON_LABELS
        assert obj["metadata"]["ownerReferences"][0]["name"] == "demo"
    assert role["rules"] == [
        {"apiGroups": [""], "resources": ["pods"], "verbs": ["get", "list", "watch", "patch"]},
        {"apiGroups": [""], "resources": ["pods/resize"], "verbs": ["patch"]},
        {"apiGroups": ["ray.io"], "resources": ["rayclusters"], "verbs": ["get", "patch"]},
    ]
    assert binding["subjects"] == [
        {"kind": "ServiceAccount", "name": "demo", "namespace": "default"}
    ]
    assert binding["roleRef"] == {
        "apiGroup": "rbac.authorization.k8s.io",
        "kind": "Role",
        "name": "demo",
    }


def test_rbac_names_use_check_name_and_custom_sa() -> None:
    rc = samples.autoscaling_cluster()
    rc["metadata"]["name"] = "c" * 53
    assert build_autoscaler_role(rc)["metadata"]["name"] == "c" * 50
    rc["spec"]["headGroupSpec"]["template"]["spec"]["serviceAccountName"] = "my-sa"
    assert build_autoscaler_service_account(rc)["metadata"]["name"] == "my-sa"
    assert build_autoscaler_role_binding(rc)["subjects"][0]["name"] == "my-sa"


def test_ingress_defaults() -> None:
    rc = samples.cluster("demo")
    rc["metadata"]["annotations"] = {
        "kubernetes.io/ingress.class": "nginx",
        "nginx.ingress.kubernetes.io/rewrite-target": "/$1",
    }
    ing = build_head_ingress(rc, OPTS)
    assert ing["apiVersion"] == "networking.k8s.io/v1"
    assert ing["kind"] == "Ingress"
    assert ing["metadata"]["name"] == "demo-head-ingress"
    assert ing["metadata"]["labels"] == {**COMMON_LABELS, "ray.io/identifier": "demo-head"}
    assert ing["metadata"]["annotations"] == {"nginx.ingress.kubernetes.io/rewrite-target": "/$1"}
    assert ing["spec"]["ingressClassName"] == "nginx"
    assert ing["spec"]["rules"] == [
        {
            "http": {
                "paths": [
                    {
                        "path": "/",
                        "pathType": "Prefix",
                        "backend": {"service": {"name": "demo-head-svc", "port": {"number": 8265}}},
                    }
                ]
            }
        }
    ]
    assert "tls" not in ing["spec"]


def test_ingress_options() -> None:
    rc = samples.cluster("demo")
    rc["spec"]["headGroupSpec"]["ingressOptions"] = {
        "host": "ray.example.com",
        "path": "/ray",
        "pathType": "Exact",
        "tls": [{"hosts": ["ray.example.com"], "secretName": "tls"}],
    }
    container = rc["spec"]["headGroupSpec"]["template"]["spec"]["containers"][0]
    container["ports"] = [{"name": "dashboard", "containerPort": 9265}]
    ing = build_head_ingress(rc, OPTS)
    rule = ing["spec"]["rules"][0]
    assert rule["host"] == "ray.example.com"
    path = rule["http"]["paths"][0]
    assert (path["path"], path["pathType"]) == ("/ray", "Exact")
    assert path["backend"]["service"]["port"] == {"number": 9265}
    assert ing["spec"]["tls"] == [{"hosts": ["ray.example.com"], "secretName": "tls"}]
    assert "ingressClassName" not in ing["spec"]


def test_auth_secret_and_quirk() -> None:
    rc = samples.cluster("demo", authOptions={"mode": "token"})
    secret = build_auth_secret(rc, "dG9rZW4=")
    assert secret["metadata"]["name"] == "demo"
    assert secret["metadata"]["labels"] == {"ray.io/cluster": "demo"}
    assert secret["stringData"] == {"auth_token": "dG9rZW4="}
    assert secret["metadata"]["ownerReferences"][0]["controller"] is True
    assert wants_auth_secret(rc)
    assert wants_auth_secret(samples.cluster(authOptions={}))  # QUIRK: empty options too
    assert not wants_auth_secret(samples.cluster())
    assert not wants_auth_secret(samples.cluster(authOptions={"mode": "disabled"}))
    assert not wants_auth_secret(samples.cluster(authOptions={"mode": "token", "secretName": "s"}))
    k8s = samples.cluster(authOptions={"mode": "token", "enableK8sTokenAuth": True})
    assert not wants_auth_secret(k8s)


def test_gcs_pvc() -> None:
    rc = samples.cluster("demo", gcsFaultToleranceOptions={"backend": "rocksdb"})
    pvc = build_gcs_pvc(rc)
    assert pvc["metadata"]["name"] == "demo-gcs-pvc"
    assert pvc["metadata"]["labels"] == {"ray.io/cluster": "demo"}
    assert pvc["metadata"]["ownerReferences"][0]["kind"] == "RayCluster"
    assert pvc["spec"] == {
        "accessModes": ["ReadWriteOnce"],
        "resources": {"requests": {"storage": "1Gi"}},
    }
    rc["spec"]["gcsFaultToleranceOptions"]["storage"] = {
        "size": "5Gi",
        "storageClassName": "fast",
        "accessModes": ["ReadWriteMany"],
        "deletionPolicy": "Retain",
    }
    pvc = build_gcs_pvc(rc)
    assert pvc["spec"]["storageClassName"] == "fast"
    assert pvc["spec"]["accessModes"] == ["ReadWriteMany"]
    assert pvc["spec"]["resources"]["requests"]["storage"] == "5Gi"
    assert "ownerReferences" not in pvc["metadata"]
    assert not uses_user_claim(rc)
    rc["spec"]["gcsFaultToleranceOptions"]["storage"]["claimName"] = "mine"
    assert uses_user_claim(rc)


def test_redis_cleanup_job() -> None:
    rc = samples.autoscaling_cluster()
    rc["metadata"]["name"] = "demo"
    rc["spec"]["gcsFaultToleranceOptions"] = {
        "redisAddress": "redis:6379",
        "redisUsername": {"value": "u"},
    }
    job = build_redis_cleanup_job(rc, OPTS)
    assert job["apiVersion"] == "batch/v1"
    assert job["kind"] == "Job"
    assert job["metadata"]["name"] == "demo-redis-cleanup"
    assert job["metadata"]["labels"]["ray.io/node-type"] == "redis-cleanup"
    assert job["metadata"]["annotations"]["ray.io/ft-enabled"] == "true"
    assert job["metadata"]["ownerReferences"][0]["name"] == "demo"
    assert job["spec"]["backoffLimit"] == 0
    assert job["spec"]["activeDeadlineSeconds"] == 300
    template = job["spec"]["template"]
    assert template["metadata"]["labels"]["ray.io/node-type"] == "redis-cleanup"
    pod_spec = template["spec"]
    assert pod_spec["restartPolicy"] == "Never"
    assert [c["name"] for c in pod_spec["containers"]] == ["ray-head"]
    ray = pod_spec["containers"][0]
    assert ray["command"] == ["/bin/bash", "-c", "--"]
    script = ray["args"][0]
    assert "cleanup_redis_storage" in script
    assert "username=os.getenv('REDIS_USERNAME', parsed.username)" in script
    assert "storage_namespace=os.getenv('RAY_external_storage_namespace')" in script
    assert "livenessProbe" not in ray
    assert "readinessProbe" not in ray
    assert samples.env_names(ray)[-2:] == [
        "RAY_redis_db_connect_retries",
        "RAY_redis_db_connect_wait_milliseconds",
    ]
    assert samples.env_value(ray, "RAY_redis_db_connect_retries") == "120"
    assert samples.env_value(ray, "RAY_redis_db_connect_wait_milliseconds") == "500"
    assert ray["resources"] == {
        "limits": {"cpu": "200m", "memory": "256Mi"},
        "requests": {"cpu": "200m", "memory": "256Mi"},
    }


def test_redis_cleanup_job_without_username_and_trimmed_name() -> None:
    rc = samples.redis_ft_cluster()
    rc["metadata"]["name"] = "r" * 53
    job = build_redis_cleanup_job(rc, OPTS)
    assert job["metadata"]["name"] == ("r" * 53 + "-redis-cleanup")[-63:]
    assert "username=" not in job["spec"]["template"]["spec"]["containers"][0]["args"][0]


def test_openshift_route() -> None:
    rc = samples.cluster("demo")
    rc["metadata"]["annotations"] = {"kubernetes.io/ingress.class": "x", "a": "1"}
    route = build_head_route(rc, OPTS)
    assert route["apiVersion"] == "route.openshift.io/v1"
    assert route["metadata"]["name"] == "demo-head-route"
    assert route["metadata"]["annotations"] == {"kubernetes.io/ingress.class": "x", "a": "1"}
    assert route["spec"] == {
        "to": {"kind": "Service", "name": "demo-head-svc", "weight": 100},
        "port": {"targetPort": 8265},
        "wildcardPolicy": "None",
    }
