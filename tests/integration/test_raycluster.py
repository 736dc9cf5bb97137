"""RayCluster controller on the real plane with KWOK: ready, scaling, suspend, deletion, healing,
and no duplicate pods when the operator is SIGKILLed mid-flight."""

from __future__ import annotations

import asyncio
import contextlib
import copy
from pathlib import Path
from typing import Any

import pytest
from operator_fixture import OperatorProcess

from kuberay.api.constants import RAYCLUSTERS
from kuberay.devenv.plane import Plane
from kuberay.devenv.testing import condition, has_condition, wait_for, wait_gone, wait_until
from kuberay.runtime.client import JSON_PATCH, PODS, SERVICES, KubeClient, Resource
from kuberay.runtime.errors import NotFound


def raycluster(name: str, replicas: int = 2, **spec_extra: Any) -> dict[str, Any]:
    container = {
        "name": "ray-head",
        "image": "rayproject/ray:2.52.0",
        "resources": {
            "limits": {"cpu": "1", "memory": "2Gi"},
            "requests": {"cpu": "1", "memory": "2Gi"},
        },
    }
    worker = copy.deepcopy(container)
    worker["name"] = "ray-worker"
    spec: dict[str, Any] = {
        "rayVersion": "2.52.0",
        "headGroupSpec": {"rayStartParams": {}, "template": {"spec": {"containers": [container]}}},
        "workerGroupSpecs": [
            {
                "groupName": "workers",
                "replicas": replicas,
                "minReplicas": 0,
                "maxReplicas": 100,
                "rayStartParams": {},
                "template": {"spec": {"containers": [worker]}},
            }
        ],
    }
    spec.update(spec_extra)
    return {
        "apiVersion": "ray.io/v1",
        "kind": "RayCluster",
        "metadata": {"name": name},
        "spec": spec,
    }


async def pods_of(kube: KubeClient, ns: str, cluster: str, extra: str = "") -> list[dict[str, Any]]:
    sel = f"ray.io/cluster={cluster}" + (f",{extra}" if extra else "")
    items = (await kube.list(PODS, ns, label_selector=sel))["items"]
    return [p for p in items if not p["metadata"].get("deletionTimestamp")]


async def wait_ready(kube: KubeClient, ns: str, name: str, timeout: float = 60) -> dict[str, Any]:
    return await wait_for(
        kube,
        RAYCLUSTERS,
        name,
        ns,
        lambda o: o.get("status", {}).get("state") == "ready",
        timeout=timeout,
        what="state ready",
    )


async def wait_workers(
    kube: KubeClient, ns: str, name: str, count: int, timeout: float = 60
) -> None:
    async def check() -> bool:
        return len(await pods_of(kube, ns, name, "ray.io/node-type=worker")) == count

    await wait_until(check, timeout=timeout, what=f"{count} worker pods of {name}")


async def test_raycluster_becomes_ready_with_status(
    kube: KubeClient, namespace: str, ray_operator: OperatorProcess
) -> None:
    await kube.create(RAYCLUSTERS, raycluster("demo"), namespace)
    obj = await wait_ready(kube, namespace, "demo")
    status = obj["status"]
    assert status["desiredWorkerReplicas"] == 2
    assert status["availableWorkerReplicas"] == 2
    assert status["readyWorkerReplicas"] == 2
    assert status["desiredCPU"] == "3"
    assert status["desiredMemory"] == "6Gi"
    assert has_condition(obj, "HeadPodReady")
    assert has_condition(obj, "RayClusterProvisioned")
    assert status["head"]["serviceName"] == "demo-head-svc"
    assert status["head"]["serviceIP"] == status["head"]["podIP"], "headless head service"
    svc = await kube.get(SERVICES, "demo-head-svc", namespace)
    assert svc["spec"]["clusterIP"] == "None"
    heads = await pods_of(kube, namespace, "demo", "ray.io/node-type=head")
    assert len(heads) == 1
    assert heads[0]["metadata"]["ownerReferences"][0]["kind"] == "RayCluster"


