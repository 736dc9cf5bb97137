"""Alpha-gated RayCluster features on the real plane.

NetworkPolicy controller (gate RayClusterNetworkPolicy): policies follow ``spec.networkPolicy``
through create, mode change and removal; a name taken by someone else's policy is reported and
never taken over; converged policies are not rewritten. mTLS (gate RayClusterMTLS): without
cert-manager's API a TLS cluster is refused with upstream's message and gets no pods. Embedded
GCS storage (gate GCSFaultToleranceEmbeddedStorage): the claim follows deletionPolicy and drift
is reported, not applied."""

from __future__ import annotations

from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest
from operator_fixture import OperatorProcess, install_crds

from kuberay.api.constants import RAYCLUSTERS
from kuberay.controllers.networkpolicy import NETWORKPOLICIES
from kuberay.devenv.plane import Plane
from kuberay.devenv.testing import wait_gone, wait_until
from kuberay.runtime.client import JSON_PATCH, PODS, PVCS, KubeClient
from kuberay.runtime.errors import NotFound
from kuberay.runtime.events import EVENTS_V1


def isolated_cluster(name: str, **policy: Any) -> dict[str, Any]:
    container = {"name": "ray-head", "image": "rayproject/ray:2.52.0"}
    worker = {"name": "ray-worker", "image": "rayproject/ray:2.52.0"}
    return {
        "apiVersion": "ray.io/v1",
        "kind": "RayCluster",
        "metadata": {"name": name},
        "spec": {
            "headGroupSpec": {
                "rayStartParams": {},
                "template": {"spec": {"containers": [container]}},
            },
            "workerGroupSpecs": [
                {
                    "groupName": "small",
                    "replicas": 1,
                    "minReplicas": 0,
                    "maxReplicas": 2,
                    "rayStartParams": {},
                    "template": {"spec": {"containers": [worker]}},
                }
            ],
            "networkPolicy": policy,
        },
    }


@pytest.fixture
async def np_operator(
    plane: Plane, kube: KubeClient, namespace: str, tmp_path: Path
) -> AsyncIterator[OperatorProcess]:
    await install_crds(kube)
    op = OperatorProcess(
        plane,
        tmp_path,
        "--feature-gates=RayClusterNetworkPolicy=true,RayClusterMTLS=true,"
        "GCSFaultToleranceEmbeddedStorage=true",
        f"--watch-namespace={namespace}",
        trace=True,
    )
    op.start()
    try:
        yield op
    finally:
        op.stop()


async def policy(kube: KubeClient, namespace: str, name: str) -> dict[str, Any] | None:
    try:
        return await kube.get(NETWORKPOLICIES, name, namespace)
    except NotFound:
        return None


async def reasons_for(kube: KubeClient, namespace: str, name: str) -> list[str]:
    events = (await kube.list(EVENTS_V1, namespace))["items"]
    return [e["reason"] for e in events if e["regarding"]["name"] == name]


async def test_policies_follow_the_spec(
    kube: KubeClient, namespace: str, np_operator: OperatorProcess
) -> None:
    rule = {"ports": [{"port": 8265}]}  # no protocol: the apiserver stores TCP
    await kube.create(
        RAYCLUSTERS,
        isolated_cluster("iso", mode="DenyAll", head={"ingressRules": [rule]}),
        namespace,
    )

    async def both() -> bool:
        return all(
            [
                await policy(kube, namespace, "iso-head"),
                await policy(kube, namespace, "iso-workers-small"),
            ]
        )

    await wait_until(both, timeout=30, what=f"both policies ({np_operator.tail()})")
    head = await policy(kube, namespace, "iso-head")
    assert head is not None
    assert head["spec"]["policyTypes"] == ["Ingress", "Egress"]
    assert head["spec"]["podSelector"]["matchLabels"] == {
        "ray.io/cluster": "iso",
        "ray.io/node-type": "head",
    }
    assert {"ports": [{"port": 8265, "protocol": "TCP"}]} in head["spec"]["ingress"]
    assert head["metadata"]["ownerReferences"][0]["kind"] == "RayCluster"

    # Converged: nothing is rewritten (the missing protocol compares equal to TCP). The watch
    # event of each policy's creation makes the controller compare it with the spec: wait for
    # the reconciles that saw both, then check that neither was written again.
    version = head["metadata"]["resourceVersion"]
    workers = await policy(kube, namespace, "iso-workers-small")
    assert workers is not None
    trace = np_operator.trace
    assert trace is not None
    for created in (head, workers):
        await trace.wait_processed("networkpolicy", "networkpolicies", created, owner="iso")
    again = await policy(kube, namespace, "iso-head")
    assert again is not None
    assert again["metadata"]["resourceVersion"] == version
    again = await policy(kube, namespace, "iso-workers-small")
    assert again is not None
    assert again["metadata"]["resourceVersion"] == workers["metadata"]["resourceVersion"]

    await kube.patch(
        RAYCLUSTERS, "iso", {"spec": {"networkPolicy": {"mode": "DenyAllIngress"}}}, namespace
    )

    async def ingress_only() -> bool:
        got = await policy(kube, namespace, "iso-workers-small")
        return got is not None and got["spec"]["policyTypes"] == ["Ingress"]

    await wait_until(ingress_only, timeout=30, what="policies updated to DenyAllIngress")

    await kube.patch(RAYCLUSTERS, "iso", {"spec": {"networkPolicy": None}}, namespace)
    await wait_gone(kube, NETWORKPOLICIES, "iso-head", namespace)
    await wait_gone(kube, NETWORKPOLICIES, "iso-workers-small", namespace)

    async def reported() -> bool:
        reasons = await reasons_for(kube, namespace, "iso")
        return (
            reasons.count("CreatedNetworkPolicy") == 2
            and reasons.count("UpdatedNetworkPolicy") == 2
            and reasons.count("DeletedNetworkPolicy") == 2
        )

    await wait_until(reported, timeout=15, what="Created/Updated/Deleted NetworkPolicy events")


