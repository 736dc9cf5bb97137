"""RayJob reconciler: the JobDeploymentStatus state machine of KubeRay v1.7
(upstream: ray-operator/controllers/ray/rayjob_controller.go).

Invariants and failure modes:
- Intent before action. The submission id and the RayCluster name are chosen in ``New`` and
  written to status (with the resourceVersion read) before any cluster is created or any job is
  submitted; every later pass builds children from the persisted status only. A crash at any
  point therefore resumes with the same names: the cluster create and submitter Job create
  answer AlreadyExists, the submitter command checks the id before submitting, and HTTPMode
  submits only after the dashboard said the id is unknown (and the dashboard itself refuses a
  second job with the same id).
- One status write per pass, at the end, with optimistic concurrency: a stale cache can never
  overwrite a newer status (Conflict -> requeue). After a successful write the reconciler
  waits until its cache has moved past the version it wrote against: the write is recorded in
  the RayJob cache (``record_write``, no write-through), and a pass that finds the key not
  fresh yet (the watch has not delivered that write) only requeues shortly. So it never acts
  twice on a state it has already left (no double cluster creation after a retry, for
  example). A watch that never delivers the write (the object was deleted) releases the key
  with the DELETED event or the relist that follows.
- A finished result is never lost: a terminal status is persisted before any cleanup (cluster
  deletion, TTL, deletion rules) runs, and cleanup only runs from a persisted terminal state.
- Dashboard errors never crash a pass: a failing status query only starts the
  ``jobStatusCheckFailureStartTime`` timer (Failed after 300 s by default), as upstream.
- Beyond upstream, ``status.conditions`` (ClusterReady, Suspended, Complete, Failed) say why a
  job is not progressing; while Initializing, ClusterReady carries the RayCluster's
  RayClusterProvisioned reason and message (image pull, unschedulable, quota ...).
- Beyond upstream, a SidecarMode job whose submitter container has already terminated leaves
  Initializing even though its cluster never reported ``ready`` (the ended container makes the
  head pod not Ready, so a job that ended before a slow worker was Ready waited forever,
  found by upstream's TestRayJobRetry on a loaded machine); Running then judges the exit.
- Every status decision (timers, deadlines, backoff, submitter outcome, TTLs, conditions) is a
  pure function in ``rayjob_status``; this module reads the caches, the clock and the
  dashboard, does the writes, and hands what it observed to those functions.
- Building a reconciler (``RayJobReconciler``) needs no manager (its caches are then
  standalone, filled by hand); ``register`` makes them from the manager's shared caches of the
  watched namespaces and wires the controller in.
"""

from __future__ import annotations

import contextlib
import copy
import logging
import os
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any

from pydantic import ValidationError

from kuberay.api import constants as c
from kuberay.api import features
from kuberay.api import validation as v
from kuberay.api.features import FeatureGates
from kuberay.api.rayjob import RayJob
from kuberay.builders import rayjob as rjb
from kuberay.builders.options import BuildOptions
from kuberay.controllers import rayjob_status as st
from kuberay.controllers.common import (
    OWNED_SELECTOR,
    POD_SELECTOR,
    RAYCLUSTERS,
    random_suffix,
)
from kuberay.controllers.dashboards import DashboardAccess
from kuberay.controllers.reconcile import (
    WriteEvents,
    cached_head_pod,
    child_events,
    selector_patch,
    wire_controller,
    working_copy,
    write_child,
)
from kuberay.ray.dashboard import (
    DashboardClient,
    DashboardError,
    DashboardFactory,
    JobSubmitRequest,
)
from kuberay.runtime.cache import CacheSource, StandaloneCaches
from kuberay.runtime.client import JOBS, PODS, SERVICES, KubeClient, Resource
from kuberay.runtime.controller import Controller, Request, Result
from kuberay.runtime.errors import AlreadyExists, ApiError, Conflict, NotFound
from kuberay.runtime.events import NORMAL, WARNING, EventRecorder
from kuberay.runtime.manager import Manager
from kuberay.runtime.store import POD_FIELDS, Obj, index_by_label, projector
from kuberay.schedulers import SUBMITTER_GROUP, BatchScheduler

