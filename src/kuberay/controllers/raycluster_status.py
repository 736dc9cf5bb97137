"""RayCluster status computation: a pure function of the cluster, its pods and its head Service.

Invariants and failure modes:
- Counters, desired resources, state, endpoints and head info follow upstream's rules exactly
  (upstream: calculateStatus in raycluster_controller.go); ``state`` latches ``ready`` and is
  only ever replaced by ``suspended`` (and back), never cleared because pods later fail.
- Beyond upstream, every stall has a reason: when the cluster is not provisioned, the
  ``RayClusterProvisioned`` condition's message names the first pod that holds it back and why
  (unschedulable, image pull errors, crash loops, a missing service account or quota), so
  ``kubectl describe`` answers "why is my cluster not ready" without reading pod events.
- A worker group with a negative ``replicas`` is clamped as upstream does, and said: the
  ``WorkerReplicasAdjusted`` condition (True, reason ``NegativeReplicas``) names each such group,
  the value given and the value used, and is removed once the spec is fixed. Like every other
  condition it exists only with the RayClusterStatusConditions gate on; with the gate off the
  reconciler's ``InvalidReplicas`` Warning event (sent either way) is the only report.
- ``status_changed`` ignores ``lastUpdateTime`` and ``observedGeneration`` so that an unchanged
  cluster is never written (no status churn, no 409 storms).
- Beyond upstream, progress is paced (``status_write_delay``): a change of nothing but the
  counters of ready/available workers, head and endpoint details, the ``HeadPodReady``
  condition and the provisioning message is written at most once per pace after the previous
  write; the caller requeues for the rest and then writes what holds then. The first status,
  every ``state`` or ``reason`` change, every spec-driven field and every other condition
  (failures, suspension, provisioned) is written at once. A cluster that becomes ready within
  the pace thus takes two writes (created, ready), as upstream's usually does under load,
  instead of one per pod that became ready.
- The pace (``status_pace``) is ``STATUS_PACE_SECONDS`` while the controller keeps up, and grows
  with its backlog (keys waiting per worker) up to ``STATUS_PACE_MAX_SECONDS``: when a thousand
  clusters start at once, their counters would be stale again before anyone reads them, and
  each write costs the plane that is making their pods. Progress of pods created after the
  previous write waits until ``STATUS_PACE_MAX_SECONDS`` after the first of them, unless every
  pod is Ready by then (that write goes at once) or a pod is stuck (its reason keeps the plain
  pace). No progress waits much
  longer than ``STATUS_PACE_MAX_SECONDS`` plus the pace (the caller may pass an infinite pace:
  a cluster waiting for the start window before any of its pods exists has no pod progress to
  report); a change of state, reason or any other condition never waits.
"""

from __future__ import annotations

import copy
from collections.abc import Iterable

from kuberay.api import constants as c
from kuberay.api import resources as res
from kuberay.runtime import rfc3339
from kuberay.runtime.store import Obj

MSG_PROVISIONING = "RayCluster Pods are being provisioned for first time"
MSG_PROVISIONED = "All Ray Pods are ready for the first time"
MSG_SUSPENDED = "RayCluster has been suspended"


def now_rfc3339() -> str:
    return rfc3339.now()


def pod_condition(pod: Obj, ctype: str) -> Obj | None:
    for cond in pod.get("status", {}).get("conditions") or []:
        if cond.get("type") == ctype:
            return dict(cond)
    return None


def pod_ready_true(pod: Obj | None) -> bool:
    """The pod's Ready condition is True, whatever its phase."""
    ready = pod_condition(pod, "Ready") if pod is not None else None
    return bool(ready and ready.get("status") == "True")


def is_running_and_ready(pod: Obj) -> bool:
    """Phase Running and condition Ready True. upstream: IsRunningAndReady."""
    return pod.get("status", {}).get("phase") == "Running" and pod_ready_true(pod)


def pod_turned_ready(old: Obj | None, new: Obj) -> bool:
    """A pod's Ready condition became True: the one pod event that can let its cluster
    finish a start, so the controller may queue it ahead (``Controller.owns(urgent=)``)."""
    return pod_ready_true(new) and not pod_ready_true(old)