async def wait_events(kube: KubeClient, namespace: str, name: str, want: dict[str, int]) -> None:
    """Waits until the events about ``name`` include each reason exactly the given times."""
    from kuberay.runtime.events import EVENTS_V1

    seen: list[tuple[str, str]] = []

    async def counted() -> bool:
        nonlocal seen
        events = (await kube.list(EVENTS_V1, namespace))["items"]
        seen = [(e["reason"], e["action"]) for e in events if e["regarding"]["name"] == name]
        reasons = [r for r, _ in seen]
        return all(reasons.count(r) == n for r, n in want.items())

    await wait_until(counted, timeout=15, what=f"events {want} (seen {seen})")
    assert all(action == "Create" for reason, action in seen if reason in want), seen


async def test_scale_by_replicas_and_by_workers_to_delete(
    kube: KubeClient, namespace: str, ray_operator: OperatorProcess
) -> None:
    await kube.create(
        RAYCLUSTERS, raycluster("scale", replicas=2, enableInTreeAutoscaling=True), namespace
    )
    await wait_ready(kube, namespace, "scale")
    await wait_events(
        kube,
        namespace,
        "scale",
        {
            "CreatedServiceAccount": 1,
            "CreatedRole": 1,
            "CreatedRoleBinding": 1,
            "CreatedService": 1,
        },
    )
    await kube.patch(
        RAYCLUSTERS,
        "scale",
        {
            "spec": {
                "workerGroupSpecs": [
                    {**raycluster("scale")["spec"]["workerGroupSpecs"][0], "replicas": 5}
                ]
            }
        },
        namespace,
    )
    await wait_workers(kube, namespace, "scale", 5)
    # The autoscaler's way: one JSON patch lowering replicas and naming the pod to remove.
    victim = sorted(
        p["metadata"]["name"]
        for p in await pods_of(kube, namespace, "scale", "ray.io/node-type=worker")
    )[0]
    patch = [
        {"op": "replace", "path": "/spec/workerGroupSpecs/0/replicas", "value": 4},
        {
            "op": "add",
            "path": "/spec/workerGroupSpecs/0/scaleStrategy",
            "value": {"workersToDelete": [victim]},
        },
    ]
    await kube.patch(RAYCLUSTERS, "scale", patch, namespace, content_type=JSON_PATCH)
    await wait_workers(kube, namespace, "scale", 4)
    names = {
        p["metadata"]["name"]
        for p in await pods_of(kube, namespace, "scale", "ray.io/node-type=worker")
    }
    assert victim not in names
    # With autoscaling on, lowering replicas alone never deletes a random pod.
    patch = [
        {"op": "replace", "path": "/spec/workerGroupSpecs/0/replicas", "value": 2},
        {"op": "replace", "path": "/spec/workerGroupSpecs/0/scaleStrategy", "value": {}},
    ]
    lowered = await kube.patch(RAYCLUSTERS, "scale", patch, namespace, content_type=JSON_PATCH)
    # A reconcile that saw the lowered replicas has finished (any delete it made is visible).
    assert ray_operator.trace is not None
    await ray_operator.trace.wait_processed("raycluster", "rayclusters", lowered)
    assert len(await pods_of(kube, namespace, "scale", "ray.io/node-type=worker")) == 4


async def test_scale_down_without_autoscaler(
    kube: KubeClient, namespace: str, ray_operator: OperatorProcess
) -> None:
    await kube.create(RAYCLUSTERS, raycluster("down", replicas=4), namespace)
    await wait_workers(kube, namespace, "down", 4)
    patch = [{"op": "replace", "path": "/spec/workerGroupSpecs/0/replicas", "value": 1}]
    await kube.patch(RAYCLUSTERS, "down", patch, namespace, content_type=JSON_PATCH)
    await wait_workers(kube, namespace, "down", 1)
    obj = await wait_for(
        kube,
        RAYCLUSTERS,
        "down",
        namespace,
        lambda o: o.get("status", {}).get("desiredWorkerReplicas") == 1,
    )
    assert obj["status"]["state"] == "ready"


