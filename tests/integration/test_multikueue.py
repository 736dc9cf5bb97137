"""MultiKueue with the real Kueue (v0.17.0) on two planes: the session's as the manager, a
second KWOK plane started here as the worker.

Kueue runs on both planes (``kuberay.devenv.kueue``). On the manager, a ``MultiKueueCluster``
points at a Secret holding the worker's kubeconfig (the worker's apiserver listens on loopback,
so the manager's Kueue reaches it), a ``MultiKueueConfig`` lists that cluster, and the
ClusterQueue carries an ``AdmissionCheck`` of controller ``kueue.x-k8s.io/multikueue``. The
worker has the same namespace and LocalQueue name, on its own ClusterQueue. Our operator runs
in-process on both planes (the fake dashboards of ``test_rayjob`` and ``test_rayservice``).

What is checked is the contract upstream KubeRay and Kueue define for ``spec.managedBy:
kueue.x-k8s.io/multikueue``: on the manager our operator leaves the object alone (no child, no
write of its own, even after Kueue admits and unsuspends it there), Kueue copies it to the
worker without ``managedBy``, our operator on the worker runs it, and Kueue copies the worker's
status back onto the manager's object. Kueue's RayService integration admits and evicts through
``rayClusterConfig.suspend``; the last test drives that toggle deterministically on the worker
(a drained ClusterQueue) and checks that the one cluster follows it in place.

Failure modes: the worker plane and the two Kueue processes cost about a minute to start on a
busy machine (module fixtures, once); a MultiKueueCluster that never turns Active (kubeconfig
refused, worker unreachable) fails the fixture with its condition in the message.
"""

from __future__ import annotations

import base64
import contextlib
import json
from collections.abc import AsyncIterator, Iterator
from typing import Any

import pytest
import test_rayservice as rs
from test_kueue import workload_of
from test_rayjob import Operator, deployment
from test_rayjob import rayjob as make_rayjob

from kuberay.api.constants import MANAGED_BY_MULTIKUEUE, RAYCLUSTERS
from kuberay.controllers.rayjob import RAYJOBS
from kuberay.controllers.rayservice import RAYSERVICES
from kuberay.devenv import binaries
from kuberay.devenv.kueue import (
    CLUSTER_QUEUES,
    LOCAL_QUEUES,
    NAMESPACE_LABEL,
    QUEUE_LABEL,
    RESOURCE_FLAVORS,
    WORKLOADS,
    Kueue,
)
from kuberay.devenv.pki import ADMIN
from kuberay.devenv.plane import Plane, PlaneConfig, running_plane
from kuberay.devenv.testing import (
    create_namespace,
    delete_namespace,
    has_condition,
    skip_unless_strict,
    unique_name,
    wait_for,
)
from kuberay.ray.dashboard import SUCCEEDED
from kuberay.runtime.client import (
    JOBS,
    NAMESPACES,
    SECRETS,
    SERVICES,
    KubeClient,
    Resource,
    load_kubeconfig,
)
from kuberay.runtime.errors import ApiError, Conflict

_KUEUE = "kueue.x-k8s.io"
ADMISSION_CHECKS = Resource(_KUEUE, "v1beta2", "admissionchecks", False, "AdmissionCheck")
MK_CONFIGS = Resource(_KUEUE, "v1beta2", "multikueueconfigs", False, "MultiKueueConfig")
MK_CLUSTERS = Resource(_KUEUE, "v1beta2", "multikueueclusters", False, "MultiKueueCluster")
# Kueue reads MultiKueueCluster Secrets from its own namespace (its Configuration's namespace).
KUEUE_NAMESPACE = "kueue-system"
MK_CONTROLLER = "kueue.x-k8s.io/multikueue"
PREBUILT_WORKLOAD_LABEL = "kueue.x-k8s.io/prebuilt-workload-name"
ORIGIN_LABEL = "kueue.x-k8s.io/multikueue-origin"
FLAVOR = "kuberay-default"
LOCAL_QUEUE = "user-queue"
FRAMEWORKS = ("ray.io/rayjob", "ray.io/raycluster", "ray.io/rayservice")
TIMEOUT = 120.0
# The field manager the apiserver records for test_rayservice's in-process operator.
MANAGER_OPERATOR_AGENT = "kuberay-rayservice-test"


