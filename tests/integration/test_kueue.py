"""The real Kueue (v0.17.0, built from its Go module) in front of our operator on the KWOK plane.

Kueue runs beside the session's plane (``kuberay.devenv.kueue``) with its webhooks registered
for namespaces labelled ``NAMESPACE_LABEL``; each test gets such a namespace, its own
ClusterQueue (a small CPU quota) and a LocalQueue. The operator runs in-process with the fake
Ray dashboards of ``test_rayjob`` (its ``Operator`` plays the submitter's part on KWOK), so a
job's progress and its submissions are observable; KWOK pods are enough for admission and
preemption, which only look at pods' requests and the objects' status.

What is checked is the contract between the two controllers as upstream KubeRay and Kueue
define it: Kueue's webhook creates jobs suspended, Kueue unsuspends on admission and suspends
on eviction, and the operator reports ``Suspended`` once the pods are gone (Kueue counts a
RayJob active until then), starting a new cluster and a new submission per admitted run.
"""

from __future__ import annotations

import contextlib
import time
from collections.abc import AsyncIterator
from typing import Any

import pytest
from test_raycluster import wait_ready
from test_rayjob import Operator, cluster_spec, deployment, rayjob

from kuberay.api.constants import RAYCLUSTERS
from kuberay.controllers.rayjob import RAYJOBS
from kuberay.devenv import binaries
from kuberay.devenv.kueue import (
    CLUSTER_QUEUES,
    LOCAL_QUEUES,
    NAMESPACE_LABEL,
    PRIORITY_LABEL,
    QUEUE_LABEL,
    RESOURCE_FLAVORS,
    WORKLOAD_PRIORITY_CLASSES,
    WORKLOADS,
    Kueue,
)
from kuberay.devenv.plane import Plane
from kuberay.devenv.testing import (
    has_condition,
    skip_unless_strict,
    unique_name,
    wait_for,
    wait_gone,
    wait_until,
)
from kuberay.ray.dashboard import SUCCEEDED
from kuberay.runtime.client import JOBS, JSON_PATCH, NAMESPACES, PODS, KubeClient
from kuberay.runtime.errors import ApiError

FLAVOR = "kuberay-default"
ELASTIC_ANNOTATION = "kueue.x-k8s.io/elastic-job"
ELASTIC_GATE = "kueue.x-k8s.io/elastic-job"
# Kueue puts the flavor's node labels into the admitted pod templates (every KWOK node has it).
FLAVOR_NODE_LABELS = {"type": "kwok"}
LOCAL_QUEUE = "user-queue"
# A RayJob of cluster_spec(): head 1 CPU + one 1-CPU worker + the 500m submitter Kueue assumes
# for K8sJobMode = 2.5 CPU; a RayCluster of it = 2 CPU. A 3-CPU quota fits exactly one of each.
QUOTA_CPU = "3"
TIMEOUT = 90.0


@pytest.fixture(scope="module")
async def kueue(plane: Plane, kube: KubeClient) -> AsyncIterator[Kueue]:
    try:
        binaries.ensure(["kueue"], log=lambda _line: None)
    except binaries.BuildError as exc:
        skip_unless_strict(f"kueue is not available: {exc}")
    # The elastic gate only changes jobs annotated elastic; the other tests' jobs are not.
    manager = Kueue(plane, feature_gates={"ElasticJobsViaWorkloadSlices": True})
    await manager.start(kube)
    flavor = {
        "apiVersion": RESOURCE_FLAVORS.api_version,
        "kind": "ResourceFlavor",
        "metadata": {"name": FLAVOR},
        "spec": {"nodeLabels": FLAVOR_NODE_LABELS},
    }
    with contextlib.suppress(ApiError):
        await kube.create(RESOURCE_FLAVORS, flavor)
    yield manager
    await manager.stop()


