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
  waits until its cache has moved past the version it wrote against, so it never acts twice on
  a state it has already left (no double cluster creation after a retry, for example).
- A finished result is never lost: a terminal status is persisted before any cleanup (cluster
  deletion, TTL, deletion rules) runs, and cleanup only runs from a persisted terminal state.
- Dashboard errors never crash a pass: a failing status query only starts the
  ``jobStatusCheckFailureStartTime`` timer (Failed after 300 s by default), as upstream.
- Beyond upstream, ``status.conditions`` (ClusterReady, Suspended, Complete, Failed) say why a
  job is not progressing; while Initializing, ClusterReady carries the RayCluster's
  RayClusterProvisioned reason and message (image pull, unschedulable, quota ...).
"""

from __future__ import annotations

import base64
import contextlib
import copy
import logging
import os
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any
from urllib.parse import urlsplit

from pydantic import ValidationError

from kuberay.api import constants as c
from kuberay.api import features
from kuberay.api import validation as v
from kuberay.api.features import FeatureGates
from kuberay.api.rayjob import RayJob
from kuberay.builders import names
from kuberay.builders import rayjob as rjb
from kuberay.builders.options import BuildOptions
from kuberay.controllers.common import (
    OWNED_SELECTOR,
    POD_SELECTOR,
    RAYCLUSTERS,
    find_cached,
    parse_time,
    random_suffix,
    rfc3339,
)
from kuberay.ray.dashboard import (
    DashboardClient,
    DashboardError,
    DashboardFactory,
    JobSubmitRequest,
)
from kuberay.ray.http_client import service_proxy_base_url
from kuberay.runtime.client import JOBS, PODS, SECRETS, SERVICES, KubeClient, Resource
from kuberay.runtime.controller import Request, Result
from kuberay.runtime.errors import AlreadyExists, ApiError, Conflict, NotFound
from kuberay.runtime.events import NORMAL, WARNING, EventRecorder
from kuberay.runtime.informer import Handler, Informer
from kuberay.runtime.manager import Manager
from kuberay.runtime.store import POD_FIELDS, Obj, index_by_label, projector
from kuberay.schedulers import SUBMITTER_GROUP, BatchScheduler

log = logging.getLogger("kuberay.controllers.rayjob")
# The Services this controller makes all carry upstream's originated-from labels (and, like
# upstream's, the head Service no other label of ours), so they are selected by those.
SERVICE_SELECTOR = f"{c.LABEL_ORIGINATED_FROM_CRD}={c.KIND_RAYJOB}"

RAYJOBS = Resource("ray.io", "v1", "rayjobs", kind="RayJob")


# status.conditions (additive, beyond upstream)
COND_CLUSTER_READY = "ClusterReady"
COND_SUSPENDED = "Suspended"
COND_COMPLETE = "Complete"
COND_FAILED = "Failed"

_POLICY_RANK = {c.DELETE_NONE: 0, c.DELETE_WORKERS: 1, c.DELETE_CLUSTER: 2, c.DELETE_SELF: 3}


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
    def __init__(
        self,
        mgr: Manager,
        config: RayJobConfig,
        dashboard_factory: DashboardFactory,
        *,
        namespaces: list[str] | None = None,
    ) -> None:
        self.client: KubeClient = mgr.client
        self.config = config
        self.dashboards = dashboard_factory
        self.recorder: EventRecorder = mgr.recorder(c.RECORDER_RAYJOB)
        ns_list: list[str | None] = list(namespaces) if namespaces else [None]
        self.rayjobs: list[Informer] = []
        self.clusters: list[Informer] = []
        self.services: list[Informer] = []
        self.jobs: list[Informer] = []
        self.pods: list[Informer] = []
        # key -> resourceVersion our last status write replaced (the cache is stale while equal)
        self._written_over: dict[str, str] = {}
        # (job, deployment status, retry count, seconds) when an attempt ends; set when
        # --enable-metrics asks for kuberay_job_execution_duration_seconds.
        self.on_attempt_end: Callable[[Obj, str, int, float], None] | None = None
        ctrl = mgr.controller("rayjob", self.reconcile, concurrency=config.concurrency)
        for ns in ns_list:
            rayjobs = mgr.informer(RAYJOBS, namespace=ns)
            clusters = mgr.informer(RAYCLUSTERS, namespace=ns)
            services = mgr.informer(SERVICES, namespace=ns, label_selector=SERVICE_SELECTOR)
            jobs = mgr.informer(JOBS, namespace=ns, label_selector=OWNED_SELECTOR)
            pods = mgr.informer(
                PODS, namespace=ns, label_selector=POD_SELECTOR, transform=projector(POD_FIELDS)
            )
            # Same index the RayCluster controller keeps on this shared informer (idempotent).
            pods.store.add_indexer("cluster", index_by_label(c.LABEL_CLUSTER))
            ctrl.for_(rayjobs)
            # A deleted object's event budget and aggregation state go with it.
            rayjobs.add_handler(Handler(on_delete=self._forget))
            ctrl.owns(clusters, c.KIND_RAYJOB, c.GROUP)
            ctrl.owns(services, c.KIND_RAYJOB, c.GROUP)
            ctrl.owns(jobs, c.KIND_RAYJOB, c.GROUP)
            self.rayjobs.append(rayjobs)
            self.clusters.append(clusters)
            self.services.append(services)
            self.jobs.append(jobs)
            self.pods.append(pods)
        self.controller = ctrl

    # ------------------------------------------------------------------ helpers
    def _forget(self, obj: Obj) -> None:
        self.recorder.forget(obj["metadata"].get("uid", ""))

    def now(self) -> float:
        return self.config.clock()

    _cached = staticmethod(find_cached)

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

    def _requeue(self) -> Result:
        return Result(requeue_after=self.config.requeue_seconds)

    # ------------------------------------------------------------------ reconcile
    async def reconcile(self, req: Request) -> Result | None:
        ns = req.namespace or ""
        cached = self._cached(self.rayjobs, ns, req.name)
        if cached is None:
            self._written_over.pop(req.key, None)
            return None
        rv = cached["metadata"].get("resourceVersion")
        if rv is not None and self._written_over.get(req.key) == rv:
            return Result(requeue_after=0.2)  # our own last write has not reached the cache
        self._written_over.pop(req.key, None)
        spec = cached.get("spec") or {}
        managed_by = spec.get("managedBy")
        if managed_by is not None and managed_by != c.MANAGED_BY_KUBERAY:
            return None
        job = copy.deepcopy(cached)
        job.setdefault("apiVersion", c.API_VERSION)
        job.setdefault("kind", c.KIND_RAYJOB)
        job["spec"] = spec = copy.deepcopy(spec)
        if not isinstance(job.get("status"), dict):
            job["status"] = {}
        old_status = copy.deepcopy(job["status"])

        if job["metadata"].get("deletionTimestamp"):
            return await self._finalize(job)

        problem = self._validate(job)
        if problem is not None:
            event_reason, message = problem
            self.recorder.event(job, WARNING, event_reason, message, "Validate")
            status = job["status"]
            status["jobDeploymentStatus"] = c.DEPLOYMENT_VALIDATION_FAILED
            status["reason"] = c.JOB_REASON_VALIDATION_FAILED
            status["message"] = message
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
        self.check_backoff_limit(job)
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
        self._init_status(job)
        return None

    def _init_status(self, job: Obj) -> None:
        """Choose the submission id and the cluster name; they are persisted before any use."""
        spec, status = job["spec"], job["status"]
        name = job["metadata"]["name"]
        mode = rjb.submission_mode(job)
        if spec.get("jobId"):
            status["jobId"] = spec["jobId"]
        elif not status.get("jobId") and mode != c.INTERACTIVE_MODE:
            status["jobId"] = rjb.generated_name(name, self.config.suffix())
        if not status.get("rayClusterName"):
            selected = (spec.get("clusterSelector") or {}).get(c.LABEL_CLUSTER)
            status["rayClusterName"] = selected or rjb.generated_name(name, self.config.suffix())
        status["jobStatus"] = c.JOB_STATUS_NEW
        status["jobDeploymentStatus"] = c.DEPLOYMENT_INITIALIZING
        status["startTime"] = rfc3339(self.now())

    async def _on_initializing(self, job: Obj) -> Result | None:
        status = job["status"]
        if self._to_suspending_if_needed(job):
            return None
        if self.active_deadline_exceeded(job) or self.pre_running_deadline_exceeded(job):
            return None
        if self.config.scheduler is not None and not job["spec"].get("clusterSelector"):
            template = self._submitter_template(job)
            await self.config.scheduler.on_job_submission(self.client, job, template)
        cluster = await self._get_or_create_cluster(job)
        status["rayClusterStatus"] = self._cluster_status_copy(job, cluster)
        if not status.get("dashboardURL"):
            if (cluster.get("status") or {}).get("state") != c.CLUSTER_STATE_READY:
                return None
            status["dashboardURL"] = rjb.dashboard_url(cluster, self.config.build)
        mode = rjb.submission_mode(job)
        if mode == c.INTERACTIVE_MODE:
            status["jobDeploymentStatus"] = c.DEPLOYMENT_WAITING
            return None
        if mode == c.K8S_JOB_MODE:
            await self._create_submitter_if_needed(job, cluster)
        status["jobDeploymentStatus"] = c.DEPLOYMENT_RUNNING
        return None

    async def _on_waiting(self, job: Obj) -> Result | None:
        if self.pre_running_deadline_exceeded(job):
            return None
        job_id = job["spec"].get("jobId")
        if job_id:
            job["status"]["jobId"] = job_id
            job["status"]["jobDeploymentStatus"] = c.DEPLOYMENT_RUNNING
        return None

    async def _on_running(self, job: Obj) -> Result | None:
        spec, status = job["spec"], job["status"]
        if self._to_suspending_if_needed(job):
            return None
        if self.active_deadline_exceeded(job):
            return None
        if self.transition_grace_exceeded(job) or self.status_check_timed_out(job):
            return None
        mode = rjb.submission_mode(job)
        ns = _ns(job)
        cluster = self._cached(self.clusters, ns, status.get("rayClusterName") or "")
        finished_at: float | None = None
        if mode in (c.K8S_JOB_MODE, c.SIDECAR_MODE):
            failed, finished_at = self.check_submitter(job, mode)
            if self.submitter_finished_timeout(job, finished_at):
                return None
            if failed:
                return None
        if cluster is not None:
            status["rayClusterStatus"] = self._cluster_status_copy(job, cluster)
            if not spec.get("clusterSelector"):
                await self._reconcile_head_service(job, cluster)
        dashboard = await self._dashboard(job)
        if dashboard is None:
            self.status_check_failed(job)
            return None
        try:
            info = await dashboard.get_job_info(status.get("jobId") or "")
            if info is None:
                if mode == c.HTTP_MODE:
                    # The id was persisted in New; the dashboard refuses a second job with it.
                    try:
                        await dashboard.submit_job(submit_request(job))
                    except DashboardError as exc:
                        # As upstream: retried next pass, without starting the check timer.
                        log.info("submitting Ray job %s failed: %s", status.get("jobId"), exc)
                        return self._requeue()
                    log.info("submitted Ray job %s", status.get("jobId"))
                    return None
                if finished_at is not None:
                    status["jobDeploymentStatus"] = c.DEPLOYMENT_FAILED
                    status["reason"] = c.JOB_REASON_APP_FAILED
                    status["message"] = "Submitter completed but Ray job not found in RayCluster."
                return None
        except DashboardError as exc:
            log.info("Ray job status query failed: %s", exc)
            self.status_check_failed(job)
            return None
        finally:
            await dashboard.close()
        status.pop("jobStatusCheckFailureStartTime", None)
        terminal = info.status in c.JOB_STATUS_TERMINAL
        if mode in (c.K8S_JOB_MODE, c.SIDECAR_MODE):
            terminal = terminal and finished_at is not None
        deployment = c.DEPLOYMENT_RUNNING
        reason = status.get("reason") or ""
        if terminal:
            deployment = c.DEPLOYMENT_COMPLETE
            if info.status == c.JOB_STATUS_FAILED:
                deployment = c.DEPLOYMENT_FAILED
                reason = c.JOB_REASON_APP_FAILED
        status["jobStatus"] = info.status
        status["message"] = info.message
        job_info: Obj = {}
        if info.start_time:
            job_info["startTime"] = rfc3339(info.start_time / 1000)
        if info.end_time:
            job_info["endTime"] = rfc3339(info.end_time / 1000)
        status["rayJobInfo"] = job_info
        status["jobDeploymentStatus"] = deployment
        if reason:
            status["reason"] = reason
        return None

    async def _on_suspending_or_retrying(self, job: Obj) -> Result | None:
        status = job["status"]
        cluster_gone = await self._delete_cluster(job)
        job_gone = True
        if rjb.submission_mode(job) == c.K8S_JOB_MODE:
            job_gone = await self._delete_submitter(job)
        if not cluster_gone or not job_gone:
            return self._requeue()
        await self._release_gang(job)
        for key in (
            "rayClusterName",
            "dashboardURL",
            "jobId",
            "message",
            "reason",
            "jobStatusCheckFailureStartTime",
        ):
            status.pop(key, None)
        status["rayClusterStatus"] = {}
        status["rayJobInfo"] = {}
        status["jobStatus"] = c.JOB_STATUS_NEW
        suspending = status.get("jobDeploymentStatus") == c.DEPLOYMENT_SUSPENDING
        status["jobDeploymentStatus"] = c.DEPLOYMENT_SUSPENDED if suspending else c.DEPLOYMENT_NEW
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

    # ------------------------------------------------------------------ timers
    def _to_suspending_if_needed(self, job: Obj) -> bool:
        if not job["spec"].get("suspend") or job["spec"].get("clusterSelector"):
            return False
        job["status"]["jobDeploymentStatus"] = c.DEPLOYMENT_SUSPENDING
        return True

    def _start_time(self, job: Obj) -> float:
        started = parse_time(job["status"].get("startTime"))
        return started if started is not None else self.now()

    def active_deadline_exceeded(self, job: Obj) -> bool:
        deadline = job["spec"].get("activeDeadlineSeconds")
        if deadline is None or self.now() < self._start_time(job) + int(deadline):
            return False
        status = job["status"]
        status["jobDeploymentStatus"] = c.DEPLOYMENT_FAILED
        status["reason"] = c.JOB_REASON_DEADLINE_EXCEEDED
        status["message"] = (
            f"The RayJob has passed the activeDeadlineSeconds. StartTime: "
            f"{status.get('startTime')}. ActiveDeadlineSeconds: {int(deadline)}"
        )
        return True

    def pre_running_deadline_exceeded(self, job: Obj) -> bool:
        deadline = job["spec"].get("preRunningDeadlineSeconds")
        if deadline is None or self.now() < self._start_time(job) + int(deadline):
            return False
        status = job["status"]
        status["jobDeploymentStatus"] = c.DEPLOYMENT_FAILED
        status["reason"] = c.JOB_REASON_PRE_RUNNING_DEADLINE_EXCEEDED
        status["message"] = (
            f"The RayJob has passed the preRunningDeadlineSeconds. StartTime: "
            f"{status.get('startTime')}. PreRunningDeadlineSeconds: {int(deadline)}"
        )
        return True

    def transition_grace_exceeded(self, job: Obj) -> bool:
        status = job["status"]
        if status.get("jobStatus") not in c.JOB_STATUS_TERMINAL:
            return False
        ended = parse_time((status.get("rayJobInfo") or {}).get("endTime"))
        grace = self.config.transition_grace_seconds
        if ended is None or self.now() < ended + grace:
            return False
        failed = status.get("jobStatus") == c.JOB_STATUS_FAILED
        status["jobDeploymentStatus"] = c.DEPLOYMENT_FAILED if failed else c.DEPLOYMENT_COMPLETE
        status["reason"] = c.JOB_REASON_TRANSITION_GRACE_PERIOD_EXCEEDED
        status["message"] = (
            f"The Ray job has been in the terminal state {status.get('jobStatus')} for more than "
            f"{int(grace)} seconds, but the JobDeploymentStatus was still Running"
        )
        return True

    def status_check_timed_out(self, job: Obj) -> bool:
        status = job["status"]
        since = parse_time(status.get("jobStatusCheckFailureStartTime"))
        timeout = self.config.status_check_timeout_seconds
        if since is None or self.now() < since + timeout:
            return False
        status["jobDeploymentStatus"] = c.DEPLOYMENT_FAILED
        status["reason"] = c.JOB_REASON_STATUS_CHECK_TIMEOUT_EXCEEDED
        status["message"] = (
            f"Failed to get the Ray job status from the dashboard for more than {int(timeout)} "
            "seconds"
        )
        return True

    def status_check_failed(self, job: Obj) -> None:
        status = job["status"]
        if not status.get("jobStatusCheckFailureStartTime"):
            status["jobStatusCheckFailureStartTime"] = rfc3339(self.now())

    def submitter_finished_timeout(self, job: Obj, finished_at: float | None) -> bool:
        status = job["status"]
        if finished_at is None or status.get("jobStatus") in c.JOB_STATUS_TERMINAL:
            return False
        grace = self.config.submitter_finished_grace_seconds
        if self.now() < finished_at + grace:
            return False
        status["jobStatus"] = c.JOB_STATUS_FAILED
        status["jobDeploymentStatus"] = c.DEPLOYMENT_FAILED
        status["reason"] = c.JOB_REASON_TRANSITION_GRACE_PERIOD_EXCEEDED
        status["message"] = (
            f"The RayJob submitter finished at {rfc3339(finished_at)} but the Ray job did not "
            f"reach a terminal state within {int(grace)} seconds"
        )
        return True

    def check_backoff_limit(self, job: Obj) -> None:
        status = job["status"]
        failed = int(status.get("failed") or 0)
        succeeded = int(status.get("succeeded") or 0)
        deployment = status.get("jobDeploymentStatus")
        if deployment == c.DEPLOYMENT_FAILED:
            failed += 1
        if (
            deployment == c.DEPLOYMENT_COMPLETE
            and status.get("jobStatus") == c.JOB_STATUS_SUCCEEDED
        ):
            succeeded += 1
        status["failed"] = failed
        status["succeeded"] = succeeded
        limit = job["spec"].get("backoffLimit")
        if (
            deployment == c.DEPLOYMENT_FAILED
            and limit is not None
            and failed < int(limit) + 1
            and status.get("reason")
            not in (c.JOB_REASON_DEADLINE_EXCEEDED, c.JOB_REASON_STATUS_CHECK_TIMEOUT_EXCEEDED)
        ):
            status["jobDeploymentStatus"] = c.DEPLOYMENT_RETRYING

    # ------------------------------------------------------------------ children
    def _cluster_status_copy(self, job: Obj, cluster: Obj) -> Obj:
        """The cluster's status, keeping the old copy when only lastUpdateTime moved."""
        new = copy.deepcopy(cluster.get("status") or {})
        old = job["status"].get("rayClusterStatus") or {}
        strip_new = {k: val for k, val in new.items() if k != "lastUpdateTime"}
        strip_old = {k: val for k, val in old.items() if k != "lastUpdateTime"}
        return copy.deepcopy(old) if strip_new == strip_old else new

    async def _get_or_create_cluster(self, job: Obj) -> Obj:
        ns = _ns(job)
        name = job["status"]["rayClusterName"]
        cached = self._cached(self.clusters, ns, name)
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
        try:
            created = await self.client.create(RAYCLUSTERS, cluster, ns)
        except AlreadyExists:
            return await self.client.get(RAYCLUSTERS, name, ns)
        except ApiError as exc:
            self.recorder.event(
                job,
                WARNING,
                c.EVENT_FAILED_TO_CREATE_RAYCLUSTER,
                f"Failed to create RayCluster {ns}/{name}: {exc.message or exc}",
                "Create",
            )
            raise
        self.recorder.event(
            job, NORMAL, c.EVENT_CREATED_RAYCLUSTER, f"Created RayCluster {ns}/{name}", "Create"
        )
        return created

    async def _create_submitter_if_needed(self, job: Obj, cluster: Obj) -> None:
        ns, name = _ns(job), job["metadata"]["name"]
        if self._cached(self.jobs, ns, name) is not None:
            return
        submitter = rjb.build_submitter_job(job, cluster.get("spec") or {})
        if self.config.scheduler is not None:
            template = copy.deepcopy(submitter["spec"]["template"])
            self.config.scheduler.add_job_metadata(job, submitter, SUBMITTER_GROUP, template)
        try:
            await self.client.create(JOBS, submitter, ns)
        except AlreadyExists:
            return
        except ApiError as exc:
            self.recorder.event(
                job,
                WARNING,
                c.EVENT_FAILED_TO_CREATE_RAYJOB_SUBMITTER,
                f"Failed to create new Kubernetes Job {ns}/{name}: {exc.message or exc}",
                "Create",
            )
            raise
        self.recorder.event(
            job,
            NORMAL,
            c.EVENT_CREATED_RAYJOB_SUBMITTER,
            f"Created Kubernetes Job {ns}/{name}",
            "Create",
        )

    def check_submitter(self, job: Obj, mode: str) -> tuple[bool, float | None]:
        """(failed, finishedAt) from the submitter Job or the head pod's sidecar container."""
        status = job["status"]
        ns = _ns(job)
        app_failed = status.get("jobStatus") == c.JOB_STATUS_FAILED
        fail_reason = c.JOB_REASON_APP_FAILED if app_failed else c.JOB_REASON_SUBMISSION_FAILED
        if mode == c.K8S_JOB_MODE:
            submitter = self._cached(self.jobs, ns, job["metadata"]["name"])
            if submitter is None:
                return False, None
            for cond in (submitter.get("status") or {}).get("conditions") or []:
                if cond.get("status") != "True":
                    continue
                at = parse_time(cond.get("lastTransitionTime")) or self.now()
                if cond.get("type") == "Failed":
                    status["jobDeploymentStatus"] = c.DEPLOYMENT_FAILED
                    status["reason"] = fail_reason
                    status["message"] = (
                        f"Job submission has failed. Reason: {cond.get('reason', '')}. "
                        f"Message: {cond.get('message', '')}"
                    )
                    return True, at
                if cond.get("type") == "Complete":
                    return False, at
            return False, None
        head = self._head_pod(ns, status.get("rayClusterName") or "")
        if head is None:
            status["jobDeploymentStatus"] = c.DEPLOYMENT_FAILED
            status["reason"] = c.JOB_REASON_APP_FAILED
            status["message"] = "Ray head pod not found."
            return True, None
        restart = self.config.gates.enabled(features.SIDECAR_SUBMITTER_RESTART)
        for cs in (head.get("status") or {}).get("containerStatuses") or []:
            if cs.get("name") != c.SUBMITTER_CONTAINER_NAME:
                continue
            if restart and int(cs.get("restartCount") or 0) >= rjb.SUBMITTER_DEFAULT_BACKOFF_LIMIT:
                status["jobDeploymentStatus"] = c.DEPLOYMENT_FAILED
                status["reason"] = fail_reason
                status["message"] = (
                    f"Ray head pod container {c.SUBMITTER_CONTAINER_NAME} restarted "
                    f"{cs.get('restartCount')} times"
                )
                return True, self.now()
            term = (cs.get("state") or {}).get("terminated")
            if not term:
                continue
            at = parse_time(term.get("finishedAt")) or self.now()
            code = int(term.get("exitCode") or 0)
            if code != 0 and not restart:
                status["jobDeploymentStatus"] = c.DEPLOYMENT_FAILED
                status["reason"] = fail_reason
                status["message"] = (
                    f"Ray head pod container {c.SUBMITTER_CONTAINER_NAME} terminated with exit "
                    f"code {code}: {term.get('reason', '')}"
                )
                return True, at
            if code == 0:
                return False, at
        return False, None

    async def _reconcile_head_service(self, job: Obj, cluster: Obj) -> None:
        want = rjb.build_job_head_service(job, cluster, self.config.build)
        ns = _ns(job)
        name = want["metadata"]["name"]
        have = self._cached(self.services, ns, name)
        if have is None:
            try:
                await self.client.create(SERVICES, want, ns)
            except AlreadyExists:
                return
            self.recorder.event(
                job, NORMAL, c.EVENT_CREATED_SERVICE, f"Created service {ns}/{name}", "Create"
            )
            return
        selector = (have.get("spec") or {}).get("selector") or {}
        want_selector = want["spec"]["selector"]
        if selector.get(c.LABEL_CLUSTER) != want_selector.get(c.LABEL_CLUSTER):
            patch = {
                "metadata": {"resourceVersion": have["metadata"]["resourceVersion"]},
                "spec": {"selector": want_selector},
            }
            try:
                await self.client.patch(SERVICES, name, patch, ns)
            except ApiError as exc:
                what = f"Failed to update service {ns}/{name}"
                self._update_failed(job, exc, c.EVENT_FAILED_TO_UPDATE_SERVICE, what)
                raise
            self.recorder.event(
                job, NORMAL, c.EVENT_UPDATED_SERVICE, f"Updated service {ns}/{name}", "Update"
            )

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
        try:
            await self.client.delete(
                res, name, ns, propagation="Background", uid=child["metadata"]["uid"]
            )
        except NotFound:
            return True
        except ApiError as exc:
            note = f"Failed to delete {what} {ns}/{name}: {exc.message or exc}"
            self.recorder.event(job, WARNING, fail_event, note, "Delete")
            raise
        self.recorder.event(job, NORMAL, done_event, f"Deleted {what} {ns}/{name}", "Delete")
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

    def _update_failed(self, job: Obj, exc: ApiError, reason: str, what: str) -> None:
        """A Warning for a failed update; a conflict or a vanished object is just a retry."""
        if not isinstance(exc, Conflict | NotFound):
            note = f"{what}: {exc.message or exc}"
            self.recorder.event(job, WARNING, reason, note, "Update")

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
        try:
            await self.client.update(RAYCLUSTERS, cluster)
        except ApiError as exc:
            what = f"Failed to suspend the worker groups of cluster {ns}/{name}"
            self._update_failed(job, exc, c.EVENT_FAILED_TO_UPDATE_RAYCLUSTER, what)
            raise
        self.recorder.event(
            job,
            NORMAL,
            c.EVENT_UPDATED_RAYCLUSTER,
            f"Suspended the worker groups of cluster {ns}/{name}",
            "Update",
        )

    def _cluster_deleted(self, job: Obj) -> bool:
        cluster = self._cached(self.clusters, _ns(job), job["status"].get("rayClusterName") or "")
        return cluster is None or bool(cluster["metadata"].get("deletionTimestamp"))

    def _workers_deleted(self, job: Obj) -> bool:
        cluster = self._cached(self.clusters, _ns(job), job["status"].get("rayClusterName") or "")
        if cluster is None:
            return True
        return all(g.get("suspend") for g in cluster["spec"].get("workerGroupSpecs") or [])

    async def _execute_policy(self, job: Obj, policy: str) -> None:
        if policy == c.DELETE_SELF:
            await self._delete_self(job)
        elif policy == c.DELETE_CLUSTER:
            await self._delete_cluster(job)
        elif policy == c.DELETE_WORKERS:
            await self._delete_workers(job)

    def _ttl_wait(self, job: Obj, ttl: float) -> float:
        """Seconds until ``endTime + ttl`` (<= 0 when due)."""
        ended = parse_time(job["status"].get("endTime"))
        if ended is None:
            ended = self.now()
        return ended + ttl - self.now()

    async def _shutdown_after_finish(self, job: Obj) -> Result:
        wait = self._ttl_wait(job, float(job["spec"].get("ttlSecondsAfterFinished") or 0))
        if wait > 0:
            return Result(requeue_after=int(wait + 2))
        if self.config.delete_rayjob_after_finishes:
            await self._delete_self(job)
        else:
            await self._delete_cluster(job)
        return Result()

    async def _legacy_deletion(self, job: Obj, strategy: Obj) -> Result:
        status = job["status"]
        side = "onSuccess" if status.get("jobStatus") == c.JOB_STATUS_SUCCEEDED else "onFailure"
        policy = ((strategy.get(side) or {}).get("policy")) or c.DELETE_NONE
        if policy == c.DELETE_NONE:
            return Result()
        wait = self._ttl_wait(job, float(job["spec"].get("ttlSecondsAfterFinished") or 0))
        if wait > 0:
            return Result(requeue_after=int(wait + 2))
        await self._execute_policy(job, policy)
        return Result()

    async def _deletion_rules(self, job: Obj, rules: list[Obj]) -> Result:
        status = job["status"]
        overdue: list[str] = []
        next_wait: float | None = None
        for rule in rules:
            cond = rule.get("condition") or {}
            if cond.get("jobStatus"):
                matches = cond["jobStatus"] == status.get("jobStatus")
            else:
                matches = cond.get("jobDeploymentStatus") == status.get("jobDeploymentStatus")
            if not matches:
                continue
            policy = rule.get("policy") or c.DELETE_NONE
            if (policy == c.DELETE_CLUSTER and self._cluster_deleted(job)) or (
                policy == c.DELETE_WORKERS and self._workers_deleted(job)
            ):
                continue
            wait = self._ttl_wait(job, float(cond.get("ttlSeconds") or 0))
            if wait <= 0:
                overdue.append(policy)
            elif next_wait is None or wait < next_wait:
                next_wait = wait
        if overdue:
            await self._execute_policy(job, max(overdue, key=lambda p: _POLICY_RANK.get(p, 0)))
        if next_wait is not None:
            return Result(requeue_after=int(next_wait + 2))
        return Result()

    # ------------------------------------------------------------------ dashboard
    async def _dashboard(self, job: Obj) -> DashboardClient | None:
        url = job["status"].get("dashboardURL")
        if not url:
            return None
        token = await self._auth_token(job)
        base = dashboard_base_url(
            str(url),
            job["metadata"]["namespace"],
            self.config.apiserver if self.config.use_kubernetes_proxy else None,
        )
        return self.dashboards(base, auth_token=token)

    async def _auth_token(self, job: Obj) -> str | None:
        spec = job["spec"].get("rayClusterSpec") or {}
        ns = _ns(job)
        cluster_name = job["status"].get("rayClusterName") or ""
        if job["spec"].get("clusterSelector"):
            cluster = self._cached(self.clusters, ns, cluster_name)
            spec = (cluster or {}).get("spec") or {}
        options = spec.get("authOptions") or {}
        if options.get("mode") != c.AUTH_MODE_TOKEN:
            return None
        secret_name = options.get("secretName") or names.auth_secret_name(cluster_name)
        try:
            secret = await self.client.get(SECRETS, secret_name, ns)
        except ApiError as exc:
            raise DashboardError(f"cannot read the auth token secret {secret_name}: {exc}") from exc
        data = (secret.get("data") or {}).get(c.AUTH_TOKEN_SECRET_KEY)
        return base64.b64decode(data).decode() if data else None

    # ------------------------------------------------------------------ status
    async def _write_status(self, job: Obj, old: Obj) -> bool:
        status = job["status"]
        new_state = status.get("jobDeploymentStatus")
        if new_state in c.DEPLOYMENT_TERMINAL and old.get("jobDeploymentStatus") != new_state:
            status["endTime"] = rfc3339(self.now())
        meta = job["metadata"]
        status["observedGeneration"] = meta.get("generation")
        cluster = self._cached(self.clusters, _ns(job), status.get("rayClusterName") or "")
        set_conditions(job, cluster, self.now())
        # Conditions ride along with a real change: they are derived from the rest of the
        # status (the cluster's stall reason is inside rayClusterStatus), and an apiserver
        # whose schema lacks them must not make every pass look like a change.
        if _without_conditions(status) == _without_conditions(old):
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
        await self.client.update_status(RAYJOBS, body)
        key = f"{meta.get('namespace')}/{meta['name']}"
        self._written_over[key] = meta["resourceVersion"]
        self._attempt_ended(job, old)
        return True

    def _attempt_ended(self, job: Obj, old: Obj) -> None:
        """Reports an attempt's duration once its end is recorded in status (so a failed
        write, retried by the next pass, reports it then and only then)."""
        state = job["status"].get("jobDeploymentStatus")
        before = old.get("jobDeploymentStatus")
        if self.on_attempt_end is None or before in c.DEPLOYMENT_TERMINAL or before == state:
            return
        if state not in c.DEPLOYMENT_TERMINAL and state != c.DEPLOYMENT_RETRYING:
            return
        started = parse_time(job["status"].get("startTime"))
        seconds = self.now() - started if started is not None else 0.0
        self.on_attempt_end(job, str(state), int(old.get("failed") or 0), seconds)