def embedded_kubeconfig(plane: Plane) -> str:
    """The plane's admin kubeconfig with the CA and client credentials inline: MultiKueue
    refuses file paths in a kubeconfig it reads from a Secret."""

    def b64(path: Any) -> str:
        return base64.b64encode(path.read_bytes()).decode()

    doc = {
        "apiVersion": "v1",
        "kind": "Config",
        "clusters": [
            {
                "name": "worker",
                "cluster": {
                    "server": plane.server,
                    "certificate-authority-data": b64(plane.pki.ca_cert),
                },
            }
        ],
        "users": [
            {
                "name": "admin",
                "user": {
                    "client-certificate-data": b64(plane.pki.client_cert(ADMIN)),
                    "client-key-data": b64(plane.pki.client_key(ADMIN)),
                },
            }
        ],
        "contexts": [{"name": "worker", "context": {"cluster": "worker", "user": "admin"}}],
        "current-context": "worker",
    }
    return json.dumps(doc)


async def wait_condition(
    kube: KubeClient, res: Resource, name: str, namespace: str | None, ctype: str
) -> dict[str, Any]:
    """Waits until the object's condition ``ctype`` is True."""
    return await wait_for(
        kube,
        res,
        name,
        namespace,
        lambda o: has_condition(o, ctype),
        timeout=TIMEOUT,
        what=f"{res.kind} {name} {ctype}",
    )


@pytest.fixture(scope="module")
def worker_plane(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Plane]:
    try:
        binaries.ensure(["kueue"], log=lambda _line: None)
    except binaries.BuildError as exc:
        skip_unless_strict(f"kueue is not available: {exc}")
    config = PlaneConfig(directory=tmp_path_factory.mktemp("worker-plane"), nodes=2)
    with running_plane(config) as p:
        yield p


@pytest.fixture(scope="module")
async def worker_kube(worker_plane: Plane) -> AsyncIterator[KubeClient]:
    config = load_kubeconfig(worker_plane.kubeconfig)
    config.qps = 0
    async with KubeClient(config, user_agent="kuberay-tests-worker") as client:
        yield client


async def ensure_flavor(kube: KubeClient) -> None:
    flavor = {
        "apiVersion": RESOURCE_FLAVORS.api_version,
        "kind": "ResourceFlavor",
        "metadata": {"name": FLAVOR},
        "spec": {"nodeLabels": {"type": "kwok"}},
    }
    with contextlib.suppress(Conflict):
        await kube.create(RESOURCE_FLAVORS, flavor)


@pytest.fixture(scope="module")
async def multikueue(
    plane: Plane, kube: KubeClient, worker_plane: Plane, worker_kube: KubeClient
) -> AsyncIterator[str]:
    """Kueue on both planes and, on the manager, the worker as an Active MultiKueueCluster
    (its name)."""
    worker = Kueue(worker_plane, frameworks=FRAMEWORKS)
    manager = Kueue(plane, frameworks=FRAMEWORKS, feature_gates={"MultiKueue": True})
    await worker.start(worker_kube)
    try:
        await manager.start(kube)
        try:
            for client in (kube, worker_kube):
                await ensure_flavor(client)
            with contextlib.suppress(Conflict):
                await kube.create(NAMESPACES, {"metadata": {"name": KUEUE_NAMESPACE}})
            name = unique_name("worker")
            secret = {
                "apiVersion": "v1",
                "kind": "Secret",
                "metadata": {"name": name},
                "stringData": {"kubeconfig": embedded_kubeconfig(worker_plane)},
            }
            await kube.create(SECRETS, secret, KUEUE_NAMESPACE)
            cluster = {
                "apiVersion": MK_CLUSTERS.api_version,
                "kind": "MultiKueueCluster",
                "metadata": {"name": name},
                "spec": {
                    "clusterSource": {"kubeConfig": {"locationType": "Secret", "location": name}}
                },
            }
            await kube.create(MK_CLUSTERS, cluster)
            await wait_condition(kube, MK_CLUSTERS, name, None, "Active")
            yield name
            with contextlib.suppress(ApiError):
                await kube.delete(MK_CLUSTERS, name)
            with contextlib.suppress(ApiError):
                await kube.delete(SECRETS, name, KUEUE_NAMESPACE)
        finally:
            await manager.stop()
    finally:
        await worker.stop()


