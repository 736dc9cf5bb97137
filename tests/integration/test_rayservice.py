"""RayService controller on the real plane (KWOK) with the in-process fake Ray dashboard.

The operator runs in the test's event loop (a Manager with the RayCluster and RayService
controllers, watching only the test's namespace) so the fake dashboard can be injected; its
Serve applications turn RUNNING by themselves shortly after each config PUT. KWOK pods run no
serve proxy, so the head pod's ``ray.io/serve`` label follows the dashboard's app statuses
(the proxy probe is disabled here). The fake dashboards outlive an operator, as Ray clusters
do, so a restart test sees the same Serve state a real restart would.
"""

from __future__ import annotations

import asyncio
import contextlib
import copy
import time
from collections.abc import AsyncIterator, Callable
from typing import Any

import pytest

from kuberay.api.constants import ANNOTATION_DELETION_AT, ANNOTATION_SERVE_CONFIG_HASH, RAYCLUSTERS
from kuberay.builders import gateway as gwb
from kuberay.controllers.raycluster import RayClusterConfig
from kuberay.controllers.raycluster import register as register_raycluster
from kuberay.controllers.rayservice import (
    GATEWAYS,
    HTTPROUTES,
    RAYSERVICES,
    RayServiceConfig,
    RayServiceReconciler,
)
from kuberay.controllers.rayservice import register as register_rayservice
from kuberay.devenv.gatewayapi import GatewayApiUnavailable, install_gateway_api
from kuberay.devenv.plane import Plane
from kuberay.devenv.testing import (
    condition,
    reconcile_trace,
    skip_unless_strict,
    wait_for,
    wait_gone,
    wait_until,
)
from kuberay.ray.fake import FakeDashboard, FakeDashboardRegistry
from kuberay.runtime.client import PODS, SERVICES, KubeClient, load_kubeconfig
from kuberay.runtime.errors import ApiError, NotFound
from kuberay.runtime.events import EVENTS_V1
from kuberay.runtime.manager import Manager, ManagerOptions

SERVE_CONFIG = """\
applications:
  - name: fruit
    import_path: fruit.deployment_graph
    route_prefix: /fruit
    deployments:
      - name: MangoStand
        num_replicas: 1
  - name: math
    import_path: conditional_dag.serve_dag
    route_prefix: /calc
"""


def cluster_spec(image: str = "rayproject/ray:2.52.0", workers: int = 1) -> dict[str, Any]:
    ports = [
        {"name": "gcs-server", "containerPort": 6379},
        {"name": "dashboard", "containerPort": 8265},
        {"name": "client", "containerPort": 10001},
        {"name": "serve", "containerPort": 8000},
    ]
    container = {
        "name": "ray-head",
        "image": image,
        "ports": ports,
        "resources": {"limits": {"cpu": "1", "memory": "1Gi"}},
    }
    worker = {
        "name": "ray-worker",
        "image": image,
        "resources": {"limits": {"cpu": "1", "memory": "1Gi"}},
    }
    return {
        "rayVersion": "2.52.0",
        "headGroupSpec": {"rayStartParams": {}, "template": {"spec": {"containers": [container]}}},
        "workerGroupSpecs": [
            {
                "groupName": "workers",
                "replicas": workers,
                "minReplicas": 0,
                "maxReplicas": 10,
                "rayStartParams": {},
                "template": {"spec": {"containers": [worker]}},
            }
        ],
    }


def rayservice(name: str, **spec: Any) -> dict[str, Any]:
    body: dict[str, Any] = {
        "serveConfigV2": SERVE_CONFIG,
        "rayClusterConfig": cluster_spec(),
        "rayClusterDeletionDelaySeconds": 2,
    }
    body.update(spec)
    return {
        "apiVersion": "ray.io/v1",
        "kind": "RayService",
        "metadata": {"name": name},
        "spec": body,
    }


class RecordingRegistry(FakeDashboardRegistry):
    """Fake dashboards that remember the ``target_capacity`` of every Serve config PUT (per
    base URL), and can run a hook right after one (crash injection)."""

    def __init__(self, **options: Any) -> None:
        super().__init__(**options)
        self.puts: dict[str, list[Any]] = {}
        self.after_put: Callable[[FakeDashboard, dict[str, Any]], None] | None = None

    def get(self, base_url: str) -> FakeDashboard:
        known = base_url.rstrip("/") in self.dashboards
        dashboard = super().get(base_url)
        if not known:
            original = dashboard.update_serve_config
            history = self.puts.setdefault(dashboard.base_url, [])

            async def recording(config: dict[str, Any]) -> None:
                await original(config)
                history.append(config.get("target_capacity"))
                if self.after_put is not None:
                    self.after_put(dashboard, config)

            dashboard.update_serve_config = recording  # type: ignore[method-assign]
        return dashboard

    def capacities(self, cluster: str) -> list[Any]:
        return [
            p for url, puts in self.puts.items() if f"//{cluster}-head-svc." in url for p in puts
        ]


