"""RayJob status decisions: pure functions from a RayJob and what was observed to its status.

Every function here takes the RayJob dict, the observed objects it needs (the RayCluster, the
submitter Job, the head pod, the dashboard's answer), the operator settings it needs and the
current time ``now`` (seconds since the epoch) as arguments. None reads a clock, a cache or the
network, so each transition of the state machine can be checked by calling it with a table of
inputs. The reconciler (``rayjob.py``) does the I/O and calls these.

Invariants and failure modes:
- Like upstream's ``...AndUpdateStatusIfNeeded`` helpers, a check edits ``job["status"]`` in
  place and says whether it changed the JobDeploymentStatus; a True answer ends the state
  handler for this pass (only the backoff limit may still turn Failed into Retrying), and the
  one status write at the end of the pass records the outcome.
- Timers count from timestamps in the status (``startTime``, ``rayJobInfo.endTime``,
  ``jobStatusCheckFailureStartTime``, ``endTime``) or on the observed submitter; a missing or
  unreadable timestamp never fires a timer early: deadlines and TTLs then count from ``now``,
  the grace and status-check timers do not run at all.
- Deadline and status-check-timeout failures are final: the backoff limit never retries them
  (a retry could not finish in time either, and the dashboard is not answering).
- Beyond upstream, ``status.conditions`` are derived from the rest of the status only, so they
  never need a write of their own (``prepare_write`` ignores them when deciding to write);
  ``lastTransitionTime`` moves only when a condition's status flips.
"""

from __future__ import annotations

import copy
from collections.abc import Callable
from typing import Any

from kuberay.api import constants as c
from kuberay.api.k8svalidation import format_go_datetime, format_go_duration
from kuberay.builders import rayjob as rjb
from kuberay.controllers.common import parse_time, rfc3339
from kuberay.ray.dashboard import JobInfo
from kuberay.runtime.store import Obj

# status.conditions (additive, beyond upstream)
COND_CLUSTER_READY = "ClusterReady"
COND_SUSPENDED = "Suspended"
COND_COMPLETE = "Complete"
COND_FAILED = "Failed"

# When several deletion rules are due at once, the most thorough policy wins.
POLICY_RANK = {c.DELETE_NONE: 0, c.DELETE_WORKERS: 1, c.DELETE_CLUSTER: 2, c.DELETE_SELF: 3}

# The status fields one attempt owns; suspending or retrying clears them for the next attempt.
_ATTEMPT_FIELDS = (
    "rayClusterName",
    "dashboardURL",
    "jobId",
    "message",
    "reason",
    "jobStatusCheckFailureStartTime",
)


# ---------------------------------------------------------------------------- New / validation
def init_status(job: Obj, suffix: Callable[[], str], now: float) -> None:
    """Chooses the submission id and the cluster name and moves to Initializing.

    upstream: initRayJobStatusIfNeed. The names are chosen here, once, and persisted before
    anything uses them, so a crash never leads to a second cluster or a second submission.
    ``suffix`` makes the random part of a generated name (called only when a name is needed).
    """
    spec, status = job["spec"], job["status"]
    name = job["metadata"]["name"]
    mode = rjb.submission_mode(job)
    if spec.get("jobId"):
        status["jobId"] = spec["jobId"]
    elif not status.get("jobId") and mode != c.INTERACTIVE_MODE:
        status["jobId"] = rjb.generated_name(name, suffix())
    if not status.get("rayClusterName"):
        selected = (spec.get("clusterSelector") or {}).get(c.LABEL_CLUSTER)
        status["rayClusterName"] = selected or rjb.generated_name(name, suffix())
    status["jobStatus"] = c.JOB_STATUS_NEW
    status["jobDeploymentStatus"] = c.DEPLOYMENT_INITIALIZING
    status["startTime"] = rfc3339(now)