log = logging.getLogger("kuberay.controllers.rayjob")
# The Services this controller makes all carry upstream's originated-from labels (and, like
# upstream's, the head Service no other label of ours), so they are selected by those.
SERVICE_SELECTOR = f"{c.LABEL_ORIGINATED_FROM_CRD}={c.KIND_RAYJOB}"

RAYJOBS = c.RAYJOBS  # kept importable from here


def _env_int(env: Mapping[str, str], name: str, default: int) -> int:
    text = (env.get(name) or "").strip()
    try:
        return int(text) if text else default
    except ValueError:
        return default


@dataclass
class RayJobConfig:
    """Operator settings for RayJobs (environment, flags, gates); timers are upstream's."""

    build: BuildOptions = field(default_factory=BuildOptions)
    gates: FeatureGates = field(default_factory=FeatureGates)
    requeue_seconds: float = 3.0
    transition_grace_seconds: float = 300.0
    status_check_timeout_seconds: float = 300.0
    submitter_finished_grace_seconds: float = 30.0
    delete_rayjob_after_finishes: bool = False
    concurrency: int = 8
    # --use-kubernetes-proxy: reach dashboards through the API server's service proxy (an
    # operator outside the cluster network); ``apiserver`` is the API server's base URL.
    use_kubernetes_proxy: bool = False
    apiserver: str = ""
    clock: Callable[[], float] = time.time
    suffix: Callable[[], str] = random_suffix
    # --batch-scheduler: adds its metadata to a K8sJobMode job's cluster and submitter.
    scheduler: BatchScheduler | None = None

    @classmethod
    def from_env(cls, env: Mapping[str, str] | None = None, **overrides: Any) -> RayJobConfig:
        env = os.environ if env is None else env
        kwargs: dict[str, Any] = {
            "build": BuildOptions.from_env(env),
            "transition_grace_seconds": float(
                _env_int(env, c.ENV_RAYJOB_TRANSITION_GRACE_PERIOD, 300)
            ),
            "status_check_timeout_seconds": float(
                _env_int(env, c.ENV_RAYJOB_STATUS_CHECK_TIMEOUT, 300)
            ),
            "delete_rayjob_after_finishes": (
                env.get(c.ENV_DELETE_RAYJOB_CR_AFTER_JOB_FINISHES, "").lower() == "true"
            ),
        }
        kwargs.update(overrides)
        return cls(**kwargs)