class Operator:
    """An in-process operator (RayCluster + RayService controllers) for one namespace that can
    be stopped and started again; the fake dashboards outlive it."""

    def __init__(self, plane: Plane, namespace: str) -> None:
        self.plane = plane
        self.namespace = namespace
        self.registry = RecordingRegistry(serve_settle_seconds=1.0)
        self.client: KubeClient | None = None
        self.reconciler: RayServiceReconciler | None = None
        self.stop_event = asyncio.Event()
        self.task: asyncio.Task[int] | None = None
        self.trace = reconcile_trace()  # before any Manager: its controllers are traced

    def dashboard(self, cluster: str) -> FakeDashboard:
        return self.registry.get(
            f"http://{cluster}-head-svc.{self.namespace}.svc.cluster.local:8265"
        )

    async def start(self) -> None:
        config = load_kubeconfig(self.plane.kubeconfig)
        config.qps = 0
        self.client = KubeClient(config, user_agent="kuberay-rayservice-test")
        mgr = Manager(
            self.client,
            ManagerOptions(metrics_addr=None, probe_addr=None, leader_election=False),
        )
        register_raycluster(mgr, RayClusterConfig(), [self.namespace])
        rs = RayServiceConfig(requeue_seconds=0.5, health_probe=None)
        self.reconciler = register_rayservice(mgr, rs, [self.namespace], self.registry)
        self.stop_event = asyncio.Event()
        self.task = asyncio.create_task(mgr.run(self.stop_event))
        waiter = asyncio.create_task(mgr.leading.wait())
        done, _ = await asyncio.wait({waiter, self.task}, timeout=30, return_when="FIRST_COMPLETED")
        if waiter not in done:
            waiter.cancel()
            raise AssertionError("operator did not start")

    async def stop(self) -> None:
        if self.task is not None:
            self.stop_event.set()
            with contextlib.suppress(asyncio.CancelledError):
                await asyncio.wait_for(self.task, 30)
            self.task = None
        if self.client is not None:
            await self.client.close()
            self.client = None


@pytest.fixture(scope="module")
async def crds(kube: KubeClient) -> None:
    from operator_fixture import install_crds

    await install_crds(kube)


@pytest.fixture
async def operator(
    plane: Plane, kube: KubeClient, namespace: str, crds: None
) -> AsyncIterator[Operator]:
    op = Operator(plane, namespace)
    await op.start()
    yield op
    await op.stop()
    for item in (await kube.list(RAYSERVICES, namespace))["items"]:
        with contextlib.suppress(ApiError):
            await kube.patch(
                RAYSERVICES, item["metadata"]["name"], {"metadata": {"finalizers": []}}, namespace
            )


def active_name(obj: dict[str, Any]) -> str:
    return str(
        ((obj.get("status") or {}).get("activeServiceStatus") or {}).get("rayClusterName") or ""
    )


def pending_name(obj: dict[str, Any]) -> str:
    return str(
        ((obj.get("status") or {}).get("pendingServiceStatus") or {}).get("rayClusterName") or ""
    )


def is_ready(obj: dict[str, Any]) -> bool:
    ready = condition(obj, "Ready")
    return ready is not None and ready["status"] == "True"


async def wait_service(
    kube: KubeClient, ns: str, name: str, predicate: Any, what: str, timeout: float = 60
) -> dict[str, Any]:
    return await wait_for(kube, RAYSERVICES, name, ns, predicate, timeout=timeout, what=what)


async def cluster_names(kube: KubeClient, ns: str) -> set[str]:
    items = (await kube.list(RAYCLUSTERS, ns))["items"]
    return {i["metadata"]["name"] for i in items if not i["metadata"].get("deletionTimestamp")}


async def selector_of(kube: KubeClient, ns: str, name: str) -> str:
    svc = await kube.get(SERVICES, name, ns)
    return str(svc["spec"]["selector"].get("ray.io/cluster"))


async def deploy(kube: KubeClient, ns: str, name: str) -> dict[str, Any]:
    await kube.create(RAYSERVICES, rayservice(name), ns)
    return await wait_service(
        kube,
        ns,
        name,
        lambda o: is_ready(o) and not pending_name(o) and bool(active_name(o)),
        "Ready with an active cluster",
    )


# --------------------------------------------------------------------------- tests


async def test_initial_deploy_reaches_ready(
    kube: KubeClient, namespace: str, operator: Operator
) -> None:
    obj = await deploy(kube, namespace, "svc")
    status = obj["status"]
    active = active_name(obj)
    assert active.startswith("svc-")
    assert len(active) == len("svc-") + 5
    assert obj["metadata"]["finalizers"] == ["ray.io/rayservice-finalizer"]
    assert status["serviceStatus"] == "Running"
    assert status["numServeEndpoints"] >= 1
    assert condition(obj, "Ready")["reason"] == "NonZeroServeEndpoints"  # type: ignore[index]
    upgrade = condition(obj, "UpgradeInProgress")
    assert upgrade is not None
    assert upgrade["status"] == "False"
    assert upgrade["reason"] == "NoPendingCluster"
    apps = status["activeServiceStatus"]["applicationStatuses"]
    assert set(apps) == {"fruit", "math"}
    assert all(a["status"] == "RUNNING" for a in apps.values())
    assert apps["fruit"]["serveDeploymentStatuses"]["MangoStand"]["status"] == "HEALTHY"
    # The cluster: labels, annotations, owner.
    cluster = await kube.get(RAYCLUSTERS, active, namespace)
    meta = cluster["metadata"]
    assert meta["labels"]["ray.io/originated-from-cr-name"] == "svc"
    assert meta["labels"]["ray.io/originated-from-crd"] == "RayService"
    assert meta["annotations"]["ray.io/kuberay-version"]
    assert meta["annotations"]["ray.io/num-worker-groups"] == "1"
    assert meta["annotations"]["ray.io/hash-without-replicas-and-workers-to-delete"]
    # Applying Serve config never writes the cluster (upstream e2e compares it whole).
    assert ANNOTATION_SERVE_CONFIG_HASH not in meta["annotations"]
    assert meta["ownerReferences"][0]["kind"] == "RayService"
    assert meta["ownerReferences"][0]["controller"] is True
    # Services point at the active cluster; the serve Service selects serving pods only.
    assert await selector_of(kube, namespace, "svc-head-svc") == active
    head_svc = await kube.get(SERVICES, "svc-head-svc", namespace)
    # Upstream's labels exactly: a ray.io/cluster selector matches only the cluster's Service.
    assert head_svc["metadata"]["labels"] == {
        "ray.io/originated-from-cr-name": "svc",
        "ray.io/originated-from-crd": "RayService",
        "ray.io/node-type": "head",
        "ray.io/identifier": "svc-head",
    }
    serve = await kube.get(SERVICES, "svc-serve-svc", namespace)
    assert serve["spec"]["selector"] == {"ray.io/cluster": active, "ray.io/serve": "true"}
    # The Serve config went to the dashboard once, as JSON.
    fake = operator.dashboard(active)
    assert fake.serve_updates == 1
    assert [a["name"] for a in (fake.serve_config or {})["applications"]] == ["fruit", "math"]
    # Head pod labelled serving from the apps' status.
    heads = await kube.list(
        PODS, namespace, label_selector=f"ray.io/cluster={active},ray.io/node-type=head"
    )
    assert heads["items"][0]["metadata"]["labels"]["ray.io/serve"] == "true"