@pytest.fixture
async def queue(kube: KubeClient, namespace: str, kueue: Kueue) -> AsyncIterator[str]:
    """A Kueue-managed namespace with a LocalQueue on a fresh ClusterQueue (its name)."""
    key, value = NAMESPACE_LABEL
    await kube.patch(NAMESPACES, namespace, {"metadata": {"labels": {key: value}}})
    name = unique_name("cq")
    quota = [{"name": "cpu", "nominalQuota": QUOTA_CPU}, {"name": "memory", "nominalQuota": "64Gi"}]
    cq = {
        "apiVersion": CLUSTER_QUEUES.api_version,
        "kind": "ClusterQueue",
        "metadata": {"name": name},
        "spec": {
            "namespaceSelector": {"matchLabels": {key: value}},
            "preemption": {"withinClusterQueue": "LowerPriority"},
            "resourceGroups": [
                {
                    "coveredResources": ["cpu", "memory"],
                    "flavors": [{"name": FLAVOR, "resources": quota}],
                }
            ],
        },
    }
    await kube.create(CLUSTER_QUEUES, cq)
    lq = {
        "apiVersion": LOCAL_QUEUES.api_version,
        "kind": "LocalQueue",
        "metadata": {"name": LOCAL_QUEUE},
        "spec": {"clusterQueue": name},
    }
    await kube.create(LOCAL_QUEUES, lq, namespace)
    await wait_for(
        kube,
        CLUSTER_QUEUES,
        name,
        None,
        lambda o: has_condition(o, "Active"),
        timeout=30,
        what="ClusterQueue Active",
    )
    yield name
    with contextlib.suppress(ApiError):
        await kube.delete(CLUSTER_QUEUES, name)


@pytest.fixture
async def operator(
    plane: Plane, kube: KubeClient, namespace: str, queue: str
) -> AsyncIterator[Operator]:
    op = Operator(plane, kube, namespace)
    await op.start()
    yield op
    await op.stop()
    for res in (RAYJOBS, RAYCLUSTERS):
        for item in (await kube.list(res, namespace))["items"]:
            patch: dict[str, Any] = {"metadata": {"finalizers": []}}
            with contextlib.suppress(ApiError):
                await kube.patch(res, item["metadata"]["name"], patch, namespace)


def queued(obj: dict[str, Any], priority: str | None = None) -> dict[str, Any]:
    labels = obj["metadata"].setdefault("labels", {})
    labels[QUEUE_LABEL] = LOCAL_QUEUE
    if priority:
        labels[PRIORITY_LABEL] = priority
    return obj


def queued_rayjob(name: str, priority: str | None = None) -> dict[str, Any]:
    """A RayJob for the LocalQueue: Kueue requires it to delete its cluster when it ends."""
    return queued(rayjob(name, "sleep 600", shutdownAfterJobFinishes=True), priority)


def raycluster(name: str) -> dict[str, Any]:
    return {
        "apiVersion": "ray.io/v1",
        "kind": "RayCluster",
        "metadata": {"name": name},
        "spec": cluster_spec(),
    }


async def workload_of(kube: KubeClient, ns: str, owner: dict[str, Any]) -> dict[str, Any]:
    """The Workload Kueue made for ``owner`` (waits until it exists)."""
    uid = owner["metadata"]["uid"]
    found: list[dict[str, Any]] = []

    async def made() -> bool:
        found[:] = [
            w
            for w in (await kube.list(WORKLOADS, ns))["items"]
            if any(ref["uid"] == uid for ref in w["metadata"].get("ownerReferences") or [])
        ]
        return bool(found)

    await wait_until(made, timeout=TIMEOUT, what=f"a Workload for {owner['metadata']['name']}")
    assert len(found) == 1, [w["metadata"]["name"] for w in found]
    return found[0]


async def wait_workload(
    kube: KubeClient, ns: str, workload: dict[str, Any], ctype: str, status: str = "True"
) -> dict[str, Any]:
    return await wait_for(
        kube,
        WORKLOADS,
        workload["metadata"]["name"],
        ns,
        lambda o: has_condition(o, ctype, status),
        timeout=TIMEOUT,
        what=f"Workload {ctype}={status}",
    )


async def wait_pending(kube: KubeClient, ns: str, workload: dict[str, Any]) -> dict[str, Any]:
    """Kueue tried the workload and found no quota for it."""
    return await wait_for(
        kube,
        WORKLOADS,
        workload["metadata"]["name"],
        ns,
        lambda o: any(
            c["type"] == "QuotaReserved" and c["status"] == "False" and c["reason"] == "Pending"
            for c in (o.get("status") or {}).get("conditions") or []
        ),
        timeout=TIMEOUT,
        what="Workload pending for quota",
    )