class RayJobReconciler:
    """The RayJob state machine over a client, a recorder and the caches it reads.

    The caches come from ``caches`` for ``namespaces`` (None: all); by default they are
    standalone and never started, so tests fill their stores with what they need. ``register``
    builds it over the manager's shared caches and wires the controller in.
    """

    def __init__(
        self,
        client: KubeClient,
        config: RayJobConfig,
        dashboard_factory: DashboardFactory,
        recorder: EventRecorder,
        *,
        caches: CacheSource | None = None,
        namespaces: list[str] | None = None,
    ) -> None:
        self.client = client
        self.config = config
        self.dashboard_access = DashboardAccess.configured(client, dashboard_factory, config)
        self.recorder = recorder
        caches = caches or StandaloneCaches(client)
        self.rayjobs = caches.cache(RAYJOBS, namespaces=namespaces)
        self.clusters = caches.cache(RAYCLUSTERS, namespaces=namespaces)
        self.services = caches.cache(
            SERVICES, namespaces=namespaces, label_selector=SERVICE_SELECTOR
        )
        self.jobs = caches.cache(JOBS, namespaces=namespaces, label_selector=OWNED_SELECTOR)
        self.pods = caches.cache(
            PODS,
            namespaces=namespaces,
            label_selector=POD_SELECTOR,
            transform=projector(POD_FIELDS),
        )
        # Same index the RayCluster controller keeps on the shared pod cache (idempotent).
        self.pods.add_indexer("cluster", index_by_label(c.LABEL_CLUSTER))
        self.controller: Controller | None = None
        # (job, deployment status, retry count, seconds) when an attempt ends; set when
        # --enable-metrics asks for kuberay_job_execution_duration_seconds.
        self.on_attempt_end: Callable[[Obj, str, int, float], None] | None = None

    # ------------------------------------------------------------------ helpers
    def forget(self, obj: Obj) -> None:
        """Drops a deleted RayJob's event budget and aggregation state."""
        self.recorder.forget(obj["metadata"].get("uid", ""))

    def now(self) -> float:
        return self.config.clock()

    def _head_pod(self, ns: str, cluster: str) -> Obj | None:
        return cached_head_pod(self.pods, ns, cluster)

    def _requeue(self) -> Result:
        return Result(requeue_after=self.config.requeue_seconds)

    # ------------------------------------------------------------------ reconcile
    async def reconcile(self, req: Request) -> Result | None:
        ns = req.namespace or ""
        cached = self.rayjobs.get(ns, req.name)
        if cached is None:
            return None
        if not self.rayjobs.is_fresh(ns, req.name):
            return Result(requeue_after=0.2)  # our own last write has not reached the cache
        job = working_copy(cached, c.KIND_RAYJOB, ensure=("spec", "status"))
        if job is None:
            return None
        old_status = copy.deepcopy(job["status"])

        if job["metadata"].get("deletionTimestamp"):
            return await self._finalize(job)

        problem = self._validate(job)
        if problem is not None:
            event_reason, message = problem
            self.recorder.event(job, WARNING, event_reason, message, "Validate")
            st.mark_validation_failed(job, message)
            await self._write_status(job, old_status)
            return None

        state = job["status"].get("jobDeploymentStatus") or c.DEPLOYMENT_NEW
        handler = {
            c.DEPLOYMENT_NEW: self._on_new,
            c.DEPLOYMENT_INITIALIZING: self._on_initializing,
            c.DEPLOYMENT_WAITING: self._on_waiting,
            c.DEPLOYMENT_RUNNING: self._on_running,
            c.DEPLOYMENT_SUSPENDING: self._on_suspending_or_retrying,
            c.DEPLOYMENT_RETRYING: self._on_suspending_or_retrying,
            c.DEPLOYMENT_SUSPENDED: self._on_suspended,
            c.DEPLOYMENT_COMPLETE: self._on_terminal,
            c.DEPLOYMENT_FAILED: self._on_terminal,
        }.get(state)
        if handler is None:
            log.info("unknown JobDeploymentStatus %r; nothing to do", state)
            return self._requeue()
        early = await handler(job)
        if early is not None:
            return early
        st.check_backoff_limit(job)
        await self._write_status(job, old_status)
        return self._requeue()

    def _validate(self, job: Obj) -> tuple[str, str] | None:
        err = v.validate_rayjob_metadata(job["metadata"])
        if err:
            return c.EVENT_INVALID_RAYJOB_METADATA, err
        try:
            model = RayJob.model_validate(job)
        except ValidationError as exc:
            return c.EVENT_INVALID_RAYJOB_SPEC, f"{v.RAYJOB_PREFIX}spec could not be read: {exc}"
        err = v.validate_rayjob_spec(model, self.config.gates)
        if err:
            return c.EVENT_INVALID_RAYJOB_SPEC, err
        err = v.validate_rayjob_status(model)
        if err:
            return c.EVENT_INVALID_RAYJOB_STATUS, err
        return None

    # ------------------------------------------------------------------ deletion
    async def _finalize(self, job: Obj) -> Result | None:
        finalizers = list(job["metadata"].get("finalizers") or [])
        if c.FINALIZER_RAYJOB not in finalizers:
            return None
        status = job["status"]
        if status.get("jobStatus") not in c.JOB_STATUS_TERMINAL and status.get("jobId"):
            dashboard = await self._dashboard(job)
            if dashboard is not None:
                try:
                    await dashboard.stop_job(status["jobId"])
                except DashboardError as exc:
                    log.info("stopping Ray job %s failed (ignored): %s", status["jobId"], exc)
                finally:
                    await dashboard.close()
        finalizers.remove(c.FINALIZER_RAYJOB)
        patch = {
            "metadata": {
                "finalizers": finalizers,
                "resourceVersion": job["metadata"]["resourceVersion"],
            }
        }
        with contextlib.suppress(NotFound):
            await self.client.patch(RAYJOBS, job["metadata"]["name"], patch, _ns(job))
        return None

    # ------------------------------------------------------------------ states
    async def _on_new(self, job: Obj) -> Result | None:
        meta = job["metadata"]
        finalizers = list(meta.get("finalizers") or [])
        if c.FINALIZER_RAYJOB not in finalizers:
            patch = {
                "metadata": {
                    "finalizers": [*finalizers, c.FINALIZER_RAYJOB],
                    "resourceVersion": meta["resourceVersion"],
                }
            }
            updated = await self.client.patch(RAYJOBS, meta["name"], patch, _ns(job))
            meta["resourceVersion"] = updated["metadata"]["resourceVersion"]
            meta["finalizers"] = updated["metadata"].get("finalizers")
        st.init_status(job, self.config.suffix, self.now())
        return None

    async def _on_initializing(self, job: Obj) -> Result | None:
        status = job["status"]
        now = self.now()
        if st.to_suspending_if_needed(job):
            return None
        if st.active_deadline_exceeded(job, now) or st.pre_running_deadline_exceeded(job, now):
            return None
        if self.config.scheduler is not None and not job["spec"].get("clusterSelector"):
            template = self._submitter_template(job)
            await self.config.scheduler.on_job_submission(self.client, job, template)
        cluster = await self._get_or_create_cluster(job)
        status["rayClusterStatus"] = st.cluster_status_copy(job, cluster)
        mode = rjb.submission_mode(job)
        if not status.get("dashboardURL"):
            ready = (cluster.get("status") or {}).get("state") == c.CLUSTER_STATE_READY
            head = self._head_pod(_ns(job), cluster["metadata"]["name"])
            if not ready and not (mode == c.SIDECAR_MODE and st.sidecar_finished(head)):
                return None
            status["dashboardURL"] = rjb.dashboard_url(cluster, self.config.build)
        if mode == c.INTERACTIVE_MODE:
            status["jobDeploymentStatus"] = c.DEPLOYMENT_WAITING
            return None
        if mode == c.K8S_JOB_MODE:
            await self._create_submitter_if_needed(job, cluster)
        status["jobDeploymentStatus"] = c.DEPLOYMENT_RUNNING
        return None

    async def _on_waiting(self, job: Obj) -> Result | None:
        if st.pre_running_deadline_exceeded(job, self.now()):
            return None
        job_id = job["spec"].get("jobId")
        if job_id:
            job["status"]["jobId"] = job_id
            job["status"]["jobDeploymentStatus"] = c.DEPLOYMENT_RUNNING
        return None

    async def _on_running(self, job: Obj) -> Result | None:
        spec, status = job["spec"], job["status"]
        cfg = self.config
        now = self.now()
        if st.to_suspending_if_needed(job) or st.active_deadline_exceeded(job, now):
            return None
        if st.transition_grace_exceeded(job, now, cfg.transition_grace_seconds):
            return None
        if st.status_check_timed_out(job, now, cfg.status_check_timeout_seconds):
            return None
        mode = rjb.submission_mode(job)
        cluster = self.clusters.get(_ns(job), status.get("rayClusterName") or "")
        finished_at: float | None = None
        if mode in (c.K8S_JOB_MODE, c.SIDECAR_MODE):
            failed, finished_at = self.check_submitter(job, mode)
            grace = cfg.submitter_finished_grace_seconds
            if st.submitter_finished_timeout(job, finished_at, self.now(), grace) or failed:
                return None
        if cluster is not None:
            status["rayClusterStatus"] = st.cluster_status_copy(job, cluster)
            if not spec.get("clusterSelector"):
                await self._reconcile_head_service(job, cluster)
        dashboard = await self._dashboard(job)
        if dashboard is None:
            st.status_check_failed(job, self.now())
            return None
        try:
            info = await dashboard.get_job_info(status.get("jobId") or "")
            if info is None:
                if mode == c.HTTP_MODE:
                    return await self._submit(job, dashboard)
                st.ray_job_missing(job, finished_at)
                return None
        except DashboardError as exc:
            log.info("Ray job status query failed: %s", exc)
            st.status_check_failed(job, self.now())
            return None
        finally:
            await dashboard.close()
        st.apply_job_info(job, info, mode, finished_at)
        return None

    async def _submit(self, job: Obj, dashboard: DashboardClient) -> Result | None:
        """HTTPMode: submits the Ray job under the id persisted in New (the dashboard refuses a
        second job with it). A failure is retried next pass without starting the check timer,
        as upstream."""
        job_id = job["status"].get("jobId")
        try:
            await dashboard.submit_job(submit_request(job))
        except DashboardError as exc:
            log.info("submitting Ray job %s failed: %s", job_id, exc)
            return self._requeue()
        log.info("submitted Ray job %s", job_id)
        return None

    async def _on_suspending_or_retrying(self, job: Obj) -> Result | None:
        cluster_gone = await self._delete_cluster(job)
        job_gone = True
        if rjb.submission_mode(job) == c.K8S_JOB_MODE:
            job_gone = await self._delete_submitter(job)
        if not cluster_gone or not job_gone:
            return self._requeue()
        await self._release_gang(job)
        st.reset_attempt(job)
        return None

    async def _on_suspended(self, job: Obj) -> Result | None:
        if not job["spec"].get("suspend"):
            job["status"]["jobDeploymentStatus"] = c.DEPLOYMENT_NEW
            return None
        return Result()

    async def _on_terminal(self, job: Obj) -> Result | None:
        spec = job["spec"]
        if spec.get("clusterSelector"):
            return Result()
        await self._release_gang(job)
        strategy = spec.get("deletionStrategy")
        if self.config.gates.enabled(features.RAY_JOB_DELETION_POLICY) and isinstance(
            strategy, dict
        ):
            if strategy.get("deletionRules"):
                return await self._deletion_rules(job, strategy["deletionRules"])
            return await self._legacy_deletion(job, strategy)
        if spec.get("shutdownAfterJobFinishes"):
            return await self._shutdown_after_finish(job)
        return Result()

    # ------------------------------------------------------------------ batch scheduler
    def _submitter_template(self, job: Obj) -> Obj | None:
        """The submitter pod a gang must make room for: K8sJobMode's Job template, or the
        SidecarMode container in a pod of its own; None when nothing is submitted by a pod."""
        cluster_spec = job["spec"].get("rayClusterSpec") or {}
        mode = rjb.submission_mode(job)
        if mode == c.K8S_JOB_MODE:
            template: Obj = rjb.build_submitter_job(job, cluster_spec)["spec"]["template"]
            return template
        if mode == c.SIDECAR_MODE:
            return {"spec": {"containers": [rjb.default_submitter_container(cluster_spec)]}}
        return None

    async def _release_gang(self, job: Obj) -> None:
        """Tells the batch scheduler the job's gang no longer needs what it reserved; a
        failure is reported and retried on the next pass, never blocking the job's cleanup."""
        if self.config.scheduler is None:
            return
        where = f"{_ns(job)}/{job['metadata']['name']}"
        try:
            changed = await self.config.scheduler.on_job_completion(self.client, job)
        except ApiError as exc:
            note = f"Failed to clean up batch scheduler resources for RayJob {where}: {exc}"
            self.recorder.event(
                job, WARNING, c.EVENT_FAILED_TO_CLEANUP_BATCH_SCHEDULER, note, "Cleanup"
            )
            return
        if changed:
            note = f"Released the batch scheduler's reservation for RayJob {where}"
            self.recorder.event(job, NORMAL, c.EVENT_BATCH_SCHEDULER_CLEANED_UP, note, "Cleanup")

    # ------------------------------------------------------------------ children
    async def _get_or_create_cluster(self, job: Obj) -> Obj:
        ns = _ns(job)
        name = job["status"]["rayClusterName"]
        cached = self.clusters.get(ns, name)
        if cached is not None:
            return cached
        if job["spec"].get("clusterSelector"):
            try:
                return await self.client.get(RAYCLUSTERS, name, ns)
            except NotFound:
                msg = (
                    f"RayCluster {ns}/{name} set in the clusterSelector is not found. "
                    "It must be created manually"
                )
                self.recorder.event(job, WARNING, c.EVENT_RAYCLUSTER_NOT_FOUND, msg, "Reconcile")
                raise
        cluster = rjb.build_cluster_for_job(
            job, sidecar_restart=self.config.gates.enabled(features.SIDECAR_SUBMITTER_RESTART)
        )
        if self.config.scheduler is not None and rjb.submission_mode(job) == c.K8S_JOB_MODE:
            template = self._submitter_template(job) or {}
            self.config.scheduler.add_job_metadata(job, cluster, "", template)
        events = child_events(
            "Create",
            f"RayCluster {ns}/{name}",
            c.EVENT_CREATED_RAYCLUSTER,
            c.EVENT_FAILED_TO_CREATE_RAYCLUSTER,
        )
        creating = self.client.create(RAYCLUSTERS, cluster, ns)
        try:
            return await write_child(self.recorder, job, events, creating, benign=(AlreadyExists,))
        except AlreadyExists:
            return await self.client.get(RAYCLUSTERS, name, ns)

    async def _create_submitter_if_needed(self, job: Obj, cluster: Obj) -> None:
        ns, name = _ns(job), job["metadata"]["name"]
        if self.jobs.get(ns, name) is not None:
            return
        submitter = rjb.build_submitter_job(job, cluster.get("spec") or {})
        if self.config.scheduler is not None:
            template = copy.deepcopy(submitter["spec"]["template"])
            self.config.scheduler.add_job_metadata(job, submitter, SUBMITTER_GROUP, template)
        events = WriteEvents(
            "Create",
            c.EVENT_CREATED_RAYJOB_SUBMITTER,
            f"Created Kubernetes Job {ns}/{name}",
            c.EVENT_FAILED_TO_CREATE_RAYJOB_SUBMITTER,
            f"Failed to create new Kubernetes Job {ns}/{name}",
        )
        with contextlib.suppress(AlreadyExists):
            await write_child(
                self.recorder,
                job,
                events,
                self.client.create(JOBS, submitter, ns),
                benign=(AlreadyExists,),
            )

    def check_submitter(self, job: Obj, mode: str) -> tuple[bool, float | None]:
        """(failed, finishedAt) from the cached submitter Job (K8sJobMode) or the cached head
        pod's sidecar container (SidecarMode)."""
        ns = _ns(job)
        if mode == c.K8S_JOB_MODE:
            submitter = self.jobs.get(ns, job["metadata"]["name"])
            return st.check_submitter_job(job, submitter, self.now())
        head = self._head_pod(ns, job["status"].get("rayClusterName") or "")
        restart = self.config.gates.enabled(features.SIDECAR_SUBMITTER_RESTART)
        return st.check_sidecar(job, head, self.now(), restart)

    async def _reconcile_head_service(self, job: Obj, cluster: Obj) -> None:
        want = rjb.build_job_head_service(job, cluster, self.config.build)
        ns = _ns(job)
        name = want["metadata"]["name"]
        have = self.services.get(ns, name)
        if have is None:
            # A failed create is reported by the error the pass ends with, not by an event.
            events = child_events("Create", f"service {ns}/{name}", c.EVENT_CREATED_SERVICE, None)
            with contextlib.suppress(AlreadyExists):
                await write_child(
                    self.recorder, job, events, self.client.create(SERVICES, want, ns)
                )
            return
        patch = selector_patch(have, want)
        if patch is None:
            return
        what = f"service {ns}/{name}"
        events = child_events(
            "Update", what, c.EVENT_UPDATED_SERVICE, c.EVENT_FAILED_TO_UPDATE_SERVICE
        )
        patching = self.client.patch(SERVICES, name, patch, ns)
        await write_child(self.recorder, job, events, patching, benign=(Conflict, NotFound))

    async def _delete_cluster(self, job: Obj) -> bool:
        """True once the cluster is gone (always for clusterSelector, which is never deleted)."""
        if job["spec"].get("clusterSelector"):
            return True
        name = job["status"].get("rayClusterName")
        if not name:
            return True
        return await self._delete_child(
            job,
            RAYCLUSTERS,
            name,
            "cluster",
            c.EVENT_DELETED_RAYCLUSTER,
            c.EVENT_FAILED_TO_DELETE_RAYCLUSTER,
        )

    async def _delete_submitter(self, job: Obj) -> bool:
        return await self._delete_child(
            job,
            JOBS,
            job["metadata"]["name"],
            "submitter K8s Job",
            c.EVENT_DELETED_RAYJOB_SUBMITTER,
            c.EVENT_FAILED_TO_DELETE_RAYJOB_SUBMITTER,
        )

    async def _delete_child(
        self, job: Obj, res: Resource, name: str, what: str, done_event: str, fail_event: str
    ) -> bool:
        """Deletes one child (uid-guarded, so a same-named successor is never hit); True once it
        is gone, False while its deletion is under way."""
        ns = _ns(job)
        try:
            child = await self.client.get(res, name, ns)
        except NotFound:
            return True
        if child["metadata"].get("deletionTimestamp"):
            return False
        events = child_events("Delete", f"{what} {ns}/{name}", done_event, fail_event)
        uid = child["metadata"]["uid"]
        deleting = self.client.delete(res, name, ns, propagation="Background", uid=uid)
        try:
            await write_child(self.recorder, job, events, deleting, benign=(NotFound,))
        except NotFound:
            return True
        return False

    async def _delete_self(self, job: Obj) -> None:
        with contextlib.suppress(NotFound):
            await self.client.delete(
                RAYJOBS,
                job["metadata"]["name"],
                _ns(job),
                propagation="Background",
                uid=job["metadata"].get("uid"),
            )
        log.info("deleted RayJob %s/%s after it finished", _ns(job), job["metadata"]["name"])

    async def _delete_workers(self, job: Obj) -> None:
        """DeleteWorkers: suspend every worker group of the job's cluster."""
        ns = _ns(job)
        name = job["status"].get("rayClusterName") or ""
        try:
            cluster = await self.client.get(RAYCLUSTERS, name, ns)
        except NotFound:
            return
        groups = cluster["spec"].get("workerGroupSpecs") or []
        if all(g.get("suspend") for g in groups):
            return
        for group in groups:
            group["suspend"] = True
        # A conflict or a vanished cluster is just a retry: no event.
        events = WriteEvents(
            "Update",
            c.EVENT_UPDATED_RAYCLUSTER,
            f"Suspended the worker groups of cluster {ns}/{name}",
            c.EVENT_FAILED_TO_UPDATE_RAYCLUSTER,
            f"Failed to suspend the worker groups of cluster {ns}/{name}",
        )
        updating = self.client.update(RAYCLUSTERS, cluster)
        await write_child(self.recorder, job, events, updating, benign=(Conflict, NotFound))

    async def _execute_policy(self, job: Obj, policy: str) -> None:
        if policy == c.DELETE_SELF:
            await self._delete_self(job)
        elif policy == c.DELETE_CLUSTER:
            await self._delete_cluster(job)
        elif policy == c.DELETE_WORKERS:
            await self._delete_workers(job)

    async def _shutdown_after_finish(self, job: Obj) -> Result:
        wait = self._ttl_after_finish(job)
        if wait > 0:
            return Result(requeue_after=st.requeue_for(wait))
        if self.config.delete_rayjob_after_finishes:
            await self._delete_self(job)
        else:
            await self._delete_cluster(job)
        return Result()

    async def _legacy_deletion(self, job: Obj, strategy: Obj) -> Result:
        policy = st.legacy_policy(job, strategy)
        if policy == c.DELETE_NONE:
            return Result()
        wait = self._ttl_after_finish(job)
        if wait > 0:
            return Result(requeue_after=st.requeue_for(wait))
        await self._execute_policy(job, policy)
        return Result()

    def _ttl_after_finish(self, job: Obj) -> float:
        ttl = float(job["spec"].get("ttlSecondsAfterFinished") or 0)
        return st.ttl_wait(job, ttl, self.now())

    async def _deletion_rules(self, job: Obj, rules: list[Obj]) -> Result:
        cluster = self.clusters.get(_ns(job), job["status"].get("rayClusterName") or "")
        due, next_wait = st.due_deletion(
            job,
            rules,
            self.now(),
            cluster_deleted=cluster is None or bool(cluster["metadata"].get("deletionTimestamp")),
            workers_deleted=st.workers_suspended(cluster),
        )
        if due is not None:
            await self._execute_policy(job, due)
        if next_wait is not None:
            return Result(requeue_after=st.requeue_for(next_wait))
        return Result()

    # ------------------------------------------------------------------ dashboard
    async def _dashboard(self, job: Obj) -> DashboardClient | None:
        """A client for the job's dashboard (``status.dashboardURL``), None before it is
        known. Raises a ``DashboardError`` when the auth token cannot be read."""
        url = job["status"].get("dashboardURL")
        if not url:
            return None
        ns = _ns(job)
        cluster_name = job["status"].get("rayClusterName") or ""
        # The token is the cluster's: the spec the job made it from, or the selected one's.
        spec = job["spec"].get("rayClusterSpec") or {}
        if job["spec"].get("clusterSelector"):
            cluster = self.clusters.get(ns, cluster_name)
            spec = (cluster or {}).get("spec") or {}
        return await self.dashboard_access.open(str(url), ns, spec, cluster_name)

    # ------------------------------------------------------------------ status
    async def _write_status(self, job: Obj, old: Obj) -> bool:
        status = job["status"]
        meta = job["metadata"]
        now = self.now()
        cluster = self.clusters.get(_ns(job), status.get("rayClusterName") or "")
        if not st.prepare_write(job, old, cluster, now):
            return False
        body = {
            "apiVersion": c.API_VERSION,
            "kind": c.KIND_RAYJOB,
            "metadata": {
                "name": meta["name"],
                "namespace": meta.get("namespace"),
                "resourceVersion": meta["resourceVersion"],
            },
            "spec": job["spec"],
            "status": status,
        }
        written = await self.client.update_status(RAYJOBS, body)
        # No write-through (``based_on``): the next pass waits for the watch (see reconcile).
        self.rayjobs.record_write(written)
        # Reported once the end is recorded (a failed write, retried next pass, reports then).
        if self.on_attempt_end is not None:
            ended = st.attempt_end(job, old, self.now())
            if ended is not None:
                self.on_attempt_end(job, *ended)
        return True


