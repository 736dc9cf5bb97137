"""RayCluster reconciler: read state from the caches, compute with pure builders, write the diff.

Invariants and failure modes:
- Level-triggered and idempotent: every pass starts from the cached RayCluster and pods, so a
  restart or a lost event costs one extra pass, never a wrong action.
- No duplicate pods and no double deletes: each pod create/delete is recorded in expectations
  before it is sent (and kept when the answer is lost, since the write may have landed), and
  a group (head, or one worker group) is only acted on when the cache has seen all of that
  group's recorded writes. Pod names are chosen before the create (random
  suffix injected into the pure builder) so that the expectation names the pod.
- Bounded work per pass: at most ``max_creates_per_pass`` pods are created per reconcile, then
  the key goes to the back of the queue, so one huge scale-up cannot starve small clusters.
  A multi-host replica is never split: a pass with budget left creates at least one whole
  replica, and a pass that created nothing never asks to run again at once (no hot loop).
- Pods are created only while the operator has fewer than ``max_unstarted_pods`` pods the
  plane has not started (``pod_window``): a head or group that finds the window full waits to
  be woken when pods start (or for a 10 s timer), and takes no more than the room left.
- A group is held (no creates, requeue shortly) while ``max_unbound_per_group`` of its pods
  still wait for the default scheduler: the scheduler's queue is FIFO, so pods created faster
  than it binds only delay every other cluster's pods. Pods found unschedulable do not count
  (a group larger than the cluster is still created in full, as upstream does), and the hold
  is off for batch schedulers, whose gangs bind nothing until every member exists.
- A pod someone else deleted counts toward its group's ``replicas`` (a head toward the one
  head) until it is gone, as in upstream, whose pod list includes terminating pods: its
  replacement is created after it, never beside it, and takes its replica index. Such a pod is
  never picked for a scale-down (it is leaving already). Multi-host groups are unchanged.
- The status is written only when it changed (ignoring timestamps), with the resourceVersion
  read, so a stale write fails with Conflict and is simply redone from fresh state.
- Invalid specs get a Warning event with upstream's message and are not retried until the spec
  changes; a spec the models cannot even parse is reported the same way, never a crash.
- The reconciler holds no manager: it is built over a client, a recorder and the caches it reads
  (``RayClusterCaches``), and ``register`` alone creates the controller and its watches.
- A negative worker ``replicas`` is not invalid upstream (it is clamped to minReplicas); it is
  clamped the same way here but never silently: an ``InvalidReplicas`` Warning event (once per
  distinct note, whatever the gates) and the ``WorkerReplicasAdjusted`` condition.
"""

from __future__ import annotations

import asyncio
import datetime as dt
import logging
import math
import os
import secrets
import sys
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from pydantic import ValidationError

from kuberay.api import constants as c
from kuberay.api import resources as resb
from kuberay.api import validation as v
from kuberay.api.constants import CM_CERTIFICATES
from kuberay.api.features import FeatureGates
from kuberay.api.raycluster import RayCluster
from kuberay.builders import auth as authb
from kuberay.builders import common as cb
from kuberay.builders import hashing, names, rbac
from kuberay.builders import ingress as ingb
from kuberay.builders import mtls as mtlsb
from kuberay.builders import pod as podb
from kuberay.builders import redis_cleanup as redisb
from kuberay.builders import service as svcb
from kuberay.builders import storage as storeb
from kuberay.builders.errors import BuildError
from kuberay.builders.options import BuildOptions
from kuberay.controllers import pod_window
from kuberay.controllers import raycluster_status as st
from kuberay.controllers.common import (
    OWNED_SELECTOR,
    POD_SELECTOR,
    RAYCLUSTERS,
    random_suffix,
)
from kuberay.controllers.reconcile import child_events, working_copy, write_child
from kuberay.runtime import rfc3339
from kuberay.runtime.cache import CacheSource, ResourceCache
from kuberay.runtime.client import (
    JOBS,
    JSON_PATCH,
    PODS,
    PVCS,
    SECRETS,
    SERVICEACCOUNTS,
    SERVICES,
    KubeClient,
    Resource,
)
from kuberay.runtime.controller import (
    Controller,
    Request,
    Result,
    annotations_changed,
    any_of,
    generation_changed,
    labels_changed,
)
from kuberay.runtime.errors import AlreadyExists, ApiError, Conflict, Invalid, NotFound
from kuberay.runtime.events import NORMAL, WARNING, EventRecorder
from kuberay.runtime.expectations import Expectations
from kuberay.runtime.informer import Handler
from kuberay.runtime.manager import Manager
from kuberay.runtime.store import POD_FIELDS, Obj, index_by_label, projector
from kuberay.schedulers import BatchScheduler

log = logging.getLogger("kuberay.controllers.raycluster")

ROLES = Resource("rbac.authorization.k8s.io", "v1", "roles", kind="Role")
ROLEBINDINGS = Resource("rbac.authorization.k8s.io", "v1", "rolebindings", kind="RoleBinding")
INGRESSES = Resource("networking.k8s.io", "v1", "ingresses", kind="Ingress")
ROUTES = Resource("route.openshift.io", "v1", "routes", kind="Route")
OPENSHIFT_GROUPS = frozenset({"route.openshift.io", "security.openshift.io", "config.openshift.io"})
CERT_MANAGER_GROUP = "cert-manager.io"
_NODE_TYPES = (c.NODE_TYPE_HEAD, c.NODE_TYPE_WORKER)
MTLS_RECREATE = "mTLS is enabled but pod doesn't have mTLS configuration, needs recreation"
DEFAULT_GCS_FT_DELETION_TIMEOUT = 300.0
HEAD_TERMINATION_REQUEUE = 10.0
# What a pass leaves for later, ordered so that max() of two groups' answers is the pass's.
DONE, WAIT_WINDOW, MORE_LATER, MORE_NOW = 0, 1, 2, 3
# Ours, not upstream's: tunes the scheduler hold (RayClusterConfig.max_unbound_per_group).
ENV_MAX_UNBOUND_PER_GROUP = "KUBERAY_MAX_UNBOUND_PODS_PER_GROUP"
# Ours, not upstream's: the operator-wide start window (RayClusterConfig.max_unstarted_pods).
ENV_MAX_UNSTARTED_PODS = "KUBERAY_MAX_UNSTARTED_PODS"
# Worker creations in one pass up to this many get an event each; more get one event.
EVENT_BATCH_MIN = 5
# events.k8s.io rejects a note longer than 1 KiB.
EVENT_NOTE_LIMIT = 1000


def _env_flag(env: Mapping[str, str], name: str, default: bool) -> bool:
    value = env.get(name)
    if value is None or value == "":
        return default
    return value.lower() == "true"