async def wait_job(
    kube: KubeClient, ns: str, name: str, state: str, timeout: float = TIMEOUT
) -> dict[str, Any]:
    return await wait_for(
        kube, RAYJOBS, name, ns, lambda o: deployment(o) == state, timeout=timeout, what=state
    )


async def cluster_pods(kube: KubeClient, ns: str, cluster: str) -> list[dict[str, Any]]:
    return list((await kube.list(PODS, ns, label_selector=f"ray.io/cluster={cluster}"))["items"])


async def admitted_pods(kube: KubeClient, ns: str, cluster: str) -> list[dict[str, Any]]:
    """The cluster's pods, each placed by the flavor Kueue assigned (its node labels)."""
    pods = await cluster_pods(kube, ns, cluster)
    assert pods
    for pod in pods:
        selector = pod["spec"].get("nodeSelector") or {}
        assert FLAVOR_NODE_LABELS.items() <= selector.items(), (pod["metadata"]["name"], selector)
    return pods


async def finish_job(op: Operator, obj: dict[str, Any]) -> None:
    """The Ray job of a running RayJob succeeds (on its cluster's fake dashboard)."""
    status = obj["status"]
    op.dashboard(status["rayClusterName"]).set_job_status(status["jobId"], SUCCEEDED)


async def test_rayjob_admitted_in_turn_by_quota(
    kube: KubeClient, namespace: str, operator: Operator
) -> None:
    first = await kube.create(RAYJOBS, queued_rayjob("first"), namespace)
    # Kueue's mutating webhook queues the job: it is stored suspended.
    assert first["spec"]["suspend"] is True
    wl_first = await workload_of(kube, namespace, first)
    await wait_workload(kube, namespace, wl_first, "Admitted")
    obj = await wait_job(kube, namespace, "first", "Running")
    assert not obj["spec"].get("suspend")
    await wait_workload(kube, namespace, wl_first, "PodsReady")
    cluster = obj["status"]["rayClusterName"]
    await admitted_pods(kube, namespace, cluster)

    second = await kube.create(RAYJOBS, queued_rayjob("second"), namespace)
    wl_second = await workload_of(kube, namespace, second)
    await wait_pending(kube, namespace, wl_second)
    # As upstream, a job created suspended passes Initializing and Suspending (names chosen,
    # nothing created) on its way to Suspended.
    obj = await wait_job(kube, namespace, "second", "Suspended")
    assert obj["spec"]["suspend"] is True
    assert not obj["status"].get("rayClusterName")
    clusters = (await kube.list(RAYCLUSTERS, namespace))["items"]
    assert [c["metadata"]["name"] for c in clusters] == [cluster]

    await finish_job(operator, await kube.get(RAYJOBS, "first", namespace))
    await wait_job(kube, namespace, "first", "Complete")
    await wait_workload(kube, namespace, wl_first, "Finished")
    await wait_workload(kube, namespace, wl_second, "Admitted")
    obj = await wait_job(kube, namespace, "second", "Running")
    await wait_gone(kube, RAYCLUSTERS, cluster, namespace)
    for name, run in (("first", first), ("second", obj)):
        done = await kube.get(RAYJOBS, name, namespace) if name == "first" else run
        job_id = done["status"]["jobId"]
        dash = operator.dashboard(done["status"]["rayClusterName"])
        assert dash.jobs_started[job_id] == 1, (name, dict(dash.jobs_started))


async def test_raycluster_admitted_in_turn_by_quota(
    kube: KubeClient, namespace: str, operator: Operator
) -> None:
    first = await kube.create(RAYCLUSTERS, queued(raycluster("first")), namespace)
    assert first["spec"]["suspend"] is True
    wl_first = await workload_of(kube, namespace, first)
    await wait_workload(kube, namespace, wl_first, "Admitted")
    await wait_ready(kube, namespace, "first", timeout=TIMEOUT)
    await wait_workload(kube, namespace, wl_first, "PodsReady")
    assert len(await admitted_pods(kube, namespace, "first")) == 2

    second = await kube.create(RAYCLUSTERS, queued(raycluster("second")), namespace)
    wl_second = await workload_of(kube, namespace, second)
    await wait_pending(kube, namespace, wl_second)
    await wait_cluster_suspended(kube, namespace, "second")
    assert await cluster_pods(kube, namespace, "second") == []

    await kube.delete(RAYCLUSTERS, "first", namespace)
    # Its Workload goes with it (garbage collection), which frees the quota.
    await wait_gone(kube, WORKLOADS, wl_first["metadata"]["name"], namespace, timeout=TIMEOUT)
    await wait_workload(kube, namespace, wl_second, "Admitted")
    await wait_ready(kube, namespace, "second", timeout=TIMEOUT)
    assert len(await admitted_pods(kube, namespace, "second")) == 2