async def test_serve_config_change_applied_in_place(
    kube: KubeClient, namespace: str, operator: Operator
) -> None:
    obj = await deploy(kube, namespace, "inplace")
    active = active_name(obj)
    fake = operator.dashboard(active)
    new_config = SERVE_CONFIG.replace("num_replicas: 1", "num_replicas: 3")
    await kube.patch(RAYSERVICES, "inplace", {"spec": {"serveConfigV2": new_config}}, namespace)

    async def reapplied() -> bool:
        return fake.serve_updates == 2

    await wait_until(reapplied, what="the new serve config PUT", timeout=30)
    deployments = (fake.serve_config or {})["applications"][0]["deployments"]
    assert deployments[0]["num_replicas"] == 3
    obj = await wait_service(
        kube,
        namespace,
        "inplace",
        lambda o: (
            is_ready(o)
            and all(
                a["status"] == "RUNNING"
                for a in o["status"]["activeServiceStatus"]["applicationStatuses"].values()
            )
        ),
        "apps RUNNING again",
    )
    assert active_name(obj) == active
    assert not pending_name(obj)
    assert await cluster_names(kube, namespace) == {active}
    # Two reconciles that saw the apps RUNNING again (the periodic requeue is 0.5 s) compared
    # the config with Serve's: neither may PUT it again.
    await operator.trace.wait_processed("rayservice", "rayservices", obj, count=2)
    assert fake.serve_updates == 2, "the same config is never PUT twice"


async def test_upgrades_off_serve_config_reaches_the_active_cluster_despite_spec_change(
    kube: KubeClient, namespace: str, operator: Operator
) -> None:
    """``upgradeStrategy: None``: no new cluster ever comes, so a serve config changed together
    with the cluster spec goes to the active cluster (upstream's
    TestUpdateServeConfigAndRayClusterSpecWithUpgradeDisabled)."""
    await kube.create(
        RAYSERVICES, rayservice("noupgrade", upgradeStrategy={"type": "None"}), namespace
    )
    obj = await wait_service(
        kube,
        namespace,
        "noupgrade",
        lambda o: is_ready(o) and bool(active_name(o)),
        "Ready with an active cluster",
    )
    active = active_name(obj)
    fake = operator.dashboard(active)
    spec = copy.deepcopy(obj["spec"]["rayClusterConfig"])
    spec["headGroupSpec"]["template"]["spec"]["containers"][0]["env"] = [
        {"name": "FOO", "value": "BAR"}
    ]
    new_config = SERVE_CONFIG.replace("num_replicas: 1", "num_replicas: 3")
    patch = {"spec": {"serveConfigV2": new_config, "rayClusterConfig": spec}}
    await kube.patch(RAYSERVICES, "noupgrade", patch, namespace)

    async def reapplied() -> bool:
        return fake.serve_updates == 2

    await wait_until(reapplied, what="the new serve config PUT to the active cluster", timeout=30)
    assert (fake.serve_config or {})["applications"][0]["deployments"][0]["num_replicas"] == 3
    assert await cluster_names(kube, namespace) == {active}
    obj = await kube.get(RAYSERVICES, "noupgrade", namespace)
    assert active_name(obj) == active
    assert not pending_name(obj)


async def test_replica_change_updates_the_cluster_in_place(
    kube: KubeClient, namespace: str, operator: Operator
) -> None:
    obj = await deploy(kube, namespace, "scale")
    active = active_name(obj)
    spec = copy.deepcopy(obj["spec"]["rayClusterConfig"])
    spec["workerGroupSpecs"][0]["replicas"] = 2
    await kube.patch(RAYSERVICES, "scale", {"spec": {"rayClusterConfig": spec}}, namespace)
    updated = await wait_for(
        kube,
        RAYCLUSTERS,
        active,
        namespace,
        lambda o: o["spec"]["workerGroupSpecs"][0]["replicas"] == 2,
        what="replicas updated in place",
    )
    # A RayService reconcile that saw the updated cluster has finished: no pending cluster.
    await operator.trace.wait_processed("rayservice", "rayclusters", updated, owner="scale")
    obj = await kube.get(RAYSERVICES, "scale", namespace)
    assert active_name(obj) == active
    assert not pending_name(obj)
    assert await cluster_names(kube, namespace) == {active}
    assert operator.dashboard(active).serve_updates == 1