def all_pods_running(pods: list[Obj]) -> bool:
    """Every pod Running and none with Ready=False.
    upstream: CheckAllPodsRunning."""
    if not pods:
        return False
    for pod in pods:
        if pod.get("status", {}).get("phase") != "Running":
            return False
        ready = pod_condition(pod, "Ready")
        if ready is not None and ready.get("status") == "False":
            return False
    return True


def node_type(pod: Obj) -> str:
    return str((pod["metadata"].get("labels") or {}).get(c.LABEL_NODE_TYPE, ""))


def find_condition(conditions: list[Obj], ctype: str) -> Obj | None:
    for cond in conditions:
        if cond.get("type") == ctype:
            return cond
    return None


def set_condition(
    conditions: list[Obj],
    ctype: str,
    status: str,
    reason: str,
    message: str,
    generation: int | None,
    now: str,
) -> None:
    """``meta.SetStatusCondition``: lastTransitionTime changes only when status changes."""
    existing = find_condition(conditions, ctype)
    if existing is None:
        cond: Obj = {"type": ctype, "status": status, "reason": reason, "message": message}
        cond["lastTransitionTime"] = now
        if generation is not None:
            cond["observedGeneration"] = generation
        conditions.append(cond)
        return
    if existing.get("status") != status:
        existing["lastTransitionTime"] = now
    existing.update(status=status, reason=reason, message=message)
    if generation is not None:
        existing["observedGeneration"] = generation


def remove_condition(conditions: list[Obj], ctype: str) -> None:
    conditions[:] = [cond for cond in conditions if cond.get("type") != ctype]


def condition_true(cluster: Obj, ctype: str) -> bool:
    cond = find_condition(cluster.get("status", {}).get("conditions") or [], ctype)
    return bool(cond and cond.get("status") == "True")


def stall_reason(pods: list[Obj]) -> str | None:
    """Why the first pod that is not Running+Ready is stuck, in one line, or None."""
    for pod in sorted(pods, key=lambda p: p["metadata"]["name"]):
        if is_running_and_ready(pod):
            continue
        name = pod["metadata"]["name"]
        status = pod.get("status", {})
        if pod.get("metadata", {}).get("deletionTimestamp"):
            continue
        scheduled = pod_condition(pod, "PodScheduled")
        if scheduled and scheduled.get("status") == "False":
            reason = scheduled.get("reason") or "Unschedulable"
            return f"pod {name}: {reason}: {scheduled.get('message', '')}".rstrip(": ")
        scheduler = (pod.get("spec") or {}).get("schedulerName") or ""
        if (
            scheduled is None
            and not (pod.get("spec") or {}).get("nodeName")
            and scheduler not in ("", "default-scheduler")
        ):
            # A batch scheduler that is not running (or not yet placing the gang) leaves no
            # trace on the pod at all: say which scheduler it is waiting for.
            return f"pod {name}: not yet scheduled by {scheduler}"
        for key in ("initContainerStatuses", "containerStatuses"):
            for cs in status.get(key) or []:
                state = cs.get("state") or {}
                waiting = state.get("waiting")
                if waiting and waiting.get("reason") not in (None, "PodInitializing"):
                    msg = waiting.get("message") or ""
                    return f"pod {name}: container {cs['name']}: {waiting['reason']} {msg}".strip()
                term = state.get("terminated")
                if term and term.get("exitCode", 0) != 0:
                    return (
                        f"pod {name}: container {cs['name']} exited with code "
                        f"{term.get('exitCode')} ({term.get('reason', '')})"
                    )
        if status.get("phase") in ("Failed", "Unknown"):
            return f"pod {name}: phase {status['phase']}: {status.get('reason', '')}".rstrip(": ")
    return None