@dataclass
class RayClusterConfig:
    """What the operator's environment and flags say about RayCluster reconciling."""

    build: BuildOptions = field(default_factory=BuildOptions)
    gates: FeatureGates = field(default_factory=FeatureGates)
    random_pod_delete: bool = False
    gcs_ft_redis_cleanup: bool = True
    # OpenShift APIs present and USE_INGRESS_ON_OPENSHIFT not "true": a Route replaces the Ingress.
    use_routes: bool = False
    # cert-manager's API is served (checked at startup with the RayClusterMTLS gate on): a
    # cluster asking for mTLS without it is refused with upstream's message.
    cert_manager: bool = False
    default_requeue_seconds: float = 300.0
    error_requeue_seconds: float = 2.0
    # Pods created per reconcile before the key goes to the back of the queue: small enough
    # that a huge scale-up interleaves with small clusters (measured in tests/bench/scale.py).
    max_creates_per_pass: int = 50
    # A group stops creating while this many of its pods still wait for the default scheduler
    # (not yet bound and not found unschedulable). Creating faster than the scheduler binds
    # only lengthens its queue, and every small cluster created meanwhile waits behind that
    # queue. 0 turns the hold off. Never applied with a batch scheduler or a custom
    # schedulerName: gang schedulers bind nothing until the whole gang exists.
    max_unbound_per_group: int = 10
    # Pods are created only while fewer than this many of the operator's pods wait for
    # the plane to start them (scheduler or kubelet; see pod_window). 0 turns it off.
    max_unstarted_pods: int = pod_window.DEFAULT_LIMIT
    hold_requeue_seconds: float = 0.5
    # Pod creates in flight at once for one group, as upstream (one at a time). Measured on
    # the KWOK plane (tests/bench/scale.py, figures in the README): 20 in flight did not make
    # a 1,000-pod scale-up ready any sooner, since the scheduler and kubelets set the pace, but
    # it made the plane's queues longer, and small clusters created meanwhile became ready 3-4
    # times slower than with the Go operator (2-3 times with 4 in flight). With one in flight
    # and the hold above at 10, their p99 matched the Go operator's at concurrency 10.
    create_parallelism: int = 1
    concurrency: int = 8
    scheduler: BatchScheduler | None = None

    @classmethod
    def from_env(cls, env: Mapping[str, str] | None = None, **overrides: Any) -> RayClusterConfig:
        env = os.environ if env is None else env
        seconds = env.get(c.ENV_RAYCLUSTER_DEFAULT_REQUEUE_SECONDS, "")
        kwargs: dict[str, Any] = {
            "build": BuildOptions.from_env(env),
            "random_pod_delete": _env_flag(env, c.ENV_ENABLE_RANDOM_POD_DELETE, False),
            "gcs_ft_redis_cleanup": _env_flag(env, c.ENV_ENABLE_GCS_FT_REDIS_CLEANUP, True),
            "default_requeue_seconds": float(seconds) if seconds.strip().isdigit() else 300.0,
        }
        unbound = env.get(ENV_MAX_UNBOUND_PER_GROUP, "").strip()
        if unbound.isdigit():
            kwargs["max_unbound_per_group"] = int(unbound)
        unstarted = env.get(ENV_MAX_UNSTARTED_PODS, "").strip()
        if unstarted.isdigit():
            kwargs["max_unstarted_pods"] = int(unstarted)
        kwargs.update(overrides)
        return cls(**kwargs)


async def _api_groups(client: KubeClient, purpose: str) -> list[str]:
    """The served API group names; on an error (after the client's own GET retries) none, with
    a warning, as upstream's discovery does: start-up goes on rather than dying on a hiccup."""
    try:
        answer = await client.request("GET", "/apis")
    except ApiError as exc:
        log.warning("API discovery failed; assuming no %s: %s", purpose, exc)
        return []
    return [str(g.get("name")) for g in answer.get("groups") or []]


async def detect_cert_manager(client: KubeClient) -> bool:
    return CERT_MANAGER_GROUP in await _api_groups(client, "cert-manager")


async def detect_openshift(client: KubeClient, env: Mapping[str, str] | None = None) -> bool:
    """Upstream's rule: any OpenShift API group served, and USE_INGRESS_ON_OPENSHIFT not set.
    upstream: GetClusterType."""
    env = os.environ if env is None else env
    if _env_flag(env, c.ENV_USE_INGRESS_ON_OPENSHIFT, False):
        return False
    groups = await _api_groups(client, "OpenShift")
    return any(g in OPENSHIFT_GROUPS for g in groups)


class _ReconcileError(Exception):
    """A failed pod operation, carrying the ReplicaFailure condition reason."""

    def __init__(self, reason: str, message: str, *, stall: bool = False) -> None:
        super().__init__(message)
        self.reason = reason
        self.message = message
        # A wait rather than a failure (no ReplicaFailure), said in ``status.reason``.
        self.stall = stall


@dataclass(frozen=True)
class RayClusterCaches:
    """What the reconciler reads: the clusters, their pods (indexed by ``ns/<ray.io/cluster>``
    under ``cluster``), the Services and batch Jobs the operator made, and the autoscaler's
    ServiceAccount, Role and RoleBinding it made (keyed by plural)."""

    clusters: ResourceCache
    pods: ResourceCache
    services: ResourceCache
    jobs: ResourceCache
    made: Mapping[str, ResourceCache]

    @classmethod
    def make(cls, mgr: CacheSource, namespaces: Sequence[str] | None) -> RayClusterCaches:
        """The caches over ``namespaces`` (all when None), scoped by the operator's selectors.
        (The calls read ``mgr.cache``: the RBAC check finds the list/watch verbs by that.)"""
        clusters = mgr.cache(RAYCLUSTERS, namespaces=namespaces)
        pods = mgr.cache(
            PODS,
            namespaces=namespaces,
            label_selector=POD_SELECTOR,
            transform=projector(POD_FIELDS),
        )
        pods.add_indexer("cluster", index_by_label(c.LABEL_CLUSTER))
        return cls(
            clusters=clusters,
            pods=pods,
            services=mgr.cache(SERVICES, namespaces=namespaces, label_selector=OWNED_SELECTOR),
            jobs=mgr.cache(JOBS, namespaces=namespaces, label_selector=OWNED_SELECTOR),
            made={
                SERVICEACCOUNTS.plural: mgr.cache(
                    SERVICEACCOUNTS, namespaces=namespaces, label_selector=OWNED_SELECTOR
                ),
                ROLES.plural: mgr.cache(
                    ROLES, namespaces=namespaces, label_selector=OWNED_SELECTOR
                ),
                ROLEBINDINGS.plural: mgr.cache(
                    ROLEBINDINGS, namespaces=namespaces, label_selector=OWNED_SELECTOR
                ),
            },
        )