async def test_cluster_spec_change_runs_blue_green_upgrade(
    kube: KubeClient, namespace: str, operator: Operator
) -> None:
    obj = await deploy(kube, namespace, "bg")
    old = active_name(obj)
    spec = copy.deepcopy(obj["spec"]["rayClusterConfig"])
    spec["headGroupSpec"]["template"]["spec"]["containers"][0]["image"] = "rayproject/ray:2.53.0"
    await kube.patch(RAYSERVICES, "bg", {"spec": {"rayClusterConfig": spec}}, namespace)
    obj = await wait_service(kube, namespace, "bg", lambda o: bool(pending_name(o)), "pending")
    new = pending_name(obj)
    assert new != old
    upgrade = condition(obj, "UpgradeInProgress")
    assert upgrade is not None
    assert upgrade["status"] == "True"
    assert upgrade["reason"] == "BothActivePendingClustersExist"
    assert new in upgrade["message"], "the message says what the upgrade waits for"
    # Traffic stays on the old cluster until every app on the new one is RUNNING.
    assert await selector_of(kube, namespace, "bg-head-svc") == old
    obj = await wait_service(kube, namespace, "bg", lambda o: active_name(o) == new, "promotion")
    assert not pending_name(obj)
    assert await selector_of(kube, namespace, "bg-head-svc") == new
    assert await selector_of(kube, namespace, "bg-serve-svc") == new
    assert operator.dashboard(new).serve_updates == 1
    # The old cluster is marked for deletion, then deleted after the (2 s) delay.
    marked = await wait_for(
        kube,
        RAYCLUSTERS,
        old,
        namespace,
        lambda o: ANNOTATION_DELETION_AT in (o["metadata"].get("annotations") or {}),
        what="deletion scheduled",
    )
    assert marked["metadata"]["annotations"][ANNOTATION_DELETION_AT]
    await wait_gone(kube, RAYCLUSTERS, old, namespace, timeout=30)
    obj = await wait_service(kube, namespace, "bg", is_ready, "Ready after the upgrade")
    assert await cluster_names(kube, namespace) == {new}
    assert condition(obj, "UpgradeInProgress")["reason"] == "NoPendingCluster"  # type: ignore[index]


async def test_restart_mid_upgrade_completes_without_a_third_cluster(
    kube: KubeClient, namespace: str, operator: Operator
) -> None:
    obj = await deploy(kube, namespace, "rs")
    old = active_name(obj)
    spec = copy.deepcopy(obj["spec"]["rayClusterConfig"])
    spec["headGroupSpec"]["template"]["spec"]["containers"][0]["image"] = "rayproject/ray:2.53.0"
    await kube.patch(RAYSERVICES, "rs", {"spec": {"rayClusterConfig": spec}}, namespace)
    obj = await wait_service(kube, namespace, "rs", lambda o: bool(pending_name(o)), "pending")
    new = pending_name(obj)
    await wait_for(kube, RAYCLUSTERS, new, namespace, lambda _: True, what="pending created")
    await operator.stop()
    await operator.start()
    obj = await wait_service(kube, namespace, "rs", lambda o: active_name(o) == new, "promotion")
    await wait_gone(kube, RAYCLUSTERS, old, namespace, timeout=30)
    assert await cluster_names(kube, namespace) == {new}
    # The pending cluster got its Serve config exactly once, across the two lives.
    assert operator.dashboard(new).serve_updates == 1
    assert operator.dashboard(old).serve_updates == 1


async def test_restart_keeps_scheduled_deletion_time(
    kube: KubeClient, namespace: str, operator: Operator
) -> None:
    body = rayservice("keep", rayClusterDeletionDelaySeconds=600)
    await kube.create(RAYSERVICES, body, namespace)
    obj = await wait_service(
        kube, namespace, "keep", lambda o: is_ready(o) and bool(active_name(o)), "Ready"
    )
    old = active_name(obj)
    spec = copy.deepcopy(obj["spec"]["rayClusterConfig"])
    spec["workerGroupSpecs"][0]["template"]["spec"]["containers"][0]["image"] = "ray:other"
    await kube.patch(RAYSERVICES, "keep", {"spec": {"rayClusterConfig": spec}}, namespace)
    marked = await wait_for(
        kube,
        RAYCLUSTERS,
        old,
        namespace,
        lambda o: ANNOTATION_DELETION_AT in (o["metadata"].get("annotations") or {}),
        what="deletion scheduled",
        timeout=60,
    )
    due = marked["metadata"]["annotations"][ANNOTATION_DELETION_AT]
    await operator.stop()
    restarted = operator.trace.mark()
    await operator.start()
    # The new operator saw the marked cluster and reconciled the RayService since.
    await operator.trace.wait_processed(
        "rayservice", "rayclusters", marked, owner="keep", after=restarted
    )
    cluster = await kube.get(RAYCLUSTERS, old, namespace)
    assert cluster["metadata"]["annotations"][ANNOTATION_DELETION_AT] == due
    assert not cluster["metadata"].get("deletionTimestamp")


async def test_delete_removes_clusters_then_finalizer(
    kube: KubeClient, namespace: str, operator: Operator
) -> None:
    obj = await deploy(kube, namespace, "gone")
    active = active_name(obj)
    await kube.delete(RAYSERVICES, "gone", namespace)
    await wait_gone(kube, RAYSERVICES, "gone", namespace, timeout=30)
    with contextlib.suppress(NotFound):
        cluster = await kube.get(RAYCLUSTERS, active, namespace)
        assert cluster["metadata"].get("deletionTimestamp")