def mark_validation_failed(job: Obj, message: str) -> None:
    """A RayJob that fails validation stops in ValidationFailed with the validator's words."""
    status = job["status"]
    status["jobDeploymentStatus"] = c.DEPLOYMENT_VALIDATION_FAILED
    status["reason"] = c.JOB_REASON_VALIDATION_FAILED
    status["message"] = message


# ---------------------------------------------------------------------------- timers
def to_suspending_if_needed(job: Obj) -> bool:
    """upstream: updateStatusToSuspendingIfNeeded. Only called from Initializing and Running,
    the two states that may be suspended; a job on a selected cluster is never suspended."""
    if not job["spec"].get("suspend") or job["spec"].get("clusterSelector"):
        return False
    job["status"]["jobDeploymentStatus"] = c.DEPLOYMENT_SUSPENDING
    return True


def start_time(job: Obj, now: float) -> float:
    """The attempt's start; ``now`` when it is unreadable, so a deadline never fires early."""
    started = parse_time(job["status"].get("startTime"))
    return started if started is not None else now


def active_deadline_exceeded(job: Obj, now: float) -> bool:
    """upstream: checkActiveDeadlineAndUpdateStatusIfNeeded. Fails the attempt once
    ``activeDeadlineSeconds`` have passed since ``startTime``."""
    deadline = job["spec"].get("activeDeadlineSeconds")
    if deadline is None or now < start_time(job, now) + int(deadline):
        return False
    status = job["status"]
    status["jobDeploymentStatus"] = c.DEPLOYMENT_FAILED
    status["reason"] = c.JOB_REASON_DEADLINE_EXCEEDED
    status["message"] = (
        f"The RayJob has passed the activeDeadlineSeconds. StartTime: "
        f"{go_time(status.get('startTime'))}. ActiveDeadlineSeconds: {int(deadline)}"
    )
    return True


def go_time(stamp: str | None) -> str:
    """An RFC 3339 status time as Go prints a ``*metav1.Time`` with ``%v`` (upstream's deadline
    messages do): ``2026-12-02 12:44:12 +0000 UTC``; ``<nil>`` when there is none."""
    when = parse_time(stamp)
    if when is None:
        return "<nil>"
    return format_go_datetime(when, zone=True)


def pre_running_deadline_exceeded(job: Obj, now: float) -> bool:
    """upstream: the preRunningDeadlineSeconds check (rayjob_controller.go), made while
    Initializing and Waiting. Fails an attempt that has not reached Running within the
    deadline (unlike the active deadline, this failure may be retried by the backoff limit)."""
    deadline = job["spec"].get("preRunningDeadlineSeconds")
    if deadline is None or now < start_time(job, now) + int(deadline):
        return False
    status = job["status"]
    status["jobDeploymentStatus"] = c.DEPLOYMENT_FAILED
    status["reason"] = c.JOB_REASON_PRE_RUNNING_DEADLINE_EXCEEDED
    status["message"] = (
        f"The RayJob has passed the preRunningDeadlineSeconds. StartTime: "
        f"{go_time(status.get('startTime'))}. PreRunningDeadlineSeconds: {int(deadline)}"
    )
    return True


def transition_grace_exceeded(job: Obj, now: float, grace: float) -> bool:
    """upstream: checkTransitionGracePeriodAndUpdateStatusIfNeeded. A Ray job that has been
    terminal for ``grace`` seconds ends the RayJob even if the submitter never finished, so a
    lost submitter cannot keep it Running for ever. Without ``rayJobInfo.endTime`` (an older
    status) the grace period does not run."""
    status = job["status"]
    if status.get("jobStatus") not in c.JOB_STATUS_TERMINAL:
        return False
    ended = parse_time((status.get("rayJobInfo") or {}).get("endTime"))
    if ended is None or now < ended + grace:
        return False
    failed = status.get("jobStatus") == c.JOB_STATUS_FAILED
    status["jobDeploymentStatus"] = c.DEPLOYMENT_FAILED if failed else c.DEPLOYMENT_COMPLETE
    status["reason"] = c.JOB_REASON_TRANSITION_GRACE_PERIOD_EXCEEDED
    status["message"] = (
        "JobDeploymentStatus does not transition to Complete or Failed within the grace "
        "period after JobStatus reaches a terminal state."
    )
    return True