async def test_suspend_and_resume(
    kube: KubeClient, namespace: str, ray_operator: OperatorProcess
) -> None:
    await kube.create(RAYCLUSTERS, raycluster("sus"), namespace)
    ready = await wait_ready(kube, namespace, "sus")
    # As upstream: both suspend conditions exist, False, from the first status on.
    for ctype in ("RayClusterSuspended", "RayClusterSuspending"):
        cond = condition(ready, ctype)
        assert cond is not None, ctype
        assert (cond["status"], cond["reason"], cond["message"]) == ("False", ctype, "")
    await kube.patch(RAYCLUSTERS, "sus", {"spec": {"suspend": True}}, namespace)
    obj = await wait_for(
        kube,
        RAYCLUSTERS,
        "sus",
        namespace,
        lambda o: has_condition(o, "RayClusterSuspended"),
        what="Suspended",
    )
    assert obj["status"]["state"] == "suspended"
    assert has_condition(obj, "RayClusterSuspending", "False")
    assert await pods_of(kube, namespace, "sus") == []
    from kuberay.runtime.events import EVENTS_V1

    async def one_deleted_pod_event() -> bool:
        events = (await kube.list(EVENTS_V1, namespace))["items"]
        reasons = [e["reason"] for e in events if e["regarding"]["name"] == "sus"]
        return reasons.count("DeletedPod") == 1 and "DeletedWorkerPod" not in reasons

    # Suspending is one collection delete upstream: one DeletedPod event (action Delete).
    await wait_until(one_deleted_pod_event, timeout=10, what="one DeletedPod event")
    await kube.patch(RAYCLUSTERS, "sus", {"spec": {"suspend": False}}, namespace)
    obj = await wait_ready(kube, namespace, "sus")
    assert has_condition(obj, "RayClusterSuspended", "False")
    assert len(await pods_of(kube, namespace, "sus")) == 3


async def test_deleting_the_cluster_cascades(
    kube: KubeClient, namespace: str, ray_operator: OperatorProcess
) -> None:
    await kube.create(RAYCLUSTERS, raycluster("gone"), namespace)
    await wait_ready(kube, namespace, "gone")
    await kube.delete(RAYCLUSTERS, "gone", namespace, propagation="Background")

    async def empty() -> bool:
        return not await pods_of(kube, namespace, "gone")

    await wait_until(empty, timeout=30, what="pods garbage-collected")
    await wait_gone(kube, SERVICES, "gone-head-svc", namespace)


async def test_head_pod_deleted_by_hand_comes_back(
    kube: KubeClient, namespace: str, ray_operator: OperatorProcess
) -> None:
    await kube.create(RAYCLUSTERS, raycluster("heal", replicas=1), namespace)
    await wait_ready(kube, namespace, "heal")
    head = (await pods_of(kube, namespace, "heal", "ray.io/node-type=head"))[0]
    await kube.delete(PODS, head["metadata"]["name"], namespace)

    async def new_head() -> bool:
        heads = await pods_of(kube, namespace, "heal", "ray.io/node-type=head")
        return len(heads) == 1 and heads[0]["metadata"]["name"] != head["metadata"]["name"]

    await wait_until(new_head, timeout=30, what="a new head pod")
    await wait_ready(kube, namespace, "heal")


