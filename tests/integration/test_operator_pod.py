"""The operator as a pod: the chart, installed by the real Helm, running on the process runtime.

The chart's image (``kuberay-py``) is this checkout on the node agent's image map, started with
the chart's own command and arguments; the operator finds the apiserver only through what a pod
gets (``KUBERNETES_SERVICE_*`` and the projected service-account token), passes the chart's
probes, and serves metrics through the chart's Service. Two replicas elect a leader through the
``ray-operator-leader`` Lease; deleting the leader's pod while clusters are being created hands
the lease to the standby, and no cluster gets a pod twice.

Ray pods here run ``sleep`` (``ray.io/overwrite-container-cmd``) with probes that always pass:
the subject is the operator, not Ray, and the machine has two cores.

Network rule: traffic only between the host, the plane's bridge and the pods these tests create.
"""

from __future__ import annotations

import asyncio
import contextlib
import time
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest
from operator_fixture import CHART, install_crds, run_helm

from kuberay.api.constants import RAYCLUSTERS
from kuberay.devenv.http import request
from kuberay.devenv.nodeagent import supported
from kuberay.devenv.plane import Plane
from kuberay.devenv.testing import (
    create_namespace,
    delete_namespace,
    has_condition,
    skip_unless_strict,
    unique_name,
    wait_for,
    wait_until,
)
from kuberay.runtime.client import DEPLOYMENTS, EVENTS, LEASES, PODS, KubeClient
from kuberay.runtime.errors import NotFound

LEASE = "ray-operator-leader"
OPERATOR_LABELS = "app.kubernetes.io/name=kuberay-operator"
VALUES: dict[str, object] = {
    "replicas": 2,
    # Worker pods would otherwise wait in an init container for a GCS that `sleep` never starts.
    "env": [{"name": "ENABLE_INIT_CONTAINER_INJECTION", "value": "false"}],
}


@pytest.fixture(autouse=True)
def _process_runtime_supported() -> None:
    why = supported()
    if why is not None:
        skip_unless_strict(why)


@pytest.fixture(scope="module")
async def release(
    helm: Path,
    process_plane: Plane,
    process_kube: KubeClient,
    tmp_path_factory: pytest.TempPathFactory,
) -> AsyncIterator[str]:
    """The chart installed (two replicas) in a namespace of its own; yields the namespace once
    the Deployment has both replicas Ready."""
    ns = unique_name("kuberay-system")
    home = tmp_path_factory.mktemp("helm")
    await install_crds(process_kube)
    await create_namespace(process_kube, ns)
    run_helm(
        helm,
        process_plane.kubeconfig,
        home,
        "install",
        "kr",
        str(CHART),
        "-n",
        ns,
        "--skip-crds",
        values=VALUES,
    )
    try:
        await both_replicas_ready(process_kube, ns, timeout=180)
        yield ns
    finally:
        run_helm(helm, process_plane.kubeconfig, home, "uninstall", "kr", "-n", ns, "--wait")
        await delete_namespace(process_kube, ns)


async def both_replicas_ready(kube: KubeClient, ns: str, timeout: float) -> None:
    """The Deployment's two pods pass the chart's readiness probe."""
    await wait_for(
        kube,
        DEPLOYMENTS,
        "kuberay-operator",
        ns,
        lambda d: (d.get("status") or {}).get("readyReplicas") == 2,
        timeout=timeout,
        what="2 ready replicas",
    )


def ray_cluster(name: str) -> dict[str, Any]:
    def group(container: str) -> dict[str, Any]:
        return {
            "rayStartParams": {},
            "template": {
                "spec": {
                    "terminationGracePeriodSeconds": 1,
                    "containers": [
                        {
                            "name": container,
                            "image": "rayproject/ray:2.59.0",
                            "command": ["sleep", "3600"],
                            "readinessProbe": {"exec": {"command": ["true"]}, "periodSeconds": 1},
                            "livenessProbe": {"exec": {"command": ["true"]}, "periodSeconds": 30},
                        }
                    ],
                }
            },
        }

    worker = {**group("ray-worker"), "groupName": "w", "replicas": 1, "minReplicas": 0}
    return {
        "apiVersion": "ray.io/v1",
        "kind": "RayCluster",
        "metadata": {"name": name, "annotations": {"ray.io/overwrite-container-cmd": "true"}},
        "spec": {
            "headGroupSpec": group("ray-head"),
            "workerGroupSpecs": [{**worker, "maxReplicas": 3}],
        },
    }


