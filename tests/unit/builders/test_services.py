"""Head, headless and serve Services (upstream: common/service.go)."""

from __future__ import annotations

import pytest

from kuberay.builders.errors import BuildError
from kuberay.builders.options import BuildOptions
from kuberay.builders.service import (
    build_head_service,
    build_headless_service,
    build_serve_service,
)

from . import samples

OPTS = BuildOptions()
LABELS = {
    "ray.io/cluster": "demo",
    "ray.io/node-type": "head",
    "ray.io/identifier": "demo-head",
    "app.kubernetes.io/name": "kuberay",
    "app.kubernetes.io/created-by": "kuberay-operator",
}


def test_head_service_default_is_headless_with_sorted_ports() -> None:
    svc = build_head_service(samples.cluster("demo"), OPTS)
    assert svc["metadata"]["name"] == "demo-head-svc"
    assert svc["metadata"]["namespace"] == "default"
    assert svc["metadata"]["labels"] == LABELS
    assert svc["metadata"]["ownerReferences"][0]["kind"] == "RayCluster"
    assert svc["spec"]["selector"] == LABELS
    assert svc["spec"]["clusterIP"] == "None"
    assert svc["spec"]["publishNotReadyAddresses"] is True
    assert svc["spec"]["ports"] == [
        {"name": "client", "port": 10001, "appProtocol": "tcp"},
        {"name": "dashboard", "port": 8265, "appProtocol": "tcp"},
        {"name": "gcs-server", "port": 6379, "appProtocol": "tcp"},
        {"name": "metrics", "port": 8080, "appProtocol": "tcp"},
    ]


def test_head_service_default_ports_and_unnamed_ports() -> None:
    rc = samples.cluster("demo")
    container = rc["spec"]["headGroupSpec"]["template"]["spec"]["containers"][0]
    del container["ports"]
    names = [p["name"] for p in build_head_service(rc, OPTS)["spec"]["ports"]]
    assert names == ["client", "dashboard", "gcs-server", "metrics", "serve"]
    container["ports"] = [{"containerPort": 7000}]
    ports = build_head_service(rc, OPTS)["spec"]["ports"]
    assert [(p["name"], p["port"]) for p in ports] == [("7000-port", 7000), ("metrics", 8080)]


def test_cluster_ip_switch_and_service_type() -> None:
    rc = samples.cluster("demo")
    svc = build_head_service(rc, BuildOptions(head_cluster_ip_service=True))
    assert "clusterIP" not in svc["spec"]
    rc["spec"]["headGroupSpec"]["serviceType"] = "NodePort"
    svc = build_head_service(rc, OPTS)
    assert svc["spec"]["type"] == "NodePort"
    assert "clusterIP" not in svc["spec"]
    rc["spec"]["headGroupSpec"]["serviceType"] = "ClusterIP"
    assert build_head_service(rc, OPTS)["spec"]["clusterIP"] == "None"


def test_head_service_annotations_and_app_name_from_template() -> None:
    rc = samples.cluster("demo", headServiceAnnotations={"a": "1"})
    rc["spec"]["headGroupSpec"]["template"]["metadata"] = {
        "labels": {"app.kubernetes.io/name": "myapp", "other": "x"}
    }
    svc = build_head_service(rc, OPTS)
    assert svc["metadata"]["annotations"] == {"a": "1"}
    assert svc["spec"]["selector"]["app.kubernetes.io/name"] == "myapp"
    assert "other" not in svc["spec"]["selector"]


def test_user_head_service_is_merged() -> None:
    rc = samples.cluster("demo", headServiceAnnotations={"shared": "ours", "b": "2"})
    rc["spec"]["headGroupSpec"]["headService"] = {
        "metadata": {
            "name": "my-head",
            "namespace": "other",
            "labels": {"ray.io/cluster": "wrong", "team": "x"},
            "annotations": {"shared": "theirs", "a": "1"},
        },
        "spec": {
            "selector": {"app": "nope"},
            "ports": [{"name": "custom", "port": 1234}],
            "type": "LoadBalancer",
        },
    }
    svc = build_head_service(rc, OPTS)
    assert svc["metadata"]["name"] == "my-head"
    assert svc["metadata"]["namespace"] == "default"
    assert svc["metadata"]["labels"] == {**LABELS, "team": "x"}
    assert svc["metadata"]["annotations"] == {"shared": "ours", "a": "1", "b": "2"}
    assert svc["spec"]["selector"] == LABELS
    assert svc["spec"]["type"] == "LoadBalancer"
    assert svc["spec"]["ports"][0] == {"name": "custom", "port": 1234}
    assert len(svc["spec"]["ports"]) == 5
    assert "clusterIP" not in svc["spec"]
    assert rc["spec"]["headGroupSpec"]["headService"]["spec"]["selector"] == {"app": "nope"}


def test_user_head_service_defaults_name_and_type() -> None:
    rc = samples.cluster("demo")
    rc["spec"]["headGroupSpec"]["serviceType"] = "NodePort"
    rc["spec"]["headGroupSpec"]["headService"] = {"spec": {}}
    svc = build_head_service(rc, OPTS)
    assert svc["metadata"]["name"] == "demo-head-svc"
    assert svc["spec"]["type"] == "NodePort"


def test_headless_worker_service() -> None:
    svc = build_headless_service(samples.cluster("demo"), OPTS)
    assert svc["metadata"]["name"] == "demo-headless"
    assert svc["metadata"]["labels"] == {"ray.io/headless-worker-svc": "demo"}
    assert svc["spec"] == {
        "clusterIP": "None",
        "selector": {"ray.io/cluster": "demo", "ray.io/node-type": "worker"},
        "type": "ClusterIP",
        "publishNotReadyAddresses": True,
    }
    assert "ports" not in svc["spec"]


def test_serve_service() -> None:
    rc = samples.cluster("demo")
    container = rc["spec"]["headGroupSpec"]["template"]["spec"]["containers"][0]
    container["ports"] += [
        {"containerPort": 8000, "name": "serve"},
        {"containerPort": 8001, "name": "serve-grpc"},
    ]
    svc = build_serve_service(rc, OPTS)
    assert svc["metadata"]["name"] == "demo-serve-svc"
    assert svc["metadata"]["labels"] == {
        "ray.io/originated-from-cr-name": "demo",
        "ray.io/originated-from-crd": "RayCluster",
        "ray.io/serve": "demo-serve",
    }
    assert svc["spec"]["selector"] == {"ray.io/cluster": "demo"}
    assert svc["spec"]["ports"] == [
        {"name": "serve", "port": 8000},
        {"name": "serve-grpc", "port": 8001},
    ]


def test_serve_service_default_port_and_error() -> None:
    rc = samples.cluster("demo")
    container = rc["spec"]["headGroupSpec"]["template"]["spec"]["containers"][0]
    del container["ports"]
    assert build_serve_service(rc, OPTS)["spec"]["ports"] == [{"name": "serve", "port": 8000}]
    with pytest.raises(BuildError, match="port named 'serve'"):
        build_serve_service(samples.cluster("demo"), OPTS)