async def wait_cluster_suspended(kube: KubeClient, ns: str, name: str) -> None:
    """The RayCluster is held by Kueue (spec.suspend) and the operator says it is suspended."""
    obj = await wait_for(
        kube,
        RAYCLUSTERS,
        name,
        ns,
        lambda o: has_condition(o, "RayClusterSuspended"),
        timeout=TIMEOUT,
        what="RayClusterSuspended",
    )
    assert obj["spec"]["suspend"] is True
    assert obj["status"]["state"] == "suspended"


async def priority_class(kube: KubeClient, value: int) -> str:
    name = unique_name(f"prio-{value}")
    body = {
        "apiVersion": WORKLOAD_PRIORITY_CLASSES.api_version,
        "kind": "WorkloadPriorityClass",
        "metadata": {"name": name},
        "value": value,
    }
    await kube.create(WORKLOAD_PRIORITY_CLASSES, body)
    return name


async def test_preemption_suspends_lower_rayjob_which_resumes_and_finishes(
    kube: KubeClient, namespace: str, operator: Operator
) -> None:
    low_class = await priority_class(kube, 10)
    high_class = await priority_class(kube, 1000)
    low = await kube.create(RAYJOBS, queued_rayjob("low", low_class), namespace)
    wl_low = await workload_of(kube, namespace, low)
    run1 = (await wait_job(kube, namespace, "low", "Running"))["status"]
    cluster1 = run1["rayClusterName"]
    await admitted_pods(kube, namespace, cluster1)

    started = time.monotonic()
    high = await kube.create(RAYJOBS, queued_rayjob("high", high_class), namespace)
    wl_high = await workload_of(kube, namespace, high)
    evicted = await wait_workload(kube, namespace, wl_low, "Evicted")
    reasons = {c["type"]: c["reason"] for c in evicted["status"]["conditions"]}
    assert reasons["Evicted"] == "Preempted", reasons
    obj = await wait_job(kube, namespace, "low", "Suspended")
    suspended_after = time.monotonic() - started
    assert obj["spec"]["suspend"] is True
    assert not obj["status"].get("rayClusterName")
    assert not obj["status"].get("jobId")
    await wait_gone(kube, RAYCLUSTERS, cluster1, namespace, timeout=TIMEOUT)
    await wait_until(
        lambda: _no_pods(kube, namespace, cluster1), timeout=TIMEOUT, what="low's pods gone"
    )
    await wait_gone(kube, JOBS, "low", namespace, timeout=TIMEOUT)

    await wait_workload(kube, namespace, wl_high, "Admitted")
    high_run = (await wait_job(kube, namespace, "high", "Running"))["status"]
    print(
        f"preemption: low Suspended {suspended_after:.1f}s and high Running "
        f"{time.monotonic() - started:.1f}s after the high RayJob was created"
    )
    # The low job waits while the high one holds the quota.
    await wait_pending(kube, namespace, wl_low)
    assert (await kube.get(RAYJOBS, "low", namespace))["spec"]["suspend"] is True

    await finish_job(operator, await kube.get(RAYJOBS, "high", namespace))
    await wait_job(kube, namespace, "high", "Complete")
    await wait_workload(kube, namespace, wl_low, "Admitted")
    run2 = (await wait_job(kube, namespace, "low", "Running"))["status"]
    assert run2["rayClusterName"] != cluster1
    assert run2["jobId"] != run1["jobId"]
    await admitted_pods(kube, namespace, run2["rayClusterName"])
    await finish_job(operator, await kube.get(RAYJOBS, "low", namespace))
    done = await wait_job(kube, namespace, "low", "Complete")
    assert done["status"]["jobStatus"] == SUCCEEDED
    await wait_workload(kube, namespace, wl_low, "Finished")

    # One submission per admitted run, each on its own cluster; one submitter Job per run.
    for run in (run1, run2, high_run):
        dash = operator.dashboard(run["rayClusterName"])
        assert dict(dash.jobs_started) == {run["jobId"]: 1}
    submitters = [name for name, _uid in operator.submitter_jobs]
    assert submitters.count("low") == 2, submitters
    assert submitters.count("high") == 1, submitters