def status_check_failed(job: Obj, now: float) -> None:
    """Starts the status-check timer at the first failed dashboard query; later failures keep
    the first time, so the timeout counts from when the dashboard stopped answering."""
    status = job["status"]
    if not status.get("jobStatusCheckFailureStartTime"):
        status["jobStatusCheckFailureStartTime"] = rfc3339(now)


def status_check_timed_out(job: Obj, now: float, timeout: float) -> bool:
    """upstream: the jobStatusCheckFailureStartTime check of the Running state. Fails the job
    (for good: no retry) once the dashboard has not answered for ``timeout`` seconds."""
    status = job["status"]
    since = parse_time(status.get("jobStatusCheckFailureStartTime"))
    if since is None or now < since + timeout:
        return False
    status["jobDeploymentStatus"] = c.DEPLOYMENT_FAILED
    status["reason"] = c.JOB_REASON_STATUS_CHECK_TIMEOUT_EXCEEDED
    status["message"] = (
        f"Failed to get the Ray job status from the dashboard for more than {int(timeout)} seconds"
    )
    return True


def submitter_finished_timeout(
    job: Obj, finished_at: float | None, now: float, grace: float
) -> bool:
    """upstream: the submitter-finished timeout of the Running state. A submitter that ended
    ``grace`` seconds ago while the Ray job is still not terminal will never see it end: the
    job is failed (both jobStatus and JobDeploymentStatus)."""
    status = job["status"]
    if finished_at is None or status.get("jobStatus") in c.JOB_STATUS_TERMINAL:
        return False
    if now < finished_at + grace:
        return False
    status["jobStatus"] = c.JOB_STATUS_FAILED
    status["jobDeploymentStatus"] = c.DEPLOYMENT_FAILED
    status["reason"] = c.JOB_REASON_TRANSITION_GRACE_PERIOD_EXCEEDED
    # The message is upstream's word for word (tests match on it), with Go's time.DateTime
    # layout in UTC and Go's duration format.
    status["message"] = (
        f"The RayJob submitter finished at {format_go_datetime(finished_at)} but the ray job "
        f"did not reach terminal state within {format_go_duration(grace)}"
    )
    return True


def check_backoff_limit(job: Obj) -> None:
    """upstream: checkBackoffLimitAndUpdateStatusIfNeeded. Counts this pass's outcome into
    ``failed``/``succeeded`` and turns a Failed attempt into Retrying while the backoff limit
    allows another one; deadline and status-check-timeout failures are never retried."""
    status = job["status"]
    failed = int(status.get("failed") or 0)
    succeeded = int(status.get("succeeded") or 0)
    deployment = status.get("jobDeploymentStatus")
    if deployment == c.DEPLOYMENT_FAILED:
        failed += 1
    if deployment == c.DEPLOYMENT_COMPLETE and status.get("jobStatus") == c.JOB_STATUS_SUCCEEDED:
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


# ---------------------------------------------------------------------------- submitter
def _submitter_fail_reason(job: Obj) -> str:
    """A submitter failing after the Ray job failed is the application's failure; before, the
    submission's."""
    app_failed = job["status"].get("jobStatus") == c.JOB_STATUS_FAILED
    return c.JOB_REASON_APP_FAILED if app_failed else c.JOB_REASON_SUBMISSION_FAILED