def head_pod_ready_condition(head: Obj | None) -> tuple[str, str, str]:
    """(status, reason, message) of HeadPodReady mirrored from the head pod.
    upstream: FindHeadPodReadyCondition."""
    if head is None:
        return "False", c.REASON_HEAD_POD_NOT_FOUND, "Head Pod not found"
    ready = pod_condition(head, "Ready")
    if ready is None:
        return "False", c.REASON_UNKNOWN, ""
    status = str(ready.get("status", "Unknown"))
    reason = str(ready.get("reason") or "")
    message = str(ready.get("message") or "")
    if status == "True" and not reason:
        reason = c.REASON_HEAD_POD_RUNNING_AND_READY
    if reason == c.REASON_CONTAINERS_NOT_READY:
        for cs in head.get("status", {}).get("containerStatuses") or []:
            state = cs.get("state") or {}
            detail = state.get("waiting") or state.get("terminated")
            if detail and detail.get("reason"):
                reason = str(detail["reason"])
                if detail.get("message"):
                    message = f"{message}; {detail['message']}" if message else detail["message"]
                break
    return status, reason or c.REASON_UNKNOWN, message


def calculate_status(  # noqa: C901, PLR0912, PLR0915
    cluster: Obj,
    pods: list[Obj],
    head_service: Obj | None,
    *,
    reconcile_error: str | None,
    error_reason: str | None,
    conditions_enabled: bool,
    now: str,
) -> Obj:
    """The new ``status`` dict for ``cluster``; ``pods`` are all live pods of the cluster.
    upstream: calculateStatus."""
    spec = cluster["spec"]
    old = cluster.get("status") or {}
    status: Obj = copy.deepcopy(old)
    generation = cluster["metadata"].get("generation")
    live = [p for p in pods if not p["metadata"].get("deletionTimestamp")]
    workers = [
        p for p in live if p["metadata"]["labels"].get(c.LABEL_NODE_TYPE) == c.NODE_TYPE_WORKER
    ]
    heads = [p for p in live if p["metadata"]["labels"].get(c.LABEL_NODE_TYPE) == c.NODE_TYPE_HEAD]
    head = heads[0] if heads else None

    status["readyWorkerReplicas"] = sum(1 for p in workers if is_running_and_ready(p))
    status["availableWorkerReplicas"] = sum(
        1 for p in workers if p.get("status", {}).get("phase") == "Running"
    )
    status["desiredWorkerReplicas"] = res.total_desired_workers(cluster)
    status["minWorkerReplicas"] = res.min_worker_replicas(cluster)
    status["maxWorkerReplicas"] = res.max_worker_replicas(cluster)
    status.update(res.pod_resource_totals(cluster))

    suspended_now = bool(spec.get("suspend")) and not live
    new_state = old.get("state")
    all_running = len(live) == status["desiredWorkerReplicas"] + 1 and all_pods_running(live)
    if suspended_now:
        new_state = "suspended"
    elif reconcile_error is None and all_running:
        new_state = "ready"
    if new_state and new_state != old.get("state"):
        status["state"] = new_state
        times = dict(status.get("stateTransitionTimes") or {})
        times[new_state] = now
        status["stateTransitionTimes"] = times

    # head info and endpoints
    head_info: Obj = {}
    if head is not None:
        if head.get("status", {}).get("podIP"):
            head_info["podIP"] = head["status"]["podIP"]
        head_info["podName"] = head["metadata"]["name"]
    if head_service is not None:
        head_info["serviceName"] = head_service["metadata"]["name"]
        cluster_ip = head_service.get("spec", {}).get("clusterIP")
        if cluster_ip == "None":
            if head_info.get("podIP"):
                head_info["serviceIP"] = head_info["podIP"]
        elif cluster_ip:
            head_info["serviceIP"] = cluster_ip
        endpoints: dict[str, str] = {}
        for port in head_service.get("spec", {}).get("ports") or []:
            if not port.get("name"):
                continue
            value = port.get("nodePort") or port.get("targetPort") or port.get("port")
            endpoints[port["name"]] = str(value)
        if endpoints:
            status["endpoints"] = endpoints
    if head_info:
        status["head"] = head_info
    else:
        status.pop("head", None)

    if conditions_enabled:
        conditions: list[Obj] = copy.deepcopy(status.get("conditions") or [])
        if reconcile_error and error_reason:
            # upstream wraps the API error with errors.Join(marker, err): the marker's name,
            # a newline, then the error.
            set_condition(
                conditions,
                c.COND_REPLICA_FAILURE,
                "True",
                error_reason,
                f"{error_reason}\n{reconcile_error}",
                None,
                now,
            )
        elif reconcile_error is None:
            remove_condition(conditions, c.COND_REPLICA_FAILURE)
        hs, hr, hm = head_pod_ready_condition(head)
        set_condition(conditions, c.COND_HEAD_POD_READY, hs, hr, hm, None, now)
        provisioned = find_condition(conditions, c.COND_RAYCLUSTER_PROVISIONED)
        already = bool(provisioned and provisioned.get("status") == "True")
        if not already:
            if all_running and all(is_running_and_ready(p) for p in live):
                set_condition(
                    conditions,
                    c.COND_RAYCLUSTER_PROVISIONED,
                    "True",
                    c.REASON_ALL_POD_RUNNING_AND_READY_FIRST_TIME,
                    MSG_PROVISIONED,
                    None,
                    now,
                )
            elif not _is_true(find_condition(conditions, c.COND_RAYCLUSTER_SUSPENDED)):
                stall = stall_reason(live)
                message = MSG_PROVISIONING if stall is None else f"{MSG_PROVISIONING}; {stall}"
                set_condition(
                    conditions,
                    c.COND_RAYCLUSTER_PROVISIONED,
                    "False",
                    c.REASON_RAYCLUSTER_PODS_PROVISIONING,
                    message,
                    None,
                    now,
                )
        suspend_conditions(conditions, status, bool(spec.get("suspend")), bool(live), now)
        replicas_condition(conditions, cluster, now)
        remove_condition(conditions, c.COND_RAYCLUSTER_VALIDATION_FAILED)
        status["conditions"] = conditions
    if reconcile_error and not conditions_enabled:
        # With conditions (the default) the error is in ReplicaFailure and, as upstream,
        # ``reason`` is left alone; without them it is the only place that says why.
        status["reason"] = reconcile_error
    else:
        status.pop("reason", None)
    status["observedGeneration"] = generation
    return status