async def test_initializing_keeps_both_conditions_initializing(
    kube: KubeClient, namespace: str, operator: Operator
) -> None:
    """Upstream keeps Ready and UpgradeInProgress False/Initializing until a cluster serves,
    also once a pending cluster exists (here one whose head can never be scheduled)."""
    spec = cluster_spec()
    spec["headGroupSpec"]["template"]["spec"]["nodeSelector"] = {"example.com/none": "x"}
    await kube.create(RAYSERVICES, rayservice("init", rayClusterConfig=spec), namespace)
    obj = await wait_service(
        kube, namespace, "init", lambda o: bool(pending_name(o)), "a pending cluster"
    )
    assert_initializing(obj)
    await wait_for(kube, RAYCLUSTERS, pending_name(obj), namespace, lambda _: True)
    obj = await kube.get(RAYSERVICES, "init", namespace)
    assert_initializing(obj)
    assert not active_name(obj)


def assert_initializing(obj: dict[str, Any]) -> None:
    for ctype in ("Ready", "UpgradeInProgress"):
        cond = condition(obj, ctype)
        assert cond is not None, ctype
        assert (cond["status"], cond["reason"], cond["message"]) == (
            "False",
            "Initializing",
            "RayService is initializing",
        ), ctype


async def test_initializing_timeout_is_terminal(
    kube: KubeClient, namespace: str, operator: Operator
) -> None:
    body = rayservice("slow")
    # The head pod can never be scheduled, so the service cannot become ready; the timeout is
    # long enough for the pass after the one that names the cluster to create it even on a
    # loaded machine (the condition's time is whole seconds: "1s" could end after 0.1 s).
    head = body["spec"]["rayClusterConfig"]["headGroupSpec"]["template"]["spec"]
    head["nodeSelector"] = {"kuberay.io/test": "no-such-node"}
    body["metadata"]["annotations"] = {"ray.io/initializing-timeout": "5s"}
    await kube.create(RAYSERVICES, body, namespace)
    obj = await wait_service(
        kube,
        namespace,
        "slow",
        lambda o: (condition(o, "Ready") or {}).get("reason") == "InitializingTimeout",
        "InitializingTimeout",
    )
    assert condition(obj, "Ready")["status"] == "False"  # type: ignore[index]
    assert not active_name(obj)
    assert not pending_name(obj)

    async def no_clusters() -> bool:
        return not await cluster_names(kube, namespace)

    await wait_until(no_clusters, what="clusters deleted", timeout=30)
    # The operator saw every deletion, then reconciled the RayService (the last deletion's
    # event is what enqueues it: a timed-out RayService without clusters is not requeued):
    # that pass must not make a new cluster.
    gone = [
        await operator.trace.wait_applied("rayclusters", namespace, name, deleted=True)
        for name in operator.trace.names("rayclusters", namespace)
    ]
    assert gone, "the operator had made a cluster"
    await operator.trace.wait_reconciled("rayservice", namespace, "slow", after=max(gone))
    assert not await cluster_names(kube, namespace), "no new cluster after the timeout"
    obj = await kube.get(RAYSERVICES, "slow", namespace)
    assert condition(obj, "Ready")["reason"] == "InitializingTimeout"  # type: ignore[index]


async def test_suspend_deletes_everything_and_resume_redeploys(
    kube: KubeClient, namespace: str, operator: Operator
) -> None:
    obj = await deploy(kube, namespace, "sus")
    first = active_name(obj)
    await kube.patch(RAYSERVICES, "sus", {"spec": {"suspend": True}}, namespace)
    obj = await wait_service(
        kube,
        namespace,
        "sus",
        lambda o: (condition(o, "Suspended") or {}).get("status") == "True",
        "Suspended",
    )
    assert condition(obj, "Suspended")["reason"] == "SuspendComplete"  # type: ignore[index]
    assert condition(obj, "Suspending")["status"] == "False"  # type: ignore[index]
    assert condition(obj, "Ready")["reason"] == "SuspendComplete"  # type: ignore[index]
    for kept in ("UpgradeInProgress", "RollbackInProgress"):  # kept as False, not removed
        cond = condition(obj, kept)
        assert cond is not None, kept
        assert (cond["status"], cond["reason"]) == ("False", "SuspendComplete")
    assert not active_name(obj)
    assert obj["status"]["numServeEndpoints"] == 0
    assert obj["status"].get("serviceStatus", "") == ""
    assert not await cluster_names(kube, namespace)
    services = await kube.list(
        SERVICES, namespace, label_selector="ray.io/originated-from-cr-name=sus"
    )
    assert not [s for s in services["items"] if not s["metadata"].get("deletionTimestamp")]

    async def deletions_reported() -> bool:
        events = (await kube.list(EVENTS_V1, namespace))["items"]
        reasons = {e["reason"] for e in events if e["regarding"]["name"] == "sus"}
        return {"DeletedRayCluster", "DeletedService"} <= reasons

    await wait_until(deletions_reported, timeout=10, what="DeletedRayCluster and DeletedService")
    await kube.patch(RAYSERVICES, "sus", {"spec": {"suspend": False}}, namespace)
    obj = await wait_service(
        kube,
        namespace,
        "sus",
        lambda o: is_ready(o) and bool(active_name(o)) and not pending_name(o),
        "Ready after resume",
    )
    assert active_name(obj) != first
    resumed = condition(obj, "Suspended")
    assert resumed is not None
    assert (resumed["status"], resumed["reason"]) == ("False", "RayServiceResumed")
    assert await selector_of(kube, namespace, "sus-head-svc") == active_name(obj)