def check_submitter_job(job: Obj, submitter: Obj | None, now: float) -> tuple[bool, float | None]:
    """upstream: checkK8sJobAndUpdateStatusIfNeeded. (failed, finishedAt) of the K8sJobMode
    submitter Job: a Failed condition fails the RayJob; a Complete one only gives the finish
    time (the Ray job's own status decides the outcome). A condition without a readable
    transition time counts as finished ``now``. No Job yet (or no final condition) is
    (False, None)."""
    if submitter is None:
        return False, None
    status = job["status"]
    for cond in (submitter.get("status") or {}).get("conditions") or []:
        if cond.get("status") != "True":
            continue
        at = parse_time(cond.get("lastTransitionTime")) or now
        if cond.get("type") == "Failed":
            status["jobDeploymentStatus"] = c.DEPLOYMENT_FAILED
            status["reason"] = _submitter_fail_reason(job)
            status["message"] = (
                f"Job submission has failed. Reason: {cond.get('reason', '')}. "
                f"Message: {cond.get('message', '')}"
            )
            return True, at
        if cond.get("type") == "Complete":
            return False, at
    return False, None


def sidecar_finished(head: Obj | None) -> bool:
    """Beyond upstream: whether the head pod's submitter container (SidecarMode) has already
    terminated. Such a job must leave Initializing even if its cluster never reported
    ``ready``: a terminated container makes the head pod not Ready, so a submission that
    ended before every pod was Ready (a worker slow to start) would otherwise wait forever;
    Running then reads the container's exit as usual."""
    for cs in ((head or {}).get("status") or {}).get("containerStatuses") or []:
        if cs.get("name") == c.SUBMITTER_CONTAINER_NAME:
            return bool((cs.get("state") or {}).get("terminated"))
    return False


def check_sidecar(
    job: Obj, head: Obj | None, now: float, restart: bool
) -> tuple[bool, float | None]:
    """upstream: the SidecarMode branch of the submitter check. (failed, finishedAt) from the
    submitter container of the head pod: no head pod fails the job (the sidecar and its
    submission are gone with it); with ``restart`` (the SidecarSubmitterRestart gate) a
    non-zero exit is restarted by the kubelet and only too many restarts fail the job, without
    it a non-zero exit fails it at once; exit code 0 gives the finish time."""
    status = job["status"]
    if head is None:
        status["jobDeploymentStatus"] = c.DEPLOYMENT_FAILED
        status["reason"] = c.JOB_REASON_APP_FAILED
        status["message"] = "Ray head pod not found."
        return True, None
    fail_reason = _submitter_fail_reason(job)
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
            return True, now
        term = (cs.get("state") or {}).get("terminated")
        if not term:
            continue
        at = parse_time(term.get("finishedAt")) or now
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


# ---------------------------------------------------------------------------- Running
def cluster_status_copy(job: Obj, cluster: Obj) -> Obj:
    """The cluster's status for ``status.rayClusterStatus``, keeping the old copy when only
    ``lastUpdateTime`` moved (the cluster touches it on every pass; copying it would write the
    RayJob's status every pass too)."""
    new = copy.deepcopy(cluster.get("status") or {})
    old = job["status"].get("rayClusterStatus") or {}
    strip_new = {k: val for k, val in new.items() if k != "lastUpdateTime"}
    strip_old = {k: val for k, val in old.items() if k != "lastUpdateTime"}
    return copy.deepcopy(old) if strip_new == strip_old else new


def ray_job_missing(job: Obj, finished_at: float | None) -> None:
    """The dashboard does not know the submission id (outside HTTPMode, which submits then).
    Before the submitter finished that is normal (not submitted yet); after, the job failed."""
    if finished_at is None:
        return
    status = job["status"]
    status["jobDeploymentStatus"] = c.DEPLOYMENT_FAILED
    status["reason"] = c.JOB_REASON_APP_FAILED
    status["message"] = "Submitter completed but Ray job not found in RayCluster."


def apply_job_info(job: Obj, info: JobInfo, mode: str, finished_at: float | None) -> None:
    """upstream: the Running state after GetJobInfo. Copies the Ray job's status into the
    RayJob and ends the attempt when the Ray job is terminal; in K8sJobMode and SidecarMode
    only once the submitter has finished too (so its logs are complete). A failed Ray job
    fails the RayJob with AppFailed; any reason set before is otherwise kept. The dashboard
    answered, so the status-check timer stops."""
    status = job["status"]
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


