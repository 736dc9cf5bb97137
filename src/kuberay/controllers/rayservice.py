"""RayService reconciler: Serve on a RayCluster with zero-downtime cluster upgrades, blue/green
(``NewCluster``) or incremental through the Gateway API (``NewClusterWithIncrementalUpgrade``,
gate RayServiceIncrementalUpgrade), rollback of an incremental upgrade, suspend / resume and the
``ray.io/initializing-timeout`` annotation (terminal, as upstream); upstream:
ray-operator/controllers/ray/rayservice_controller.go.

What is decided and what is done are apart: the decisions of a pass (status, conditions, which
cluster serves, when to prepare a new one, each incremental step) are pure functions in
``rayservice_status`` and ``rayservice_incremental``, fed with what this module observed and one
clock reading; this module reads the caches, talks to the API server and the dashboards, and
makes the writes those functions ask for. The Serve proxy probe is ``kuberay.ray.serve``.
``RayServiceReconciler`` is built without a Manager (over standalone caches); ``register``
builds it over the manager's caches and wires it into the manager.

Invariants and failure modes:
- Intent before action. A new cluster's name is written to
  ``status.pendingServiceStatus.rayClusterName`` before the cluster is created; every later pass
  builds it from the persisted name, so a crash or restart never creates a second pending
  cluster (the create answers AlreadyExists). A spec change while a blue/green upgrade is pending
  replaces the pending cluster (the old one is cleaned up like any other stale cluster).
- Beyond upstream, nothing the decisions depend on lives only in memory:
  * which Serve config a cluster runs is decided from what its Serve reports as deployed. The
    hash of the config last PUT to each cluster (by cluster uid) is kept in memory only to
    skip that comparison; it is not needed for correctness: after a restart the comparison
    recognises a config that runs already, and only when Serve reports it back altered does
    it cost one redundant PUT (upstream re-PUTs after every restart), never a missed one. The
    RayCluster object itself is never written for a Serve config change, as upstream (its
    e2e test compares the whole object before and after); a ``ray.io/serve-config-hash``
    annotation left by an older version is still read.
  * a stale cluster's deletion time is recorded on it (annotation
    ``ray.io/deletion-scheduled-at``) before the delay starts, so a restart neither restarts
    the ``rayClusterDeletionDelaySeconds`` timer nor forgets the cluster.
- Blue/green: traffic moves only by re-pointing the ``ray.io/cluster`` selector of the head
  and serve Services (nothing else of an existing Service is ever updated). A pending cluster
  is promoted to active exactly when the Services point at it, which happens only once its head
  is ready, every Serve application on it is RUNNING and at least one of its serving pods is
  Ready (what the serve Service's EndpointSlices would report once pointed at it).
- Incremental: the Gateway ``<svc>-gateway`` and HTTPRoute ``<svc>-httproute`` (owned by the
  RayService, rewritten when the fields we manage drift) send traffic to per-cluster
  ``<cluster>-serve-svc`` Services by weight. Each pass makes at most one move (one
  ``target_capacity`` PUT or one weight step, see ``builders.gateway``) and only while the
  Gateway reports Accepted+Programmed and the route Accepted+ResolvedRefs; otherwise the
  UpgradeInProgress message names what is missing. The stepping state is the status
  (``targetCapacity``, ``trafficRoutedPercent``, ``lastTrafficMigratedTime`` of both sides), and
  what was really applied wins over it: the ``target_capacity`` Serve reports and the weights
  on the route. So after a crash between a write and the status update, the restarted
  operator neither repeats the PUT nor steps twice; the one cost is a full interval of waiting
  when the lost write was a weight step.
- Rollback: when the goal returns to the active cluster's spec (or changes to a third spec)
  mid-upgrade, RollbackInProgress is set and the same stepping runs with the roles swapped;
  once the active cluster has capacity 100 and all traffic the pending cluster is dropped (and
  for a third spec a new pending cluster is prepared afterwards). Returning to the pending
  spec cancels the rollback.
- The Gateway API is used through plain REST calls, never informers: the operator starts and
  runs without the Gateway API CRDs; an incremental RayService then says they are missing.
- One status write per pass, at the end, with optimistic concurrency (Conflict -> requeue).
  The written object is recorded in the RayService cache (``record_write`` with the version it
  replaced), and so is the cluster a serve-config annotation patch answered: the next pass reads
  those versions, never the copies they replaced, even before the watch delivers them (so its
  status write does not fail with a Conflict). Unlike RayJob, a pass does not wait for the
  watch to deliver those writes first.
- The head pod's ``ray.io/serve`` label follows the serve proxy health check
  (``/-/healthz`` on the serve port). When the proxy cannot be reached at all (KWOK pods have
  no processes, or the probe is disabled) the dashboard's application statuses are the
  signal: ``true`` iff every application is RUNNING.
- Beyond upstream, the UpgradeInProgress message says what a pending cluster is waiting for
  (its head pod, its dashboard, which Serve applications are not RUNNING yet).
- Dashboard errors never crash a pass: they are logged, the apps keep their last status and
  the pass is requeued.
"""

from __future__ import annotations

import contextlib
import copy
import logging
import time
from collections.abc import Callable
from dataclasses import dataclass, field

from kuberay.api import constants as c
from kuberay.api.features import FeatureGates
from kuberay.builders import gateway as gwb
from kuberay.builders import names
from kuberay.builders import rayjob as rjb
from kuberay.builders import rayservice as rsb
from kuberay.builders.errors import BuildError
from kuberay.builders.options import BuildOptions
from kuberay.controllers import rayservice_incremental as rsi
from kuberay.controllers import rayservice_status as rss
from kuberay.controllers.common import (
    POD_SELECTOR,
    RAYCLUSTERS,
    random_suffix,
    rfc3339,
)
from kuberay.controllers.dashboards import DashboardAccess, TokenUnreadable
from kuberay.controllers.rayservice_status import ServeState, pending_name_of
from kuberay.controllers.reconcile import (
    cached_head_pod,
    child_events,
    fetch_working_copy,
    selector_patch,
    try_write_child,
    wire_controller,
    write_child,
)
from kuberay.ray.dashboard import DashboardClient, DashboardError, DashboardFactory
from kuberay.ray.serve import HealthProbe, proxy_healthz
from kuberay.runtime.cache import CacheSource, StandaloneCaches
from kuberay.runtime.client import (
    ENDPOINTSLICES,
    PODS,
    SERVICES,
    KubeClient,
    Resource,
)
from kuberay.runtime.controller import Controller, Request, Result
from kuberay.runtime.errors import AlreadyExists, Conflict, NotFound
from kuberay.runtime.events import WARNING, EventRecorder
from kuberay.runtime.manager import Manager
from kuberay.runtime.store import POD_FIELDS, FieldTree, Obj, Shared, index_by_label, projector

