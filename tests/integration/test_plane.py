"""The local plane is a real Kubernetes: scheduling, controllers, garbage collection, watches."""

from __future__ import annotations

from typing import Any

from kuberay.devenv.plane import Plane
from kuberay.devenv.testing import has_condition, unique_name, wait_for, wait_gone, wait_until
from kuberay.runtime.client import (
    CONFIGMAPS,
    CRDS,
    DEPLOYMENTS,
    ENDPOINTSLICES,
    JOBS,
    NODES,
    PODS,
    PODTEMPLATES,
    SERVICES,
    KubeClient,
)
from kuberay.runtime.errors import Gone


def _deployment(name: str, replicas: int) -> dict[str, Any]:
    labels = {"app": name}
    return {
        "apiVersion": "apps/v1",
        "kind": "Deployment",
        "metadata": {"name": name},
        "spec": {
            "replicas": replicas,
            "selector": {"matchLabels": labels},
            "template": {
                "metadata": {"labels": labels},
                "spec": {
                    "containers": [
                        {
                            "name": "web",
                            "image": "nginx:1.27",
                            "ports": [{"containerPort": 80, "name": "http"}],
                            "resources": {"requests": {"cpu": "100m", "memory": "64Mi"}},
                        }
                    ]
                },
            },
        },
    }


async def test_version_is_the_pinned_release(plane: Plane, kube: KubeClient) -> None:
    version = await kube.request("GET", "/version")
    assert version["gitVersion"].startswith("v1.")
    assert int(version["minor"]) >= 34


async def test_kwok_nodes_are_ready_with_capacity(plane: Plane, kube: KubeClient) -> None:
    nodes = (await kube.list(NODES))["items"]
    assert len(nodes) >= plane.config.nodes
    for node in nodes:
        assert has_condition(node, "Ready")
        assert node["status"]["allocatable"]["cpu"] == plane.config.node_cpu


async def test_deployment_pods_are_scheduled_running_and_ready(
    kube: KubeClient, namespace: str
) -> None:
    name = "web"
    await kube.create(DEPLOYMENTS, _deployment(name, 3), namespace)
    await wait_for(
        kube,
        DEPLOYMENTS,
        name,
        namespace,
        lambda d: d.get("status", {}).get("availableReplicas") == 3,
        what="3 available replicas",
    )
    pods = (await kube.list(PODS, namespace, label_selector=f"app={name}"))["items"]
    assert len(pods) == 3
    for pod in pods:
        assert pod["spec"]["nodeName"].startswith("kwok-node-")
        assert pod["status"]["phase"] == "Running"
        assert has_condition(pod, "Ready")
        assert pod["status"]["podIP"]


async def test_deleting_owner_garbage_collects_dependents(kube: KubeClient, namespace: str) -> None:
    owner = await kube.create(CONFIGMAPS, {"metadata": {"name": "owner"}}, namespace)
    ref = {
        "apiVersion": "v1",
        "kind": "ConfigMap",
        "name": "owner",
        "uid": owner["metadata"]["uid"],
    }
    for i in range(3):
        await kube.create(
            CONFIGMAPS, {"metadata": {"name": f"dep-{i}", "ownerReferences": [ref]}}, namespace
        )
    await kube.delete(CONFIGMAPS, "owner", namespace, propagation="Background")
    for i in range(3):
        await wait_gone(kube, CONFIGMAPS, f"dep-{i}", namespace)


async def test_batch_job_pod_completes(kube: KubeClient, namespace: str) -> None:
    job = {
        "apiVersion": "batch/v1",
        "kind": "Job",
        "metadata": {"name": "once"},
        "spec": {
            "backoffLimit": 0,
            "template": {
                "spec": {
                    "restartPolicy": "Never",
                    "containers": [{"name": "main", "image": "busybox", "command": ["true"]}],
                }
            },
        },
    }
    await kube.create(JOBS, job, namespace)
    done = await wait_for(
        kube, JOBS, "once", namespace, lambda j: has_condition(j, "Complete"), what="Complete"
    )
    assert done["status"]["succeeded"] == 1
    pods = (await kube.list(PODS, namespace, label_selector="job-name=once"))["items"]
    assert [p["status"]["phase"] for p in pods] == ["Succeeded"]


async def test_service_gets_endpointslices(kube: KubeClient, namespace: str) -> None:
    await kube.create(DEPLOYMENTS, _deployment("api", 2), namespace)
    svc = {
        "apiVersion": "v1",
        "kind": "Service",
        "metadata": {"name": "api"},
        "spec": {"selector": {"app": "api"}, "ports": [{"port": 80, "targetPort": "http"}]},
    }
    created = await kube.create(SERVICES, svc, namespace)
    assert created["spec"]["clusterIP"].startswith("10.96.")

    async def two_ready_endpoints() -> bool:
        slices = await kube.list(
            ENDPOINTSLICES, namespace, label_selector="kubernetes.io/service-name=api"
        )
        ready = [
            ep
            for s in slices["items"]
            for ep in s.get("endpoints") or []
            if ep.get("conditions", {}).get("ready")
        ]
        return len(ready) == 2

    await wait_until(two_ready_endpoints, what="2 ready endpoints in the Service's slices")


async def test_crd_installs_and_becomes_established(kube: KubeClient) -> None:
    group = f"{unique_name('g')}.example.com"
    crd: dict[str, Any] = {
        "apiVersion": "apiextensions.k8s.io/v1",
        "kind": "CustomResourceDefinition",
        "metadata": {"name": f"widgets.{group}"},
        "spec": {
            "group": group,
            "names": {"plural": "widgets", "singular": "widget", "kind": "Widget"},
            "scope": "Namespaced",
            "versions": [
                {
                    "name": "v1",
                    "served": True,
                    "storage": True,
                    "schema": {
                        "openAPIV3Schema": {
                            "type": "object",
                            "properties": {
                                "spec": {
                                    "type": "object",
                                    "properties": {"size": {"type": "integer", "minimum": 1}},
                                }
                            },
                        }
                    },
                }
            ],
        },
    }
    await kube.create(CRDS, crd)
    try:
        await wait_for(
            kube,
            CRDS,
            crd["metadata"]["name"],
            None,
            lambda c: has_condition(c, "Established") and has_condition(c, "NamesAccepted"),
            what="Established",
        )
    finally:
        await kube.delete(CRDS, crd["metadata"]["name"])


async def test_watch_from_compacted_resource_version_is_gone(
    plane: Plane, kube: KubeClient, namespace: str
) -> None:
    # podtemplates bypass the apiserver's watch cache on this plane, so watches reach etcd.
    first = await kube.create(PODTEMPLATES, _podtemplate("a"), namespace)
    old_rv = first["metadata"]["resourceVersion"]
    for name in ("b", "c"):
        await kube.create(PODTEMPLATES, _podtemplate(name), namespace)
    plane.compact_etcd()
    first_event = None
    try:
        async for event in kube.watch(PODTEMPLATES, namespace, resource_version=old_rv):
            first_event = event
            break
    except Gone:
        return  # the apiserver may also answer the request itself with HTTP 410
    assert first_event is not None, "the watch ended without any event"
    assert first_event.type == "ERROR", f"expected 410 Gone, got {first_event.type}"
    assert first_event.object["code"] == 410, first_event.object


def _podtemplate(name: str) -> dict[str, Any]:
    return {
        "metadata": {"name": name},
        "template": {"spec": {"containers": [{"name": "c", "image": "busybox"}]}},
    }