async def test_spec_change_mid_upgrade_replaces_the_pending_cluster(
    kube: KubeClient, namespace: str, operator: Operator
) -> None:
    obj = await deploy(kube, namespace, "twice")
    first = active_name(obj)
    spec = copy.deepcopy(obj["spec"]["rayClusterConfig"])
    head = spec["headGroupSpec"]["template"]["spec"]["containers"][0]
    head["image"] = "rayproject/ray:2.53.0"
    await kube.patch(RAYSERVICES, "twice", {"spec": {"rayClusterConfig": spec}}, namespace)
    obj = await wait_service(kube, namespace, "twice", lambda o: bool(pending_name(o)), "pending")
    second = pending_name(obj)
    operator.dashboard(second).serve_settle_seconds = None  # its apps never get RUNNING
    obj = await wait_service(
        kube,
        namespace,
        "twice",
        lambda o: "DEPLOYING" in (condition(o, "UpgradeInProgress") or {}).get("message", ""),
        "the pending cluster's apps deploying",
    )
    assert await selector_of(kube, namespace, "twice-head-svc") == first
    head["image"] = "rayproject/ray:2.54.0"
    await kube.patch(RAYSERVICES, "twice", {"spec": {"rayClusterConfig": spec}}, namespace)
    obj = await wait_service(
        kube, namespace, "twice", lambda o: pending_name(o) not in ("", second), "new pending"
    )
    third = pending_name(obj)
    obj = await wait_service(
        kube, namespace, "twice", lambda o: active_name(o) == third, "promotion of the third"
    )
    await wait_gone(kube, RAYCLUSTERS, second, namespace, timeout=30)
    await wait_gone(kube, RAYCLUSTERS, first, namespace, timeout=30)
    assert await cluster_names(kube, namespace) == {third}


# --------------------------------------------------------------------------- incremental upgrade


@pytest.fixture(scope="module")
async def gateway_api(kube: KubeClient) -> None:
    """The real Gateway API CRDs (from the Go module pinned in controlplane/gateway-api)."""
    try:
        await install_gateway_api(kube)
    except GatewayApiUnavailable as exc:
        if exc.no_go:
            skip_unless_strict(str(exc))
        raise


class FakeGatewayController:
    """Plays the Gateway API implementation the plane does not have: once ``enabled``, reports
    every Gateway of the namespace Accepted+Programmed and every HTTPRoute Accepted+ResolvedRefs
    for its parent Gateway."""

    def __init__(self, kube: KubeClient, namespace: str) -> None:
        self.kube = kube
        self.namespace = namespace
        self.enabled = False
        self.task: asyncio.Task[None] | None = None

    @staticmethod
    def _conditions(obj: dict[str, Any], *types: str) -> list[dict[str, Any]]:
        now = time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())
        return [
            {
                "type": t,
                "status": "True",
                "reason": t,
                "message": "fake gateway controller",
                "lastTransitionTime": now,
                "observedGeneration": obj["metadata"].get("generation", 1),
            }
            for t in types
        ]

    async def _sync(self) -> None:
        ns = self.namespace
        for gw in (await self.kube.list(GATEWAYS, ns))["items"]:
            if gwb.gateway_not_ready(gw):
                body = {"status": {"conditions": self._conditions(gw, "Accepted", "Programmed")}}
                await self.kube.patch(
                    GATEWAYS, gw["metadata"]["name"], body, ns, subresource="status"
                )
        for route in (await self.kube.list(HTTPROUTES, ns))["items"]:
            parent = route["spec"]["parentRefs"][0]["name"]
            if gwb.httproute_not_ready(route, parent):
                body = {
                    "status": {
                        "parents": [
                            {
                                "parentRef": {"name": parent, "namespace": ns},
                                "controllerName": "example.com/fake-gateway-controller",
                                "conditions": self._conditions(route, "Accepted", "ResolvedRefs"),
                            }
                        ]
                    }
                }
                await self.kube.patch(
                    HTTPROUTES, route["metadata"]["name"], body, ns, subresource="status"
                )

    async def _run(self) -> None:
        while True:
            if self.enabled:
                with contextlib.suppress(ApiError):
                    await self._sync()
            await asyncio.sleep(0.2)

    @contextlib.asynccontextmanager
    async def running(self) -> AsyncIterator[FakeGatewayController]:
        self.task = asyncio.create_task(self._run())
        try:
            yield self
        finally:
            self.task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self.task


def incremental_service(name: str, interval: int = 1) -> dict[str, Any]:
    body = rayservice(
        name,
        upgradeStrategy={
            "type": "NewClusterWithIncrementalUpgrade",
            "clusterUpgradeOptions": {
                "maxSurgePercent": 50,
                "stepSizePercent": 25,
                "intervalSeconds": interval,
                "gatewayClassName": "fake",
            },
        },
    )
    body["spec"]["rayClusterConfig"]["enableInTreeAutoscaling"] = True
    return body


def side(obj: dict[str, Any], which: str) -> dict[str, Any]:
    return dict((obj.get("status") or {}).get(f"{which}ServiceStatus") or {})


def upgrade_message(obj: dict[str, Any]) -> str:
    return str((condition(obj, "UpgradeInProgress") or {}).get("message", ""))