log = logging.getLogger("kuberay.controllers.rayservice")
# The Services this controller makes all carry upstream's originated-from labels (and, like
# upstream's, the head Service no other label of ours), so they are selected by those.
SERVICE_SELECTOR = f"{c.LABEL_ORIGINATED_FROM_CRD}={c.KIND_RAYSERVICE}"

# EndpointSlices are watched for every Service in the watched namespaces, Ray's or not, so only
# what counting ready serve endpoints needs is cached: which endpoints are ready, and whose.
ENDPOINTSLICE_FIELDS: FieldTree = {
    "apiVersion": True,
    "kind": True,
    "metadata": {
        "name": True,
        "namespace": True,
        "uid": True,
        "resourceVersion": True,
        "labels": Shared(),
    },
    "endpoints": {"conditions": {"ready": True}, "targetRef": {"uid": True}},
}

# Outcomes of a write that are states, not failures: the name is taken (AlreadyExists is a
# Conflict), the version read is stale, or the object (or its whole API) is not there.
STATES = (Conflict, NotFound)

RAYSERVICES = c.RAYSERVICES  # kept importable from here
GATEWAYS = Resource("gateway.networking.k8s.io", "v1", "gateways", kind="Gateway")
HTTPROUTES = Resource("gateway.networking.k8s.io", "v1", "httproutes", kind="HTTPRoute")


@dataclass(frozen=True)
class _GatewayKind:
    """Per-kind names for the Gateway API objects the incremental upgrade owns."""

    resource: Resource
    kind: str
    created: str
    updated: str
    failed_create: str
    failed_update: str
    deleted: str
    failed_delete: str
    drifted: Callable[[Obj, Obj], bool]


GATEWAY_KIND = _GatewayKind(
    GATEWAYS,
    "Gateway",
    c.EVENT_CREATED_GATEWAY,
    c.EVENT_UPDATED_GATEWAY,
    c.EVENT_FAILED_TO_CREATE_GATEWAY,
    c.EVENT_FAILED_TO_UPDATE_GATEWAY,
    c.EVENT_DELETED_GATEWAY,
    c.EVENT_FAILED_TO_DELETE_GATEWAY,
    gwb.gateway_drifted,
)
HTTPROUTE_KIND = _GatewayKind(
    HTTPROUTES,
    "HTTPRoute",
    c.EVENT_CREATED_HTTPROUTE,
    c.EVENT_UPDATED_HTTPROUTE,
    c.EVENT_FAILED_TO_CREATE_HTTPROUTE,
    c.EVENT_FAILED_TO_UPDATE_HTTPROUTE,
    c.EVENT_DELETED_HTTPROUTE,
    c.EVENT_FAILED_TO_DELETE_HTTPROUTE,
    gwb.httproute_drifted,
)


@dataclass
class RayServiceConfig:
    """Operator settings for RayServices; the requeue interval is upstream's 2 s."""

    build: BuildOptions = field(default_factory=BuildOptions)
    gates: FeatureGates = field(default_factory=FeatureGates)
    requeue_seconds: float = 2.0
    concurrency: int = 8
    zero_downtime: bool = True  # env ENABLE_ZERO_DOWNTIME != "false"
    # The serve proxy health check of the head pod; None: use the apps' status only.
    health_probe: HealthProbe | None = proxy_healthz
    # --use-kubernetes-proxy: reach dashboards through the API server's service proxy.
    use_kubernetes_proxy: bool = False
    apiserver: str = ""
    clock: Callable[[], float] = time.time
    suffix: Callable[[], str] = random_suffix