async def holder(kube: KubeClient, ns: str) -> str:
    try:
        lease = await kube.get(LEASES, LEASE, ns)
    except NotFound:
        return ""
    return str(lease["spec"].get("holderIdentity") or "")


async def operator_pods(kube: KubeClient, ns: str) -> list[dict[str, Any]]:
    return list((await kube.list(PODS, ns, label_selector=OPERATOR_LABELS))["items"])


async def cluster_pods(kube: KubeClient, ns: str, name: str) -> list[dict[str, Any]]:
    return list((await kube.list(PODS, ns, label_selector=f"ray.io/cluster={name}"))["items"])


def is_ready(cluster: dict[str, Any]) -> bool:
    return (cluster.get("status") or {}).get("state") == "ready"


async def run_pod(kube: KubeClient, plane: Plane, ns: str, name: str, script: str) -> str:
    """``python -c script`` in a pod of ``ns`` (restartPolicy Never); its output."""
    body = {
        "metadata": {"name": name},
        "spec": {
            "restartPolicy": "Never",
            "containers": [
                {"name": "main", "image": "python:3.11", "command": ["python", "-c", script]}
            ],
        },
    }
    await kube.create(PODS, body, ns)
    pod = await wait_for(
        kube,
        PODS,
        name,
        ns,
        lambda p: (p.get("status") or {}).get("phase") in ("Succeeded", "Failed"),
        timeout=60,
        what="completion",
    )
    out = plane.container_log(ns, name, "main")
    assert pod["status"]["phase"] == "Succeeded", out
    return out


async def test_chart_runs_the_operator_in_a_pod(
    release: str, process_kube: KubeClient, process_plane: Plane, process_namespace: str
) -> None:
    ns, kube = release, process_kube
    pods = await operator_pods(kube, ns)
    assert len(pods) == 2
    for pod in pods:
        (status,) = pod["status"]["containerStatuses"]
        # The chart's probes (/healthz, /readyz on the health port) pass and nothing restarted.
        assert status["ready"], status
        assert status["restartCount"] == 0, status
        assert has_condition(pod, "Ready")
        (ctr,) = pod["spec"]["containers"]
        assert ctr["command"] == ["kuberay"]
        assert ctr["args"][0] == "operator"
        # In-cluster configuration only: the admission-injected token volume, no kubeconfig.
        mounts = {m["mountPath"] for m in ctr["volumeMounts"]}
        assert "/var/run/secrets/kubernetes.io/serviceaccount" in mounts
        assert not any(e["name"] == "KUBECONFIG" for e in ctr.get("env") or [])

    # The apiserver validates projected service-account tokens while the replicas run (no other
    # pod here calls the API; the node agent and the plane's components use certificates).
    before = await projected_token_logins(process_plane)
    await wait_until(
        lambda: _more_logins(process_plane, before),
        timeout=60,
        what="the operator pods to authenticate with their projected tokens",
    )

    names = {p["metadata"]["name"] for p in pods}
    # Identity is <hostname>_<pid>; a pod's hostname is its name.
    await wait_until(
        lambda: _holder_in(kube, ns, names), timeout=60, what=f"a {LEASE} holder among {names}"
    )

    # A RayCluster in another namespace (the chart watches all): reconciled to ready.
    await kube.create(RAYCLUSTERS, ray_cluster("solo"), process_namespace)
    await wait_for(
        kube, RAYCLUSTERS, "solo", process_namespace, is_ready, timeout=120, what="state ready"
    )
    kinds = sorted(
        p["metadata"]["labels"]["ray.io/node-type"]
        for p in await cluster_pods(kube, process_namespace, "solo")
    )
    assert kinds == ["head", "worker"]

    # Metrics through the chart's Service, by its cluster DNS name, from another pod. The name
    # resolves to an endpoint of the Service; both replicas serve /metrics.
    # The apiserver's Service name leads to the address the operator's environment names.
    script = f"""
import os, socket, urllib.request
api = socket.gethostbyname('kubernetes.default')
socket.create_connection((api, int(os.environ['KUBERNETES_SERVICE_PORT'])), timeout=5).close()
print('kubernetes.default is the API host:', api == os.environ['KUBERNETES_SERVICE_HOST'])
body = urllib.request.urlopen('http://kuberay-operator.{ns}:8080/metrics', timeout=10).read()
for line in body.decode().splitlines():
    if line.startswith(('leader_election_master_status', 'controller_runtime_reconcile_total')):
        print(line)
"""
    out = await run_pod(kube, process_plane, process_namespace, "scrape", script)
    assert "kubernetes.default is the API host: True" in out, out
    assert f'leader_election_master_status{{name="{LEASE}"}}' in out, out