def cluster_queue(name: str, admission_check: str | None = None) -> dict[str, Any]:
    key, value = NAMESPACE_LABEL
    quota = [{"name": "cpu", "nominalQuota": "8"}, {"name": "memory", "nominalQuota": "64Gi"}]
    spec: dict[str, Any] = {
        "namespaceSelector": {"matchLabels": {key: value}},
        "resourceGroups": [
            {
                "coveredResources": ["cpu", "memory"],
                "flavors": [{"name": FLAVOR, "resources": quota}],
            }
        ],
    }
    if admission_check:
        spec["admissionChecksStrategy"] = {"admissionChecks": [{"name": admission_check}]}
    return {
        "apiVersion": CLUSTER_QUEUES.api_version,
        "kind": "ClusterQueue",
        "metadata": {"name": name},
        "spec": spec,
    }


async def queue_in(kube: KubeClient, namespace: str, cq: dict[str, Any]) -> None:
    """A Kueue-managed namespace with the LocalQueue on ``cq``, which is created and waited
    Active."""
    key, value = NAMESPACE_LABEL
    await kube.patch(NAMESPACES, namespace, {"metadata": {"labels": {key: value}}})
    await kube.create(CLUSTER_QUEUES, cq)
    lq = {
        "apiVersion": LOCAL_QUEUES.api_version,
        "kind": "LocalQueue",
        "metadata": {"name": LOCAL_QUEUE},
        "spec": {"clusterQueue": cq["metadata"]["name"]},
    }
    await kube.create(LOCAL_QUEUES, lq, namespace)
    await wait_condition(kube, CLUSTER_QUEUES, cq["metadata"]["name"], None, "Active")


@pytest.fixture
async def queues(
    kube: KubeClient, worker_kube: KubeClient, namespace: str, multikueue: str
) -> AsyncIterator[dict[str, str]]:
    """The test's namespace queued on both planes; the manager's queue dispatches through
    MultiKueue to the worker. Yields the names: ``mk`` (MultiKueueConfig and AdmissionCheck),
    ``manager`` and ``worker`` (ClusterQueues)."""
    await create_namespace(worker_kube, namespace)
    names = {"mk": unique_name("mk"), "manager": unique_name("cq"), "worker": unique_name("cq")}
    config = {
        "apiVersion": MK_CONFIGS.api_version,
        "kind": "MultiKueueConfig",
        "metadata": {"name": names["mk"]},
        "spec": {"clusters": [multikueue]},
    }
    await kube.create(MK_CONFIGS, config)
    check = {
        "apiVersion": ADMISSION_CHECKS.api_version,
        "kind": "AdmissionCheck",
        "metadata": {"name": names["mk"]},
        "spec": {
            "controllerName": MK_CONTROLLER,
            "parameters": {"apiGroup": _KUEUE, "kind": "MultiKueueConfig", "name": names["mk"]},
        },
    }
    await kube.create(ADMISSION_CHECKS, check)
    await wait_condition(kube, ADMISSION_CHECKS, names["mk"], None, "Active")
    await queue_in(worker_kube, namespace, cluster_queue(names["worker"]))
    await queue_in(kube, namespace, cluster_queue(names["manager"], names["mk"]))
    yield names
    with contextlib.suppress(ApiError):
        await kube.delete(CLUSTER_QUEUES, names["manager"])
    with contextlib.suppress(ApiError):
        await worker_kube.delete(CLUSTER_QUEUES, names["worker"])
    for res in (ADMISSION_CHECKS, MK_CONFIGS):
        with contextlib.suppress(ApiError):
            await kube.delete(res, names["mk"])
    await delete_namespace(worker_kube, namespace)