class RayServiceReconciler:
    """Reconciles RayServices. Construction needs no Manager: the caches it reads (with their
    indexes) come from ``caches`` for ``namespaces`` (None: all), by default standalone ones
    that are never started, so a test can build one around its own client, recorder and
    hand-filled stores."""

    def __init__(
        self,
        client: KubeClient,
        recorder: EventRecorder,
        config: RayServiceConfig,
        dashboard_factory: DashboardFactory,
        *,
        caches: CacheSource | None = None,
        namespaces: list[str] | None = None,
    ) -> None:
        self.client = client
        self.config = config
        self.dashboard_access = DashboardAccess.configured(client, dashboard_factory, config)
        self.recorder = recorder
        caches = caches or StandaloneCaches(client)
        self.rayservices = caches.cache(RAYSERVICES, namespaces=namespaces)
        self.clusters = caches.cache(RAYCLUSTERS, namespaces=namespaces)
        self.clusters.add_indexer("origin", index_by_label(c.LABEL_ORIGINATED_FROM_CR_NAME))
        self.services = caches.cache(
            SERVICES, namespaces=namespaces, label_selector=SERVICE_SELECTOR
        )
        self.pods = caches.cache(
            PODS,
            namespaces=namespaces,
            label_selector=POD_SELECTOR,
            transform=projector(POD_FIELDS),
        )
        self.pods.add_indexer("cluster", index_by_label(c.LABEL_CLUSTER))
        self.slices = caches.cache(
            ENDPOINTSLICES, namespaces=namespaces, transform=projector(ENDPOINTSLICE_FIELDS)
        )
        self.slices.add_indexer("service", index_by_label(c.LABEL_ENDPOINTSLICE_SERVICE_NAME))
        self.controller: Controller | None = None
        # cluster uid -> hash of the Serve config last PUT to it (an optimisation, see above)
        self.applied_serve: dict[str, str] = {}

    # ------------------------------------------------------------------ helpers
    def forget(self, obj: Obj) -> None:
        self.recorder.forget(obj["metadata"].get("uid", ""))

    def now(self) -> float:
        return self.config.clock()

    def _owned_clusters(self, ns: str, svc_name: str) -> list[Obj]:
        named = self.clusters.list(index="origin", value=f"{ns}/{svc_name}")
        return [obj for obj in named if _originated_from_crd(obj) == c.KIND_RAYSERVICE]

    def _head_pod(self, ns: str, cluster: str) -> Obj | None:
        return cached_head_pod(self.pods, ns, cluster)

    def _requeue(self, seconds: float | None = None) -> Result:
        if seconds is not None and seconds <= 0:
            return Result(requeue=True)  # now (requeue_after=0 would mean "not at all")
        return Result(requeue_after=self.config.requeue_seconds if seconds is None else seconds)

    # ------------------------------------------------------------------ reconcile
    async def reconcile(self, req: Request) -> Result | None:
        svc = fetch_working_copy(self.rayservices, req, c.KIND_RAYSERVICE, ensure=("status",))
        if svc is None:
            return None
        old_status = copy.deepcopy(svc["status"])
        stop, result, wait = await self._preflight(svc, old_status)
        if stop:
            return result
        status = svc["status"]
        active_name = (status.get(rss.ACTIVE) or {}).get("rayClusterName") or ""
        active, pending, settled = await self._clusters(svc, active_name, pending_name_of(svc))

        incremental = rsi.is_incremental(svc, self.config.gates)
        rolling_back = False
        if incremental and active is not None and pending is not None:
            rolling_back = rsi.reconcile_rollback_state(svc, active, pending, self.now())
        elif pending is None:
            rss.drop_condition(svc, c.COND_ROLLBACK_IN_PROGRESS)
        active_serve, pending_serve = await self._reconcile_serve_sides(
            svc, active, pending, incremental=incremental, rolling_back=rolling_back
        )

        # ---- status of both sides (what the dashboards said)
        if active is not None:
            status[rss.ACTIVE] = rss.side_status(status.get(rss.ACTIVE), active, active_serve)
        elif active_name:
            status[rss.ACTIVE] = {}
        if pending is not None:
            status[rss.PENDING] = rss.side_status(status.get(rss.PENDING), pending, pending_serve)

        step_wait: float | None = None
        if incremental and active is not None:
            before = active
            active, pending, detail, step_wait = await self._incremental_upgrade(
                svc, active, pending, active_serve, pending_serve, rolling_back
            )
            if (active_serve if active is before else pending_serve).ready:
                await self._reconcile_services(svc, active)
        else:
            active, pending, detail = await self._switch_traffic(
                svc, active, pending, active_serve, pending_serve, incremental=incremental
            )
        if settled:
            # upstream: reconcileRayCluster returns right after an in-place update, so a
            # cluster whose update did not land (a stale cache) is never judged outdated.
            self._prepare_new_cluster(svc, active, pending, incremental=incremental)
        status["numServeEndpoints"] = self._num_serve_endpoints(svc, incremental=incremental)
        waiting = rss.upgrade_detail(svc, pending, pending_serve.apps, detail)
        self._set_status_conditions(
            svc, active is not None, bool(pending_name_of(svc)), waiting=waiting
        )
        await self._write_status(svc, old_status)
        soonest = [x for x in (wait, step_wait) if x is not None]
        return self._requeue(min([*soonest, self.config.requeue_seconds]) if soonest else None)

    async def _preflight(
        self, svc: Obj, old_status: Obj
    ) -> tuple[bool, Result | None, float | None]:
        """Everything that may end a pass before the clusters are looked at: the clean-up of
        stale clusters, deletion, the finalizer, validation, suspend and the initializing
        timeout. Returns (stop, the result when stopping, seconds until the next due
        clean-up)."""
        ns, name = svc["metadata"]["namespace"], svc["metadata"]["name"]
        deleting = bool(svc["metadata"].get("deletionTimestamp"))
        wait = await self._clean_up_clusters(svc, deleting)
        if deleting:
            return True, await self._finalize(svc), wait
        if c.FINALIZER_RAYSERVICE not in (svc["metadata"].get("finalizers") or []):
            await self._add_finalizer(svc)
            return True, self._requeue(0), wait

        problem = rss.validation_problem(svc, self.config.gates)
        if problem is not None:
            reason, message = problem
            self.recorder.event(svc, WARNING, reason, message, "Validate")
            self._set_condition(svc, c.COND_READY, "False", c.REASON_VALIDATION_FAILED, message)
            await self._write_status(svc, old_status)
            return True, None, wait

        stop, result = await self._handle_suspend(svc, old_status)
        if stop:
            return True, result, wait
        self._init_conditions(svc)
        if self._initializing_timed_out(svc):
            # Terminal: no cluster is kept (the clean-up deletes them after the delay); only
            # deleting and recreating the RayService recovers.
            rss.clear_sides(svc["status"])
            await self._write_status(svc, old_status)
            remaining = self._owned_clusters(ns, name)
            return True, self._requeue(wait) if remaining else None, wait
        return False, None, wait

    async def _clusters(
        self, svc: Obj, active_name: str, pending_name: str
    ) -> tuple[Obj | None, Obj | None, bool]:
        """The active cluster (from the cache) and the pending one (created when only its name
        exists yet), each updated in place when the goal differs from it only in ways that
        need no new cluster (``rsb.needs_in_place_update``); and False when such an update did
        not land (conflict), so that the pass does not take the old spec for an outdated one."""
        ns = svc["metadata"]["namespace"]
        active = self.clusters.get(ns, active_name) if active_name else None
        pending = await self._ensure_pending(svc, pending_name) if pending_name else None
        # upstream: shouldUpdateCluster leaves the active cluster alone during an upgrade (the
        # goal is the pending one's), a suspend toggle included.
        settled = True
        if active is not None and not rss.is_true(svc, c.COND_UPGRADE_IN_PROGRESS):
            active, landed = await self._update_in_place(svc, active)
            settled = settled and landed
        if pending is not None:
            pending, landed = await self._update_in_place(svc, pending)
            settled = settled and landed
        return active, pending, settled

    def _prepare_new_cluster(
        self, svc: Obj, active: Obj | None, pending: Obj | None, *, incremental: bool
    ) -> None:
        """Names a new pending cluster in the status when ``rss.should_prepare_new_cluster``
        says so; it is created on the next pass, from that name."""
        prepare = rss.should_prepare_new_cluster(
            svc,
            active,
            pending,
            incremental=incremental,
            gates=self.config.gates,
            zero_downtime=self.config.zero_downtime,
        )
        if not prepare:
            return
        ns, name = svc["metadata"]["namespace"], svc["metadata"]["name"]
        new_name = rsb.cluster_name_for(name, self.config.suffix())
        svc["status"][rss.PENDING] = rss.new_pending_side(
            new_name, incremental=incremental, has_active=active is not None
        )
        log.info("RayService %s/%s: new pending cluster %s", ns, name, new_name)

    async def _reconcile_serve_sides(
        self,
        svc: Obj,
        active: Obj | None,
        pending: Obj | None,
        *,
        incremental: bool,
        rolling_back: bool,
    ) -> tuple[ServeState, ServeState]:
        """Serve on both clusters (pending first), then their head pods' serve labels;
        returns what the (active, pending) dashboards said."""
        pending_serve = ServeState()
        if pending is not None:
            pending_serve = await self._reconcile_serve(
                svc,
                pending,
                apply=not rolling_back,
                capacity=rsi.side_capacity(svc, rss.PENDING, 0) if incremental else None,
            )
        active_serve = ServeState()
        if active is not None:
            # The active cluster keeps serving while a pending one comes up; config-only
            # changes are applied to it in place (its hash still matches the goal, or upgrades
            # are off so no new cluster will come), and during a rollback it gets the goal
            # config back. upstream: the active branch of reconcileServe's callers, gated on
            # !shouldPrepareNewCluster.
            in_place = rsb.matches_goal(svc, active) or not rss.upgrades_enabled(
                svc, gates=self.config.gates, zero_downtime=self.config.zero_downtime
            )
            apply = in_place and (pending is None or rolling_back)
            active_serve = await self._reconcile_serve(
                svc,
                active,
                apply=apply,
                capacity=rsi.side_capacity(svc, rss.ACTIVE, gwb.FULL) if incremental else None,
            )
        for cluster, serve in ((active, active_serve), (pending, pending_serve)):
            if cluster is not None:
                await self._update_serve_label(svc, cluster, serve.apps)
        return active_serve, pending_serve

    async def _switch_traffic(
        self,
        svc: Obj,
        active: Obj | None,
        pending: Obj | None,
        active_serve: ServeState,
        pending_serve: ServeState,
        *,
        incremental: bool,
    ) -> tuple[Obj | None, Obj | None, str]:
        """Blue/green (and an incremental RayService without an active cluster yet): points
        the Services at the cluster to serve, promoting the pending one when they now select
        it. Returns the (possibly swapped) clusters and what the switch waits for."""
        ns, name = svc["metadata"]["namespace"], svc["metadata"]["name"]
        status = svc["status"]
        detail = ""
        if incremental:
            # upstream: the Gateway exists from the first reconcile on (the HTTPRoute only
            # once a cluster is active, since it has nothing to route to before).
            if pending is not None:
                await self._ensure_cluster_serve_services(svc, [pending])
            _, gateway_problem = await self._apply_gateway_object(
                svc, GATEWAY_KIND, gwb.build_gateway(svc)
            )
            detail = gateway_problem or detail
        # Traffic leaves a serving cluster only for serve endpoints that are ready.
        endpoints_ready = pending is not None and (
            active is None or self._serve_pods_ready(svc, pending) > 0
        )
        target = rss.switch_target(
            svc,
            active,
            pending,
            active_ready=active_serve.ready,
            pending_ready=pending_serve.ready,
            endpoints_ready=endpoints_ready,
        )
        pointed_at = None
        if target is not None:
            pointed_at = await self._reconcile_services(svc, target)
        if pending is not None and pointed_at == pending["metadata"]["name"]:
            # Promotion: the Services now send traffic to the pending cluster.
            status[rss.ACTIVE] = status[rss.PENDING]
            status[rss.PENDING] = {}
            log.info("RayService %s/%s: promoted %s", ns, name, pending["metadata"]["name"])
            return pending, None, detail
        if pending is not None and pending_serve.ready and not endpoints_ready:
            detail = rss.endpoints_wait(pending["metadata"]["name"])
        return active, pending, detail

    # ------------------------------------------------------------------ suspend
    async def _handle_suspend(self, svc: Obj, old_status: Obj) -> tuple[bool, Result | None]:
        """The suspend state machine; (True, result) ends the pass. Once Suspending is
        persisted the suspension completes whatever ``spec.suspend`` says meanwhile."""
        want = bool(svc["spec"].get("suspend"))
        if rss.is_true(svc, c.COND_SUSPENDING):
            if await self._delete_children(svc):
                rss.mark_suspend_in_progress(svc, self.now())
                await self._write_status(svc, old_status)
                return True, self._requeue()
            rss.mark_suspended(svc, self.now())
            await self._write_status(svc, old_status)
            return True, None
        if rss.is_true(svc, c.COND_SUSPENDED):
            if want:
                return True, None
            rss.mark_resumed(svc, self.now())
            return False, None
        if not want:
            return False, None
        rss.mark_suspend_requested(svc, self.now())
        await self._write_status(svc, old_status)
        return True, self._requeue(0)

    async def _delete_children(self, svc: Obj) -> bool:
        """Deletes every RayCluster and Service that originated from the RayService; True while
        any remains."""
        ns, name = svc["metadata"]["namespace"], svc["metadata"]["name"]
        remaining = False
        children: list[tuple[Resource, Obj]] = [
            (RAYCLUSTERS, x) for x in self._owned_clusters(ns, name)
        ]
        for item in self.services.list(ns):
            labels = item["metadata"].get("labels") or {}
            if (
                labels.get(c.LABEL_ORIGINATED_FROM_CR_NAME) == name
                and labels.get(c.LABEL_ORIGINATED_FROM_CRD) == c.KIND_RAYSERVICE
            ):
                children.append((SERVICES, item))
        for res, obj in children:
            remaining = True
            if obj["metadata"].get("deletionTimestamp"):
                continue
            child = obj["metadata"]["name"]
            if res is RAYCLUSTERS:
                kind, done = "RayCluster", c.EVENT_DELETED_RAYCLUSTER
                failed = c.EVENT_FAILED_TO_DELETE_RAYCLUSTER
            else:
                kind, done = "Service", c.EVENT_DELETED_SERVICE
                failed = c.EVENT_FAILED_TO_DELETE_SERVICE
            events = child_events("Delete", f"{kind} {ns}/{child}", done, failed)
            deleting = self.client.delete(res, child, ns, propagation="Background")
            with contextlib.suppress(NotFound):
                await try_write_child(self.recorder, svc, events, deleting, benign=(NotFound,))
        return await self._delete_gateway_objects(svc) or remaining

    def _initializing_timed_out(self, svc: Obj) -> bool:
        """True once Ready is (or has just become) False/InitializingTimeout."""
        timed_out, message = rss.initializing_timed_out(svc, self.now())
        if message:
            self._set_condition(svc, c.COND_READY, "False", c.REASON_INITIALIZING_TIMEOUT, message)
            self.recorder.event(
                svc, WARNING, c.EVENT_RAYSERVICE_INITIALIZING_TIMEOUT, message, "Reconcile"
            )
        return timed_out

    # ------------------------------------------------------------------ finalizer / deletion
    async def _add_finalizer(self, svc: Obj) -> None:
        meta = svc["metadata"]
        patch = {
            "metadata": {
                "finalizers": [*(meta.get("finalizers") or []), c.FINALIZER_RAYSERVICE],
                "resourceVersion": meta["resourceVersion"],
            }
        }
        with contextlib.suppress(Conflict, NotFound):
            await self.client.patch(RAYSERVICES, meta["name"], patch, meta["namespace"])

    async def _finalize(self, svc: Obj) -> Result | None:
        meta = svc["metadata"]
        finalizers = list(meta.get("finalizers") or [])
        if c.FINALIZER_RAYSERVICE not in finalizers:
            return None
        if self._owned_clusters(meta["namespace"], meta["name"]):
            return self._requeue()
        finalizers.remove(c.FINALIZER_RAYSERVICE)
        patch = {"metadata": {"finalizers": finalizers, "resourceVersion": meta["resourceVersion"]}}
        with contextlib.suppress(NotFound):
            await self.client.patch(RAYSERVICES, meta["name"], patch, meta["namespace"])
        return None

    async def _clean_up_clusters(self, svc: Obj, deleting: bool) -> float | None:
        """Schedules (annotation first) and performs the deletion of every owned cluster that
        is neither active nor pending. Returns seconds until the next due deletion."""
        meta, status = svc["metadata"], svc["status"]
        ns = meta["namespace"]
        keep = rss.clusters_to_keep(status, deleting=deleting)
        delay = 0 if deleting else rsb.deletion_delay_seconds(svc)
        now = self.now()
        soonest: float | None = None
        for cluster in self._owned_clusters(ns, meta["name"]):
            cmeta = cluster["metadata"]
            if cmeta.get("deletionTimestamp"):
                continue
            if cmeta["name"] in keep:
                if c.ANNOTATION_DELETION_AT in (cmeta.get("annotations") or {}):
                    # Marked from a stale view of the status: the mark must not outlive it.
                    unmark = {"metadata": {"annotations": {c.ANNOTATION_DELETION_AT: None}}}
                    with contextlib.suppress(NotFound):
                        await self.client.patch(RAYCLUSTERS, cmeta["name"], unmark, ns)
                continue
            due, schedule = rss.deletion_due(
                cmeta.get("annotations") or {}, deleting=deleting, now=now, delay=delay
            )
            if schedule:
                patch = {
                    "metadata": {
                        "annotations": {c.ANNOTATION_DELETION_AT: rfc3339(due)},
                        "resourceVersion": cmeta["resourceVersion"],
                    }
                }
                try:
                    await self.client.patch(RAYCLUSTERS, cmeta["name"], patch, ns)
                except (Conflict, NotFound):
                    soonest = 0.5 if soonest is None else min(soonest, 0.5)
                    continue
                log.info("RayCluster %s/%s scheduled for deletion", ns, cmeta["name"])
            if due > now:
                left = due - now
                soonest = left if soonest is None else min(soonest, left)
                continue
            await self._delete_stale_cluster(svc, cmeta)
        return soonest

    async def _delete_stale_cluster(self, svc: Obj, cmeta: Obj) -> None:
        """Deletes one stale cluster (uid-guarded); a failure is reported and retried later."""
        ns, cname = svc["metadata"]["namespace"], cmeta["name"]
        events = child_events(
            "Delete",
            f"RayCluster {ns}/{cname}",
            c.EVENT_DELETED_RAYCLUSTER,
            c.EVENT_FAILED_TO_DELETE_RAYCLUSTER,
            server_message=False,
        )
        uid = cmeta.get("uid")
        deleting = self.client.delete(RAYCLUSTERS, cname, ns, propagation="Background", uid=uid)
        with contextlib.suppress(NotFound):
            await try_write_child(self.recorder, svc, events, deleting, benign=(NotFound,))

    # ------------------------------------------------------------------ clusters
    async def _ensure_pending(self, svc: Obj, name: str) -> Obj | None:
        ns = svc["metadata"]["namespace"]
        cached = self.clusters.get(ns, name)
        if cached is not None:
            return cached
        events = child_events(
            "Create",
            f"RayCluster {ns}/{name}",
            c.EVENT_CREATED_RAYCLUSTER,
            c.EVENT_FAILED_TO_CREATE_RAYCLUSTER,
        )
        creating = self.client.create(RAYCLUSTERS, rsb.build_cluster(svc, name), ns)
        try:
            return await write_child(self.recorder, svc, events, creating, benign=(AlreadyExists,))
        except AlreadyExists:
            return await self.client.get(RAYCLUSTERS, name, ns)

    async def _update_in_place(self, svc: Obj, cluster: Obj) -> tuple[Obj, bool]:
        """The cluster after an in-place update if one is needed, and whether it is current
        (False: the update met a conflict or a deleted cluster; the next pass retries)."""
        if not rsb.needs_in_place_update(svc, cluster):
            return cluster, True
        want = rsb.updated_cluster(svc, cluster)
        ns, cname = svc["metadata"]["namespace"], cluster["metadata"]["name"]
        events = child_events(
            "Update",
            f"RayCluster {ns}/{cname}",
            c.EVENT_UPDATED_RAYCLUSTER,
            c.EVENT_FAILED_TO_UPDATE_RAYCLUSTER,
        )
        updating = self.client.update(RAYCLUSTERS, want)
        try:
            updated = await write_child(
                self.recorder, svc, events, updating, benign=(Conflict, NotFound)
            )
        except (Conflict, NotFound):
            return cluster, False
        return updated, True

    # ------------------------------------------------------------------ incremental upgrade
    async def _incremental_upgrade(
        self,
        svc: Obj,
        active: Obj,
        pending: Obj | None,
        active_serve: ServeState,
        pending_serve: ServeState,
        rolling_back: bool,
    ) -> tuple[Obj, Obj | None, str, float | None]:
        """One pass of the Gateway API upgrade: objects, one capacity or traffic step, and
        completion (promotion, or the end of a rollback). Every value it steps from is in the
        status (or observed on the route / from Serve), so a restart resumes where it was.
        Returns the (possibly swapped) clusters, what the switch waits for, and when to come
        back for the next step."""
        status = svc["status"]
        ns, name = svc["metadata"]["namespace"], svc["metadata"]["name"]
        await self._ensure_cluster_serve_services(svc, [x for x in (active, pending) if x])
        a_side: Obj = status[rss.ACTIVE]
        a_side.setdefault("targetCapacity", gwb.FULL)
        gateway, gateway_problem = await self._apply_gateway_object(
            svc, GATEWAY_KIND, gwb.build_gateway(svc)
        )
        route_name = gwb.httproute_name(name)
        route = await self._get_optional(HTTPROUTES, route_name, ns)
        detail, step_wait = "", None
        if pending is None:
            a_side["trafficRoutedPercent"] = gwb.FULL
        else:
            detail, step_wait = await self._step(
                svc, (active, pending), (active_serve, pending_serve), rolling_back, gateway, route
            )
            if gateway_problem:
                detail = gateway_problem
            if rsi.complete_migration(svc, rolling_back):
                if rolling_back:
                    log.info(
                        "RayService %s/%s: rolled back to %s", ns, name, active["metadata"]["name"]
                    )
                    pending = None
                else:
                    log.info("RayService %s/%s: promoted %s", ns, name, pending["metadata"]["name"])
                    active, pending = pending, None
        backends = rsi.route_backends(status, active, pending)
        _, route_problem = await self._apply_gateway_object(
            svc, HTTPROUTE_KIND, gwb.build_httproute(svc, backends), route
        )
        return active, pending, detail or route_problem, step_wait

    async def _step(
        self,
        svc: Obj,
        clusters: tuple[Obj, Obj],
        serves: tuple[ServeState, ServeState],
        rolling_back: bool,
        gateway: Obj | None,
        route: Obj | None,
    ) -> tuple[str, float | None]:
        """Plans this pass's move (``rsi.plan_step``) and makes the one write it may ask for:
        a ``target_capacity`` PUT, recorded in the status once it succeeded."""
        (active, pending), (active_serve, pending_serve) = clusters, serves
        gaining, gaining_serve = (
            (active, active_serve) if rolling_back else (pending, pending_serve)
        )
        step = rsi.plan_step(
            svc,
            active["metadata"]["name"],
            pending["metadata"]["name"],
            rolling_back=rolling_back,
            gaining_ready=gaining_serve.ready,
            gaining_endpoints=self._serve_pods_ready(svc, gaining),
            gateway=gateway,
            route=route,
            now=self.now(),
        )
        if not step.put_side:
            return step.detail, step.wait
        cluster, serve = (
            (active, active_serve) if step.put_side == rss.ACTIVE else (pending, pending_serve)
        )
        done = await self._put_target_capacity(svc, cluster, serve, step.put_capacity)
        if done:
            svc["status"][step.put_side]["targetCapacity"] = step.put_capacity
        return step.detail, 0.0 if done else None

    async def _ensure_cluster_serve_services(self, svc: Obj, clusters: list[Obj]) -> None:
        """``<cluster>-serve-svc`` for each cluster (the HTTPRoute's backends); create-only."""
        ns = svc["metadata"]["namespace"]
        for cluster in clusters:
            sname = names.serve_service_name(str(cluster["metadata"]["name"]))
            if self.services.get(ns, sname) is not None:
                continue
            events = child_events(
                "Create",
                f"service {ns}/{sname}",
                c.EVENT_CREATED_SERVICE,
                c.EVENT_FAILED_TO_CREATE_SERVICE,
                server_message=False,
            )
            try:
                want = gwb.build_cluster_serve_service(svc, cluster, self.config.build)
            except BuildError as exc:
                message = f"{events.failed_message}: {exc}"
                self.recorder.event(
                    svc, WARNING, c.EVENT_FAILED_TO_CREATE_SERVICE, message, "Create"
                )
                continue
            creating = self.client.create(SERVICES, want, ns)
            with contextlib.suppress(Conflict, NotFound):  # AlreadyExists is a Conflict
                await try_write_child(self.recorder, svc, events, creating, benign=STATES)

    async def _get_optional(self, res: Resource, name: str, ns: str) -> Obj | None:
        """The object, or None when it (or its whole API) does not exist."""
        try:
            return await self.client.get(res, name, ns)
        except NotFound:
            return None

    async def _apply_gateway_object(
        self, svc: Obj, kind: _GatewayKind, want: Obj, have: Obj | None = None
    ) -> tuple[Obj | None, str]:
        """Creates the Gateway / HTTPRoute, or puts back the fields the operator manages when
        they drifted. Returns the object and, when it could not be written, why."""
        ns, oname = svc["metadata"]["namespace"], want["metadata"]["name"]
        what = f"{kind.kind} {ns}/{oname}"
        if have is None:
            have = await self._get_optional(kind.resource, oname, ns)
        if have is None:
            events = child_events(
                "Create", what, kind.created, kind.failed_create, server_message=False
            )
            creating = self.client.create(kind.resource, want, ns)
            try:
                return await try_write_child(self.recorder, svc, events, creating, benign=STATES)
            except AlreadyExists:
                return None, ""
            except NotFound:
                return None, (
                    f"the Gateway API ({gwb.GATEWAY_API_VERSION}) is not installed: cannot "
                    f"create {what}"
                )
        if not kind.drifted(have, want):
            return have, ""
        patch = gwb.drift_patch(want)
        patch["metadata"]["resourceVersion"] = have["metadata"].get("resourceVersion")
        events = child_events(
            "Update", what, kind.updated, kind.failed_update, server_message=False
        )
        patching = self.client.patch(kind.resource, oname, patch, ns)
        try:
            updated, problem = await try_write_child(
                self.recorder, svc, events, patching, benign=STATES
            )
        except (Conflict, NotFound):
            return have, ""
        return updated or have, problem

    async def _delete_gateway_objects(self, svc: Obj) -> bool:
        """Deletes the Gateway and HTTPRoute; True while either still existed."""
        ns, name = svc["metadata"]["namespace"], svc["metadata"]["name"]
        remaining = False
        for kind, oname in (
            (HTTPROUTE_KIND, gwb.httproute_name(name)),
            (GATEWAY_KIND, gwb.gateway_name(name)),
        ):
            what = f"{kind.kind} {ns}/{oname}"
            events = child_events(
                "Delete", what, kind.deleted, kind.failed_delete, server_message=False
            )
            deleting = self.client.delete(kind.resource, oname, ns, propagation="Background")
            try:
                await try_write_child(self.recorder, svc, events, deleting, benign=STATES)
            except NotFound:
                continue
            except Conflict:
                pass
            remaining = True
        return remaining

    # ------------------------------------------------------------------ serve
    async def _dashboard(self, svc: Obj, cluster: Obj) -> DashboardClient | None:
        """A client for the cluster's dashboard, or None when its auth token cannot be read."""
        ns, cname = svc["metadata"]["namespace"], cluster["metadata"]["name"]
        address = rjb.dashboard_url(cluster, self.config.build)
        try:
            return await self.dashboard_access.open(address, ns, cluster.get("spec") or {}, cname)
        except TokenUnreadable as exc:
            log.info(
                "RayService %s/%s: auth token of %s: %s",
                ns,
                svc["metadata"]["name"],
                cname,
                exc.error,
            )
            return None

    async def _reconcile_serve(
        self, svc: Obj, cluster: Obj, *, apply: bool = True, capacity: int | None = None
    ) -> ServeState:
        """Applies the Serve config when the cluster has not got it yet (with
        ``target_capacity`` when ``capacity`` is given); returns what the dashboard reports
        (nothing while it cannot be asked)."""
        if not rss.head_ready(cluster):
            return ServeState()
        ns, cname = svc["metadata"]["namespace"], cluster["metadata"]["name"]
        dashboard = await self._dashboard(svc, cluster)
        if dashboard is None:
            return ServeState()
        try:
            details = await dashboard.get_serve_details()
            applied = self._applied_hash(cluster)
            want = rsb.serve_config_hash(svc)
            config = (rsb.serve_config(svc) or {}) if apply and want else {}
            action = rss.serve_config_action(config, applied, want, details)
            if action == rss.SERVE_RECORD:
                # Serve runs it already (applied before a restart): remember, do not PUT.
                self._record_applied(cluster, want)
            elif action == rss.SERVE_PUT:
                if capacity is not None:
                    config["target_capacity"] = capacity
                reasons = (
                    c.EVENT_UPDATED_SERVE_APPLICATIONS,
                    c.EVENT_FAILED_TO_UPDATE_SERVE_APPLICATIONS,
                )
                if not await self._put_serve_config(
                    svc, cname, dashboard, config, ("serve applications", *reasons)
                ):
                    return ServeState()
                self._record_applied(cluster, want)
                details = await dashboard.get_serve_details()
        except DashboardError as exc:
            log.info(
                "RayService %s/%s: dashboard of %s: %s", ns, svc["metadata"]["name"], cname, exc
            )
            return ServeState()
        finally:
            await dashboard.close()
        return rss.serve_state(details, capacity)

    async def _put_target_capacity(
        self, svc: Obj, cluster: Obj, serve: ServeState, capacity: int
    ) -> bool:
        """PUTs the cluster's Serve config (``rsi.capacity_config``) with a new
        ``target_capacity``; True when the dashboard took it."""
        cname = str(cluster["metadata"]["name"])
        config = rsi.capacity_config(svc, self._applied_hash(cluster), serve.deployed)
        dashboard = await self._dashboard(svc, cluster) if config else None
        if dashboard is None or not config:
            return False
        config["target_capacity"] = capacity
        what = f"target_capacity {capacity} of serve applications"
        try:
            return await self._put_serve_config(
                svc,
                cname,
                dashboard,
                config,
                (
                    what,
                    c.EVENT_UPDATED_SERVE_TARGET_CAPACITY,
                    c.EVENT_FAILED_TO_UPDATE_TARGET_CAPACITY,
                ),
            )
        finally:
            await dashboard.close()

    async def _put_serve_config(
        self,
        svc: Obj,
        cname: str,
        dashboard: DashboardClient,
        config: Obj,
        event: tuple[str, str, str],
    ) -> bool:
        """One Serve config PUT, with upstream's event for the outcome either way."""
        what, ok_reason, failed_reason = event
        ns = svc["metadata"]["namespace"]
        events = child_events(
            "Update", f"{what} to the RayCluster {ns}/{cname}", ok_reason, failed_reason
        )
        putting = dashboard.update_serve_config(config)
        failures = (DashboardError,)
        _, problem = await try_write_child(self.recorder, svc, events, putting, failures=failures)
        return not problem

    def _applied_hash(self, cluster: Obj) -> str | None:
        """The hash of the Serve config last PUT to ``cluster`` by this process, else the
        annotation an older version wrote on it, else None (then Serve's report decides)."""
        meta = cluster["metadata"]
        return self.applied_serve.get(str(meta.get("uid") or "")) or (
            (meta.get("annotations") or {}).get(c.ANNOTATION_SERVE_CONFIG_HASH)
        )

    def _record_applied(self, cluster: Obj, config_hash: str) -> None:
        """Remembers what ``cluster`` runs; forgets clusters the cache no longer holds, so the
        record stays as small as the set of live clusters."""
        uid = str(cluster["metadata"].get("uid") or "")
        if not uid:
            return
        live = {str(o["metadata"].get("uid")) for o in self.clusters.list()}
        for gone in [u for u in self.applied_serve if u not in live]:
            del self.applied_serve[gone]
        self.applied_serve[uid] = config_hash

    async def _update_serve_label(
        self, svc: Obj, cluster: Obj, apps: dict[str, Obj] | None
    ) -> None:
        ns, cname = svc["metadata"]["namespace"], cluster["metadata"]["name"]
        pod = self._head_pod(ns, cname)
        if pod is None:
            return
        exclude = bool(svc["spec"].get("excludeHeadPodFromServeSvc"))
        probed: bool | None = None
        if not exclude:
            ip = (pod.get("status") or {}).get("podIP")
            probe = self.config.health_probe
            if probe is not None and ip:
                probed = await probe(str(ip), rss.serve_port(cluster))
        want = rss.serve_label(exclude_head=exclude, probed=probed, apps=apps)
        labels = pod["metadata"].get("labels") or {}
        if labels.get(c.LABEL_SERVE) == want:
            return
        pname = pod["metadata"]["name"]
        events = child_events(
            "Update",
            f"the serve label to {want} for the head pod {ns}/{pname}",
            c.EVENT_UPDATED_HEAD_POD_SERVE_LABEL,
            c.EVENT_FAILED_TO_UPDATE_HEAD_POD_SERVE_LABEL,
            server_message=False,
        )
        patching = self.client.patch(
            PODS, pname, {"metadata": {"labels": {c.LABEL_SERVE: want}}}, ns
        )
        with contextlib.suppress(NotFound):
            await try_write_child(self.recorder, svc, events, patching, benign=(NotFound,))

    # ------------------------------------------------------------------ services
    async def _reconcile_services(self, svc: Obj, target: Obj) -> str | None:
        """Creates or re-points the head and serve Services at ``target``; returns the cluster
        both now point at (None when either could not be made to)."""
        ns = svc["metadata"]["namespace"]
        try:
            wanted = [
                rsb.build_head_service_for(svc, target, self.config.build),
                rsb.build_serve_service_for(svc, target, self.config.build),
            ]
        except BuildError as exc:
            self.recorder.event(svc, WARNING, c.EVENT_FAILED_TO_CREATE_SERVICE, str(exc), "Create")
            return None
        target_name = str(target["metadata"]["name"])
        for want in wanted:
            sname = want["metadata"]["name"]
            have = self.services.get(ns, sname)
            if have is None:
                # A failed create is reported by the error the pass ends with, not by an event.
                events = child_events(
                    "Create", f"service {ns}/{sname}", c.EVENT_CREATED_SERVICE, None
                )
                try:
                    await write_child(
                        self.recorder, svc, events, self.client.create(SERVICES, want, ns)
                    )
                except AlreadyExists:
                    have = await self.client.get(SERVICES, sname, ns)
                else:
                    continue
            # Both Services select the target cluster by name (``ray.io/cluster``).
            patch = selector_patch(have, want)
            if patch is None:
                continue
            what = f"service {ns}/{sname}"
            updated, failed = c.EVENT_UPDATED_SERVICE, c.EVENT_FAILED_TO_UPDATE_SERVICE
            events = child_events("Update", what, updated, failed)
            patching = self.client.patch(SERVICES, sname, patch, ns)
            try:
                await write_child(self.recorder, svc, events, patching, benign=STATES)
            except (Conflict, NotFound):
                return None
        return target_name

    def _num_serve_endpoints(self, svc: Obj, *, incremental: bool = False) -> int:
        """Ready endpoints behind the serve Service(s) (``rss.serve_service_names``)."""
        ns = svc["metadata"]["namespace"]
        slices = []
        for sname in rss.serve_service_names(svc, incremental=incremental):
            slices.extend(self.slices.list(index="service", value=f"{ns}/{sname}"))
        return rsb.count_ready_endpoints(slices)

    def _serve_pods_ready(self, svc: Obj, cluster: Obj) -> int:
        """Serving pods of ``cluster`` (``rss.count_serving_pods``) from the pod cache."""
        ns, cname = svc["metadata"]["namespace"], cluster["metadata"]["name"]
        return rss.count_serving_pods(self.pods.list(index="cluster", value=f"{ns}/{cname}"))

    # ------------------------------------------------------------------ status
    def _set_condition(
        self, svc: Obj, ctype: str, status: str, reason: str, message: str = ""
    ) -> None:
        rss.set_service_condition(svc, ctype, status, reason, message, self.now())

    def _init_conditions(self, svc: Obj) -> None:
        conditions: list[Obj] = svc["status"].setdefault("conditions", []) or []
        svc["status"]["conditions"] = conditions
        rss.init_conditions(conditions, svc["metadata"].get("generation"), rfc3339(self.now()))

    def _set_status_conditions(
        self, svc: Obj, has_active: bool, has_pending: bool, *, waiting: str = ""
    ) -> None:
        rss.calculate_conditions(
            svc["status"],
            has_active=has_active,
            has_pending=has_pending,
            waiting=waiting,
            generation=svc["metadata"].get("generation"),
            now=rfc3339(self.now()),
        )

    async def _write_status(self, svc: Obj, old: Obj) -> bool:
        status = svc["status"]
        meta = svc["metadata"]
        status["observedGeneration"] = meta.get("generation")
        for cond in status.get("conditions") or []:
            cond["observedGeneration"] = meta.get("generation")
        if rss.comparable(status) == rss.comparable(old):
            return False
        status["lastUpdateTime"] = rfc3339(self.now())
        body = {
            "apiVersion": c.API_VERSION,
            "kind": c.KIND_RAYSERVICE,
            "metadata": {
                "name": meta["name"],
                "namespace": meta.get("namespace"),
                "resourceVersion": meta["resourceVersion"],
            },
            "spec": svc["spec"],
            "status": status,
        }
        try:
            written = await self.client.update_status(RAYSERVICES, body)
        except (Conflict, NotFound):
            return False
        self.rayservices.record_write(written, based_on=meta["resourceVersion"])
        return True


def _originated_from_crd(obj: Obj) -> str | None:
    labels: Obj = obj["metadata"].get("labels") or {}
    return labels.get(c.LABEL_ORIGINATED_FROM_CRD)


def register(
    mgr: Manager,
    config: RayServiceConfig,
    namespaces: list[str] | None,
    dashboard_factory: DashboardFactory,
) -> RayServiceReconciler:
    """Builds the reconciler over the manager's caches of the watched namespaces (None: all)
    and wires in its controller."""
    rec = RayServiceReconciler(
        mgr.client,
        mgr.recorder(c.RECORDER_RAYSERVICE),
        config,
        dashboard_factory,
        caches=mgr,
        namespaces=namespaces,
    )
    # A deleted object's event budget and aggregation state go with it (forget).
    rec.controller = wire_controller(
        mgr,
        "rayservice",
        rec.reconcile,
        config.concurrency,
        rec.rayservices,
        rec.forget,
        [rec.clusters, rec.services],
        c.KIND_RAYSERVICE,
    )
    return rec