def _without_conditions(status: Obj) -> Obj:
    return {k: val for k, val in status.items() if k != "conditions"}


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


def set_conditions(job: Obj, cluster: Obj | None, now: float) -> None:
    """Kubernetes-style conditions derived from the state machine (additive to upstream)."""
    status = job["status"]
    conditions: list[Obj] = [dict(x) for x in status.get("conditions") or []]
    gen = job["metadata"].get("generation")
    stamp = rfc3339(now)
    state = status.get("jobDeploymentStatus") or ""

    def put(ctype: str, value: str, reason: str, message: str) -> None:
        for cond in conditions:
            if cond.get("type") == ctype:
                if cond.get("status") != value:
                    cond["lastTransitionTime"] = stamp
                cond.update(status=value, reason=reason, message=message)
                if gen is not None:
                    cond["observedGeneration"] = gen
                return
        new: Obj = {
            "type": ctype,
            "status": value,
            "reason": reason,
            "message": message,
            "lastTransitionTime": stamp,
        }
        if gen is not None:
            new["observedGeneration"] = gen
        conditions.append(new)

    if state == c.DEPLOYMENT_INITIALIZING:
        if cluster is None:
            put(
                COND_CLUSTER_READY,
                "False",
                "RayClusterNotFound",
                "The RayCluster does not exist yet",
            )
        elif (cluster.get("status") or {}).get("state") == c.CLUSTER_STATE_READY:
            put(COND_CLUSTER_READY, "True", "RayClusterReady", "The RayCluster is ready")
        else:
            provisioned = next(
                (
                    x
                    for x in (cluster.get("status") or {}).get("conditions") or []
                    if x.get("type") == c.COND_RAYCLUSTER_PROVISIONED
                ),
                None,
            )
            reason = (provisioned or {}).get("reason") or "RayClusterNotReady"
            message = (provisioned or {}).get("message") or "Waiting for the RayCluster"
            put(COND_CLUSTER_READY, "False", str(reason), str(message))
    elif state in (c.DEPLOYMENT_RUNNING, c.DEPLOYMENT_WAITING):
        put(COND_CLUSTER_READY, "True", "RayClusterReady", "The RayCluster is ready")
    elif state in (c.DEPLOYMENT_SUSPENDED, c.DEPLOYMENT_NEW, c.DEPLOYMENT_RETRYING):
        put(COND_CLUSTER_READY, "False", state or "New", "No RayCluster for this attempt yet")
    put(
        COND_SUSPENDED,
        "True" if state == c.DEPLOYMENT_SUSPENDED else "False",
        "Suspended" if state == c.DEPLOYMENT_SUSPENDED else "NotSuspended",
        "",
    )
    reason = str(status.get("reason") or "")
    message = str(status.get("message") or "")
    if state == c.DEPLOYMENT_COMPLETE:
        put(COND_COMPLETE, "True", reason or "JobSucceeded", message)
        put(COND_FAILED, "False", "Complete", "")
    elif state in (c.DEPLOYMENT_FAILED, c.DEPLOYMENT_VALIDATION_FAILED):
        put(COND_FAILED, "True", reason or "Failed", message)
        put(COND_COMPLETE, "False", "Failed", "")
    else:
        put(COND_COMPLETE, "False", state or "New", "")
        put(COND_FAILED, "False", state or "New", "")
    status["conditions"] = conditions


def dashboard_base_url(dashboard_url: str, namespace: str, apiserver: str | None) -> str:
    """Where to reach a job's dashboard: ``status.dashboardURL`` directly, or (with an API
    server URL, ``--use-kubernetes-proxy``) the same head Service through the API server's
    service proxy."""
    base = rjb.with_scheme(dashboard_url)
    if apiserver is None:
        return base
    service = (urlsplit(base).hostname or "").split(".")[0]
    return service_proxy_base_url(apiserver, namespace, service)


def register(
    mgr: Manager,
    config: RayJobConfig,
    namespaces: list[str] | None,
    dashboard_factory: DashboardFactory,
) -> RayJobReconciler:
    return RayJobReconciler(mgr, config, dashboard_factory, namespaces=namespaces)