async def test_a_worker_deleted_by_hand_is_replaced_only_once_it_is_gone(
    kube: KubeClient, namespace: str, ray_operator: OperatorProcess
) -> None:
    """Upstream counts a terminating pod toward ``replicas``: the replacement never overlaps
    it (upstream's TestRayClusterSingleHostMultiSlice counts pods right after a delete)."""
    await kube.create(RAYCLUSTERS, raycluster("keep", replicas=2), namespace)
    await wait_ready(kube, namespace, "keep")
    worker = (await pods_of(kube, namespace, "keep", "ray.io/node-type=worker"))[0]
    wname = worker["metadata"]["name"]
    hold = {"metadata": {"finalizers": ["kuberay-test/hold"]}}
    await kube.patch(PODS, wname, hold, namespace)
    await kube.delete(PODS, wname, namespace)
    # The operator has seen the deletion once the status counts one ready worker less.
    await wait_for(
        kube,
        RAYCLUSTERS,
        "keep",
        namespace,
        lambda o: o.get("status", {}).get("readyWorkerReplicas") == 1,
        timeout=60,
        what="readyWorkerReplicas 1 after the delete",
    )
    selector = "ray.io/cluster=keep,ray.io/node-type=worker"
    all_workers = (await kube.list(PODS, namespace, label_selector=selector))["items"]
    assert len(all_workers) == 2, [p["metadata"]["name"] for p in all_workers]
    await kube.patch(PODS, wname, {"metadata": {"finalizers": None}}, namespace)
    await wait_workers(kube, namespace, "keep", 2)
    await wait_ready(kube, namespace, "keep")


async def test_invalid_spec_gets_a_warning_event(
    kube: KubeClient, namespace: str, ray_operator: OperatorProcess
) -> None:
    bad = raycluster("bad")
    bad["spec"]["workerGroupSpecs"][0]["minReplicas"] = 5
    bad["spec"]["workerGroupSpecs"][0]["maxReplicas"] = 2
    await kube.create(RAYCLUSTERS, bad, namespace)
    from kuberay.runtime.events import EVENTS_V1

    async def warned() -> bool:
        events = (await kube.list(EVENTS_V1, namespace))["items"]
        return any(
            e["reason"] == "InvalidRayClusterSpec" and e["regarding"]["name"] == "bad"
            for e in events
        )

    await wait_until(warned, timeout=20, what="an InvalidRayClusterSpec event")
    # Beyond upstream: status says it too, until the spec is fixed.
    obj = await wait_for(
        kube,
        RAYCLUSTERS,
        "bad",
        namespace,
        lambda o: has_condition(o, "ValidationFailed"),
        what="the ValidationFailed condition",
    )
    cond = condition(obj, "ValidationFailed")
    assert cond is not None
    assert cond["reason"] == "InvalidRayClusterSpec"
    assert "minReplicas 5 greater than maxReplicas 2" in cond["message"]
    assert obj["status"]["observedGeneration"] == obj["metadata"]["generation"]
    assert await pods_of(kube, namespace, "bad") == []
    fix = [{"op": "replace", "path": "/spec/workerGroupSpecs/0/minReplicas", "value": 0}]
    await kube.patch(RAYCLUSTERS, "bad", fix, namespace, content_type=JSON_PATCH)
    obj = await wait_ready(kube, namespace, "bad")
    assert condition(obj, "ValidationFailed") is None


async def test_sigkill_mid_creation_leaves_no_duplicates(
    plane: Plane, kube: KubeClient, namespace: str, ray_operator: OperatorProcess, tmp_path: Path
) -> None:
    clusters = [f"c{i}" for i in range(20)]
    for name in clusters:
        await kube.create(RAYCLUSTERS, raycluster(name, replicas=3), namespace)

    async def some_pods() -> bool:
        return (
            len((await kube.list(PODS, namespace, label_selector="ray.io/cluster"))["items"]) >= 10
        )

    await wait_until(some_pods, timeout=30, what="pod creation to be under way")
    ray_operator.kill()
    assert ray_operator.trace is not None
    restarted = ray_operator.trace.mark()
    ray_operator.start()
    for name in clusters:
        ready = await wait_ready(kube, namespace, name, timeout=120)
        # The new process reconciled the cluster as it is now, with its caches synced: a
        # duplicate it was going to make from a stale view has been created by then.
        await ray_operator.trace.wait_processed(
            "raycluster", "rayclusters", ready, after=restarted, timeout=60
        )
    for name in clusters:
        pods = await pods_of(kube, namespace, name)
        heads = [p for p in pods if p["metadata"]["labels"]["ray.io/node-type"] == "head"]
        workers = [p for p in pods if p["metadata"]["labels"]["ray.io/node-type"] == "worker"]
        assert (len(heads), len(workers)) == (1, 3), (name, [p["metadata"]["name"] for p in pods])
    try:
        await kube.get(RAYCLUSTERS, "c0", namespace)
    except NotFound:  # pragma: no cover
        pytest.fail("cluster vanished")