# ---------------------------------------------------------------------------- Suspending/Retrying
def reset_attempt(job: Obj) -> None:
    """upstream: the end of the Suspending/Retrying state. Once the attempt's cluster and
    submitter are gone, forgets everything the attempt owned and moves on: Suspending to
    Suspended, Retrying to New (which chooses new names for the next attempt)."""
    status = job["status"]
    for key in _ATTEMPT_FIELDS:
        status.pop(key, None)
    status["rayClusterStatus"] = {}
    status["rayJobInfo"] = {}
    status["jobStatus"] = c.JOB_STATUS_NEW
    suspending = status.get("jobDeploymentStatus") == c.DEPLOYMENT_SUSPENDING
    status["jobDeploymentStatus"] = c.DEPLOYMENT_SUSPENDED if suspending else c.DEPLOYMENT_NEW


# ---------------------------------------------------------------------------- cleanup timing
def ttl_wait(job: Obj, ttl: float, now: float) -> float:
    """Seconds until ``endTime + ttl`` (<= 0 when due); without a readable ``endTime`` the TTL
    counts from ``now``."""
    ended = parse_time(job["status"].get("endTime"))
    if ended is None:
        ended = now
    return ended + ttl - now


def requeue_for(wait: float) -> int:
    """Whole seconds to wait for a TTL still ``wait`` seconds away, with upstream's 2 s slack
    so the next pass finds it due."""
    return int(wait + 2)


def legacy_policy(job: Obj, strategy: Obj) -> str:
    """upstream: the onSuccess/onFailure deletionStrategy. The policy for how the job ended
    (a job that did not succeed takes onFailure); DeleteNone when none is given."""
    side = "onSuccess" if job["status"].get("jobStatus") == c.JOB_STATUS_SUCCEEDED else "onFailure"
    return ((strategy.get(side) or {}).get("policy")) or c.DELETE_NONE


def due_deletion(
    job: Obj,
    rules: list[Obj],
    now: float,
    *,
    cluster_deleted: bool,
    workers_deleted: bool,
) -> tuple[str | None, float | None]:
    """upstream: the deletionRules handling of a finished RayJob. (policy to run now, seconds
    until the next rule is due). Rules match on jobStatus or else on jobDeploymentStatus; a
    rule whose effect is already observed (cluster deleted, workers suspended) is skipped, so
    it neither runs again nor keeps the job requeued. Of the rules due now the most thorough
    policy runs (DeleteSelf > DeleteCluster > DeleteWorkers > DeleteNone)."""
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
        if (policy == c.DELETE_CLUSTER and cluster_deleted) or (
            policy == c.DELETE_WORKERS and workers_deleted
        ):
            continue
        wait = ttl_wait(job, float(cond.get("ttlSeconds") or 0), now)
        if wait <= 0:
            overdue.append(policy)
        elif next_wait is None or wait < next_wait:
            next_wait = wait
    due = max(overdue, key=lambda p: POLICY_RANK.get(p, 0)) if overdue else None
    return due, next_wait


def workers_suspended(cluster: Obj | None) -> bool:
    """DeleteWorkers has taken effect: no cluster, or every worker group suspended."""
    if cluster is None:
        return True
    return all(g.get("suspend") for g in cluster["spec"].get("workerGroupSpecs") or [])


# ---------------------------------------------------------------------------- status write
def without_conditions(status: Obj) -> Obj:
    return {k: val for k, val in status.items() if k != "conditions"}


def prepare_write(job: Obj, old: Obj, cluster: Obj | None, now: float) -> bool:
    """Completes the status for this pass's write and says whether it must be written.

    upstream: updateRayJobStatus stamps ``endTime`` when the attempt turns Complete or Failed.
    ``observedGeneration`` and the conditions are set too, but only a change of anything else
    warrants a write: the conditions follow from the rest, and an apiserver whose schema lacks
    them must not make every pass look like a change.
    """
    status = job["status"]
    new_state = status.get("jobDeploymentStatus")
    if new_state in c.DEPLOYMENT_TERMINAL and old.get("jobDeploymentStatus") != new_state:
        status["endTime"] = rfc3339(now)
    status["observedGeneration"] = job["metadata"].get("generation")
    set_conditions(job, cluster, now)
    return without_conditions(status) != without_conditions(old)