class Writes:
    """Every API write an operator made (method, path), to show it left objects alone."""

    def __init__(self) -> None:
        self.seen: list[tuple[str, str]] = []

    async def __call__(self, when: str, method: str, path: str, _obj: Any) -> None:
        if when == "after":
            self.seen.append((method, path))


async def unfinalize(kube: KubeClient, namespace: str, resources: tuple[Resource, ...]) -> None:
    for res in resources:
        for item in (await kube.list(res, namespace))["items"]:
            with contextlib.suppress(ApiError):
                patch: dict[str, Any] = {"metadata": {"finalizers": []}}
                await kube.patch(res, item["metadata"]["name"], patch, namespace)


@contextlib.asynccontextmanager
async def both_running(
    manager: Any, worker: Any, clients: tuple[KubeClient, ...], namespace: str, kind: Resource
) -> AsyncIterator[None]:
    """The two in-process operators running; afterwards stopped, and our finalizers dropped
    from what is left of ``kind`` and its clusters on both planes (the namespace goes next)."""
    await manager.start()
    await worker.start()
    try:
        yield
    finally:
        await worker.stop()
        await manager.stop()
        for client in clients:
            await unfinalize(client, namespace, (kind, RAYCLUSTERS))


@pytest.fixture
async def job_operators(
    plane: Plane,
    kube: KubeClient,
    worker_plane: Plane,
    worker_kube: KubeClient,
    namespace: str,
    queues: dict[str, str],
) -> AsyncIterator[tuple[Operator, Operator, Writes]]:
    """Our RayJob operator on the manager (its writes recorded) and on the worker."""
    manager = Operator(plane, kube, namespace)
    writes = Writes()
    manager.hooks.append(writes)
    worker = Operator(worker_plane, worker_kube, namespace)
    async with both_running(manager, worker, (kube, worker_kube), namespace, RAYJOBS):
        yield manager, worker, writes