async def test_redis_gcs_ft_cleanup_finalizer_flow(
    kube: KubeClient, namespace: str, ray_operator: OperatorProcess
) -> None:
    from kuberay.runtime.client import JOBS

    spec = {"gcsFaultToleranceOptions": {"redisAddress": "redis:6379"}}
    await kube.create(RAYCLUSTERS, raycluster("ft", replicas=1, **spec), namespace)
    obj = await wait_ready(kube, namespace, "ft")
    assert "ray.io/gcs-ft-redis-cleanup-finalizer" in obj["metadata"]["finalizers"]
    head = (await pods_of(kube, namespace, "ft", "ray.io/node-type=head"))[0]
    env = {e["name"]: e.get("value") for e in head["spec"]["containers"][0].get("env", [])}
    assert env["RAY_REDIS_ADDRESS"] == "redis:6379"
    assert head["metadata"]["annotations"]["ray.io/ft-enabled"] == "true"
    # Every cleanup Job ever created, seen by a watch opened before the deletion (the Job may
    # be garbage-collected with the cluster before a later list could see it).
    selector = "ray.io/node-type=redis-cleanup"
    listed = await kube.list(JOBS, namespace, label_selector=selector)
    created: list[str] = []

    async def record() -> None:
        async for event in kube.watch(
            JOBS,
            namespace,
            resource_version=listed["metadata"]["resourceVersion"],
            label_selector=selector,
            timeout_seconds=90,
        ):
            if event.type == "ADDED":
                created.append(event.object["metadata"]["name"])

    watcher = asyncio.create_task(record())
    try:
        await kube.delete(RAYCLUSTERS, "ft", namespace)
        # pods go first, then a cleanup Job runs (KWOK completes it), then the finalizer is
        # lifted and the cluster is gone
        await wait_gone(kube, RAYCLUSTERS, "ft", namespace, timeout=60)
    finally:
        watcher.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await watcher
    assert created == ["ft-redis-cleanup"]


async def test_multi_host_groups_are_whole_replicas(
    kube: KubeClient, namespace: str, ray_operator: OperatorProcess
) -> None:
    rc = raycluster("mh", replicas=2)
    rc["spec"]["workerGroupSpecs"][0]["numOfHosts"] = 2
    await kube.create(RAYCLUSTERS, rc, namespace)
    await wait_ready(kube, namespace, "mh")
    workers = await pods_of(kube, namespace, "mh", "ray.io/node-type=worker")
    assert len(workers) == 4
    by_replica: dict[str, list[str]] = {}
    for p in workers:
        labels = p["metadata"]["labels"]
        by_replica.setdefault(labels["ray.io/worker-group-replica-name"], []).append(
            labels["ray.io/replica-host-index"]
        )
    assert sorted(sorted(v) for v in by_replica.values()) == [["0", "1"], ["0", "1"]]
    assert await kube.get(SERVICES, "mh-headless", namespace)
    # losing one host replaces the whole replica
    victim = workers[0]
    replica = victim["metadata"]["labels"]["ray.io/worker-group-replica-name"]
    await kube.delete(PODS, victim["metadata"]["name"], namespace)

    async def replaced() -> bool:
        pods = await pods_of(kube, namespace, "mh", "ray.io/node-type=worker")
        names = {p["metadata"]["labels"]["ray.io/worker-group-replica-name"] for p in pods}
        return len(pods) == 4 and replica not in names

    await wait_until(replaced, timeout=30, what="the broken replica to be replaced whole")


def _tiny_multihost(name: str, replicas: int, hosts: int) -> dict[str, Any]:
    rc = raycluster(name, replicas=replicas)
    group = rc["spec"]["workerGroupSpecs"][0]
    group["numOfHosts"] = hosts
    small = {"cpu": "10m", "memory": "16Mi"}
    group["template"]["spec"]["containers"][0]["resources"] = {"limits": small, "requests": small}
    return rc