async def route_backends(kube: KubeClient, ns: str, name: str) -> list[tuple[str, int]]:
    route = await kube.get(HTTPROUTES, f"{name}-httproute", ns)
    refs = route["spec"]["rules"][0]["backendRefs"]
    return [(r["name"], r["weight"]) for r in refs]


async def start_incremental_upgrade(
    kube: KubeClient, ns: str, name: str, interval: int = 1
) -> tuple[str, str, dict[str, Any]]:
    """Deploys an incremental RayService, changes its cluster spec; returns (old, new, the
    original cluster spec) once the new cluster waits for the Gateway."""
    await kube.create(RAYSERVICES, incremental_service(name, interval), ns)
    obj = await wait_service(
        kube, ns, name, lambda o: is_ready(o) and bool(active_name(o)), "Ready", timeout=90
    )
    old = active_name(obj)
    original = copy.deepcopy(obj["spec"]["rayClusterConfig"])
    spec = copy.deepcopy(original)
    spec["headGroupSpec"]["template"]["spec"]["containers"][0]["image"] = "rayproject/ray:2.53.0"
    await kube.patch(RAYSERVICES, name, {"spec": {"rayClusterConfig": spec}}, ns)
    obj = await wait_service(
        kube,
        ns,
        name,
        lambda o: bool(pending_name(o)) and "Gateway" in upgrade_message(o),
        "the pending cluster waiting for the Gateway",
        timeout=90,
    )
    return old, pending_name(obj), original


async def test_incremental_gateway_exists_before_any_cluster_serves(
    kube: KubeClient, namespace: str, operator: Operator, gateway_api: None
) -> None:
    """upstream: the Gateway is made on the first reconcile; the HTTPRoute waits for an active
    cluster (here the cluster's head can never be scheduled, so none becomes active)."""
    body = incremental_service("early")
    body["spec"]["rayClusterConfig"]["headGroupSpec"]["template"]["spec"]["nodeSelector"] = {
        "example.com/none": "x"
    }
    await kube.create(RAYSERVICES, body, namespace)

    async def gateway_made() -> bool:
        try:
            await kube.get(GATEWAYS, "early-gateway", namespace)
        except NotFound:
            return False
        return True

    await wait_until(gateway_made, timeout=30, what="the Gateway")
    obj = await kube.get(RAYSERVICES, "early", namespace)
    assert not active_name(obj)
    with pytest.raises(NotFound):
        await kube.get(HTTPROUTES, "early-httproute", namespace)


async def follow_upgrade(
    kube: KubeClient,
    ns: str,
    version: str,
    clusters: tuple[str, str],
    samples: list[tuple[int, int, int]],
) -> dict[str, Any]:
    """Records (pending capacity, active capacity, pending traffic) of every status write of
    RayService ``inc`` after ``version`` until ``new`` is active; returns that object."""
    old, new = clusters
    async for event in kube.watch(
        RAYSERVICES,
        ns,
        resource_version=version,
        field_selector="metadata.name=inc",
        bookmarks=False,
    ):
        assert event.type == "MODIFIED", event
        obj = event.object
        if active_name(obj) == new:
            return obj
        pending, active = side(obj, "pending"), side(obj, "active")
        if pending.get("rayClusterName") == new:
            samples.append(
                (
                    pending.get("targetCapacity", 0),
                    active.get("targetCapacity", 100),
                    pending.get("trafficRoutedPercent", 0),
                )
            )
        assert await cluster_names(kube, ns) <= {old, new}
    raise AssertionError("the watch ended before the promotion")


async def test_incremental_upgrade_steps_traffic_and_capacity_then_promotes(
    kube: KubeClient, namespace: str, operator: Operator, gateway_api: None
) -> None:
    async with FakeGatewayController(kube, namespace).running() as gateway_controller:
        old, new, _ = await start_incremental_upgrade(kube, namespace, "inc")
        # The objects while traffic is still all on the old cluster.
        gateway = await kube.get(GATEWAYS, "inc-gateway", namespace)
        assert gateway["spec"]["gatewayClassName"] == "fake"
        assert gateway["spec"]["listeners"][0]["port"] == 80
        assert gateway["metadata"]["ownerReferences"][0]["kind"] == "RayService"
        assert await route_backends(kube, namespace, "inc") == [
            (f"{old}-serve-svc", 100),
            (f"{new}-serve-svc", 0),
        ]
        for cluster in (old, new):
            serve = await kube.get(SERVICES, f"{cluster}-serve-svc", namespace)
            assert serve["metadata"]["ownerReferences"][0]["name"] == cluster
        obj = await kube.get(RAYSERVICES, "inc", namespace)
        assert "waiting for Gateway" in upgrade_message(obj)
        assert "Accepted and Programmed" in upgrade_message(obj)
        assert side(obj, "pending")["targetCapacity"] == 0
        assert side(obj, "pending")["trafficRoutedPercent"] == 0
        # Nothing moves until the Gateway works: two reconciles since (the requeue is 0.5 s).
        await operator.trace.wait_reconciled(
            "rayservice", namespace, "inc", after=operator.trace.mark(), count=2
        )
        assert operator.registry.capacities(new) in ([], [0])
        # A Gateway controller reports the objects ready: the migration runs to promotion.
        # Every status write is seen through a watch from this version on: polling could step
        # over a state that lasted less than one poll.
        version = obj["metadata"]["resourceVersion"]
        gateway_controller.enabled = True
        samples: list[tuple[int, int, int]] = []
        try:
            async with asyncio.timeout(120):
                obj = await follow_upgrade(kube, namespace, version, (old, new), samples)
        except TimeoutError:
            pytest.fail(f"no promotion in 120 s: {samples[-3:]}")
    for p_capacity, a_capacity, traffic in samples:
        assert traffic <= p_capacity, samples
        assert p_capacity + a_capacity >= 100, samples
    assert {25, 50, 75} <= {t for _, _, t in samples}, samples
    assert not pending_name(obj)
    assert side(obj, "active")["trafficRoutedPercent"] == 100
    assert side(obj, "active")["targetCapacity"] == 100
    # Serve saw each capacity exactly once, in order.
    assert operator.registry.capacities(new) == [0, 50, 100]
    assert operator.registry.capacities(old) == [100, 50, 0]

    async def route_on_new_only() -> bool:
        return await route_backends(kube, namespace, "inc") == [(f"{new}-serve-svc", 100)]

    await wait_until(route_on_new_only, what="route to the new cluster only", timeout=30)
    assert await selector_of(kube, namespace, "inc-serve-svc") == new
    await wait_gone(kube, RAYCLUSTERS, old, namespace, timeout=30)
    reasons = {e.get("reason") for e in (await kube.list(EVENTS_V1, namespace))["items"]}
    assert {"CreatedGateway", "CreatedHTTPRoute", "UpdatedServeTargetCapacity"} <= reasons
    assert "UpdatedHTTPRoute" in reasons