async def test_rayjob_dispatched_to_worker_and_status_flows_back(
    kube: KubeClient,
    worker_kube: KubeClient,
    namespace: str,
    job_operators: tuple[Operator, Operator, Writes],
) -> None:
    manager_op, worker_op, manager_writes = job_operators
    body = make_rayjob("mk", "sleep 600", shutdownAfterJobFinishes=True)
    body["metadata"]["labels"] = {QUEUE_LABEL: LOCAL_QUEUE}
    body["spec"]["managedBy"] = MANAGED_BY_MULTIKUEUE
    created = await kube.create(RAYJOBS, body, namespace)
    assert created["spec"]["suspend"] is True  # Kueue's webhook queues it
    local_wl = await workload_of(kube, namespace, created)

    # Kueue copies the job to the worker, handing it to the worker's controller there.
    remote = await wait_for(
        worker_kube, RAYJOBS, "mk", namespace, lambda o: True, timeout=TIMEOUT, what="remote"
    )
    assert "managedBy" not in remote["spec"], remote["spec"]
    assert remote["metadata"]["labels"][PREBUILT_WORKLOAD_LABEL] == local_wl["metadata"]["name"]
    assert ORIGIN_LABEL in remote["metadata"]["labels"]
    running = await wait_for(
        worker_kube,
        RAYJOBS,
        "mk",
        namespace,
        lambda o: deployment(o) == "Running",
        timeout=TIMEOUT,
        what="Running on the worker",
    )
    status = running["status"]

    # The worker's status reaches the manager's object, whose own operator never acts.
    await wait_for(
        kube,
        RAYJOBS,
        "mk",
        namespace,
        lambda o: deployment(o) == "Running" and o["status"].get("jobId") == status["jobId"],
        timeout=TIMEOUT,
        what="Running copied to the manager",
    )
    await wait_condition(kube, WORKLOADS, local_wl["metadata"]["name"], namespace, "Admitted")

    worker_op.dashboard(status["rayClusterName"]).set_job_status(status["jobId"], SUCCEEDED)
    done = await wait_for(
        kube,
        RAYJOBS,
        "mk",
        namespace,
        lambda o: deployment(o) == "Complete",
        timeout=TIMEOUT,
        what="Complete copied to the manager",
    )
    assert done["status"]["jobStatus"] == SUCCEEDED
    assert done["status"]["rayClusterName"] == status["rayClusterName"]
    await wait_condition(kube, WORKLOADS, local_wl["metadata"]["name"], namespace, "Finished")

    # Exactly one submission, on the worker.
    dash = worker_op.dashboard(status["rayClusterName"])
    assert dict(dash.jobs_started) == {status["jobId"]: 1}
    assert [name for name, _uid in worker_op.submitter_jobs] == ["mk"]
    # Nothing of ours on the manager: no cluster, no submitter, no write at all.
    assert (await kube.list(RAYCLUSTERS, namespace))["items"] == []
    assert (await kube.list(JOBS, namespace))["items"] == []
    assert manager_op.submitter_jobs == []
    assert manager_writes.seen == [], manager_writes.seen
    assert manager_op.registry.clients_made == 0


@pytest.fixture
async def service_operators(
    plane: Plane,
    worker_plane: Plane,
    kube: KubeClient,
    worker_kube: KubeClient,
    namespace: str,
    queues: dict[str, str],
) -> AsyncIterator[tuple[rs.Operator, rs.Operator]]:
    """Our RayService operator on the manager and on the worker."""
    manager, worker = rs.Operator(plane, namespace), rs.Operator(worker_plane, namespace)
    async with both_running(manager, worker, (kube, worker_kube), namespace, RAYSERVICES):
        yield manager, worker


async def ready_cluster(kube: KubeClient, namespace: str, name: str) -> str:
    """Waits until the RayService is Ready; its active cluster's name."""
    ready = await wait_for(
        kube,
        RAYSERVICES,
        name,
        namespace,
        lambda o: rs.is_ready(o) and bool(rs.active_name(o)),
        timeout=TIMEOUT,
        what="Ready with an active cluster",
    )
    return str(rs.active_name(ready))