def _replicas(pods: list[dict[str, Any]]) -> dict[str, set[str]]:
    out: dict[str, set[str]] = {}
    for p in pods:
        labels = p["metadata"]["labels"]
        out.setdefault(labels["ray.io/worker-group-replica-name"], set()).add(p["metadata"]["uid"])
    return out


async def test_multi_host_replica_larger_than_the_create_budget(
    kube: KubeClient, namespace: str, ray_operator: OperatorProcess
) -> None:
    """A 64-host replica (a TPU v6e-256 slice) exceeds the 50-pod create budget of one pass; it
    is still created whole, and the cluster becomes ready."""
    await kube.create(RAYCLUSTERS, _tiny_multihost("slice", 1, 64), namespace)
    obj = await wait_ready(kube, namespace, "slice", timeout=120)
    assert obj["status"]["desiredWorkerReplicas"] == 64
    workers = await pods_of(kube, namespace, "slice", "ray.io/node-type=worker")
    assert len(workers) == 64
    hosts = sorted(int(p["metadata"]["labels"]["ray.io/replica-host-index"]) for p in workers)
    assert hosts == list(range(64))
    assert len(_replicas(workers)) == 1


async def test_multi_host_lost_host_recreates_the_whole_replica_after_deleting_it(
    kube: KubeClient, namespace: str, ray_operator: OperatorProcess
) -> None:
    """As upstream's TestRayClusterMultiHostMultiSlice: 2x4, 1x4, 3x4, then one host deleted.
    The group goes 12 -> 8 -> 12 (the broken replica is deleted first, then made anew), and
    no observed state has a replica mixing old and new pods."""
    await kube.create(RAYCLUSTERS, _tiny_multihost("mhs", 2, 4), namespace)
    await wait_ready(kube, namespace, "mhs")
    await wait_workers(kube, namespace, "mhs", 8)
    for replicas, count in ((1, 4), (3, 12)):
        patch = [{"op": "replace", "path": "/spec/workerGroupSpecs/0/replicas", "value": replicas}]
        await kube.patch(RAYCLUSTERS, "mhs", patch, namespace, content_type=JSON_PATCH)
        await wait_workers(kube, namespace, "mhs", count)
    listed = await kube.list(PODS, namespace, label_selector="ray.io/cluster=mhs")
    before = [p for p in listed["items"] if p["metadata"]["labels"]["ray.io/node-type"] == "worker"]
    assert sorted(len(v) for v in _replicas(before).values()) == [4, 4, 4]
    victim = before[0]
    old_replica = victim["metadata"]["labels"]["ray.io/worker-group-replica-name"]
    old_uids = _replicas(before)[old_replica]
    live = {p["metadata"]["uid"]: p for p in before}
    counts: list[int] = []

    async def observe() -> None:
        # Every state the apiserver goes through, from the listed version on (a watch, so
        # that no short-lived state is missed between polls).
        async for event in kube.watch(
            PODS,
            namespace,
            resource_version=listed["metadata"]["resourceVersion"],
            label_selector="ray.io/cluster=mhs,ray.io/node-type=worker",
            timeout_seconds=60,
        ):
            if event.type not in ("ADDED", "MODIFIED", "DELETED"):
                continue
            pod = event.object
            uid = pod["metadata"]["uid"]
            if event.type == "DELETED" or pod["metadata"].get("deletionTimestamp"):
                live.pop(uid, None)
            else:
                live[uid] = pod
            counts.append(len(live))
            groups = _replicas(list(live.values()))
            for uids in groups.values():
                # never a replica with some old and some new pods
                assert uids <= old_uids or not (uids & old_uids), groups
            if len(live) == 12 and old_replica not in groups:
                return

    watcher = asyncio.create_task(observe())
    await kube.delete(PODS, victim["metadata"]["name"], namespace)
    await asyncio.wait_for(watcher, timeout=60)
    # 12 -> 11 (the lost host) -> 8 (the rest of its replica) -> 12 (a new replica)
    assert min(counts) == 8, f"the rest of the replica was not deleted first: {counts}"
    assert counts[-1] == 12
    after = await pods_of(kube, namespace, "mhs", "ray.io/node-type=worker")
    indices: dict[str, set[str]] = {}
    for p in after:
        lab = p["metadata"]["labels"]
        indices.setdefault(lab["ray.io/worker-group-replica-index"], set()).add(
            lab["ray.io/replica-host-index"]
        )
    assert indices == {str(i): {"0", "1", "2", "3"} for i in range(3)}
    assert not {p["metadata"]["uid"] for p in after} & old_uids