def suspending(cluster: Obj) -> bool:
    """Whether the cluster's status says it is suspending (a ``RayClusterSuspending`` condition
    that is True): the state machine's cue for the reconciler to delete every pod."""
    conditions = (cluster.get("status") or {}).get("conditions") or []
    return any(
        co.get("type") == c.COND_RAYCLUSTER_SUSPENDING and co.get("status") == "True"
        for co in conditions
    )


def suspend_conditions(
    conditions: list[Obj], status: Obj, want_suspend: bool, any_pods: bool, now: str
) -> None:
    """The suspend state machine in ``conditions`` (and ``status.state``).

    upstream: the suspend block of ``calculateStatus`` (raycluster_controller.go). Both
    conditions exist from the first status on, False while nothing is suspended (reason equal to
    the type, empty message), so a watcher never has to treat "absent" as a state. Suspending
    turns True when ``spec.suspend`` is set; once every pod is gone, Suspending goes False and
    Suspended True (and Provisioned False, since pods must be provisioned again); clearing
    ``spec.suspend`` turns Suspended False, and the pods come back on the next pass.
    """
    suspending = _is_true(find_condition(conditions, c.COND_RAYCLUSTER_SUSPENDING))
    suspended = _is_true(find_condition(conditions, c.COND_RAYCLUSTER_SUSPENDED))
    sus, sing = c.COND_RAYCLUSTER_SUSPENDED, c.COND_RAYCLUSTER_SUSPENDING
    if not suspending and not suspended:
        set_condition(conditions, sus, "False", sus, "", None, now)
        set_condition(conditions, sing, "True" if want_suspend else "False", sing, "", None, now)
    elif suspending and not any_pods:
        set_condition(
            conditions,
            c.COND_RAYCLUSTER_PROVISIONED,
            "False",
            c.REASON_RAYCLUSTER_PODS_PROVISIONING,
            MSG_SUSPENDED,
            None,
            now,
        )
        set_condition(conditions, sing, "False", sing, "", None, now)
        set_condition(conditions, sus, "True", sus, "", None, now)
        if status.get("state") != "suspended":
            status["state"] = "suspended"
            times = dict(status.get("stateTransitionTimes") or {})
            times["suspended"] = now
            status["stateTransitionTimes"] = times
    elif suspended and not want_suspend:
        set_condition(conditions, sus, "False", sus, "", None, now)