def attempt_end(job: Obj, old: Obj, now: float) -> tuple[str, int, float] | None:
    """upstream: emitRayJobExecutionDuration. (deployment status, retry count, seconds) when
    this write ends an attempt (a non-terminal status turned terminal or Retrying), else None.
    The retry count is the ``failed`` count before the attempt; the duration runs from
    ``startTime`` (0 when it is unreadable)."""
    state = job["status"].get("jobDeploymentStatus")
    before = old.get("jobDeploymentStatus")
    if before in c.DEPLOYMENT_TERMINAL or before == state:
        return None
    if state not in c.DEPLOYMENT_TERMINAL and state != c.DEPLOYMENT_RETRYING:
        return None
    started = parse_time(job["status"].get("startTime"))
    seconds = now - started if started is not None else 0.0
    return str(state), int(old.get("failed") or 0), seconds


# ---------------------------------------------------------------------------- conditions
def _put_condition(
    conditions: list[Obj],
    ctype: str,
    value: str,
    reason: str,
    message: str,
    generation: Any,
    stamp: str,
) -> None:
    """meta.SetStatusCondition: ``lastTransitionTime`` moves only when the status flips."""
    for cond in conditions:
        if cond.get("type") == ctype:
            if cond.get("status") != value:
                cond["lastTransitionTime"] = stamp
            cond.update(status=value, reason=reason, message=message)
            if generation is not None:
                cond["observedGeneration"] = generation
            return
    new: Obj = {
        "type": ctype,
        "status": value,
        "reason": reason,
        "message": message,
        "lastTransitionTime": stamp,
    }
    if generation is not None:
        new["observedGeneration"] = generation
    conditions.append(new)


def cluster_ready(state: str, cluster: Obj | None) -> tuple[str, str, str] | None:
    """(status, reason, message) of ClusterReady for a deployment state, or None to leave the
    condition as it is (Suspending and the terminal states). While Initializing an unready
    cluster lends its RayClusterProvisioned reason and message, which name the stall."""
    if state == c.DEPLOYMENT_INITIALIZING:
        if cluster is None:
            return "False", "RayClusterNotFound", "The RayCluster does not exist yet"
        if (cluster.get("status") or {}).get("state") == c.CLUSTER_STATE_READY:
            return "True", "RayClusterReady", "The RayCluster is ready"
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
        return "False", str(reason), str(message)
    if state in (c.DEPLOYMENT_RUNNING, c.DEPLOYMENT_WAITING):
        return "True", "RayClusterReady", "The RayCluster is ready"
    if state in (c.DEPLOYMENT_SUSPENDED, c.DEPLOYMENT_NEW, c.DEPLOYMENT_RETRYING):
        return "False", state or "New", "No RayCluster for this attempt yet"
    return None


def set_conditions(job: Obj, cluster: Obj | None, now: float) -> None:
    """Kubernetes-style conditions derived from the state machine (beyond upstream):
    ClusterReady, Suspended, Complete and Failed, each stamped with the job's generation."""
    status = job["status"]
    conditions: list[Obj] = [dict(x) for x in status.get("conditions") or []]
    gen = job["metadata"].get("generation")
    stamp = rfc3339(now)
    state = status.get("jobDeploymentStatus") or ""

    def put(ctype: str, value: str, reason: str, message: str) -> None:
        _put_condition(conditions, ctype, value, reason, message, gen, stamp)

    ready = cluster_ready(state, cluster)
    if ready is not None:
        put(COND_CLUSTER_READY, *ready)
    suspended = state == c.DEPLOYMENT_SUSPENDED
    put(
        COND_SUSPENDED,
        "True" if suspended else "False",
        "Suspended" if suspended else "NotSuspended",
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