async def test_ingress_serve_service_and_auth_secret(
    kube: KubeClient, namespace: str, ray_operator: OperatorProcess
) -> None:
    from kuberay.runtime.client import SECRETS

    rc = raycluster("extras", replicas=1, authOptions={"mode": "token"}, rayVersion="2.52.0")
    rc["metadata"]["annotations"] = {"ray.io/enable-serve-service": "true"}
    rc["spec"]["headGroupSpec"]["enableIngress"] = True
    head = rc["spec"]["headGroupSpec"]["template"]["spec"]["containers"][0]
    head["ports"] = [
        {"name": "serve", "containerPort": 8000},
        {"name": "dashboard", "containerPort": 8265},
    ]
    await kube.create(RAYCLUSTERS, rc, namespace)
    await wait_ready(kube, namespace, "extras")
    ingress = await kube.get(
        Resource("networking.k8s.io", "v1", "ingresses"), "extras-head-ingress", namespace
    )
    path = ingress["spec"]["rules"][0]["http"]["paths"][0]
    assert path["backend"]["service"] == {"name": "extras-head-svc", "port": {"number": 8265}}
    serve = await kube.get(SERVICES, "extras-serve-svc", namespace)
    assert [p["name"] for p in serve["spec"]["ports"]] == ["serve"]
    secret = await kube.get(SECRETS, "extras", namespace)
    assert secret["data"]["auth_token"]
    await wait_events(kube, namespace, "extras", {"CreatedIngress": 1, "CreatedService": 2})


SAMPLES = Path(__file__).resolve().parents[2] / "deploy" / "samples"
# Samples that need an alpha feature gate or an API this plane does not have (cert-manager).
GATED_SAMPLES = {
    "raycluster.gcs-ft-rocksdb.yaml": "gate GCSFaultToleranceEmbeddedStorage",
    "raycluster.gcs-ft-rocksdb-claim.yaml": "gate GCSFaultToleranceEmbeddedStorage",
    # Covered with the real cert-manager by test_mtls_cert_manager.py.
    "raycluster.mtls-history.yaml": "gate RayClusterMTLS and cert-manager",
    "raycluster.network-policy.yaml": "gate RayClusterNetworkPolicy",
    "raycluster.multi-host.yaml": "TPU node selector and google.com/tpu capacity",
}


async def test_our_raycluster_samples_become_ready(
    kube: KubeClient, namespace: str, ray_operator: OperatorProcess
) -> None:
    import yaml

    from kuberay.runtime.client import SERVICEACCOUNTS

    names = []
    for path in sorted(SAMPLES.glob("*.yaml")):
        doc = yaml.safe_load(path.read_text())
        if doc.get("kind") != "RayCluster" or path.name in GATED_SAMPLES:
            continue
        sa = doc["spec"]["headGroupSpec"]["template"]["spec"].get("serviceAccountName")
        if sa:  # a user-named service account must exist; the operator does not create it
            await kube.create(SERVICEACCOUNTS, {"metadata": {"name": sa}}, namespace)
        await kube.create(RAYCLUSTERS, doc, namespace)
        names.append(doc["metadata"]["name"])
    assert len(names) >= 8
    for name in names:
        await wait_ready(kube, namespace, name, timeout=90)