class RayClusterReconciler:
    """Reconciles RayClusters over a client, a recorder and the caches it reads.

    Built without a manager (tests hand in caches over standalone informers); ``register``
    makes the caches and the controller and wires them in."""

    def __init__(
        self,
        client: KubeClient,
        config: RayClusterConfig,
        recorder: EventRecorder,
        caches: RayClusterCaches,
    ) -> None:
        self.client, self.config, self.recorder = client, config, recorder
        self.clusters, self.pods = caches.clusters, caches.pods
        self.services, self.jobs = caches.services, caches.jobs
        # The autoscaler's ServiceAccount, Role and RoleBinding we made: a cache hit spares
        # three create calls (answered AlreadyExists) on every reconcile of an autoscaling
        # cluster, including the periodic one; a miss (cold or stale cache) only costs them.
        self.made = caches.made
        self.controller: Controller | None = None
        self.expectations = Expectations(self._lookup_pod)
        self.window = pod_window.PodStartWindow(self.pods, config.max_unstarted_pods)
        # uid -> the InvalidReplicas note last sent, so a spec with a negative replicas gets one
        # event per distinct problem, not one per pass (which would also use up the cluster's
        # event budget and hide its pod events).
        self._replica_notes: dict[str, str] = {}

    def forget_cluster(self, obj: Obj) -> None:
        """Drops a deleted cluster's event budget and replica note."""
        uid = obj["metadata"].get("uid", "")
        self.recorder.forget(uid)
        self._replica_notes.pop(uid, None)

    # ------------------------------------------------------------------ cache access
    def _lookup_pod(self, ns: str, name: str) -> Obj | None:
        return self.pods.get(ns, name)

    def cluster_pods(self, ns: str, cluster: str) -> list[Obj]:
        return self.pods.list(index="cluster", value=f"{ns}/{cluster}")

    def start_may_be_done(self, old: Obj | None, new: Obj) -> bool:
        """Whether a pod event goes to the urgent lane: the pod turned Ready and every pod of
        its cluster in the cache (already updated by this event) is Running and Ready, so the
        pass may report the cluster ready or create its next pods. The pods that turn Ready
        before the last one of their start go to the back of the queue, as any event does:
        their pass would only hold its progress."""
        if not st.pod_turned_ready(old, new):
            return False
        meta = new.get("metadata") or {}
        ns, cluster = meta.get("namespace", ""), (meta.get("labels") or {}).get(c.LABEL_CLUSTER)
        if not cluster:
            return False
        return all(st.is_running_and_ready(p) for p in self.cluster_pods(ns, cluster))

    # ------------------------------------------------------------------ reconcile
    async def reconcile(self, req: Request) -> Result | None:
        """One pass over a RayCluster: validate, children, pods, status.
        upstream: Reconcile / rayClusterReconcile."""
        ns = req.namespace or ""
        cached = self.clusters.get(ns, req.name)
        if cached is None:
            self.expectations.drop_prefix(f"{ns}/{req.name}/")
            return None
        cluster = working_copy(cached, c.KIND_RAYCLUSTER)
        if cluster is None:
            return None
        spec = cluster["spec"]
        spec["headGroupSpec"].setdefault("rayStartParams", {})
        for group in spec.get("workerGroupSpecs") or []:
            if group.get("rayStartParams") is None:
                group["rayStartParams"] = {}

        problem = self._validate(cluster)
        if problem is not None:
            reason, message, requeue = problem
            self.recorder.event(cluster, WARNING, reason, message, "Validate")
            if requeue:
                return Result(requeue_after=self.config.error_requeue_seconds)
            await self._write_status(
                cluster,
                st.invalid_spec_status(
                    cluster,
                    reason,
                    message,
                    conditions_enabled=self.config.gates.enabled("RayClusterStatusConditions"),
                    now=st.now_rfc3339(),
                ),
            )
            return None
        finalizer_result = await self._reconcile_redis_finalizer(cluster)
        if finalizer_result is not None:
            return finalizer_result
        if cluster["metadata"].get("deletionTimestamp"):
            return None
        self._warn_replicas(cluster)

        error: _ReconcileError | None = None
        more_work = DONE
        try:
            # What pods need at creation (their service account, the auth Secret, the GCS
            # volume) comes first, then Services and the Ingress, then pods.
            await self._reconcile_rbac(cluster)
            await self._reconcile_auth_secret(cluster)
            if cb.is_gcs_ft_embedded(cluster):
                await self._reconcile_gcs_pvc(cluster)
            await self._reconcile_services(cluster)
            more_work = await self._reconcile_pods(cluster)
        except _ReconcileError as exc:
            error = exc
        except Conflict:
            raise
        except ApiError as exc:
            error = _ReconcileError("", str(exc))
        except BuildError as exc:
            self.recorder.event(
                cluster, WARNING, c.EVENT_INVALID_RAYCLUSTER_SPEC, str(exc), "Validate"
            )
            error = _ReconcileError("", str(exc))
        changed, held = await self._update_status(cluster, error, waiting=more_work == WAIT_WINDOW)
        if held and more_work == DONE:
            # A paced progress write (raycluster_status.status_write_delay): come back for it.
            return Result(requeue_after=held)
        if more_work == WAIT_WINDOW:
            # Woken when pods start; the timer only covers a lost wake-up.
            wait = self.window.requeue_seconds()
            return Result(requeue_after=min(held, wait) if held else wait)
        if held and more_work == MORE_LATER:
            return Result(requeue_after=min(held, self.config.hold_requeue_seconds))
        if more_work == MORE_NOW:
            return Result(requeue_after=0.001)
        if more_work == MORE_LATER:
            return Result(requeue_after=self.config.hold_requeue_seconds)
        if error is not None:
            return Result(requeue_after=self.config.error_requeue_seconds, failed=True)
        if changed:
            return Result(requeue_after=self.config.error_requeue_seconds)
        return Result(requeue_after=self.config.default_requeue_seconds)

    def _validate(self, cluster: Obj) -> tuple[str, str, bool] | None:
        """(event reason, message, flag) when metadata, spec or status is invalid, else None.
        upstream: the validation block of rayClusterReconcile."""
        err = v.validate_raycluster_metadata(cluster["metadata"])
        if err:
            return c.EVENT_INVALID_RAYCLUSTER_METADATA, err, False
        try:
            model = RayCluster.model_validate(cluster)
        except ValidationError as exc:
            return c.EVENT_INVALID_RAYCLUSTER_SPEC, f"spec could not be read: {exc}", False
        annotations = cluster["metadata"].get("annotations") or {}
        if model.spec is None:
            return c.EVENT_INVALID_RAYCLUSTER_SPEC, "spec is required", False
        err = v.validate_raycluster_spec(model.spec, annotations, self.config.gates)
        if err:
            return c.EVENT_INVALID_RAYCLUSTER_SPEC, err, False
        tls = model.spec.tls_options
        if tls is not None and tls.enabled and not self.config.cert_manager:
            return c.EVENT_INVALID_RAYCLUSTER_SPEC, v.CERT_MANAGER_MISSING, False
        err = v.validate_raycluster_upgrade_options(model)
        if err:
            return c.EVENT_INVALID_RAYCLUSTER_SPEC, err, False
        err = v.validate_raycluster_status(model)
        if err:
            return c.EVENT_INVALID_RAYCLUSTER_STATUS, err, True
        return None

    def _warn_replicas(self, cluster: Obj) -> None:
        """A Warning ``InvalidReplicas`` event when a group's ``replicas`` is negative (clamped
        as upstream does; the status condition says the same while the gate allows
        conditions). Sent whatever the gates, once per distinct note."""
        uid = cluster["metadata"].get("uid", "")
        warnings = resb.replica_warnings(cluster)
        if not warnings:
            self._replica_notes.pop(uid, None)
            return
        note = "; ".join(warnings)
        if self._replica_notes.get(uid) != note:
            self._replica_notes[uid] = note
            self.recorder.event(cluster, WARNING, c.EVENT_INVALID_REPLICAS, note, "Validate")

    # ------------------------------------------------------------------ child objects
    async def _create_if_missing(
        self,
        res: Resource,
        obj: Obj,
        events: tuple[Obj, str, str] | None = None,
    ) -> bool:
        """Create-only semantics (upstream never updates these): True when created.
        ``events`` = (cluster, created reason, failed reason) reports the outcome on the
        cluster, as upstream does for each child it creates."""
        meta = obj["metadata"]
        made = self.made.get(res.plural)
        if made is not None and made.get(meta.get("namespace") or "", meta["name"]):
            return False
        where = f"{obj.get('kind', res.plural)} {meta.get('namespace')}/{meta.get('name')}"
        try:
            if events is None:
                await self.client.create(res, obj, meta.get("namespace"))
            else:
                cluster, created, failed = events
                await write_child(
                    self.recorder,
                    cluster,
                    child_events("Create", where, created, failed),
                    self.client.create(res, obj, meta.get("namespace")),
                    benign=(AlreadyExists,),
                )
        except AlreadyExists:
            return False
        return True

    async def _reconcile_rbac(self, cluster: Obj) -> None:
        """The autoscaler's ServiceAccount, Role and RoleBinding.
        upstream: reconcileAutoscalerServiceAccount, reconcileAutoscalerRole,
        reconcileAutoscalerRoleBinding."""
        if not cluster["spec"].get("enableInTreeAutoscaling"):
            return
        ns = cluster["metadata"]["namespace"]
        head_sa = (cluster["spec"]["headGroupSpec"].get("template", {}).get("spec", {})).get(
            "serviceAccountName"
        )
        if head_sa:
            try:
                await self.client.get(SERVICEACCOUNTS, names.check_name(head_sa), ns)
            except NotFound:
                msg = (
                    f"the service account {head_sa} of the head pod does not exist; "
                    "the operator does not create user-named service accounts"
                )
                self.recorder.event(
                    cluster, WARNING, c.EVENT_AUTOSCALER_SERVICE_ACCOUNT_NOT_FOUND, msg, "Create"
                )
                raise _ReconcileError("", msg) from None
        else:
            await self._create_if_missing(
                SERVICEACCOUNTS,
                rbac.build_autoscaler_service_account(cluster),
                (
                    cluster,
                    c.EVENT_CREATED_SERVICE_ACCOUNT,
                    c.EVENT_FAILED_TO_CREATE_SERVICE_ACCOUNT,
                ),
            )
        await self._create_if_missing(
            ROLES,
            rbac.build_autoscaler_role(cluster),
            (cluster, c.EVENT_CREATED_ROLE, c.EVENT_FAILED_TO_CREATE_ROLE),
        )
        await self._create_if_missing(
            ROLEBINDINGS,
            rbac.build_autoscaler_role_binding(cluster),
            (cluster, c.EVENT_CREATED_ROLE_BINDING, c.EVENT_FAILED_TO_CREATE_ROLE_BINDING),
        )

    async def _reconcile_gcs_pvc(self, cluster: Obj) -> None:
        """The RocksDB GCS claim: created when missing, adopted or released as
        ``deletionPolicy`` says, drift reported (never applied); a user-named claim that does
        not exist is reported, since the head pod waits for it."""
        want = storeb.build_gcs_pvc(cluster)
        ns, name = want["metadata"]["namespace"], want["metadata"]["name"]
        try:
            have = await self.client.get(PVCS, name, ns)
        except NotFound:
            if storeb.uses_user_claim(cluster):
                note = (
                    f"PersistentVolumeClaim {ns}/{name} named in gcsFaultToleranceOptions.storage"
                    " does not exist; the head pod stays pending until it does"
                )
                self.recorder.event(cluster, WARNING, c.EVENT_FAILED_TO_CREATE_PVC, note, "Create")
                return
            await self._create_if_missing(
                PVCS, want, (cluster, c.EVENT_CREATED_PVC, c.EVENT_FAILED_TO_CREATE_PVC)
            )
            return
        if storeb.uses_user_claim(cluster):
            return  # the user's claim: never changed
        drift = storeb.pvc_drift(want, have)
        if drift:
            note = (
                f"PersistentVolumeClaim {ns}/{name} differs from gcsFaultToleranceOptions.storage "
                f"({'; '.join(drift)}); it is left unchanged"
            )
            self.recorder.event(cluster, WARNING, c.EVENT_FAILED_TO_CREATE_PVC, note, "Update")
        owners = storeb.owner_references_for(cluster, have)
        if owners is not None:
            have["metadata"]["ownerReferences"] = owners
            await self.client.update(PVCS, have)

    async def _reconcile_ingress(self, cluster: Obj) -> None:
        """Created when asked for and kept in line with the spec (upstream updates on drift);
        an Ingress of the same name that we do not own is reported and left alone.
        upstream: reconcileIngress."""
        if not cluster["spec"]["headGroupSpec"].get("enableIngress"):
            return
        if self.config.use_routes:
            route = ingb.build_head_route(cluster, self.config.build)
            await self._create_if_missing(
                ROUTES, route, (cluster, c.EVENT_CREATED_ROUTE, c.EVENT_FAILED_TO_CREATE_ROUTE)
            )
            return
        want = ingb.build_head_ingress(cluster, self.config.build)
        ns, name = want["metadata"]["namespace"], want["metadata"]["name"]
        try:
            have = await self.client.get(INGRESSES, name, ns)
        except NotFound:
            await self._create_if_missing(
                INGRESSES,
                want,
                (cluster, c.EVENT_CREATED_INGRESS, c.EVENT_FAILED_TO_CREATE_INGRESS),
            )
            return
        owners = have["metadata"].get("ownerReferences") or []
        if not any(o.get("uid") == cluster["metadata"].get("uid") for o in owners):
            self.recorder.event(
                cluster,
                WARNING,
                c.EVENT_FAILED_TO_UPDATE_INGRESS,
                f"ingress {ns}/{name} exists and is not owned by this RayCluster",
                "Update",
            )
            return
        spec = dict(want["spec"])
        if not spec.get("ingressClassName") and have["spec"].get("ingressClassName"):
            spec["ingressClassName"] = have["spec"]["ingressClassName"]
        same = (
            have["metadata"].get("labels") == want["metadata"].get("labels")
            and (have["metadata"].get("annotations") or {})
            == (want["metadata"].get("annotations") or {})
            and have.get("spec") == spec
        )
        if not same:
            have["metadata"]["labels"] = want["metadata"].get("labels")
            have["metadata"]["annotations"] = want["metadata"].get("annotations")
            have["spec"] = spec
            await write_child(
                self.recorder,
                cluster,
                child_events("Update", f"ingress {ns}/{name}", c.EVENT_UPDATED_INGRESS, None),
                self.client.update(INGRESSES, have),
            )

    async def _reconcile_auth_secret(self, cluster: Obj) -> None:
        """Creates the token Secret once when auth asks for one. upstream: reconcileAuthSecret."""
        if not authb.wants_auth_secret(cluster):
            return
        ns = cluster["metadata"]["namespace"]
        name = names.auth_secret_name(cluster["metadata"]["name"])
        try:
            await self.client.get(SECRETS, name, ns)
        except NotFound:
            token = secrets.token_urlsafe(32)
            await self._create_if_missing(SECRETS, authb.build_auth_secret(cluster, token))

    async def _reconcile_redis_finalizer(self, cluster: Obj) -> Result | None:
        """The Redis GCS fault-tolerance cleanup: a finalizer keeps the RayCluster until a Job
        has removed its GCS data from Redis (or a timeout forces it).
        upstream: the GCS FT Redis cleanup block of rayClusterReconcile."""
        meta = cluster["metadata"]
        finalizers = list(meta.get("finalizers") or [])
        has_finalizer = c.FINALIZER_GCS_FT_REDIS_CLEANUP in finalizers
        deleting = bool(meta.get("deletionTimestamp"))
        if cb.is_gcs_ft_embedded(cluster):
            if deleting and has_finalizer:
                await self._set_finalizers(
                    cluster, [f for f in finalizers if f != c.FINALIZER_GCS_FT_REDIS_CLEANUP]
                )
            return None
        if not (self.config.gcs_ft_redis_cleanup and cb.is_gcs_ft_enabled(cluster)):
            return None
        if not deleting:
            if has_finalizer:
                return None
            await self._set_finalizers(cluster, [*finalizers, c.FINALIZER_GCS_FT_REDIS_CLEANUP])
            return Result(requeue_after=self.config.error_requeue_seconds)
        if not has_finalizer:
            return None
        ns, name = meta["namespace"], meta["name"]
        pods = [
            p
            for p in self.cluster_pods(ns, name)
            if st.node_type(p) in (c.NODE_TYPE_HEAD, c.NODE_TYPE_WORKER)
        ]
        live = [p for p in pods if not _terminating(p)]
        if live:
            await self._delete_pods(
                cluster, live, "", c.REASON_FAILED_DELETE_ALL_PODS, why="before the Redis cleanup"
            )
        remove = [f for f in finalizers if f != c.FINALIZER_GCS_FT_REDIS_CLEANUP]
        timeout = redis_cleanup_timeout(meta)
        if seconds_since(meta["deletionTimestamp"], dt.datetime.now(dt.UTC)) >= timeout:
            await self._set_finalizers(cluster, remove)
            self.recorder.event(
                cluster,
                WARNING,
                c.EVENT_FORCE_DELETED_STUCK_CLUSTER,
                f"the Redis cleanup did not finish within {timeout:.0f}s; removed the finalizer "
                f"{c.FINALIZER_GCS_FT_REDIS_CLEANUP} so the RayCluster can be deleted",
                "Cleanup",
            )
            return None
        if any(st.node_type(p) == c.NODE_TYPE_HEAD for p in pods):
            return Result(requeue_after=HEAD_TERMINATION_REQUEUE)
        job_name = names.redis_cleanup_job_name(name)
        job = self.jobs.get(ns, job_name)
        if job is not None:
            outcome = job_outcome(job)
            if outcome is None:
                return Result(requeue_after=self.config.error_requeue_seconds)
            if outcome != "Complete":
                log.warning("redis cleanup job %s/%s failed; removing the finalizer", ns, job_name)
            await self._set_finalizers(cluster, remove)
            return None
        try:
            await self.client.create(
                JOBS, redisb.build_redis_cleanup_job(cluster, self.config.build), ns
            )
            self.recorder.event(
                cluster,
                NORMAL,
                c.EVENT_CREATED_REDIS_CLEANUP_JOB,
                f"Created Redis cleanup Job {ns}/{job_name}",
                "Create",
            )
        except AlreadyExists:
            pass
        except ApiError as exc:
            self.recorder.event(
                cluster, WARNING, c.EVENT_FAILED_TO_CREATE_REDIS_CLEANUP_JOB, exc.message, "Create"
            )
        return Result(requeue_after=self.config.error_requeue_seconds)

    async def _set_finalizers(self, cluster: Obj, finalizers: list[str]) -> None:
        """Optimistic write (resourceVersion-guarded) so a concurrent change is never lost."""
        meta = cluster["metadata"]
        patch = [
            {"op": "test", "path": "/metadata/resourceVersion", "value": meta["resourceVersion"]},
            {
                "op": "replace" if "finalizers" in meta else "add",
                "path": "/metadata/finalizers",
                "value": finalizers,
            },
        ]
        try:
            await self.client.patch(
                RAYCLUSTERS, meta["name"], patch, meta["namespace"], content_type=JSON_PATCH
            )
        except Invalid as exc:  # the test op failed: our copy is stale
            raise Conflict(409, exc.body, "PATCH", RAYCLUSTERS.plural) from exc

    async def _reconcile_head_service(self, cluster: Obj) -> None:
        """Create-only head Service. upstream: reconcileHeadService."""
        want = svcb.build_head_service(cluster, self.config.build)
        ns = cluster["metadata"]["namespace"]
        if self.services.get(ns, want["metadata"]["name"]) is not None:
            return
        await self._create_if_missing(SERVICES, want, self._service_events(cluster))

    def _service_events(self, cluster: Obj) -> tuple[Obj, str, str]:
        return (cluster, c.EVENT_CREATED_SERVICE, c.EVENT_FAILED_TO_CREATE_SERVICE)

    async def _reconcile_services(self, cluster: Obj) -> None:
        """Ingress or Route, then the head, serve and headless Services.
        upstream: reconcileIngress, reconcileHeadService, reconcileServeService,
        reconcileHeadlessService."""
        spec = cluster["spec"]
        await self._reconcile_ingress(cluster)
        await self._reconcile_head_service(cluster)
        if any(int(g.get("numOfHosts") or 1) > 1 for g in spec.get("workerGroupSpecs") or []):
            await self._create_if_missing(
                SERVICES,
                svcb.build_headless_service(cluster, self.config.build),
                self._service_events(cluster),
            )
        annotations = cluster["metadata"].get("annotations") or {}
        if annotations.get(c.ANNOTATION_ENABLE_SERVE_SERVICE) == "true":
            await self._create_if_missing(
                SERVICES,
                svcb.build_serve_service(cluster, self.config.build),
                self._service_events(cluster),
            )

    # ------------------------------------------------------------------ pods
    async def _reconcile_pods(self, cluster: Obj) -> int:
        """Says whether pod work remains: MORE_NOW after a full batch of creates, MORE_LATER
        while a group is held back for the scheduler, DONE otherwise.
        upstream: reconcilePods."""
        spec = cluster["spec"]
        meta = cluster["metadata"]
        ns, name = meta["namespace"], meta["name"]
        every = self.cluster_pods(ns, name)
        ray_pods = [p for p in every if st.node_type(p) in (c.NODE_TYPE_HEAD, c.NODE_TYPE_WORKER)]
        pods = [p for p in ray_pods if not _terminating(p)]
        # Pods someone else deleted still count until they are gone, as upstream lists them:
        # no replacement overlaps the pod it replaces (and takes its replica index after it).
        leaving = [p for p in ray_pods if _terminating(p)]
        suspending = st.suspending(cluster)
        if suspending or spec.get("suspend"):
            # upstream's collection delete is announced even when there is no pod at all (a
            # cluster created suspended); pods still terminating were announced already.
            if suspending and (pods or not every):
                await self._delete_pods(
                    cluster, pods, "", c.REASON_FAILED_DELETE_ALL_PODS, why="due to suspension"
                )
            return DONE
        if cb.is_tls_enabled(cluster, self.config.build):
            # upstream: checkMTLSSecretsReady, after suspension (which must never wait for
            # certificates) and before any pod is created or recreated.
            why = await self._mtls_wait_reason(ns, name)
            if why is not None:
                raise _ReconcileError("", f"mTLS secrets not ready: {why}", stall=True)

        want_hash = hashing.spec_hash(spec)
        heads = [
            p for p in pods if p["metadata"]["labels"].get(c.LABEL_NODE_TYPE) == c.NODE_TYPE_HEAD
        ]
        strategy = (spec.get("upgradeStrategy") or {}).get("type")
        if heads:
            ann = heads[0]["metadata"].get("annotations") or {}
            if (
                strategy == "Recreate"
                and ann.get(c.ANNOTATION_UPGRADE_STRATEGY_RECREATE_HASH) != want_hash
            ):
                if ann.get(c.ANNOTATION_KUBERAY_VERSION) != self.config.build.kuberay_version:
                    await self._restamp_head(heads[0], want_hash)
                else:
                    self.expectations.drop_prefix(f"{ns}/{name}/")
                    await self._delete_pods(
                        cluster,
                        pods,
                        "",
                        c.REASON_FAILED_DELETE_ALL_PODS,
                        why="due to a spec change with the Recreate upgrade strategy",
                    )
                    return DONE

        if self.config.scheduler is not None:
            await self.config.scheduler.on_submission(self.client, cluster)
        leaving_heads = [p for p in leaving if st.node_type(p) == c.NODE_TYPE_HEAD]
        head_more = DONE
        if heads or not leaving_heads:
            head_more = await self._reconcile_head(cluster, heads)
        # A head waiting for the start window keeps its workers waiting too: they would take
        # the room it waits for, and come before it (a pass, an event and a status write
        # apart). Deletions still go ahead.
        creating = not (head_more == WAIT_WINDOW and not heads)
        return max(head_more, await self._reconcile_groups(cluster, pods, leaving, creating))

    def _lacks_mtls(self, cluster: Obj, pod: Obj) -> bool:
        """A pod of a TLS cluster built without TLS (TLS was turned on later): recreated.
        upstream: the podHasMTLSConfiguration checks in reconcilePods."""
        return cb.is_tls_enabled(cluster, self.config.build) and not mtlsb.pod_has_mtls(pod)

    async def _mtls_wait_reason(self, ns: str, name: str) -> str | None:
        """Why a TLS cluster's pods must wait (its leaf Certificates not Ready or Secrets not
        complete), read from the API: this controller keeps no cache of either."""
        found: dict[str, Obj | None] = {}
        lookups = [
            *((CM_CERTIFICATES, mtlsb.leaf_certificate_name(name, t)) for t in _NODE_TYPES),
            *((SECRETS, podb.tls_secret_name(name, t)) for t in _NODE_TYPES),
        ]
        for res, obj_name in lookups:
            try:
                found[obj_name] = await self.client.get(res, obj_name, ns)
            except NotFound:
                found[obj_name] = None
        return mtlsb.secrets_wait_reason(name, found, found)

    async def _reconcile_groups(
        self, cluster: Obj, pods: list[Obj], leaving: list[Obj], creating: bool = True
    ) -> int:
        """Every worker group in turn within one pass's create budget; with ``creating``
        False (the head waits for the start window) groups only delete."""
        spec = cluster["spec"]
        ns, name = cluster["metadata"]["namespace"], cluster["metadata"]["name"]
        more = DONE
        budget = self.config.max_creates_per_pass
        for group in spec.get("workerGroupSpecs") or []:
            key = f"{ns}/{name}/{group['groupName']}"
            if not self.expectations.satisfied(key):
                continue

            def of_group(p: Obj, group_name: str = group["groupName"]) -> bool:
                labels = p["metadata"]["labels"]
                return bool(
                    labels.get(c.LABEL_GROUP) == group_name
                    and labels.get(c.LABEL_NODE_TYPE) == c.NODE_TYPE_WORKER
                )

            group_pods = [p for p in pods if of_group(p)]
            group_leaving = [p for p in leaving if of_group(p)]
            created, left = await self._reconcile_group(
                cluster, group, group_pods, budget, group_leaving, creating
            )
            budget -= created
            more = max(more, left)
        if more == MORE_NOW and budget == self.config.max_creates_per_pass:
            # An immediate requeue is only for a pass that created pods and stopped at its
            # budget; one that made no progress must not spin (it waits for an event or the
            # hold interval instead).
            more = MORE_LATER
        return more

    async def _restamp_head(self, head: Obj, want_hash: str) -> None:
        patch = {
            "metadata": {
                "annotations": {
                    c.ANNOTATION_UPGRADE_STRATEGY_RECREATE_HASH: want_hash,
                    c.ANNOTATION_KUBERAY_VERSION: self.config.build.kuberay_version,
                }
            }
        }
        await self.client.patch(
            PODS, head["metadata"]["name"], patch, head["metadata"]["namespace"]
        )

    async def _reconcile_head(self, cluster: Obj, heads: list[Obj]) -> int:
        """The head pod: recreated when unhealthy, created when missing once the start window
        has room (WAIT_WINDOW otherwise, DONE when nothing is left to do here)."""
        meta = cluster["metadata"]
        ns, name = meta["namespace"], meta["name"]
        key = f"{ns}/{name}/"
        if not self.expectations.satisfied(key):
            return DONE
        if len(heads) == 1:
            head = heads[0]
            if podb.pod_is_unhealthy(head):
                await self._delete_pods(cluster, [head], "", c.REASON_FAILED_DELETE_HEAD_POD)
                raise _ReconcileError(
                    "", f"deleted unhealthy head pod {head['metadata']['name']}; recreating"
                )
            if self._lacks_mtls(cluster, head):
                await self._delete_pods(cluster, [head], "", c.REASON_FAILED_DELETE_HEAD_POD)
                raise _ReconcileError("", MTLS_RECREATE)
            return DONE
        if len(heads) > 1:
            raise _ReconcileError(
                "", v.too_many_head_pods(sorted(h["metadata"]["name"] for h in heads))
            )
        annotations = meta.get("annotations") or {}
        if st.condition_true(cluster, c.COND_RAYCLUSTER_PROVISIONED) and (
            annotations.get(c.ANNOTATION_DISABLE_PROVISIONED_HEAD_RESTART) == "true"
        ):
            return DONE
        cluster_key = f"{ns}/{name}"
        # The head and the first batch of workers together, so the cluster is created in one
        # pass: a head created alone went Ready while its workers waited for room, and the
        # cluster took a status write more than upstream's two.
        first_batch = self._whole_batch(self._missing_workers(cluster))
        need = 1 + max(0, min(first_batch, self.window.limit - 1))
        if self.window.room(cluster_key) < need:
            # A head waits its turn like workers do: created ahead of the window, a thousand
            # new clusters' heads filled the plane's queues (1000x10 on KWOK: about 100 s
            # from create to Ready), and every cluster's workers then waited behind them.
            self.window.wait(cluster_key, need)
            return WAIT_WINDOW
        if need > 1:
            # Room for the first batch is set aside while the head's create is in flight, or
            # a concurrent pass could take it and leave the workers to a pass of their own.
            self.window.hold(cluster_key, need - 1)
        suffix = None if self.config.build.deterministic_head_pod_name else random_suffix()
        pod = podb.build_head_pod(cluster, self.config.build, name_suffix=suffix)
        await self._create_pod(cluster, pod, key, head=True)
        if need == 1:
            # No worker batch follows to claim the room this cluster may have been woken for.
            self.window.claimed(cluster_key)
        return DONE

    async def _reconcile_group(
        self,
        cluster: Obj,
        group: Obj,
        pods: list[Obj],
        budget: int,
        leaving: list[Obj] | None = None,
        creating: bool = True,
    ) -> tuple[int, int]:
        """One worker group: ``pods`` are its live pods, ``leaving`` those being deleted by
        someone else, which count toward ``replicas`` until gone (upstream's pod list holds
        them) but are never chosen for deletion; missing workers are created only when
        ``creating``. upstream: the worker part of reconcilePods."""
        leaving = leaving or []
        meta = cluster["metadata"]
        ns, name = meta["namespace"], meta["name"]
        key = f"{ns}/{name}/{group['groupName']}"
        if group.get("suspend"):
            if pods:
                await self._delete_pods(cluster, pods, key, c.REASON_FAILED_DELETE_WORKER_POD)
            return 0, DONE
        hosts = max(1, int(group.get("numOfHosts") or 1))
        if hosts > 1 and self.config.build.multi_host_indexing:
            return await self._reconcile_multihost_group(cluster, group, pods, hosts, budget)
        unhealthy = [p for p in pods if podb.pod_is_unhealthy(p) or self._lacks_mtls(cluster, p)]
        if unhealthy:
            await self._delete_pods(cluster, unhealthy, key, c.REASON_FAILED_DELETE_WORKER_POD)
            raise _ReconcileError(
                "", f"deleted {len(unhealthy)} unhealthy worker pods of group {group['groupName']}"
            )
        to_delete = set((group.get("scaleStrategy") or {}).get("workersToDelete") or [])
        named = [p for p in pods if p["metadata"]["name"] in to_delete]
        if named:
            await self._delete_pods(cluster, named, key, c.REASON_FAILED_DELETE_WORKER_POD)
        remaining = [p for p in pods if p["metadata"]["name"] not in to_delete]
        desired = resb.desired_worker_replicas(group) * max(1, int(group.get("numOfHosts") or 1))
        diff = desired - len(remaining) - len(leaving)
        if diff > 0 and not creating:
            return 0, DONE
        if diff > 0:
            room = self._scheduler_room(group, remaining)
            cluster_key = f"{meta['namespace']}/{meta['name']}"
            window = self.window.room(cluster_key)
            whole = self._whole_batch(min(diff, max(0, budget), room))
            if 0 < window < whole:
                # A partial batch costs a pass, an event and perhaps a status write of its
                # own; wait for room for a whole one.
                window = 0
            count = min(diff, max(0, budget), room, window)
            if count == 0 and room == 0:
                return 0, MORE_LATER
            if count == 0 and window == 0 and budget > 0:
                self.window.wait(cluster_key, whole)
                return 0, WAIT_WINDOW
            used = {
                p["metadata"]["labels"].get(c.LABEL_WORKER_GROUP_REPLICA_INDEX)
                for p in (*remaining, *leaving)
            }
            free = (i for i in range(desired * 2 + 1) if str(i) not in used)
            builds = [
                self._new_worker(
                    cluster, group, next(free) if self.config.build.multi_host_indexing else None
                )
                for _ in range(count)
            ]
            # _create_pods claims the room this cluster was promised as it reserves the batch.
            await self._create_pods(cluster, builds, key)
            if count == diff:
                return count, DONE
            if count == room:
                return count, MORE_LATER
            if count == window:
                # The window is full now: wake up for the next whole batch when pods start.
                self.window.wait(cluster_key, self._whole_batch(min(diff, room) - count))
                return count, WAIT_WINDOW
            return count, MORE_NOW
        excess = len(remaining) - desired  # live pods only: a leaving one is going already
        if diff < 0 and excess > 0:
            autoscaling = bool(cluster["spec"].get("enableInTreeAutoscaling"))
            if not autoscaling or self.config.random_pod_delete:
                victims = remaining[:excess]
                await self._delete_pods(cluster, victims, key, c.REASON_FAILED_DELETE_WORKER_POD)
        return 0, DONE

    def _whole_batch(self, wanted: int) -> int:
        """The fewest workers a group creates in one go while the start window paces it:
        what it wants, but no more than a wake-up batch, and no more than the window holds
        beside a head (so a head and its first batch fit in the window together, and a
        group never waits for its own head to start)."""
        return max(0, min(wanted, pod_window.WAKE_BATCH, max(1, self.window.limit - 1)))

    def _missing_workers(self, cluster: Obj) -> int:
        """Workers a cluster's groups lack when its head is missing: a head that waits for
        the window waits for room for these too (a batch of them)."""
        missing = 0
        for group in cluster["spec"].get("workerGroupSpecs") or []:
            if group.get("suspend"):
                continue
            hosts = max(1, int(group.get("numOfHosts") or 1))
            missing += resb.desired_worker_replicas(group) * hosts
        return missing - len(
            [
                p
                for p in self.cluster_pods(
                    cluster["metadata"]["namespace"], cluster["metadata"]["name"]
                )
                if st.node_type(p) == c.NODE_TYPE_WORKER and not _terminating(p)
            ]
        )

    def _scheduler_room(self, group: Obj, pods: list[Obj]) -> int:
        """How many more pods this group may create now without outrunning the scheduler."""
        limit = self.config.max_unbound_per_group
        template_spec = (group.get("template") or {}).get("spec") or {}
        custom = template_spec.get("schedulerName") not in (None, "", "default-scheduler")
        if limit <= 0 or self.config.scheduler is not None or custom:
            return sys.maxsize
        return max(0, limit - sum(1 for p in pods if _awaiting_scheduler(p)))

    async def _reconcile_multihost_group(
        self, cluster: Obj, group: Obj, pods: list[Obj], hosts: int, budget: int
    ) -> tuple[int, int]:
        """Multi-host groups live and die by whole replicas of ``numOfHosts`` pods: a partial,
        unhealthy or named-for-deletion replica is removed entirely, new replicas get the
        lowest free index and hosts 0..n-1.
        upstream: reconcileMultiHostWorkerGroup."""
        meta = cluster["metadata"]
        key = f"{meta['namespace']}/{meta['name']}/{group['groupName']}"
        replicas: dict[str, list[Obj]] = {}
        for pod in pods:
            labels = pod["metadata"]["labels"]
            replicas.setdefault(labels.get(c.LABEL_WORKER_GROUP_REPLICA_NAME, ""), []).append(pod)
        doomed_names, why = replicas_to_remove(group, replicas, hosts)
        if doomed_names:
            doomed = [p for name in doomed_names for p in replicas[name]]
            await self._delete_pods(cluster, doomed, key, c.REASON_FAILED_DELETE_WORKER_POD)
            raise _ReconcileError("", why)
        desired = resb.desired_worker_replicas(group)
        diff = desired - len(replicas)
        if diff > 0:
            used = {p["metadata"]["labels"].get(c.LABEL_WORKER_GROUP_REPLICA_INDEX) for p in pods}
            free = (i for i in range(desired + len(replicas) + 1) if str(i) not in used)
            # The budget is counted in pods, but a replica is only useful whole: a pass that
            # still has budget creates at least one whole replica, however many hosts it has
            # (a 64-host TPU slice must not wait forever on a budget of 50).
            count = min(diff, max(budget // hosts, 1 if budget > 0 else 0))
            builds: list[Obj] = []
            for _ in range(count):
                index = next(free)
                replica_name = f"{group['groupName']}-{random_suffix()}"
                builds.extend(
                    self._new_worker(cluster, group, index, replica_name, host)
                    for host in range(hosts)
                )
            await self._create_pods(cluster, builds, key)
            return len(builds), MORE_NOW if count < diff else DONE
        if diff < 0:
            autoscaling = bool(cluster["spec"].get("enableInTreeAutoscaling"))
            if not autoscaling or self.config.random_pod_delete:
                victims = [p for name in sorted(replicas)[:-diff] for p in replicas[name]]
                await self._delete_pods(cluster, victims, key, c.REASON_FAILED_DELETE_WORKER_POD)
        return 0, DONE

    def _new_worker(
        self,
        cluster: Obj,
        group: Obj,
        index: int | None,
        replica_name: str | None = None,
        host: int | None = None,
    ) -> Obj:
        """A worker pod of ``group`` under a fresh random name (chosen before the create, so
        that the expectation can name it)."""
        return podb.build_worker_pod(
            cluster,
            group,
            self.config.build,
            name_suffix=random_suffix(),
            replica_index=index,
            replica_name=replica_name,
            host_index=host,
        )

    async def _create_pods(self, cluster: Obj, pods: list[Obj], key: str) -> None:
        sem = asyncio.Semaphore(self.config.create_parallelism)
        # The whole batch counts in the start window before the first create is sent: the
        # creates go out one at a time, and a reconcile of another cluster running in between
        # must not see room that this batch is about to take.
        for pod in pods:
            if pod["metadata"].get("name"):
                self.window.reserve(pod["metadata"]["namespace"], pod["metadata"]["name"])
        # The reservations stand for the room this cluster was promised or held: kept as well
        # while the creates go out one by one (seconds under load), it counted twice, and
        # other clusters' heads went out without the workers they had found room for.
        meta = cluster["metadata"]
        self.window.claimed(f"{meta['namespace']}/{meta['name']}")
        created: list[str] = []

        async def one(pod: Obj) -> None:
            async with sem:
                name = await self._create_pod(cluster, pod, key, head=False, announce=False)
                created.append(name)

        results = await asyncio.gather(*(one(p) for p in pods), return_exceptions=True)
        self._announce_workers(cluster, created)
        for result in results:
            if isinstance(result, BaseException):
                raise result

    def _announce_workers(self, cluster: Obj, created: list[str]) -> None:
        """One event per pod for a few pods (upstream's messages); one event naming the pods
        for a batch, since a large scale-up would otherwise add an event write per pod to the
        apiserver's load (upstream #2547) while telling nothing more."""
        ns = cluster["metadata"]["namespace"]
        if len(created) <= EVENT_BATCH_MIN:
            for name in created:
                message = f"Created pod {ns}/{name}"
                self.recorder.event(cluster, NORMAL, c.EVENT_CREATED_WORKER_POD, message, "Create")
            return
        message = f"Created {len(created)} worker pods in {ns}:"
        for i, name in enumerate(sorted(created)):
            more = f" and {len(created) - i} more"
            if len(message) + len(name) + 2 + len(more) > EVENT_NOTE_LIMIT and i:
                message += more
                break
            message += (", " if i else " ") + name
        self.recorder.event(cluster, NORMAL, c.EVENT_CREATED_WORKER_POD, message, "Create")

    async def _create_pod(
        self, cluster: Obj, pod: Obj, key: str, *, head: bool, announce: bool = True
    ) -> str:
        """Creates one pod, with expectations and its event.
        upstream: createHeadPod / createWorkerPod."""
        if self.config.scheduler is not None:
            labels = pod["metadata"].get("labels") or {}
            group = c.HEAD_GROUP_NAME if head else labels.get(c.LABEL_GROUP, "")
            self.config.scheduler.add_pod_metadata(cluster, group, pod)
        ns = pod["metadata"]["namespace"]
        pod_name = pod["metadata"].get("name", "")
        if pod_name:
            self.expectations.expect_create(key, ns, pod_name)
            self.window.reserve(ns, pod_name)
        try:
            created = await self.client.create(PODS, pod, ns)
        except ApiError as exc:
            if pod_name and _surely_not_written(exc):
                self.expectations.observe_failure(key, ns, pod_name)
                self.window.release(ns, pod_name)
            reason = (
                c.EVENT_FAILED_TO_CREATE_HEAD_POD if head else c.EVENT_FAILED_TO_CREATE_WORKER_POD
            )
            self.recorder.event(
                cluster, WARNING, reason, f"Failed to create pod: {exc.message}", "Create"
            )
            raise _ReconcileError(
                c.REASON_FAILED_CREATE_HEAD_POD if head else c.REASON_FAILED_CREATE_WORKER_POD,
                exc.message or str(exc),
            ) from exc
        if not pod_name:
            self.expectations.expect_create(key, ns, created["metadata"]["name"])
        created_name: str = created["metadata"]["name"]
        if announce:
            reason = c.EVENT_CREATED_HEAD_POD if head else c.EVENT_CREATED_WORKER_POD
            message = f"Created pod {ns}/{created_name}"
            self.recorder.event(cluster, NORMAL, reason, message, "Create")
        return created_name

    async def _delete_pods(
        self, cluster: Obj, pods: list[Obj], key: str, fail_reason: str, *, why: str = ""
    ) -> None:
        """Deletes ``pods`` one by one (uid-guarded, with expectations). Deleting all of a
        cluster's pods (suspend, Recreate, finalizer) is upstream's collection delete: one
        DeletedPod event, or FailedToDeletePodCollection; single pods get their own events.

        The collection event's note names only the cause (``why``), never a pod count, so the
        repeats of one suspension (the pass that deletes, then passes that find nothing left)
        aggregate into one Event with a series count, as upstream's recorder does.
        upstream: deletePods."""
        collective = fail_reason == c.REASON_FAILED_DELETE_ALL_PODS
        deleted = 0
        try:
            for pod in pods:
                meta = pod["metadata"]
                head = meta["labels"].get(c.LABEL_NODE_TYPE) == c.NODE_TYPE_HEAD
                where = f"{meta['namespace']}/{meta['name']}"
                group_key = key or self._group_key(cluster, pod)
                self.expectations.expect_delete(group_key, meta["namespace"], meta["name"])
                try:
                    await self.client.delete(
                        PODS, meta["name"], meta["namespace"], uid=meta.get("uid")
                    )
                except NotFound:
                    continue
                except ApiError as exc:
                    if _surely_not_written(exc):
                        self.expectations.observe_failure(
                            group_key, meta["namespace"], meta["name"]
                        )
                    if collective:
                        failed = c.EVENT_FAILED_TO_DELETE_POD_COLLECTION
                    elif head:
                        failed = c.EVENT_FAILED_TO_DELETE_HEAD_POD
                    else:
                        failed = c.EVENT_FAILED_TO_DELETE_WORKER_POD
                    detail = exc.message or str(exc)
                    self.recorder.event(
                        cluster,
                        WARNING,
                        failed,
                        f"Failed to delete pod {where}: {detail}",
                        "Delete",
                    )
                    raise _ReconcileError(fail_reason, detail) from exc
                deleted += 1
                if not collective:
                    reason = c.EVENT_DELETED_HEAD_POD if head else c.EVENT_DELETED_WORKER_POD
                    self.recorder.event(cluster, NORMAL, reason, f"Deleted pod {where}", "Delete")
        finally:
            if collective and (deleted or not pods):
                meta = cluster["metadata"]
                self.recorder.event(
                    cluster,
                    NORMAL,
                    c.EVENT_DELETED_POD,
                    f"Deleted all Pods of RayCluster {meta['namespace']}/{meta['name']} {why}",
                    "Delete",
                )

    def _group_key(self, cluster: Obj, pod: Obj) -> str:
        meta = cluster["metadata"]
        labels = pod["metadata"]["labels"]
        group = (
            ""
            if labels.get(c.LABEL_NODE_TYPE) == c.NODE_TYPE_HEAD
            else labels.get(c.LABEL_GROUP, "")
        )
        return f"{meta['namespace']}/{meta['name']}/{group}"

    # ------------------------------------------------------------------ status
    async def _update_status(
        self, cluster: Obj, error: _ReconcileError | None, *, waiting: bool = False
    ) -> tuple[bool, float]:
        """Computes the new status and writes it when it changed, unless it is progress to
        pace: then (False, seconds to wait). The pace is measured as ``status_write_delay``
        says (from the last write, or from pods created since, within a bound); a cluster
        ``waiting`` for the start window gets the longest pace, since more of its pods are
        about to be created and their Ready write will carry the progress; one that has no pod
        yet writes no progress at all (its first status and any other change still go out).
        upstream: updateRayClusterStatus (after calculateStatus)."""
        meta = cluster["metadata"]
        ns, name = meta["namespace"], meta["name"]
        pods = self.cluster_pods(ns, name)
        head_svc = self.services.get(ns, names.head_service_name(cluster))
        now = st.now_rfc3339()
        new = st.calculate_status(
            cluster,
            pods,
            head_svc,
            reconcile_error=error.message if error else None,
            error_reason=error.reason if error and error.reason else None,
            conditions_enabled=self.config.gates.enabled("RayClusterStatusConditions"),
            now=now,
        )
        if error is not None and error.stall:
            new["reason"] = error.message
        if error is None and st.status_changed(cluster.get("status"), new):
            pace = st.STATUS_PACE_MAX_SECONDS if waiting else self._status_pace()
            if waiting and not pods:
                # Nothing created yet: the only progress is the head Service appearing, and
                # the write after the pods are created carries it.
                pace = math.inf
            held = st.status_write_delay(
                cluster.get("status"),
                new,
                time.time(),
                pace,
                created=[p["metadata"].get("creationTimestamp") or "" for p in pods],
            )
            if held > 0:
                return False, held
        return await self._write_status(cluster, new), 0.0

    def _status_pace(self) -> float:
        """The progress-write pace for the controller's present backlog (``status_pace``);
        the base pace when no controller is wired in (a reconciler driven directly)."""
        ctrl = self.controller
        if ctrl is None:
            return st.STATUS_PACE_SECONDS
        return st.status_pace(ctrl.queue.depth, ctrl.concurrency)

    async def _write_status(self, cluster: Obj, new: Obj) -> bool:
        """Writes ``new`` as the cluster's status when it differs (resourceVersion-guarded, so
        a stale read fails with Conflict and is redone). A cluster deleted meanwhile is not an
        error: there is nothing left to report on."""
        meta = cluster["metadata"]
        if not st.status_changed(cluster.get("status"), new):
            return False
        new["lastUpdateTime"] = st.now_rfc3339()
        body = {
            "apiVersion": c.API_VERSION,
            "kind": c.KIND_RAYCLUSTER,
            "metadata": {
                "name": meta["name"],
                "namespace": meta["namespace"],
                "resourceVersion": meta["resourceVersion"],
            },
            "spec": cluster["spec"],
            "status": new,
        }
        try:
            written = await self.client.update_status(RAYCLUSTERS, body)
        except NotFound:
            log.debug("%s/%s is gone; status not written", meta["namespace"], meta["name"])
            return False
        # The next pass reads this answer, not the version it replaced (which would make its
        # next write fail with Conflict).
        self.clusters.record_write(written, based_on=meta["resourceVersion"])
        return True


def register(
    mgr: Manager, config: RayClusterConfig, namespaces: list[str] | None = None
) -> RayClusterReconciler:
    """Builds the reconciler over ``mgr``'s caches and wires it in: a controller for the
    RayClusters (spec, label and annotation changes) that owns their pods, Services and
    cleanup Jobs, and a delete handler that forgets a cluster's per-object state.
    upstream: SetupWithManager."""
    reconciler = RayClusterReconciler(
        mgr.client,
        config,
        mgr.recorder("raycluster-controller"),
        RayClusterCaches.make(mgr, namespaces),
    )
    ctrl = mgr.controller("raycluster", reconciler.reconcile, concurrency=config.concurrency)
    ctrl.for_(reconciler.clusters, any_of(generation_changed, labels_changed, annotations_changed))
    reconciler.clusters.add_handler(Handler(on_delete=reconciler.forget_cluster))
    for owned in (reconciler.jobs, reconciler.services):
        ctrl.owns(owned, c.KIND_RAYCLUSTER, c.GROUP)
    # The last pod of a start turning Ready: that pass goes ahead of the clusters not yet
    # started, or a burst's ready statuses lag minutes behind their pods. At most one such
    # pass per batch the start window lets in.
    ctrl.owns(reconciler.pods, c.KIND_RAYCLUSTER, c.GROUP, urgent=reconciler.start_may_be_done)
    reconciler.controller = ctrl
    reconciler.window.wake = ctrl.queue.add
    return reconciler


def redis_cleanup_timeout(meta: Obj) -> float:
    """How long a deleted cluster waits for its Redis cleanup before the finalizer is removed
    anyway: the annotation's positive whole number of seconds, else the default."""
    raw = (meta.get("annotations") or {}).get(c.ANNOTATION_GCS_FT_DELETION_TIMEOUT)
    if raw and raw.strip().isdigit() and int(raw) > 0:
        return float(raw)
    return DEFAULT_GCS_FT_DELETION_TIMEOUT


def seconds_since(timestamp: str, now: dt.datetime) -> float:
    """Seconds from the RFC 3339 ``timestamp`` to the aware ``now``."""
    return (now - rfc3339.parse(timestamp)).total_seconds()


def job_outcome(job: Obj) -> str | None:
    """A batch Job's end: "Complete", "Failed" (failed, or bound to fail: FailureTarget), or
    None while it runs. A Job with both Complete and a failure condition counts as Complete."""
    conditions = {
        co.get("type")
        for co in (job.get("status") or {}).get("conditions") or []
        if co.get("status") == "True"
    }
    if not conditions & {"Complete", "Failed", "FailureTarget"}:
        return None
    return "Complete" if "Complete" in conditions else "Failed"


def replicas_to_remove(
    group: Obj, replicas: Mapping[str, list[Obj]], hosts: int
) -> tuple[list[str], str]:
    """Which replicas of a multi-host group (pods by replica name) go whole this pass, and the
    reconcile error that says so: first the partial or unhealthy ones; else those with a pod
    named in ``scaleStrategy.workersToDelete``; else none."""
    group_name = group["groupName"]
    broken = [
        name
        for name, members in replicas.items()
        if len(members) < hosts or any(podb.pod_is_unhealthy(p) for p in members)
    ]
    if broken:
        return broken, (
            f"deleted {len(broken)} incomplete or unhealthy replicas of group {group_name}"
        )
    to_delete = set((group.get("scaleStrategy") or {}).get("workersToDelete") or [])
    named = [
        name
        for name, members in replicas.items()
        if any(p["metadata"]["name"] in to_delete for p in members)
    ]
    return named, f"deleted {len(named)} replicas of group {group_name} named in workersToDelete"


def _surely_not_written(exc: ApiError) -> bool:
    """Only a definite rejection (4xx other than AlreadyExists/Conflict and request timeout)
    proves that a write did not happen. A lost connection, a client timeout or a 5xx (the
    apiserver answers 504 while the write may still commit) leave it unknown, so the
    expectation must stay until the cache shows the outcome or it expires; forgetting it there
    would let the next pass create the same kind of pod a second time."""
    return 400 <= exc.status < 500 and exc.status not in (408, 409)


def _awaiting_scheduler(pod: Obj) -> bool:
    """Created but not yet bound, and the scheduler has not (yet) found it unschedulable."""
    if (pod.get("spec") or {}).get("nodeName"):
        return False
    for cond in (pod.get("status") or {}).get("conditions") or []:
        if cond.get("type") == "PodScheduled" and cond.get("reason") == "Unschedulable":
            return False
    return True


def _terminating(pod: Obj) -> bool:
    return bool(pod["metadata"].get("deletionTimestamp"))