async def test_a_foreign_policy_of_the_same_name_is_never_taken_over(
    kube: KubeClient, namespace: str, np_operator: OperatorProcess
) -> None:
    foreign = {
        "apiVersion": "networking.k8s.io/v1",
        "kind": "NetworkPolicy",
        "metadata": {"name": "clash-head", "labels": {"team": "security"}},
        "spec": {"podSelector": {}, "policyTypes": ["Ingress"]},
    }
    await kube.create(NETWORKPOLICIES, foreign, namespace)
    await kube.create(RAYCLUSTERS, isolated_cluster("clash", mode="DenyAll"), namespace)

    async def collided() -> bool:
        reasons = await reasons_for(kube, namespace, "clash")
        return "NetworkPolicyNameCollision" in reasons

    await wait_until(collided, timeout=30, what="a NetworkPolicyNameCollision event")
    assert await policy(kube, namespace, "clash-workers-small") is not None
    kept = await policy(kube, namespace, "clash-head")
    assert kept is not None
    assert not kept["metadata"].get("ownerReferences")
    assert kept["spec"] == {"podSelector": {}, "policyTypes": ["Ingress"]}


async def test_tls_cluster_without_cert_manager_is_refused(
    kube: KubeClient, namespace: str, np_operator: OperatorProcess
) -> None:
    cluster = isolated_cluster("tls", mode="DenyAll")
    del cluster["spec"]["networkPolicy"]
    cluster["spec"]["tlsOptions"] = {"enabled": True}
    await kube.create(RAYCLUSTERS, cluster, namespace)
    message = ""

    async def refused() -> bool:
        nonlocal message
        events = (await kube.list(EVENTS_V1, namespace))["items"]
        for event in events:
            if event["regarding"]["name"] == "tls" and event["reason"] == "InvalidRayClusterSpec":
                message = event["note"]
                return True
        return False

    await wait_until(
        refused, timeout=30, what=f"an InvalidRayClusterSpec event ({np_operator.tail()})"
    )
    assert message == "tlsOptions requires cert-manager, but cert-manager is not installed"
    pods = await kube.list(PODS, namespace, label_selector="ray.io/cluster=tls")
    assert pods["items"] == []


async def test_gcs_claim_follows_deletion_policy_and_reports_drift(
    kube: KubeClient, namespace: str, np_operator: OperatorProcess
) -> None:
    cluster = isolated_cluster("gcs")
    del cluster["spec"]["networkPolicy"]
    cluster["spec"]["gcsFaultToleranceOptions"] = {
        "backend": "rocksdb",
        "storage": {"size": "1Gi"},
    }
    await kube.create(RAYCLUSTERS, cluster, namespace)

    async def claim() -> dict[str, Any] | None:
        try:
            return await kube.get(PVCS, "gcs-gcs-pvc", namespace)
        except NotFound:
            return None

    async def owned() -> bool:
        got = await claim()
        return bool(got and got["metadata"].get("ownerReferences"))

    await wait_until(owned, timeout=30, what=f"an owned GCS claim ({np_operator.tail()})")
    path = "/spec/gcsFaultToleranceOptions/storage"
    retain = [{"op": "add", "path": f"{path}/deletionPolicy", "value": "Retain"}]
    await kube.patch(RAYCLUSTERS, "gcs", retain, namespace, content_type=JSON_PATCH)

    async def released() -> bool:
        got = await claim()
        return bool(got and not got["metadata"].get("ownerReferences"))

    await wait_until(released, timeout=30, what="the claim released by deletionPolicy Retain")
    grow = [{"op": "replace", "path": f"{path}/size", "value": "2Gi"}]
    await kube.patch(RAYCLUSTERS, "gcs", grow, namespace, content_type=JSON_PATCH)

    async def drift_reported() -> bool:
        events = (await kube.list(EVENTS_V1, namespace))["items"]
        return any(
            e["regarding"]["name"] == "gcs"
            and e["reason"] == "FailedToCreatePVC"
            and "size 1Gi, spec asks 2Gi" in e["note"]
            for e in events
        )

    await wait_until(drift_reported, timeout=30, what="a FailedToCreatePVC drift warning")
    got = await claim()
    assert got is not None
    assert got["spec"]["resources"]["requests"]["storage"] == "1Gi"