def invalid_spec_status(
    cluster: Obj, reason: str, message: str, *, conditions_enabled: bool, now: str
) -> Obj:
    """The status of a RayCluster the operator refuses to reconcile (invalid metadata or spec).

    Upstream only sends a Warning event; here status says it too, so that the refusal is seen
    by whoever reads status (and survives event expiry or an event lost under load): the
    ``ValidationFailed`` condition (True, ``reason`` the event's reason, the validation message)
    with conditions on, ``status.reason`` without them. Nothing else changes: the cluster's
    pods, if any, are left as they are. The condition goes once the spec is valid again
    (``calculate_status`` removes it)."""
    status: Obj = copy.deepcopy(cluster.get("status") or {})
    if conditions_enabled:
        conditions: list[Obj] = copy.deepcopy(status.get("conditions") or [])
        set_condition(
            conditions, c.COND_RAYCLUSTER_VALIDATION_FAILED, "True", reason, message, None, now
        )
        status["conditions"] = conditions
    else:
        status["reason"] = message
    status["observedGeneration"] = cluster["metadata"].get("generation")
    return status


def replicas_condition(conditions: list[Obj], cluster: Obj, now: str) -> None:
    """``WorkerReplicasAdjusted`` True while some group's ``replicas`` is negative (the message
    says which, and the value used), absent otherwise."""
    warnings = res.replica_warnings(cluster)
    if not warnings:
        remove_condition(conditions, c.COND_WORKER_REPLICAS_ADJUSTED)
        return
    set_condition(
        conditions,
        c.COND_WORKER_REPLICAS_ADJUSTED,
        "True",
        c.REASON_NEGATIVE_REPLICAS,
        "; ".join(warnings),
        None,
        now,
    )


def _is_true(cond: Obj | None) -> bool:
    return bool(cond and cond.get("status") == "True")


_IGNORED = ("lastUpdateTime", "observedGeneration")

STATUS_PACE_SECONDS = 5.0
STATUS_PACE_MAX_SECONDS = 30.0
# Fields whose change alone is progress, paced by ``status_write_delay``.
_PROGRESS_FIELDS = frozenset(
    {"readyWorkerReplicas", "availableWorkerReplicas", "head", "endpoints", "conditions"}
)
# Conditions whose change alone is progress (anything else about conditions is written at once).
_PROGRESS_CONDITIONS = frozenset({c.COND_HEAD_POD_READY})


def _progress_only_conditions(old: list[Obj], new: list[Obj]) -> bool:
    """Whether the conditions differ only in progress: ``HeadPodReady`` changes, or the
    message of a still-False ``RayClusterProvisioned``."""

    def by_type(conds: list[Obj]) -> dict[str, Obj]:
        return {str(x.get("type")): x for x in conds}

    before, after = by_type(old), by_type(new)
    if before.keys() != after.keys():
        return False
    for ctype, cond in after.items():
        prev = before[ctype]
        if cond == prev or ctype in _PROGRESS_CONDITIONS:
            continue
        provisioning = ctype == c.COND_RAYCLUSTER_PROVISIONED and cond.get("status") == "False"
        same_but_message = {**prev, "message": cond.get("message")} == cond
        if not (provisioning and same_but_message):
            return False
    return True