async def projected_token_logins(plane: Plane) -> float:
    """The apiserver's count of projected service-account tokens it has validated (its token
    cache keeps a validated token for 10 s, so a steady client adds about one per 10 s)."""
    text = await asyncio.to_thread(
        request, "GET", f"{plane.server}/metrics", context=plane.admin_context()
    )
    return sum(
        float(line.rsplit(" ", 1)[1])
        for line in str(text).splitlines()
        if line.startswith("serviceaccount_valid_tokens_total")
    )


async def _more_logins(plane: Plane, than: float) -> bool:
    return await projected_token_logins(plane) > than


async def _holder_in(kube: KubeClient, ns: str, names: set[str]) -> bool:
    return (await holder(kube, ns)).rsplit("_", 1)[0] in names


async def test_leader_pod_deleted_mid_creation_standby_takes_over_once(
    release: str, process_kube: KubeClient, process_namespace: str
) -> None:
    ns, kube, target = release, process_kube, process_namespace
    old = await holder(kube, ns)
    assert old, "no leader"
    old_pod = old.rsplit("_", 1)[0]
    names = [f"fo-{i}" for i in range(6)]
    seen: dict[str, set[str]] = {name: set() for name in names}
    start = await kube.list(PODS, target)

    async def record() -> None:
        """Every pod added to the namespace, by cluster, from before the first create on."""
        rv = start["metadata"]["resourceVersion"]
        while True:
            async for event in kube.watch(PODS, target, resource_version=rv):
                rv = event.object["metadata"].get("resourceVersion", rv)
                if event.type == "ADDED":
                    labels = event.object["metadata"].get("labels") or {}
                    cluster = labels.get("ray.io/cluster", "")
                    seen.setdefault(cluster, set()).add(event.object["metadata"]["uid"])

    recorder = asyncio.create_task(record())
    for name in names[:3]:
        await kube.create(RAYCLUSTERS, ray_cluster(name), target)
    deleted_at = time.monotonic()
    await kube.delete(PODS, old_pod, ns)
    # Created while the leader is going away: only the new leader can reconcile these.
    for name in names[3:]:
        await kube.create(RAYCLUSTERS, ray_cluster(name), target)

    takeover = 0.0
    first_reconcile = 0.0
    deadline = deleted_at + 120
    while not (takeover and first_reconcile):
        now = time.monotonic()
        assert now < deadline, f"no takeover within 120s (lease holder {await holder(kube, ns)!r})"
        current = await holder(kube, ns)
        if not takeover and current and current.rsplit("_", 1)[0] != old_pod:
            takeover = now - deleted_at
        if takeover and not first_reconcile and await cluster_pods(kube, target, names[3]):
            first_reconcile = now - deleted_at
        await asyncio.sleep(0.1)
    print(f"\nfailover: lease taken {takeover:.1f}s, first pod {first_reconcile:.1f}s after delete")

    for name in names:
        await wait_for(kube, RAYCLUSTERS, name, target, is_ready, timeout=120, what="state ready")
    recorder.cancel()
    with contextlib.suppress(asyncio.CancelledError):
        await recorder
    # Nothing done twice: every pod ever created for a cluster (the watch saw it, however short
    # its life) is one of its current two, one head and one worker.
    events = (await kube.list(EVENTS, target))["items"]
    for name in names:
        pods = await cluster_pods(kube, target, name)
        kinds = sorted(p["metadata"]["labels"]["ray.io/node-type"] for p in pods)
        assert kinds == ["head", "worker"], (name, [p["metadata"]["name"] for p in pods])
        assert seen[name] == {p["metadata"]["uid"] for p in pods}, (name, seen[name])
        # Events agree where they exist (the old leader may not have sent its last ones).
        for reason in ("CreatedHeadPod", "CreatedWorkerPod", "DeletedWorkerPod"):
            count = sum(
                int(e.get("count") or 1)
                for e in events
                if e["involvedObject"]["name"] == name and e["reason"] == reason
            )
            assert count <= (0 if reason.startswith("Deleted") else 1), (name, reason, count)
    # The Deployment replaced the deleted pod; the new one is a standby that passes its probes.
    await both_replicas_ready(kube, ns, timeout=120)