async def test_incremental_rollback_when_the_spec_returns(
    kube: KubeClient, namespace: str, operator: Operator, gateway_api: None
) -> None:
    async with FakeGatewayController(kube, namespace).running() as gateway_controller:
        old, new, original = await start_incremental_upgrade(kube, namespace, "rb", interval=2)
        gateway_controller.enabled = True
        await wait_service(
            kube,
            namespace,
            "rb",
            lambda o: side(o, "pending").get("trafficRoutedPercent", 0) >= 25,
            "traffic on the new cluster",
            timeout=60,
        )
        await kube.patch(RAYSERVICES, "rb", {"spec": {"rayClusterConfig": original}}, namespace)
        obj = await wait_service(
            kube,
            namespace,
            "rb",
            lambda o: (condition(o, "RollbackInProgress") or {}).get("status") == "True",
            "RollbackInProgress",
        )
        rollback = condition(obj, "RollbackInProgress")
        assert rollback is not None
        assert rollback["reason"] == "DesiredClusterSpecChanged"
        assert pending_name(obj) == new
        obj = await wait_service(
            kube,
            namespace,
            "rb",
            lambda o: not pending_name(o) and condition(o, "RollbackInProgress") is None,
            "rollback complete",
            timeout=90,
        )
    assert active_name(obj) == old
    assert side(obj, "active")["trafficRoutedPercent"] == 100
    assert side(obj, "active")["targetCapacity"] == 100
    assert operator.registry.capacities(old)[-1] == 100
    assert operator.registry.capacities(new)[-1] == 0

    async def route_on_old_only() -> bool:
        return await route_backends(kube, namespace, "rb") == [(f"{old}-serve-svc", 100)]

    await wait_until(route_on_old_only, what="route back on the old cluster only", timeout=30)
    await wait_gone(kube, RAYCLUSTERS, new, namespace, timeout=30)
    # A reconcile after the operator saw the new cluster gone: no further pending cluster.
    gone = await operator.trace.wait_applied("rayclusters", namespace, new, deleted=True)
    await operator.trace.wait_reconciled("rayservice", namespace, "rb", after=gone)
    obj = await kube.get(RAYSERVICES, "rb", namespace)
    assert active_name(obj) == old
    assert not pending_name(obj), "the spec is the active one again: no new cluster"


async def test_crash_mid_incremental_upgrade_resumes_without_repeats(
    kube: KubeClient, namespace: str, operator: Operator, gateway_api: None
) -> None:
    """The operator dies right after Serve accepted a new target_capacity and before the
    status recorded it; its successor must neither PUT that capacity again nor make a second
    pending cluster, and must finish the migration."""
    crashed = asyncio.Event()

    async def lost_write(*_args: Any, **_kwargs: Any) -> bool:
        raise RuntimeError("injected crash before the status write")

    def crash_after(dashboard: FakeDashboard, config: dict[str, Any]) -> None:
        if config.get("target_capacity") == 50 and not crashed.is_set():
            assert operator.reconciler is not None
            operator.reconciler._write_status = lost_write  # type: ignore[method-assign]
            crashed.set()

    async with FakeGatewayController(kube, namespace).running() as gateway_controller:
        old, new, _ = await start_incremental_upgrade(kube, namespace, "cr")
        operator.registry.after_put = crash_after
        gateway_controller.enabled = True
        await asyncio.wait_for(crashed.wait(), 60)
        await operator.stop()
        operator.registry.after_put = None
        obj = await kube.get(RAYSERVICES, "cr", namespace)
        assert side(obj, "pending")["targetCapacity"] == 0, "the status write was lost"
        await operator.start()

        async def promoted() -> bool:
            assert await cluster_names(kube, namespace) <= {old, new}
            return active_name(await kube.get(RAYSERVICES, "cr", namespace)) == new

        await wait_until(promoted, what="promotion after the restart", timeout=90)
    capacities = operator.registry.capacities(new) + operator.registry.capacities(old)
    assert operator.registry.capacities(new) == [0, 50, 100], capacities
    assert operator.registry.capacities(old) == [100, 50, 0], capacities
