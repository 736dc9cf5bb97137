"""RayService reconciler: Serve on a RayCluster with zero-downtime cluster upgrades, blue/green
(``NewCluster``) or incremental through the Gateway API (``NewClusterWithIncrementalUpgrade``,
gate RayServiceIncrementalUpgrade), rollback of an incremental upgrade, suspend / resume and the
``ray.io/initializing-timeout`` annotation (terminal, as upstream); upstream:
ray-operator/controllers/ray/rayservice_controller.go.

Invariants and failure modes:
- Intent before action. A new cluster's name is written to
  ``status.pendingServiceStatus.rayClusterName`` before the cluster is created; every later pass
  builds it from the persisted name, so a crash or restart never creates a second pending
  cluster (the create answers AlreadyExists). A spec change while a blue/green upgrade is pending
  replaces the pending cluster (the old one is cleaned up like any other stale cluster).
- Beyond upstream, nothing the decisions depend on lives only in memory:
  * the Serve config applied to a cluster is recorded on that cluster (annotation
    ``ray.io/serve-config-hash``, written right after a successful PUT), so a restart does not
    re-PUT (which would redeploy every application). A crash between the PUT and the
    annotation write is recognised from the config Serve reports as deployed (the annotation
    is then written without a PUT); only when Serve reports it back altered does it cost one
    redundant PUT, never a missed one.
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
- One status write per pass, at the end, with optimistic concurrency (Conflict -> requeue);
  the written object is put into the cache (``apply_own_write``) so the next pass starts from
  it instead of the stale copy.
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

import asyncio
import base64
import contextlib
import copy
import logging
import time
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field

import yaml
from pydantic import ValidationError

from kuberay.api import constants as c
from kuberay.api import features
from kuberay.api import validation as v
from kuberay.api.features import FeatureGates
from kuberay.api.k8svalidation import parse_go_duration
from kuberay.api.rayservice import RayService
from kuberay.builders import gateway as gwb
from kuberay.builders import names
from kuberay.builders import rayjob as rjb
from kuberay.builders import rayservice as rsb
from kuberay.builders.errors import BuildError
from kuberay.builders.options import BuildOptions
from kuberay.controllers import rayservice_status as rss
from kuberay.controllers.common import (
    POD_SELECTOR,
    RAYCLUSTERS,
    find_cached,
    parse_time,
    random_suffix,
    rfc3339,
)
from kuberay.controllers.rayjob import dashboard_base_url
from kuberay.ray.dashboard import DashboardClient, DashboardError, DashboardFactory
from kuberay.runtime.client import (
    ENDPOINTSLICES,
    PODS,
    SECRETS,
    SERVICES,
    KubeClient,
    Resource,
)
from kuberay.runtime.controller import Request, Result
from kuberay.runtime.errors import AlreadyExists, ApiError, Conflict, NotFound
from kuberay.runtime.events import NORMAL, WARNING, EventRecorder
from kuberay.runtime.informer import Handler, Informer
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

RAYSERVICES = Resource("ray.io", "v1", "rayservices", kind="RayService")
GATEWAYS = Resource("gateway.networking.k8s.io", "v1", "gateways", kind="Gateway")
HTTPROUTES = Resource("gateway.networking.k8s.io", "v1", "httproutes", kind="HTTPRoute")

HealthProbe = Callable[[str, int], Awaitable[bool | None]]


async def proxy_healthz(ip: str, port: int, timeout: float = 2.0) -> bool | None:
    """GET ``http://ip:port/-/healthz``: True on 200, False on another answer, None when the
    proxy cannot be reached at all."""
    try:
        reader, writer = await asyncio.wait_for(asyncio.open_connection(ip, port), timeout)
    except (OSError, TimeoutError):
        return None
    try:
        request = f"GET /-/healthz HTTP/1.1\r\nHost: {ip}\r\nConnection: close\r\n\r\n"
        writer.write(request.encode())
        await writer.drain()
        line = await asyncio.wait_for(reader.readline(), timeout)
        parts = line.decode(errors="replace").split()
        return len(parts) >= 2 and parts[1] == "200"
    except (OSError, TimeoutError):
        return None
    finally:
        writer.close()
        with contextlib.suppress(OSError):
            await writer.wait_closed()


@dataclass
class ServeState:
    """What one pass learned from a cluster's dashboard (all empty when it could not ask)."""

    ready: bool = False
    apps: dict[str, Obj] | None = None
    capacity: int | None = None  # the target_capacity Serve reports (incremental upgrades)
    deployed: Obj = field(default_factory=dict)


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
    def __init__(
        self,
        mgr: Manager,
        config: RayServiceConfig,
        dashboard_factory: DashboardFactory,
        *,
        namespaces: list[str] | None = None,
    ) -> None:
        self.client: KubeClient = mgr.client
        self.config = config
        self.dashboards = dashboard_factory
        self.recorder: EventRecorder = mgr.recorder(c.RECORDER_RAYSERVICE)
        ns_list: list[str | None] = list(namespaces) if namespaces else [None]
        self.rayservices: list[Informer] = []
        self.clusters: list[Informer] = []
        self.services: list[Informer] = []
        self.pods: list[Informer] = []
        self.slices: list[Informer] = []
        ctrl = mgr.controller("rayservice", self.reconcile, concurrency=config.concurrency)
        for ns in ns_list:
            rayservices = mgr.informer(RAYSERVICES, namespace=ns)
            clusters = mgr.informer(RAYCLUSTERS, namespace=ns)
            services = mgr.informer(SERVICES, namespace=ns, label_selector=SERVICE_SELECTOR)
            pods = mgr.informer(
                PODS, namespace=ns, label_selector=POD_SELECTOR, transform=projector(POD_FIELDS)
            )
            pods.store.add_indexer("cluster", index_by_label(c.LABEL_CLUSTER))
            slices = mgr.informer(
                ENDPOINTSLICES, namespace=ns, transform=projector(ENDPOINTSLICE_FIELDS)
            )
            clusters.store.add_indexer("origin", index_by_label(c.LABEL_ORIGINATED_FROM_CR_NAME))
            slices.store.add_indexer("service", index_by_label(c.LABEL_ENDPOINTSLICE_SERVICE_NAME))
            ctrl.for_(rayservices)
            # A deleted object's event budget and aggregation state go with it.
            rayservices.add_handler(Handler(on_delete=self._forget))
            ctrl.owns(clusters, c.KIND_RAYSERVICE, c.GROUP)
            ctrl.owns(services, c.KIND_RAYSERVICE, c.GROUP)
            self.rayservices.append(rayservices)
            self.clusters.append(clusters)
            self.services.append(services)
            self.pods.append(pods)
            self.slices.append(slices)
        self.controller = ctrl

    # ------------------------------------------------------------------ helpers
    def _forget(self, obj: Obj) -> None:
        self.recorder.forget(obj["metadata"].get("uid", ""))

    def now(self) -> float:
        return self.config.clock()

    _cached = staticmethod(find_cached)

    def _owned_clusters(self, ns: str, svc_name: str) -> list[Obj]:
        out = []
        for inf in self.clusters:
            for obj in inf.store.by_index("origin", f"{ns}/{svc_name}"):
                labels = obj["metadata"].get("labels") or {}
                if labels.get(c.LABEL_ORIGINATED_FROM_CRD) == c.KIND_RAYSERVICE:
                    out.append(obj)
        return out

    def _head_pod(self, ns: str, cluster: str) -> Obj | None:
        for inf in self.pods:
            for pod in inf.store.by_index("cluster", f"{ns}/{cluster}"):
                meta = pod["metadata"]
                labels = meta.get("labels") or {}
                if labels.get(c.LABEL_NODE_TYPE) == c.NODE_TYPE_HEAD and not meta.get(
                    "deletionTimestamp"
                ):
                    return pod
        return None

    def _requeue(self, seconds: float | None = None) -> Result:
        if seconds is not None and seconds <= 0:
            return Result(requeue=True)  # now (requeue_after=0 would mean "not at all")
        return Result(requeue_after=self.config.requeue_seconds if seconds is None else seconds)

    # ------------------------------------------------------------------ reconcile
    async def reconcile(self, req: Request) -> Result | None:
        ns = req.namespace or ""
        cached = self._cached(self.rayservices, ns, req.name)
        if cached is None:
            return None
        spec = cached.get("spec") or {}
        managed_by = spec.get("managedBy")
        if managed_by is not None and managed_by != c.MANAGED_BY_KUBERAY:
            return None
        svc = copy.deepcopy(cached)
        svc.setdefault("apiVersion", c.API_VERSION)
        svc.setdefault("kind", c.KIND_RAYSERVICE)
        if not isinstance(svc.get("status"), dict):
            svc["status"] = {}
        old_status = copy.deepcopy(svc["status"])
        name = svc["metadata"]["name"]
        deleting = bool(svc["metadata"].get("deletionTimestamp"))

        wait = await self._clean_up_clusters(svc, deleting)
        if deleting:
            return await self._finalize(svc)
        if c.FINALIZER_RAYSERVICE not in (svc["metadata"].get("finalizers") or []):
            await self._add_finalizer(svc)
            return self._requeue(0)

        problem = self._validate(svc)
        if problem is not None:
            reason, message = problem
            self.recorder.event(svc, WARNING, reason, message, "Validate")
            self._set_condition(svc, c.COND_READY, "False", c.REASON_VALIDATION_FAILED, message)
            await self._write_status(svc, old_status)
            return None

        status = svc["status"]
        stop, result = await self._handle_suspend(svc, old_status)
        if stop:
            return result
        self._init_conditions(svc)
        if self._initializing_timed_out(svc):
            # Terminal: no cluster is kept (the clean-up deletes them after the delay); only
            # deleting and recreating the RayService recovers.
            status["activeServiceStatus"] = {}
            status["pendingServiceStatus"] = {}
            status["numServeEndpoints"] = 0
            status["serviceStatus"] = ""
            await self._write_status(svc, old_status)
            remaining = self._owned_clusters(ns, name)
            return self._requeue(wait) if remaining else None
        active_name = (status.get("activeServiceStatus") or {}).get("rayClusterName") or ""
        pending_name = (status.get("pendingServiceStatus") or {}).get("rayClusterName") or ""
        active = self._cached(self.clusters, ns, active_name) if active_name else None
        pending = await self._ensure_pending(svc, pending_name) if pending_name else None
        if active is not None:
            active = await self._update_in_place(svc, active)
        if pending is not None:
            pending = await self._update_in_place(svc, pending)

        incremental = self._incremental(svc)
        rolling_back = False
        if incremental and active is not None and pending is not None:
            rolling_back = self._reconcile_rollback_state(svc, active, pending)
        elif pending is None:
            self._drop_condition(svc, c.COND_ROLLBACK_IN_PROGRESS)

        pending_serve = ServeState()
        if pending is not None:
            pending_serve = await self._reconcile_serve(
                svc,
                pending,
                apply=not rolling_back,
                capacity=self._capacity(svc, "pendingServiceStatus", 0) if incremental else None,
            )
        active_serve = ServeState()
        if active is not None:
            # The active cluster keeps serving while a pending one comes up; config-only
            # changes are applied to it in place (its hash still matches the goal), and during
            # a rollback it gets the goal config back.
            apply = rsb.matches_goal(svc, active) and (pending is None or rolling_back)
            active_serve = await self._reconcile_serve(
                svc,
                active,
                apply=apply,
                capacity=self._capacity(svc, "activeServiceStatus", gwb.FULL)
                if incremental
                else None,
            )
        for cluster, serve in ((active, active_serve), (pending, pending_serve)):
            if cluster is not None:
                await self._update_serve_label(svc, cluster, serve.apps)

        # ---- status of both sides (what the dashboards said)
        if active is not None:
            status["activeServiceStatus"] = self._side_status(
                status.get("activeServiceStatus"), active, active_serve
            )
        elif active_name:
            status["activeServiceStatus"] = {}
        if pending is not None:
            status["pendingServiceStatus"] = self._side_status(
                status.get("pendingServiceStatus"), pending, pending_serve
            )

        detail = ""
        step_wait: float | None = None
        if incremental and active is not None:
            before = active
            active, pending, detail, step_wait = await self._incremental_upgrade(
                svc, active, pending, active_serve, pending_serve, rolling_back
            )
            if (active_serve if active is before else pending_serve).ready:
                await self._reconcile_services(svc, active)
        else:
            if incremental:
                # upstream: the Gateway exists from the first reconcile on (the HTTPRoute only
                # once a cluster is active, since it has nothing to route to before).
                if pending is not None:
                    await self._ensure_cluster_serve_services(svc, [pending])
                _, gateway_problem = await self._apply_gateway_object(
                    svc, GATEWAY_KIND, gwb.build_gateway(svc)
                )
                detail = gateway_problem or detail
            target = None
            # Traffic leaves a serving cluster only for serve endpoints that are ready.
            endpoints_ready = pending is not None and (
                active is None or self._serve_pods_ready(svc, pending) > 0
            )
            if (
                pending is not None
                and pending_serve.ready
                and endpoints_ready
                and (rsb.matches_goal(svc, pending) or rsb.only_groups_appended(svc, pending))
            ):
                # (a pending cluster for a goal that changed since is replaced, never promoted)
                target = pending
            elif active is not None and active_serve.ready:
                target = active
            pointed_at = None
            if target is not None:
                pointed_at = await self._reconcile_services(svc, target)
            if pending is not None and pointed_at == pending["metadata"]["name"]:
                # Promotion: the Services now send traffic to the pending cluster.
                status["activeServiceStatus"] = status["pendingServiceStatus"]
                status["pendingServiceStatus"] = {}
                active, pending = pending, None
                log.info("RayService %s/%s: promoted %s", ns, name, active["metadata"]["name"])
            elif pending is not None and pending_serve.ready and not endpoints_ready:
                detail = (
                    f"waiting for the serve endpoints of RayCluster {pending['metadata']['name']}"
                    " to be ready"
                )
        if self._should_prepare_new_cluster(svc, active, pending, incremental=incremental):
            new_name = rsb.cluster_name_for(name, self.config.suffix())
            side: Obj = {"rayClusterName": new_name}
            if incremental:
                # The first cluster takes all traffic at once; a later one starts empty.
                side["targetCapacity"] = gwb.FULL if active is None else 0
                side["trafficRoutedPercent"] = gwb.FULL if active is None else 0
            status["pendingServiceStatus"] = side
            log.info("RayService %s/%s: new pending cluster %s", ns, name, new_name)
        status["numServeEndpoints"] = self._num_serve_endpoints(svc, incremental=incremental)
        waiting = self._waiting_for(svc, pending, pending_serve.apps, detail)
        if detail and detail not in waiting:
            waiting = rss.with_detail(waiting, detail) if waiting else detail
        self._set_status_conditions(
            svc, active is not None, bool(pending_name_of(svc)), waiting=waiting
        )
        await self._write_status(svc, old_status)
        soonest = [x for x in (wait, step_wait) if x is not None]
        return self._requeue(min([*soonest, self.config.requeue_seconds]) if soonest else None)

    # ------------------------------------------------------------------ validation
    def _validate(self, svc: Obj) -> tuple[str, str] | None:
        err = v.validate_rayservice_metadata(svc["metadata"])
        if err:
            return c.EVENT_INVALID_RAYSERVICE_METADATA, err
        try:
            model = RayService.model_validate(svc)
        except ValidationError as exc:
            return c.EVENT_INVALID_RAYSERVICE_SPEC, f"{v.RAYSERVICE_PREFIX}{exc}"
        err = v.validate_rayservice_spec(model, self.config.gates)
        if err:
            return c.EVENT_INVALID_RAYSERVICE_SPEC, err
        try:
            rsb.serve_config(svc)
        except (ValueError, yaml.YAMLError) as exc:
            return c.EVENT_INVALID_RAYSERVICE_SPEC, f"{v.RAYSERVICE_PREFIX}serveConfigV2: {exc}"
        return None

    # ------------------------------------------------------------------ suspend
    def _is(self, svc: Obj, ctype: str) -> bool:
        return (self._condition(svc, ctype) or {}).get("status") == "True"

    async def _handle_suspend(self, svc: Obj, old_status: Obj) -> tuple[bool, Result | None]:
        """The suspend state machine; (True, result) ends the pass. Once Suspending is
        persisted the suspension completes whatever ``spec.suspend`` says meanwhile."""
        status = svc["status"]
        want = bool(svc["spec"].get("suspend"))
        if self._is(svc, c.COND_SUSPENDING):
            if await self._delete_children(svc):
                self._set_condition(svc, c.COND_SUSPENDING, "True", c.REASON_SUSPEND_IN_PROGRESS)
                self._set_condition(svc, c.COND_READY, "False", c.REASON_SUSPEND_IN_PROGRESS)
                await self._write_status(svc, old_status)
                return True, self._requeue()
            for ctype, value in (
                (c.COND_SUSPENDING, "False"),
                (c.COND_SUSPENDED, "True"),
                (c.COND_READY, "False"),
                (c.COND_UPGRADE_IN_PROGRESS, "False"),
                (c.COND_ROLLBACK_IN_PROGRESS, "False"),
            ):
                self._set_condition(svc, ctype, value, c.REASON_SUSPEND_COMPLETE)
            await self._write_status(svc, old_status)
            return True, None
        if self._is(svc, c.COND_SUSPENDED):
            if want:
                return True, None
            self._set_condition(svc, c.COND_SUSPENDED, "False", c.REASON_RAYSERVICE_RESUMED)
            self._drop_condition(svc, c.COND_READY)  # re-armed below with a fresh time
            self._set_condition(svc, c.COND_UPGRADE_IN_PROGRESS, "False", c.REASON_INITIALIZING)
            return False, None
        if not want:
            return False, None
        self._set_condition(svc, c.COND_SUSPENDING, "True", c.REASON_SUSPEND_REQUESTED)
        self._set_condition(svc, c.COND_READY, "False", c.REASON_SUSPEND_IN_PROGRESS)
        self._set_condition(svc, c.COND_UPGRADE_IN_PROGRESS, "False", c.REASON_SUSPEND_IN_PROGRESS)
        self._set_condition(svc, c.COND_ROLLBACK_IN_PROGRESS, "False", c.REASON_SUSPEND_IN_PROGRESS)
        status["activeServiceStatus"] = {}
        status["pendingServiceStatus"] = {}
        status["numServeEndpoints"] = 0
        status["serviceStatus"] = ""
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
        for inf in self.services:
            for item in inf.store.values():
                meta = item.get("metadata") or {}
                labels = meta.get("labels") or {}
                if (
                    meta.get("namespace") == ns
                    and labels.get(c.LABEL_ORIGINATED_FROM_CR_NAME) == name
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
            try:
                await self.client.delete(res, child, ns, propagation="Background")
            except NotFound:
                continue
            except ApiError as exc:
                note = f"Failed to delete {kind} {ns}/{child}: {exc.message or exc}"
                self.recorder.event(svc, WARNING, failed, note, "Delete")
                continue
            self.recorder.event(svc, NORMAL, done, f"Deleted {kind} {ns}/{child}", "Delete")
        return await self._delete_gateway_objects(svc) or remaining

    def _drop_condition(self, svc: Obj, ctype: str) -> None:
        conditions = svc["status"].get("conditions") or []
        svc["status"]["conditions"] = [x for x in conditions if x.get("type") != ctype]

    def _initializing_timed_out(self, svc: Obj) -> bool:
        """True once Ready is (or has just become) False/InitializingTimeout."""
        ready = self._condition(svc, c.COND_READY) or {}
        if ready.get("reason") == c.REASON_INITIALIZING_TIMEOUT:
            return True
        if ready.get("reason") != c.REASON_INITIALIZING:
            return False
        text = (svc["metadata"].get("annotations") or {}).get(c.ANNOTATION_INITIALIZING_TIMEOUT)
        if not text:
            return False
        try:
            timeout = parse_go_duration(str(text))
        except ValueError:
            timeout = float(int(str(text)))  # validated: a positive integer (seconds)
        since = parse_time(ready.get("lastTransitionTime"))
        if since is None or self.now() - since < timeout:
            return False
        message = f"RayService failed to become ready within the initializing timeout of {text}"
        self._set_condition(svc, c.COND_READY, "False", c.REASON_INITIALIZING_TIMEOUT, message)
        self.recorder.event(
            svc, WARNING, c.EVENT_RAYSERVICE_INITIALIZING_TIMEOUT, message, "Reconcile"
        )
        return True

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
        keep = set()
        if not deleting:
            keep = {
                (status.get("activeServiceStatus") or {}).get("rayClusterName"),
                (status.get("pendingServiceStatus") or {}).get("rayClusterName"),
            }
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
            due = parse_time((cmeta.get("annotations") or {}).get(c.ANNOTATION_DELETION_AT))
            if due is None or (deleting and due > now):
                due = now + delay
                if delay > 0:
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
            try:
                await self.client.delete(
                    RAYCLUSTERS, cmeta["name"], ns, propagation="Background", uid=cmeta.get("uid")
                )
            except NotFound:
                continue
            except ApiError as exc:
                self.recorder.event(
                    svc,
                    WARNING,
                    c.EVENT_FAILED_TO_DELETE_RAYCLUSTER,
                    f"Failed to delete RayCluster {ns}/{cmeta['name']}: {exc}",
                    "Delete",
                )
                continue
            self.recorder.event(
                svc,
                NORMAL,
                c.EVENT_DELETED_RAYCLUSTER,
                f"Deleted RayCluster {ns}/{cmeta['name']}",
                "Delete",
            )
        return soonest

    # ------------------------------------------------------------------ clusters
    async def _ensure_pending(self, svc: Obj, name: str) -> Obj | None:
        ns = svc["metadata"]["namespace"]
        cached = self._cached(self.clusters, ns, name)
        if cached is not None:
            return cached
        cluster = rsb.build_cluster(svc, name)
        try:
            created = await self.client.create(RAYCLUSTERS, cluster, ns)
        except AlreadyExists:
            return await self.client.get(RAYCLUSTERS, name, ns)
        except ApiError as exc:
            self.recorder.event(
                svc,
                WARNING,
                c.EVENT_FAILED_TO_CREATE_RAYCLUSTER,
                f"Failed to create RayCluster {ns}/{name}: {exc.message or exc}",
                "Create",
            )
            raise
        self.recorder.event(
            svc, NORMAL, c.EVENT_CREATED_RAYCLUSTER, f"Created RayCluster {ns}/{name}", "Create"
        )
        return created

    async def _update_in_place(self, svc: Obj, cluster: Obj) -> Obj:
        if not rsb.needs_in_place_update(svc, cluster):
            return cluster
        want = rsb.updated_cluster(svc, cluster)
        ns, cname = svc["metadata"]["namespace"], cluster["metadata"]["name"]
        try:
            updated = await self.client.update(RAYCLUSTERS, want)
        except (Conflict, NotFound):
            return cluster
        except ApiError as exc:
            note = f"Failed to update RayCluster {ns}/{cname}: {exc.message or exc}"
            self.recorder.event(svc, WARNING, c.EVENT_FAILED_TO_UPDATE_RAYCLUSTER, note, "Update")
            raise
        self.recorder.event(
            svc, NORMAL, c.EVENT_UPDATED_RAYCLUSTER, f"Updated RayCluster {ns}/{cname}", "Update"
        )
        return updated

    def _should_prepare_new_cluster(
        self, svc: Obj, active: Obj | None, pending: Obj | None, *, incremental: bool = False
    ) -> bool:
        if self._is(svc, c.COND_ROLLBACK_IN_PROGRESS):
            return False
        if incremental and active is not None and pending is not None:
            return False  # a changed goal is a rollback first (see _reconcile_rollback_state)
        if pending is not None:
            # A pending cluster whose spec is no longer the goal is replaced.
            return not rsb.matches_goal(svc, pending) and not rsb.only_groups_appended(svc, pending)
        if pending_name_of(svc):
            return False  # chosen, not created yet
        if active is None:
            return True
        if rsb.matches_goal(svc, active) or rsb.only_groups_appended(svc, active):
            return False
        strategy = ((svc["spec"].get("upgradeStrategy") or {}).get("type")) or ""
        if strategy == c.RAYSERVICE_UPGRADE_NEW_CLUSTER:
            return True
        if strategy == c.RAYSERVICE_UPGRADE_INCREMENTAL:
            return self.config.gates.enabled(features.RAY_SERVICE_INCREMENTAL_UPGRADE)
        if strategy:
            return False
        return self.config.zero_downtime

    # ------------------------------------------------------------------ incremental upgrade
    def _incremental(self, svc: Obj) -> bool:
        strategy = (svc["spec"].get("upgradeStrategy") or {}).get("type")
        return strategy == c.RAYSERVICE_UPGRADE_INCREMENTAL and self.config.gates.enabled(
            features.RAY_SERVICE_INCREMENTAL_UPGRADE
        )

    @staticmethod
    def _capacity(svc: Obj, side: str, default: int) -> int:
        value = (svc["status"].get(side) or {}).get("targetCapacity")
        return gwb.normalize_capacity(value, default)

    def _reconcile_rollback_state(self, svc: Obj, active: Obj, pending: Obj) -> bool:
        """True while the upgrade runs backwards: the goal is the active cluster's spec again,
        or a third spec (rolled back first, then upgraded to from the active cluster)."""
        if rsb.matches_goal(svc, pending) or rsb.only_groups_appended(svc, pending):
            self._drop_condition(svc, c.COND_ROLLBACK_IN_PROGRESS)  # the goal came back
            return False
        if not self._is(svc, c.COND_ROLLBACK_IN_PROGRESS):
            if rsb.matches_goal(svc, active):
                message = (
                    f"The desired spec matches the active RayCluster {active['metadata']['name']}"
                    "; rolling traffic back to it"
                )
            else:
                message = (
                    "The desired spec changed during the upgrade; rolling traffic back to "
                    f"RayCluster {active['metadata']['name']} before upgrading again"
                )
            self._set_condition(
                svc,
                c.COND_ROLLBACK_IN_PROGRESS,
                "True",
                c.REASON_DESIRED_CLUSTER_SPEC_CHANGED,
                message,
            )
        return True

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
        a_side: Obj = status["activeServiceStatus"]
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
            active, pending = self._complete_migration(svc, active, pending, rolling_back)
        backends = [
            gwb.Backend(
                str(cluster["metadata"]["name"]),
                _serve_port(cluster),
                int(side.get("trafficRoutedPercent") or 0),
            )
            for cluster, side in (
                (active, status["activeServiceStatus"]),
                (pending, status.get("pendingServiceStatus") or {}),
            )
            if cluster is not None
        ]
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
        """At most one move toward the gaining cluster (pending; active in a rollback), and
        only through a Gateway and HTTPRoute their controller reports as working."""
        (active, pending), (active_serve, pending_serve) = clusters, serves
        status = svc["status"]
        ns, name = svc["metadata"]["namespace"], svc["metadata"]["name"]
        a_side, p_side = status["activeServiceStatus"], status["pendingServiceStatus"]
        a_name, p_name = active["metadata"]["name"], pending["metadata"]["name"]
        p_side.setdefault("targetCapacity", 0)
        p_traffic = gwb.normalize_capacity(p_side.get("trafficRoutedPercent"), 0)
        observed = gwb.route_weights(route, a_name, p_name)
        if observed is not None and observed[1] != p_traffic:
            # The route is ahead of the status (its write happened, the status write did
            # not): believe the route and wait a full interval from now.
            p_traffic = observed[1]
            self._set_traffic(svc, p_traffic)
        else:
            a_side["trafficRoutedPercent"] = gwb.FULL - p_traffic
            p_side["trafficRoutedPercent"] = p_traffic
        missing = gwb.gateway_not_ready(gateway)
        if missing:
            return (
                f"waiting for Gateway {ns}/{gwb.gateway_name(name)} to be " + " and ".join(missing),
                None,
            )
        missing = gwb.httproute_not_ready(route, gwb.gateway_name(name))
        if missing:
            return (
                f"waiting for HTTPRoute {ns}/{gwb.httproute_name(name)} to be "
                + " and ".join(missing),
                None,
            )
        if rolling_back:
            gaining, losing, serve = active, pending, active_serve
            g_side, l_side = a_side, p_side
        else:
            gaining, losing, serve = pending, active, pending_serve
            g_side, l_side = p_side, a_side
        g_name = gaining["metadata"]["name"]
        m = gwb.Migration(
            gwb.normalize_capacity(g_side.get("targetCapacity"), 0),
            gwb.normalize_capacity(l_side.get("targetCapacity"), 0),
            gwb.normalize_capacity(g_side.get("trafficRoutedPercent"), 0),
        )
        if m.complete:
            return "", None
        if not serve.ready:
            return f"waiting for Serve applications on RayCluster {g_name} to be RUNNING", None
        opts = gwb.upgrade_options(svc)
        want_gain, want_lose = gwb.next_capacities(m, opts.max_surge_percent)
        for cluster, side, old, new in (
            (gaining, g_side, m.gaining_capacity, want_gain),
            (losing, l_side, m.losing_capacity, want_lose),
        ):
            if new != old:
                cluster_serve = active_serve if cluster is active else pending_serve
                done = await self._put_target_capacity(svc, cluster, cluster_serve, new)
                if done:
                    side["targetCapacity"] = new
                return (
                    f"setting target_capacity of RayCluster {cluster['metadata']['name']} "
                    f"to {new}%",
                    0.0 if done else None,
                )
        if self._serve_pods_ready(svc, gaining) == 0:
            return f"waiting for the serve endpoints of RayCluster {g_name} to be ready", None
        last = max(
            (
                t
                for t in (
                    parse_time(a_side.get("lastTrafficMigratedTime")),
                    parse_time(p_side.get("lastTrafficMigratedTime")),
                )
                if t is not None
            ),
            default=None,
        )
        traffic, wait = gwb.next_traffic(
            m, opts.step_size_percent, opts.interval_seconds, last, self.now()
        )
        if traffic != m.gaining_traffic:
            self._set_traffic(svc, gwb.FULL - traffic if rolling_back else traffic)
        verb = "rolling traffic back to" if rolling_back else "moving traffic to"
        return (
            f"{verb} RayCluster {g_name}: {traffic}% routed, target capacity "
            f"{m.gaining_capacity}% (RayCluster {losing['metadata']['name']}: "
            f"{m.losing_capacity}%)",
            wait,
        )

    def _set_traffic(self, svc: Obj, pending_percent: int) -> None:
        status = svc["status"]
        when = rfc3339(self.now())
        for side, value in (
            (status["activeServiceStatus"], gwb.FULL - pending_percent),
            (status["pendingServiceStatus"], pending_percent),
        ):
            side["trafficRoutedPercent"] = value
            side["lastTrafficMigratedTime"] = when

    def _complete_migration(
        self, svc: Obj, active: Obj, pending: Obj, rolling_back: bool
    ) -> tuple[Obj, Obj | None]:
        """Promotion (forward) or the end of a rollback, once the losing cluster is at
        capacity 0 and the gaining one takes all traffic."""
        status = svc["status"]
        a_side, p_side = status["activeServiceStatus"], status["pendingServiceStatus"]
        ns, name = svc["metadata"]["namespace"], svc["metadata"]["name"]
        if rolling_back:
            done = gwb.Migration(
                self._capacity(svc, "activeServiceStatus", gwb.FULL),
                self._capacity(svc, "pendingServiceStatus", 0),
                int(a_side.get("trafficRoutedPercent") or 0),
            ).complete
            if not done:
                return active, pending
            status["pendingServiceStatus"] = {}
            self._drop_condition(svc, c.COND_ROLLBACK_IN_PROGRESS)
            log.info("RayService %s/%s: rolled back to %s", ns, name, active["metadata"]["name"])
            return active, None
        done = gwb.Migration(
            self._capacity(svc, "pendingServiceStatus", 0),
            self._capacity(svc, "activeServiceStatus", gwb.FULL),
            int(p_side.get("trafficRoutedPercent") or 0),
        ).complete
        if not done:
            return active, pending
        status["activeServiceStatus"] = p_side
        status["pendingServiceStatus"] = {}
        log.info("RayService %s/%s: promoted %s", ns, name, pending["metadata"]["name"])
        return pending, None

    async def _ensure_cluster_serve_services(self, svc: Obj, clusters: list[Obj]) -> None:
        """``<cluster>-serve-svc`` for each cluster (the HTTPRoute's backends); create-only."""
        ns = svc["metadata"]["namespace"]
        for cluster in clusters:
            sname = names.serve_service_name(str(cluster["metadata"]["name"]))
            if self._cached(self.services, ns, sname) is not None:
                continue
            event = ("Create", f"service {ns}/{sname}")
            try:
                want = gwb.build_cluster_serve_service(svc, cluster, self.config.build)
            except BuildError as exc:
                message = f"Failed to create {event[1]}: {exc}"
                self.recorder.event(
                    svc, WARNING, c.EVENT_FAILED_TO_CREATE_SERVICE, message, "Create"
                )
                continue
            with contextlib.suppress(AlreadyExists, Conflict, NotFound):
                await self._recorded(
                    svc,
                    (*event, c.EVENT_CREATED_SERVICE, c.EVENT_FAILED_TO_CREATE_SERVICE),
                    self.client.create(SERVICES, want, ns),
                )

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
            try:
                return await self._recorded(
                    svc,
                    ("Create", what, kind.created, kind.failed_create),
                    self.client.create(kind.resource, want, ns),
                )
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
        try:
            updated, problem = await self._recorded(
                svc,
                ("Update", what, kind.updated, kind.failed_update),
                self.client.patch(kind.resource, oname, patch, ns),
            )
        except (Conflict, NotFound):
            return have, ""
        return updated or have, problem

    async def _recorded(
        self, svc: Obj, event: tuple[str, str, str, str], call: Awaitable[Obj]
    ) -> tuple[Obj | None, str]:
        """Runs one write and records upstream's event for it, success or failure; returns
        (the written object, why it failed). AlreadyExists, Conflict and NotFound are left to
        the caller (they are states, not failures)."""
        action, what, ok_reason, failed_reason = event
        try:
            out = await call
        except (AlreadyExists, Conflict, NotFound):
            raise
        except ApiError as exc:
            message = f"Failed to {action.lower()} {what}: {exc}"
            self.recorder.event(svc, WARNING, failed_reason, message, action)
            return None, message
        self.recorder.event(svc, NORMAL, ok_reason, f"{action}d {what}", action)
        return out, ""

    async def _delete_gateway_objects(self, svc: Obj) -> bool:
        """Deletes the Gateway and HTTPRoute; True while either still existed."""
        ns, name = svc["metadata"]["namespace"], svc["metadata"]["name"]
        remaining = False
        for kind, oname in (
            (HTTPROUTE_KIND, gwb.httproute_name(name)),
            (GATEWAY_KIND, gwb.gateway_name(name)),
        ):
            try:
                await self._recorded(
                    svc,
                    ("Delete", f"{kind.kind} {ns}/{oname}", kind.deleted, kind.failed_delete),
                    self.client.delete(kind.resource, oname, ns, propagation="Background"),
                )
            except NotFound:
                continue
            except Conflict:
                pass
            remaining = True
        return remaining

    # ------------------------------------------------------------------ serve
    def _head_ready(self, cluster: Obj) -> bool:
        status = cluster.get("status") or {}
        for cond in status.get("conditions") or []:
            if cond.get("type") == c.COND_HEAD_POD_READY:
                return bool(cond.get("status") == "True")
        return bool(status.get("state") == c.CLUSTER_STATE_READY)

    async def _dashboard(self, svc: Obj, cluster: Obj) -> DashboardClient | None:
        """A client for the cluster's dashboard, or None when its auth token cannot be read."""
        ns, cname = svc["metadata"]["namespace"], cluster["metadata"]["name"]
        url = dashboard_base_url(
            rjb.dashboard_url(cluster, self.config.build),
            ns,
            self.config.apiserver if self.config.use_kubernetes_proxy else None,
        )
        try:
            token = await self._auth_token(cluster)
        except ApiError as exc:
            log.info(
                "RayService %s/%s: auth token of %s: %s", ns, svc["metadata"]["name"], cname, exc
            )
            return None
        return self.dashboards(url, auth_token=token)

    async def _reconcile_serve(
        self, svc: Obj, cluster: Obj, *, apply: bool = True, capacity: int | None = None
    ) -> ServeState:
        """Applies the Serve config when the cluster has not got it yet (with
        ``target_capacity`` when ``capacity`` is given); returns what the dashboard reports
        (nothing while it cannot be asked)."""
        if not self._head_ready(cluster):
            return ServeState()
        ns, cname = svc["metadata"]["namespace"], cluster["metadata"]["name"]
        dashboard = await self._dashboard(svc, cluster)
        if dashboard is None:
            return ServeState()
        try:
            details = await dashboard.get_serve_details()
            applied = (cluster["metadata"].get("annotations") or {}).get(
                c.ANNOTATION_SERVE_CONFIG_HASH
            )
            want = rsb.serve_config_hash(svc)
            no_apps = not (details.get("applications") or {})
            config = (rsb.serve_config(svc) or {}) if apply and want else {}
            if (
                config
                and applied != want
                and not no_apps
                and rsb.runs_serve_config(details, config)
            ):
                # Applied before, but the record of it was lost (crash right after the PUT).
                await self._record_applied(cluster, want)
            elif config and (applied != want or no_apps):
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
                await self._record_applied(cluster, want)
                details = await dashboard.get_serve_details()
        except DashboardError as exc:
            log.info(
                "RayService %s/%s: dashboard of %s: %s", ns, svc["metadata"]["name"], cname, exc
            )
            return ServeState()
        finally:
            await dashboard.close()
        apps = rsb.app_statuses(details)
        observed = details.get("target_capacity")
        return ServeState(
            ready=rsb.all_apps_running(apps),
            apps=apps,
            capacity=None
            if capacity is None or observed is None
            else gwb.normalize_capacity(observed, capacity),
            deployed=rsb.deployed_serve_config(details),
        )

    async def _put_target_capacity(
        self, svc: Obj, cluster: Obj, serve: ServeState, capacity: int
    ) -> bool:
        """PUTs the cluster's Serve config with a new ``target_capacity``. The config is the
        one the cluster runs (the goal's when its hash is recorded there, else what the
        dashboard reports as deployed), so a capacity change never redeploys other apps."""
        cname = str(cluster["metadata"]["name"])
        applied = (cluster["metadata"].get("annotations") or {}).get(c.ANNOTATION_SERVE_CONFIG_HASH)
        config = (
            rsb.serve_config(svc)
            if applied and applied == rsb.serve_config_hash(svc)
            else copy.deepcopy(serve.deployed)
        )
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
        try:
            await dashboard.update_serve_config(config)
        except DashboardError as exc:
            message = f"Failed to update {what} to the RayCluster {ns}/{cname}: {exc}"
            self.recorder.event(svc, WARNING, failed_reason, message, "Update")
            return False
        message = f"Updated {what} to the RayCluster {ns}/{cname}"
        self.recorder.event(svc, NORMAL, ok_reason, message, "Update")
        return True

    async def _auth_token(self, cluster: Obj) -> str | None:
        options = (cluster.get("spec") or {}).get("authOptions") or {}
        if options.get("mode") != c.AUTH_MODE_TOKEN:
            return None
        meta = cluster["metadata"]
        secret_name = options.get("secretName") or names.auth_secret_name(meta["name"])
        secret = await self.client.get(SECRETS, secret_name, meta["namespace"])
        data = (secret.get("data") or {}).get(c.AUTH_TOKEN_SECRET_KEY)
        return base64.b64decode(data).decode() if data else None

    async def _record_applied(self, cluster: Obj, config_hash: str) -> None:
        meta = cluster["metadata"]
        patch = {"metadata": {"annotations": {c.ANNOTATION_SERVE_CONFIG_HASH: config_hash}}}
        try:
            updated = await self.client.patch(RAYCLUSTERS, meta["name"], patch, meta["namespace"])
        except NotFound:
            return
        meta.setdefault("annotations", {})[c.ANNOTATION_SERVE_CONFIG_HASH] = config_hash
        for inf in self.clusters:
            inf.apply_own_write(updated, meta.get("resourceVersion") or "")

    async def _update_serve_label(
        self, svc: Obj, cluster: Obj, apps: dict[str, Obj] | None
    ) -> None:
        ns, cname = svc["metadata"]["namespace"], cluster["metadata"]["name"]
        pod = self._head_pod(ns, cname)
        if pod is None:
            return
        healthy: bool | None = None
        if not svc["spec"].get("excludeHeadPodFromServeSvc"):
            ip = (pod.get("status") or {}).get("podIP")
            probe = self.config.health_probe
            if probe is not None and ip:
                healthy = await probe(str(ip), _serve_port(cluster))
            if healthy is None:  # proxy unreachable: the dashboard's app status decides
                healthy = apps is not None and rsb.all_apps_running(apps)
        want = "true" if healthy else "false"
        labels = pod["metadata"].get("labels") or {}
        if labels.get(c.LABEL_SERVE) == want:
            return
        patch = {"metadata": {"labels": {c.LABEL_SERVE: want}}}
        try:
            await self.client.patch(PODS, pod["metadata"]["name"], patch, ns)
        except NotFound:
            return
        except ApiError as exc:
            self.recorder.event(
                svc,
                WARNING,
                c.EVENT_FAILED_TO_UPDATE_HEAD_POD_SERVE_LABEL,
                f"Failed to update the serve label to {want} for the head pod "
                f"{ns}/{pod['metadata']['name']}: {exc}",
                "Update",
            )
            return
        self.recorder.event(
            svc,
            NORMAL,
            c.EVENT_UPDATED_HEAD_POD_SERVE_LABEL,
            f"Updated the serve label to {want} for the head pod {ns}/{pod['metadata']['name']}",
            "Update",
        )

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
            have = self._cached(self.services, ns, sname)
            if have is None:
                try:
                    have = await self.client.create(SERVICES, want, ns)
                except AlreadyExists:
                    have = await self.client.get(SERVICES, sname, ns)
                else:
                    self.recorder.event(
                        svc,
                        NORMAL,
                        c.EVENT_CREATED_SERVICE,
                        f"Created service {ns}/{sname}",
                        "Create",
                    )
                    continue
            selector = (have.get("spec") or {}).get("selector") or {}
            if selector.get(c.LABEL_CLUSTER) == target_name:
                continue
            patch = {
                "metadata": {"resourceVersion": have["metadata"]["resourceVersion"]},
                "spec": {"selector": want["spec"]["selector"]},
            }
            try:
                await self.client.patch(SERVICES, sname, patch, ns)
            except (Conflict, NotFound):
                return None
            except ApiError as exc:
                note = f"Failed to update service {ns}/{sname}: {exc.message or exc}"
                self.recorder.event(svc, WARNING, c.EVENT_FAILED_TO_UPDATE_SERVICE, note, "Update")
                raise
            self.recorder.event(
                svc, NORMAL, c.EVENT_UPDATED_SERVICE, f"Updated service {ns}/{sname}", "Update"
            )
        return target_name

    def _num_serve_endpoints(self, svc: Obj, *, incremental: bool = False) -> int:
        """Ready endpoints behind the serve Service, or (incremental) behind both clusters'
        own serve Services."""
        ns = svc["metadata"]["namespace"]
        if incremental:
            status = svc["status"]
            services = [
                names.serve_service_name(str(side["rayClusterName"]))
                for side in (status.get("activeServiceStatus"), status.get("pendingServiceStatus"))
                if side and side.get("rayClusterName")
            ]
        else:
            services = [rsb.serve_service_name(svc)]
        slices = []
        for sname in services:
            for inf in self.slices:
                slices.extend(inf.store.by_index("service", f"{ns}/{sname}"))
        return rsb.count_ready_endpoints(slices)

    def _serve_pods_ready(self, svc: Obj, cluster: Obj) -> int:
        """Pods of ``cluster`` the serve Service would have as ready endpoints once pointed
        at it (labelled serving, Ready, not terminating): no Service selects a pending
        cluster before the switch, so its EndpointSlices cannot be asked."""
        ns, cname = svc["metadata"]["namespace"], cluster["metadata"]["name"]
        count = 0
        for inf in self.pods:
            for pod in inf.store.by_index("cluster", f"{ns}/{cname}"):
                meta = pod["metadata"]
                if meta.get("deletionTimestamp"):
                    continue
                if (meta.get("labels") or {}).get(c.LABEL_SERVE) != "true":
                    continue
                conditions = (pod.get("status") or {}).get("conditions") or []
                if any(x.get("type") == "Ready" and x.get("status") == "True" for x in conditions):
                    count += 1
        return count

    # ------------------------------------------------------------------ status
    @staticmethod
    def _side_status(old: Obj | None, cluster: Obj, serve: ServeState) -> Obj:
        out = copy.deepcopy(old or {})
        out["rayClusterName"] = cluster["metadata"]["name"]
        if serve.apps is not None:
            out["applicationStatuses"] = serve.apps
        if serve.capacity is not None:
            # What Serve reports wins over the status: a PUT whose status write was lost
            # (crash) is then neither repeated nor stepped over.
            out["targetCapacity"] = serve.capacity
        cluster_status = cluster.get("status")
        if cluster_status:
            out["rayClusterStatus"] = copy.deepcopy(cluster_status)
        return out

    def _set_condition(
        self, svc: Obj, ctype: str, status: str, reason: str, message: str = ""
    ) -> None:
        conditions: list[Obj] = svc["status"].setdefault("conditions", []) or []
        svc["status"]["conditions"] = conditions
        generation = svc["metadata"].get("generation")
        for cond in conditions:
            if cond.get("type") == ctype:
                if cond.get("status") != status:
                    cond["lastTransitionTime"] = rfc3339(self.now())
                cond.update(status=status, reason=reason, message=message)
                cond["observedGeneration"] = generation
                return
        conditions.append(
            {
                "type": ctype,
                "status": status,
                "reason": reason,
                "message": message,
                "lastTransitionTime": rfc3339(self.now()),
                "observedGeneration": generation,
            }
        )

    def _condition(self, svc: Obj, ctype: str) -> Obj | None:
        for cond in svc["status"].get("conditions") or []:
            if cond.get("type") == ctype:
                return dict(cond)
        return None

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

    def _waiting_for(
        self, svc: Obj, pending: Obj | None, apps: dict[str, Obj] | None, detail: str = ""
    ) -> str:
        """Beyond upstream: what the pending cluster is waiting for, in plain words; ``detail``
        is what the traffic switch itself waits for (endpoints, Gateway, migration steps)."""
        name = pending_name_of(svc)
        if not name:
            return ""
        if pending is None:
            return f"creating RayCluster {name}"
        if not self._head_ready(pending):
            return f"waiting for the head pod of RayCluster {name} to be ready"
        if apps is None:
            return f"waiting for the dashboard of RayCluster {name} to answer"
        not_running = sorted(
            f"{app}={info.get('status')}"
            for app, info in apps.items()
            if info.get("status") != c.APP_RUNNING
        )
        if not apps:
            return f"waiting for Serve applications on RayCluster {name}"
        if not_running:
            return (
                f"waiting for Serve applications on RayCluster {name} to be RUNNING: "
                + ", ".join(not_running)
            )
        return detail or f"switching traffic to RayCluster {name}"

    async def _write_status(self, svc: Obj, old: Obj) -> bool:
        status = svc["status"]
        meta = svc["metadata"]
        status["observedGeneration"] = meta.get("generation")
        for cond in status.get("conditions") or []:
            cond["observedGeneration"] = meta.get("generation")
        if _comparable(status) == _comparable(old):
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
        for inf in self.rayservices:
            inf.apply_own_write(written, meta["resourceVersion"])
        return True


def pending_name_of(svc: Obj) -> str:
    return str((svc["status"].get("pendingServiceStatus") or {}).get("rayClusterName") or "")


def _serve_port(cluster: Obj) -> int:
    head = ((cluster.get("spec") or {}).get("headGroupSpec") or {}).get("template") or {}
    containers = (head.get("spec") or {}).get("containers") or []
    for port in (containers[0].get("ports") or []) if containers else []:
        if port.get("name") == c.SERVE_PORT_NAME and port.get("containerPort"):
            return int(port["containerPort"])
    return c.SERVE_PORT


def _comparable(status: Obj) -> Obj:
    """The status without what alone never warrants a write (upstream: the clusters' own
    statuses and the update time)."""
    out = copy.deepcopy(status)
    out.pop("lastUpdateTime", None)
    for side in ("activeServiceStatus", "pendingServiceStatus"):
        if isinstance(out.get(side), dict):
            out[side].pop("rayClusterStatus", None)
    for cond in out.get("conditions") or []:
        cond.pop("lastTransitionTime", None)
    return out


def register(
    mgr: Manager,
    config: RayServiceConfig,
    namespaces: list[str] | None,
    dashboard_factory: DashboardFactory,
) -> RayServiceReconciler:
    return RayServiceReconciler(mgr, config, dashboard_factory, namespaces=namespaces)