async def test_stall_reasons_reach_the_status(
    kube: KubeClient, namespace: str, ray_operator: OperatorProcess
) -> None:
    """Unschedulable pods, a quota rejection and a missing service account are all explained
    in status conditions, not only in pod events."""
    big = raycluster("too-big", replicas=1)
    big["spec"]["workerGroupSpecs"][0]["template"]["spec"]["containers"][0]["resources"] = {
        "limits": {"cpu": "1", "memory": "1Gi", "nvidia.com/gpu": "64"}
    }
    await kube.create(RAYCLUSTERS, big, namespace)
    obj = await wait_for(
        kube,
        RAYCLUSTERS,
        "too-big",
        namespace,
        lambda o: "Unschedulable" in _cond_message(o, "RayClusterProvisioned"),
        what="an Unschedulable reason in RayClusterProvisioned",
    )
    assert "Insufficient nvidia.com/gpu" in _cond_message(obj, "RayClusterProvisioned")

    nosa = raycluster("no-sa", replicas=0)
    nosa["spec"]["headGroupSpec"]["template"]["spec"]["serviceAccountName"] = "missing-sa"
    await kube.create(RAYCLUSTERS, nosa, namespace)
    obj = await wait_for(
        kube,
        RAYCLUSTERS,
        "no-sa",
        namespace,
        lambda o: "missing-sa" in _cond_message(o, "ReplicaFailure"),
        what="the missing service account in ReplicaFailure",
    )
    assert obj["status"]["conditions"]

    quota = {"metadata": {"name": "tiny"}, "spec": {"hard": {"pods": "2"}}}
    quotas = Resource("", "v1", "resourcequotas")
    await kube.create(quotas, quota, namespace)
    await wait_for(
        kube,
        quotas,
        "tiny",
        namespace,
        lambda o: "pods" in ((o.get("status") or {}).get("used") or {}),
        what="the quota controller to fill in usage",
    )
    await kube.create(RAYCLUSTERS, raycluster("over-quota", replicas=3), namespace)
    obj = await wait_for(
        kube,
        RAYCLUSTERS,
        "over-quota",
        namespace,
        lambda o: "exceeded quota" in _cond_message(o, "ReplicaFailure"),
        what="the quota rejection in ReplicaFailure",
    )
    assert obj["status"]["conditions"]


def _cond_message(obj: dict[str, Any], ctype: str) -> str:
    for cond in (obj.get("status") or {}).get("conditions") or []:
        if cond["type"] == ctype:
            return str(cond.get("message", ""))
    return ""


async def test_recreate_upgrade_strategy_replaces_all_pods_on_spec_change(
    kube: KubeClient, namespace: str, ray_operator: OperatorProcess
) -> None:
    rc = raycluster("rec", replicas=2, upgradeStrategy={"type": "Recreate"})
    await kube.create(RAYCLUSTERS, rc, namespace)
    await wait_ready(kube, namespace, "rec")
    before = {p["metadata"]["name"] for p in await pods_of(kube, namespace, "rec")}
    # a replicas change is not a spec change for the hash: nothing is recreated
    patch = [{"op": "replace", "path": "/spec/workerGroupSpecs/0/replicas", "value": 3}]
    await kube.patch(RAYCLUSTERS, "rec", patch, namespace, content_type=JSON_PATCH)
    await wait_workers(kube, namespace, "rec", 3)
    assert before <= {p["metadata"]["name"] for p in await pods_of(kube, namespace, "rec")}
    image = "/spec/workerGroupSpecs/0/template/spec/containers/0/image"
    patch = [{"op": "replace", "path": image, "value": "rayproject/ray:2.53.0"}]
    await kube.patch(RAYCLUSTERS, "rec", patch, namespace, content_type=JSON_PATCH)

    async def all_new() -> bool:
        pods = await pods_of(kube, namespace, "rec")
        names = {p["metadata"]["name"] for p in pods}
        return len(pods) == 4 and not (names & before)

    await wait_until(all_new, timeout=60, what="every pod recreated")
    workers = await pods_of(kube, namespace, "rec", "ray.io/node-type=worker")
    assert {p["spec"]["containers"][0]["image"] for p in workers} == {"rayproject/ray:2.53.0"}