async def test_rayservice_dispatched_to_worker_and_status_flows_back(
    kube: KubeClient,
    worker_kube: KubeClient,
    namespace: str,
    service_operators: tuple[rs.Operator, rs.Operator],
) -> None:
    manager_op, worker_op = service_operators
    body = rs.rayservice("svc")
    body["metadata"]["labels"] = {QUEUE_LABEL: LOCAL_QUEUE}
    body["spec"]["managedBy"] = MANAGED_BY_MULTIKUEUE
    created = await kube.create(RAYSERVICES, body, namespace)
    # Kueue's RayService integration queues through the cluster config's suspend.
    assert created["spec"]["rayClusterConfig"]["suspend"] is True
    local_wl = await workload_of(kube, namespace, created)

    remote = await wait_for(
        worker_kube, RAYSERVICES, "svc", namespace, lambda o: True, timeout=TIMEOUT, what="remote"
    )
    assert "managedBy" not in remote["spec"], remote["spec"]
    assert remote["metadata"]["labels"][PREBUILT_WORKLOAD_LABEL] == local_wl["metadata"]["name"]
    # The worker's Kueue admits it (suspend cleared) and our operator there brings it up.
    active = await ready_cluster(worker_kube, namespace, "svc")
    cluster = await worker_kube.get(RAYCLUSTERS, active, namespace)
    assert not cluster["spec"].get("suspend")
    assert worker_op.dashboard(active).serve_updates == 1
    # One cluster on the worker: admission resumed the queued one rather than replacing it.
    assert await rs.cluster_names(worker_kube, namespace) == {active}

    copied = await wait_for(
        kube,
        RAYSERVICES,
        "svc",
        namespace,
        lambda o: rs.is_ready(o) and rs.active_name(o) == active,
        timeout=TIMEOUT,
        what="Ready copied to the manager",
    )
    assert copied["status"]["serviceStatus"] == "Running"
    await wait_condition(kube, WORKLOADS, local_wl["metadata"]["name"], namespace, "Admitted")
    # Nothing of ours on the manager: no cluster, no Service, no finalizer, no field written.
    assert (await kube.list(RAYCLUSTERS, namespace))["items"] == []
    assert (await kube.list(SERVICES, namespace))["items"] == []
    assert not copied["metadata"].get("finalizers")
    writers = {f["manager"] for f in copied["metadata"].get("managedFields") or []}
    assert MANAGER_OPERATOR_AGENT not in writers, writers
    # (The same operator's name does show on the worker's object, which it writes.)
    ready = await worker_kube.get(RAYSERVICES, "svc", namespace)
    assert MANAGER_OPERATOR_AGENT in {f["manager"] for f in ready["metadata"]["managedFields"]}
    assert manager_op.registry.dashboards == {}


async def test_rayservice_evicted_and_readmitted_by_kueue_keeps_its_cluster(
    worker_plane: Plane,
    worker_kube: KubeClient,
    namespace: str,
    queues: dict[str, str],
) -> None:
    """Kueue evicts and readmits a RayService by toggling ``rayClusterConfig.suspend``; the
    operator applies each toggle to the same cluster in place (upstream: shouldUpdateCluster).
    On the worker plane alone: a drained ClusterQueue evicts deterministically, which the
    MultiKueue run above cannot (there Kueue usually admits before the cluster exists)."""
    op = rs.Operator(worker_plane, namespace)
    await op.start()
    try:
        body = rs.rayservice("svc")
        body["metadata"]["labels"] = {QUEUE_LABEL: LOCAL_QUEUE}
        await worker_kube.create(RAYSERVICES, body, namespace)
        active = await ready_cluster(worker_kube, namespace, "svc")

        drain = {"spec": {"stopPolicy": "HoldAndDrain"}}
        await worker_kube.patch(CLUSTER_QUEUES, queues["worker"], drain)
        suspended = await wait_condition(
            worker_kube, RAYCLUSTERS, active, namespace, "RayClusterSuspended"
        )
        assert suspended["spec"]["suspend"] is True
        svc = await worker_kube.get(RAYSERVICES, "svc", namespace)
        assert svc["spec"]["rayClusterConfig"]["suspend"] is True

        resume = {"spec": {"stopPolicy": "None"}}
        await worker_kube.patch(CLUSTER_QUEUES, queues["worker"], resume)
        await wait_for(
            worker_kube,
            RAYCLUSTERS,
            active,
            namespace,
            lambda o: not o["spec"].get("suspend") and o["status"].get("state") == "ready",
            timeout=TIMEOUT,
            what="the same cluster resumed",
        )
        again = await wait_for(
            worker_kube,
            RAYSERVICES,
            "svc",
            namespace,
            lambda o: rs.is_ready(o) and rs.active_name(o) == active,
            timeout=TIMEOUT,
            what="Ready again on the same cluster",
        )
        assert not again["spec"]["rayClusterConfig"].get("suspend")
        assert await rs.cluster_names(worker_kube, namespace) == {active}
    finally:
        await op.stop()
        await unfinalize(worker_kube, namespace, (RAYSERVICES, RAYCLUSTERS))