async def test_preemption_suspends_lower_raycluster_until_quota_frees(
    kube: KubeClient, namespace: str, operator: Operator
) -> None:
    low_class = await priority_class(kube, 10)
    high_class = await priority_class(kube, 1000)
    low = await kube.create(RAYCLUSTERS, queued(raycluster("low"), low_class), namespace)
    wl_low = await workload_of(kube, namespace, low)
    await wait_ready(kube, namespace, "low", timeout=TIMEOUT)
    await admitted_pods(kube, namespace, "low")

    high = await kube.create(RAYCLUSTERS, queued(raycluster("high"), high_class), namespace)
    wl_high = await workload_of(kube, namespace, high)
    evicted = await wait_workload(kube, namespace, wl_low, "Evicted")
    reasons = {c["type"]: c["reason"] for c in evicted["status"]["conditions"]}
    assert reasons["Evicted"] == "Preempted", reasons
    # Kueue counts a RayCluster active while its state is ready: the eviction completes (and
    # the high one is admitted) only once the operator reports it suspended, pods gone.
    await wait_cluster_suspended(kube, namespace, "low")
    await wait_until(
        lambda: _no_pods(kube, namespace, "low"), timeout=TIMEOUT, what="low's pods gone"
    )
    await wait_workload(kube, namespace, wl_high, "Admitted")
    await wait_ready(kube, namespace, "high", timeout=TIMEOUT)
    await wait_pending(kube, namespace, wl_low)

    await kube.delete(RAYCLUSTERS, "high", namespace)
    await wait_workload(kube, namespace, wl_low, "Admitted")
    await wait_ready(kube, namespace, "low", timeout=TIMEOUT)
    assert len(await admitted_pods(kube, namespace, "low")) == 2


async def _no_pods(kube: KubeClient, ns: str, cluster: str) -> bool:
    return not await cluster_pods(kube, ns, cluster)


def elastic_raycluster(name: str, workers: int) -> dict[str, Any]:
    """An autoscaling RayCluster Kueue admits slice by slice: head 500m, workers 500m each."""
    body = queued(raycluster(name))
    body["metadata"]["annotations"] = {ELASTIC_ANNOTATION: "true"}
    spec = body["spec"]
    spec["enableInTreeAutoscaling"] = True
    head = spec["headGroupSpec"]["template"]["spec"]["containers"][0]
    group = spec["workerGroupSpecs"][0]
    worker = group["template"]["spec"]["containers"][0]
    for container in (head, worker):
        container["resources"] = {"limits": {"cpu": "500m", "memory": "1Gi"}}
    group["replicas"] = workers
    return body


def worker_counts(workload: dict[str, Any]) -> int:
    return next(int(p["count"]) for p in workload["spec"]["podSets"] if p["name"] == "workers")


async def cluster_workloads(
    kube: KubeClient, ns: str, owner: dict[str, Any]
) -> list[dict[str, Any]]:
    uid = owner["metadata"]["uid"]
    return [
        w
        for w in (await kube.list(WORKLOADS, ns))["items"]
        if any(ref["uid"] == uid for ref in w["metadata"].get("ownerReferences") or [])
    ]


async def wait_workers_running(kube: KubeClient, ns: str, cluster: str, count: int) -> None:
    """Exactly ``count`` live worker pods, all ungated (admitted) and Running."""

    async def settled() -> bool:
        pods = [
            p
            for p in await cluster_pods(kube, ns, cluster)
            if p["metadata"]["labels"].get("ray.io/node-type") == "worker"
            and not p["metadata"].get("deletionTimestamp")
        ]
        return len(pods) == count and all(
            not p["spec"].get("schedulingGates") and p["status"].get("phase") == "Running"
            for p in pods
        )

    async def explain() -> str:
        return "\n".join(
            f"{p['metadata']['name']} gates={p['spec'].get('schedulingGates')} "
            f"phase={p['status'].get('phase')} deleting={p['metadata'].get('deletionTimestamp')} "
            f"annotations={p['metadata'].get('annotations')}"
            for p in await cluster_pods(kube, ns, cluster)
        )

    await wait_until(
        settled, timeout=TIMEOUT, what=f"{count} admitted workers running", explain=explain
    )