def submit_request(job: Obj) -> JobSubmitRequest:
    """The dashboard submit request for HTTPMode (the id is the persisted status.jobId)."""
    payload = rjb.job_submit_payload(job, job["status"].get("jobId") or "")
    return JobSubmitRequest(
        entrypoint=payload["entrypoint"],
        submission_id=payload["submission_id"],
        runtime_env=payload.get("runtime_env"),
        metadata=payload.get("metadata"),
        entrypoint_num_cpus=payload.get("entrypoint_num_cpus"),
        entrypoint_num_gpus=payload.get("entrypoint_num_gpus"),
        entrypoint_resources=payload.get("entrypoint_resources"),
    )


def _ns(job: Obj) -> str:
    return str(job["metadata"].get("namespace") or "")


def register(
    mgr: Manager,
    config: RayJobConfig,
    namespaces: list[str] | None,
    dashboard_factory: DashboardFactory,
) -> RayJobReconciler:
    """Builds the reconciler over the manager's caches of the watched namespaces (all when
    none is given) and wires in the controller that owns the RayJob's clusters, Services and
    submitter Jobs."""
    reconciler = RayJobReconciler(
        mgr.client,
        config,
        dashboard_factory,
        mgr.recorder(c.RECORDER_RAYJOB),
        caches=mgr,
        namespaces=namespaces,
    )
    # A deleted object's event budget and aggregation state go with it (forget).
    reconciler.controller = wire_controller(
        mgr,
        "rayjob",
        reconciler.reconcile,
        config.concurrency,
        reconciler.rayjobs,
        reconciler.forget,
        [reconciler.clusters, reconciler.services, reconciler.jobs],
        c.KIND_RAYJOB,
    )
    return reconciler