def status_pace(
    backlog: int,
    workers: int,
    base: float = STATUS_PACE_SECONDS,
    ceiling: float = STATUS_PACE_MAX_SECONDS,
) -> float:
    """The pace for progress-only writes given the controller's ``backlog`` (keys waiting in its
    queue) and its number of ``workers``: ``base`` while at most one key waits per worker,
    ``base`` times the keys per worker beyond that, never above ``ceiling`` (nor below
    ``base``). A deep queue means every reconcile comes late anyway, so fresher counters would
    be stale on arrival; the writes they cost go to the pods instead."""
    if base <= 0:
        return 0.0
    per_worker = max(0, backlog) / max(1, workers)
    return max(base, min(ceiling, base * per_worker))


def status_write_delay(
    old: Obj | None,
    new: Obj,
    now: float,
    pace: float = STATUS_PACE_SECONDS,
    created: Iterable[str] = (),
) -> float:
    """Seconds to hold back writing ``new`` over ``old`` (0: write now): a progress-only change
    waits until ``pace`` seconds after the previous write (``old["lastUpdateTime"]``).

    ``created`` are the creationTimestamps of the cluster's pods. When pods were created after
    the previous write (a start, a scale-up), their steps toward Ready wait until
    ``STATUS_PACE_MAX_SECONDS`` after the first of them, and the write that reports every
    pod Ready goes at once: a start then costs one write however slowly the plane makes its
    pods Ready (a 5 s pace here cost a third and fourth write per cluster when KWOK took 5-10 s
    per pod), and pods created without pause (a long scale-up) still have their progress
    written twice a minute. A provisioning message that names a stuck pod (``names_a_stall``)
    keeps the plain pace: the reason for a stall is what the status is read for."""
    if not old or pace <= 0:
        return 0.0
    last = rfc3339.parse_time(old.get("lastUpdateTime"))
    if last is None:
        return 0.0
    keys = (set(old) | set(new)) - set(_IGNORED)
    changed = {k for k in keys if old.get(k) != new.get(k)}
    if not changed <= _PROGRESS_FIELDS:
        return 0.0
    if "conditions" in changed and not _progress_only_conditions(
        list(old.get("conditions") or []), list(new.get("conditions") or [])
    ):
        return 0.0
    deadline = last + pace
    # RFC 3339 UTC timestamps in whole seconds (the apiserver's) order as strings do.
    mark = rfc3339.format_time(last)
    after = [t for t in created if t > mark]
    if after and not names_a_stall(new):
        if _every_pod_ready(new):
            return 0.0
        first = rfc3339.parse_time(min(after))
        if first is not None:
            deadline = max(deadline, first + STATUS_PACE_MAX_SECONDS)
    return max(0.0, deadline - now)


# Waiting reasons of a container that is starting as it should: named in the provisioning
# message all the same, but no stall.
_STARTING_REASONS = ("ContainerCreating",)


def names_a_stall(status: Obj) -> bool:
    """Whether ``status``'s ``RayClusterProvisioned`` message names a pod that is stuck
    (unschedulable, an image it cannot pull, a crash loop, a failed container) rather than one
    still starting: such a reason is never held back behind new pods' start."""
    cond = find_condition(list(status.get("conditions") or []), c.COND_RAYCLUSTER_PROVISIONED)
    if cond is None or cond.get("status") != "False":
        return False
    message = str(cond.get("message") or "")
    prefix = f"{MSG_PROVISIONING}; "
    if not message.startswith(prefix):
        return False
    detail = message[len(prefix) :]
    return not any(f": {reason}" in detail for reason in _STARTING_REASONS)


def _every_pod_ready(status: Obj) -> bool:
    """Whether ``status`` reports every desired worker ready (and the head, where the
    ``HeadPodReady`` condition says): the end of a start, which never waits."""
    desired = status.get("desiredWorkerReplicas")
    if desired is None or status.get("readyWorkerReplicas") != desired:
        return False
    head = find_condition(list(status.get("conditions") or []), c.COND_HEAD_POD_READY)
    return head is None or head.get("status") == "True"


def status_changed(old: Obj | None, new: Obj) -> bool:
    def strip(s: Obj | None) -> Obj:
        out = dict(s or {})
        for key in _IGNORED:
            out.pop(key, None)
        return out

    return strip(old) != strip(new)