async def autoscale(
    kube: KubeClient, ns: str, name: str, replicas: int, delete: list[str] | None = None
) -> None:
    """What Ray's autoscaler writes: the group's replicas (and, scaling down, the workers to
    delete), as a JSON patch of those fields only; Kueue's changes to the templates stay."""
    ops: list[dict[str, Any]] = [
        {"op": "replace", "path": "/spec/workerGroupSpecs/0/replicas", "value": replicas}
    ]
    if delete is not None:
        ops.append(
            {
                "op": "add",
                "path": "/spec/workerGroupSpecs/0/scaleStrategy",
                "value": {"workersToDelete": delete},
            }
        )
    await kube.patch(RAYCLUSTERS, name, ops, ns, content_type=JSON_PATCH)


async def test_elastic_raycluster_scale_up_is_a_new_workload_slice_and_shrinks(
    kube: KubeClient, namespace: str, queue: str, operator: Operator
) -> None:
    cluster = await kube.create(RAYCLUSTERS, elastic_raycluster("elastic", 1), namespace)
    # Kueue's webhook gates every pod template until the slice they belong to is admitted.
    spec = cluster["spec"]
    for template in (spec["headGroupSpec"]["template"], spec["workerGroupSpecs"][0]["template"]):
        assert {"name": ELASTIC_GATE} in template["spec"]["schedulingGates"]
    first = await workload_of(kube, namespace, cluster)
    await wait_workload(kube, namespace, first, "Admitted")
    assert worker_counts(first) == 1
    await wait_ready(kube, namespace, "elastic", timeout=TIMEOUT)
    await wait_workers_running(kube, namespace, "elastic", 1)

    # The autoscaler asks for two more workers (1 CPU more: 2 of the 3-CPU quota).
    await autoscale(kube, namespace, "elastic", 3)
    slices: list[dict[str, Any]] = []

    async def new_slice_admitted() -> bool:
        slices[:] = [
            w
            for w in await cluster_workloads(kube, namespace, cluster)
            if w["metadata"]["name"] != first["metadata"]["name"]
        ]
        return any(has_condition(w, "Admitted") for w in slices)

    await wait_until(new_slice_admitted, timeout=TIMEOUT, what="a new admitted workload slice")
    assert [worker_counts(w) for w in slices] == [3]
    old = await wait_workload(kube, namespace, first, "Finished")
    finished = next(c for c in old["status"]["conditions"] if c["type"] == "Finished")
    assert finished["reason"] == "WorkloadSliceReplaced", finished
    await wait_workers_running(kube, namespace, "elastic", 3)
    current = slices[0]["metadata"]["name"]
    await wait_cpu_used(kube, queue, "2")

    # Scale-down the autoscaler's way: fewer replicas and the workers to delete named.
    workers = sorted(
        p["metadata"]["name"]
        for p in await cluster_pods(kube, namespace, "elastic")
        if p["metadata"]["labels"].get("ray.io/node-type") == "worker"
    )
    await autoscale(kube, namespace, "elastic", 1, workers[1:])
    await wait_workers_running(kube, namespace, "elastic", 1)

    async def shrunk() -> bool:
        live = [
            w
            for w in await cluster_workloads(kube, namespace, cluster)
            if has_condition(w, "Admitted") and not has_condition(w, "Finished")
        ]
        # Shrinking updates the admitted slice in place; no new slice is made.
        return [(w["metadata"]["name"], worker_counts(w)) for w in live] == [(current, 1)]

    await wait_until(shrunk, timeout=TIMEOUT, what="the admitted slice shrunk to one worker")
    # The quota follows: head and one worker, 500m each.
    await wait_cpu_used(kube, queue, "1")


async def wait_cpu_used(kube: KubeClient, queue: str, cpu: str) -> None:
    await wait_for(
        kube,
        CLUSTER_QUEUES,
        queue,
        None,
        lambda o: _cpu_used(o) == cpu,
        timeout=TIMEOUT,
        what=f"{cpu} CPU used in the ClusterQueue",
    )


def _cpu_used(cq: dict[str, Any]) -> str:
    usage = (cq.get("status") or {}).get("flavorsUsage") or []
    return next((str(r["total"]) for f in usage for r in f["resources"] if r["name"] == "cpu"), "")
