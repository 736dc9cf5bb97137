"""RayService status: pure functions from what one pass observed (the RayService, its clusters,
their pods, what their dashboards said, the clock reading passed in) to the status and to the
decisions the reconciler acts on. Nothing here reads the clock, an informer or the network.

upstream: ``calculateStatus`` and ``calculateConditions`` (rayservice_controller.go).

Invariants and failure modes:
- ``Ready`` and ``UpgradeInProgress`` both exist from the first status on. Until a cluster
  first serves they are False with reason ``Initializing`` and the message "RayService is
  initializing", whether or not a pending cluster exists yet; ``UpgradeInProgress`` only turns
  ``Unknown``/``NoActiveCluster`` when a RayService that is past initializing has lost its
  active cluster (which upstream treats as a bug to report).
- ``Ready`` follows the serve endpoints of the active cluster; it only falls back to
  ``ZeroServeEndpoints`` after having been True, so a failed initialization keeps its own
  reason (``InitializingTimeout``, validation failures) instead of being overwritten.
  ``InitializingTimeout`` is terminal: once set, only recreating the RayService clears it.
- A condition's ``lastTransitionTime`` changes only when its status does; ``observedGeneration``
  is always the RayService's current generation.
- Beyond upstream, the "both clusters exist" message says what the pending cluster is waiting
  for (``waiting_for``), so a stalled upgrade explains itself in ``kubectl describe``.
- ``comparable`` leaves out what alone never warrants a status write (the clusters' own
  statuses, update and transition times), so an unchanged RayService is never written.
- A new pending cluster is chosen only when no pending cluster (created or merely named) is
  for the current goal, and never while a rollback runs: a name once written is reused by
  every later pass, so a crash can never lead to two pending clusters.
"""

from __future__ import annotations

import copy
from dataclasses import dataclass, field

import yaml
from pydantic import ValidationError

from kuberay.api import constants as c
from kuberay.api import features
from kuberay.api import validation as v
from kuberay.api.features import FeatureGates
from kuberay.api.k8svalidation import format_go_duration, parse_go_duration
from kuberay.api.rayservice import RayService
from kuberay.builders import gateway as gwb
from kuberay.builders import names
from kuberay.builders import rayservice as rsb
from kuberay.controllers.common import parse_time, rfc3339
from kuberay.controllers.raycluster_status import find_condition, set_condition
from kuberay.runtime.store import Obj

MSG_INITIALIZING = "RayService is initializing"
MSG_NON_ZERO_ENDPOINTS = "Number of serve endpoints is greater than 0"
MSG_ZERO_ENDPOINTS = "Number of serve endpoints dropped to 0"
MSG_BOTH_CLUSTERS = "Both active and pending Ray clusters exist"
MSG_NO_PENDING = "Active Ray cluster exists and no pending Ray cluster"
MSG_NO_ACTIVE = (
    "No active Ray cluster exists, and the RayService is not initializing. "
    "Please open a GitHub issue in the KubeRay repository."
)


ACTIVE = "activeServiceStatus"
PENDING = "pendingServiceStatus"


def with_detail(message: str, detail: str) -> str:
    return f"{message}; {detail}" if detail else message


def init_conditions(conditions: list[Obj], generation: int | None, now: str) -> None:
    """Seeds both conditions as initializing; a validation failure that has since been fixed
    starts over from initializing too. upstream: the first block of ``calculateConditions``."""
    ready = find_condition(conditions, c.COND_READY)
    if ready is None or ready.get("reason") == c.REASON_VALIDATION_FAILED:
        set_condition(
            conditions,
            c.COND_READY,
            "False",
            c.REASON_INITIALIZING,
            MSG_INITIALIZING,
            generation,
            now,
        )
    if find_condition(conditions, c.COND_UPGRADE_IN_PROGRESS) is None:
        set_condition(
            conditions,
            c.COND_UPGRADE_IN_PROGRESS,
            "False",
            c.REASON_INITIALIZING,
            MSG_INITIALIZING,
            generation,
            now,
        )


def calculate_conditions(
    status: Obj,
    *,
    has_active: bool,
    has_pending: bool,
    waiting: str,
    generation: int | None,
    now: str,
) -> None:
    """Updates ``status.conditions`` and ``status.serviceStatus`` in place; ``serviceStatus``
    is Running exactly while Ready is True. upstream: ``calculateConditions`` (and the end of
    ``calculateStatus``)."""
    conditions: list[Obj] = status.setdefault("conditions", [])
    init_conditions(conditions, generation, now)
    endpoints = int(status.get("numServeEndpoints") or 0)
    ready = find_condition(conditions, c.COND_READY) or {}
    if has_active and endpoints > 0:
        set_condition(
            conditions,
            c.COND_READY,
            "True",
            c.REASON_NON_ZERO_SERVE_ENDPOINTS,
            MSG_NON_ZERO_ENDPOINTS,
            generation,
            now,
        )
    elif ready.get("status") == "True":
        set_condition(
            conditions,
            c.COND_READY,
            "False",
            c.REASON_ZERO_SERVE_ENDPOINTS,
            MSG_ZERO_ENDPOINTS,
            generation,
            now,
        )
    upgrade = find_condition(conditions, c.COND_UPGRADE_IN_PROGRESS) or {}
    if has_active and has_pending:
        set_condition(
            conditions,
            c.COND_UPGRADE_IN_PROGRESS,
            "True",
            c.REASON_BOTH_ACTIVE_PENDING_CLUSTERS_EXIST,
            with_detail(MSG_BOTH_CLUSTERS, waiting),
            generation,
            now,
        )
    elif has_active:
        set_condition(
            conditions,
            c.COND_UPGRADE_IN_PROGRESS,
            "False",
            c.REASON_NO_PENDING_CLUSTER,
            MSG_NO_PENDING,
            generation,
            now,
        )
    elif upgrade.get("reason") not in (c.REASON_INITIALIZING, c.REASON_INITIALIZING_TIMEOUT):
        set_condition(
            conditions,
            c.COND_UPGRADE_IN_PROGRESS,
            "Unknown",
            c.REASON_NO_ACTIVE_CLUSTER,
            MSG_NO_ACTIVE,
            generation,
            now,
        )
    ready_now = (find_condition(conditions, c.COND_READY) or {}).get("status") == "True"
    status["serviceStatus"] = c.RAYSERVICE_STATUS_RUNNING if ready_now else ""


# ---------------------------------------------------------------------- observed state


@dataclass
class ServeState:
    """What one pass learned from a cluster's dashboard (all empty when it could not ask)."""

    ready: bool = False
    apps: dict[str, Obj] | None = None
    capacity: int | None = None  # the target_capacity Serve reports (incremental upgrades)
    deployed: Obj = field(default_factory=dict)


def pending_name_of(svc: Obj) -> str:
    """The pending cluster's name as persisted in the status (it may not exist yet)."""
    return str((svc["status"].get(PENDING) or {}).get("rayClusterName") or "")


def serve_port(cluster: Obj) -> int:
    """The head container's ``serve`` port, else Ray's default. upstream: ``GetServePort``
    (common) / ``FindContainerPort`` (utils)."""
    head = ((cluster.get("spec") or {}).get("headGroupSpec") or {}).get("template") or {}
    containers = (head.get("spec") or {}).get("containers") or []
    for port in (containers[0].get("ports") or []) if containers else []:
        if port.get("name") == c.SERVE_PORT_NAME and port.get("containerPort"):
            return int(port["containerPort"])
    return c.SERVE_PORT


def head_ready(cluster: Obj) -> bool:
    """Whether the dashboard is worth asking: the cluster's HeadPodReady condition, or (with
    the RayClusterStatusConditions gate off, no conditions at all) its ``ready`` state.
    upstream: the head check at the top of ``reconcileServe``."""
    status = cluster.get("status") or {}
    for cond in status.get("conditions") or []:
        if cond.get("type") == c.COND_HEAD_POD_READY:
            return bool(cond.get("status") == "True")
    return bool(status.get("state") == c.CLUSTER_STATE_READY)


def count_serving_pods(pods: list[Obj]) -> int:
    """Pods the serve Service would have as ready endpoints once pointed at their cluster
    (labelled serving, Ready, not terminating). Beyond upstream: no Service selects a pending
    cluster before the switch, so its EndpointSlices cannot be asked."""
    count = 0
    for pod in pods:
        meta = pod["metadata"]
        if meta.get("deletionTimestamp"):
            continue
        if (meta.get("labels") or {}).get(c.LABEL_SERVE) != "true":
            continue
        conditions = (pod.get("status") or {}).get("conditions") or []
        if any(x.get("type") == "Ready" and x.get("status") == "True" for x in conditions):
            count += 1
    return count


def serve_service_names(svc: Obj, *, incremental: bool) -> list[str]:
    """The Services whose ready endpoints are ``numServeEndpoints``: the RayService's serve
    Service, or (incremental) both clusters' own serve Services, since the Gateway sends to
    those. upstream: the endpoint count in ``calculateStatus``."""
    if not incremental:
        return [rsb.serve_service_name(svc)]
    status = svc["status"]
    return [
        names.serve_service_name(str(side["rayClusterName"]))
        for side in (status.get(ACTIVE), status.get(PENDING))
        if side and side.get("rayClusterName")
    ]


# ---------------------------------------------------------------------- conditions


def condition(svc: Obj, ctype: str) -> Obj | None:
    """A copy of the RayService's condition ``ctype``, or None."""
    for cond in svc["status"].get("conditions") or []:
        if cond.get("type") == ctype:
            return dict(cond)
    return None


def is_true(svc: Obj, ctype: str) -> bool:
    return (condition(svc, ctype) or {}).get("status") == "True"


def set_service_condition(
    svc: Obj, ctype: str, value: str, reason: str, message: str, now: float
) -> None:
    """Sets one condition; ``lastTransitionTime`` moves only when the status changes and
    ``observedGeneration`` is always the current generation. upstream: ``setCondition``."""
    conditions: list[Obj] = svc["status"].setdefault("conditions", []) or []
    svc["status"]["conditions"] = conditions
    generation = svc["metadata"].get("generation")
    for cond in conditions:
        if cond.get("type") == ctype:
            if cond.get("status") != value:
                cond["lastTransitionTime"] = rfc3339(now)
            cond.update(status=value, reason=reason, message=message)
            cond["observedGeneration"] = generation
            return
    conditions.append(
        {
            "type": ctype,
            "status": value,
            "reason": reason,
            "message": message,
            "lastTransitionTime": rfc3339(now),
            "observedGeneration": generation,
        }
    )


def drop_condition(svc: Obj, ctype: str) -> None:
    conditions = svc["status"].get("conditions") or []
    svc["status"]["conditions"] = [x for x in conditions if x.get("type") != ctype]


# ---------------------------------------------------------------------- validation, timeout


def validation_problem(svc: Obj, gates: FeatureGates) -> tuple[str, str] | None:
    """(event reason, message) of the first thing wrong with the RayService, or None: the
    metadata, then the spec (schema, then semantic rules), then the Serve config's YAML.
    upstream: ``validateRayService``."""
    err = v.validate_rayservice_metadata(svc["metadata"])
    if err:
        return c.EVENT_INVALID_RAYSERVICE_METADATA, err
    try:
        model = RayService.model_validate(svc)
    except ValidationError as exc:
        return c.EVENT_INVALID_RAYSERVICE_SPEC, f"{v.RAYSERVICE_PREFIX}{exc}"
    err = v.validate_rayservice_spec(model, gates)
    if err:
        return c.EVENT_INVALID_RAYSERVICE_SPEC, err
    try:
        rsb.serve_config(svc)
    except (ValueError, yaml.YAMLError) as exc:
        return c.EVENT_INVALID_RAYSERVICE_SPEC, f"{v.RAYSERVICE_PREFIX}serveConfigV2: {exc}"
    return None


def initializing_timed_out(svc: Obj, now: float) -> tuple[bool, str]:
    """(timed out, message) for the ``ray.io/initializing-timeout`` annotation. A timeout that
    happens at ``now`` comes with the message for the condition and the event; one that
    happened before (Ready is already False/InitializingTimeout) with an empty message, since
    it is terminal and reported once. upstream: ``isInitializingTimeout`` and
    ``markFailedOnInitializingTimeout`` (with ``getInitializingTimeout``)."""
    ready = condition(svc, c.COND_READY) or {}
    if ready.get("reason") == c.REASON_INITIALIZING_TIMEOUT:
        return True, ""
    if ready.get("reason") != c.REASON_INITIALIZING:
        return False, ""
    text = (svc["metadata"].get("annotations") or {}).get(c.ANNOTATION_INITIALIZING_TIMEOUT)
    if not text:
        return False, ""
    try:
        timeout = parse_go_duration(str(text))
    except ValueError:
        timeout = float(int(str(text)))  # validated: a positive integer (seconds)
    since = parse_time(ready.get("lastTransitionTime"))
    if since is None or now - since < timeout:
        return False, ""
    return True, (
        f"RayService failed to become ready within the configured timeout of "
        f"{format_go_duration(timeout)}. Time spent initializing: {format_go_duration(now - since)}"
    )


def clear_sides(status: Obj) -> None:
    """No cluster, no endpoints, not running: after a timeout and while suspending."""
    status[ACTIVE] = {}
    status[PENDING] = {}
    status["numServeEndpoints"] = 0
    status["serviceStatus"] = ""


# ---------------------------------------------------------------------- suspend
# upstream has no suspend for RayService at the version ported; these are the transitions of
# the Suspending -> Suspended -> resumed state machine the reconciler drives.


def mark_suspend_requested(svc: Obj, now: float) -> None:
    """``spec.suspend`` was just set: Suspending is persisted first (so the suspension
    completes even if ``spec.suspend`` is cleared meanwhile) and the sides are emptied."""
    set_service_condition(svc, c.COND_SUSPENDING, "True", c.REASON_SUSPEND_REQUESTED, "", now)
    set_service_condition(svc, c.COND_READY, "False", c.REASON_SUSPEND_IN_PROGRESS, "", now)
    for ctype in (c.COND_UPGRADE_IN_PROGRESS, c.COND_ROLLBACK_IN_PROGRESS):
        set_service_condition(svc, ctype, "False", c.REASON_SUSPEND_IN_PROGRESS, "", now)
    clear_sides(svc["status"])


def mark_suspend_in_progress(svc: Obj, now: float) -> None:
    """Children are still being deleted."""
    set_service_condition(svc, c.COND_SUSPENDING, "True", c.REASON_SUSPEND_IN_PROGRESS, "", now)
    set_service_condition(svc, c.COND_READY, "False", c.REASON_SUSPEND_IN_PROGRESS, "", now)


def mark_suspended(svc: Obj, now: float) -> None:
    """Every child is gone."""
    for ctype, value in (
        (c.COND_SUSPENDING, "False"),
        (c.COND_SUSPENDED, "True"),
        (c.COND_READY, "False"),
        (c.COND_UPGRADE_IN_PROGRESS, "False"),
        (c.COND_ROLLBACK_IN_PROGRESS, "False"),
    ):
        set_service_condition(svc, ctype, value, c.REASON_SUSPEND_COMPLETE, "", now)


def mark_resumed(svc: Obj, now: float) -> None:
    """``spec.suspend`` was cleared on a suspended RayService: Ready is dropped so that it is
    re-armed as Initializing with a fresh time (the initializing timeout starts over)."""
    set_service_condition(svc, c.COND_SUSPENDED, "False", c.REASON_RAYSERVICE_RESUMED, "", now)
    drop_condition(svc, c.COND_READY)
    set_service_condition(svc, c.COND_UPGRADE_IN_PROGRESS, "False", c.REASON_INITIALIZING, "", now)


# ---------------------------------------------------------------------- clusters


def clusters_to_keep(status: Obj, *, deleting: bool) -> set[str | None]:
    """The names of the clusters the clean-up must leave alone: active and pending, none
    once the RayService is being deleted. upstream: ``cleanUpRayClusterInstance``."""
    if deleting:
        return set()
    return {
        (status.get(ACTIVE) or {}).get("rayClusterName"),
        (status.get(PENDING) or {}).get("rayClusterName"),
    }


def deletion_due(
    annotations: Obj, *, deleting: bool, now: float, delay: float
) -> tuple[float, bool]:
    """(when a stale cluster is to be deleted, whether that time must be recorded on it now).
    A recorded time is kept across restarts; deleting the RayService cuts it short to now.
    upstream: ``cleanUpRayClusterInstance`` (which keeps the time in memory only)."""
    due = parse_time(annotations.get(c.ANNOTATION_DELETION_AT))
    if due is None or (deleting and due > now):
        return now + delay, delay > 0
    return due, False


def should_prepare_new_cluster(
    svc: Obj,
    active: Obj | None,
    pending: Obj | None,
    *,
    incremental: bool,
    gates: FeatureGates,
    zero_downtime: bool,
) -> bool:
    """Whether to name a new pending cluster now. Never during a rollback nor (incremental)
    while both clusters exist: a changed goal is a rollback first. A pending cluster whose
    spec is no longer the goal is replaced; a named but not yet created one is kept. Otherwise
    the strategy decides (``NewCluster`` always, incremental with its gate, ``None`` never, no
    strategy as ``ENABLE_ZERO_DOWNTIME`` says). upstream: ``shouldPrepareNewCluster`` and
    ``isZeroDowntimeUpgradeEnabled``."""
    if is_true(svc, c.COND_ROLLBACK_IN_PROGRESS):
        return False
    if incremental and active is not None and pending is not None:
        return False
    if pending is not None:
        return not rsb.matches_goal(svc, pending) and not rsb.only_groups_appended(svc, pending)
    if pending_name_of(svc):
        return False  # chosen, not created yet
    if active is None:
        return True
    if rsb.matches_goal(svc, active) or rsb.only_groups_appended(svc, active):
        return False
    return upgrades_enabled(svc, gates=gates, zero_downtime=zero_downtime)


def upgrades_enabled(svc: Obj, *, gates: FeatureGates, zero_downtime: bool) -> bool:
    """Whether a changed cluster spec gets a new cluster: ``NewCluster`` always, incremental
    with its gate, ``None`` never, no strategy as ``ENABLE_ZERO_DOWNTIME`` says. When it does
    not, the active cluster keeps serving and takes serve config changes in place.
    upstream: ``isZeroDowntimeUpgradeEnabled``."""
    strategy = ((svc["spec"].get("upgradeStrategy") or {}).get("type")) or ""
    if strategy == c.RAYSERVICE_UPGRADE_NEW_CLUSTER:
        return True
    if strategy == c.RAYSERVICE_UPGRADE_INCREMENTAL:
        return gates.enabled(features.RAY_SERVICE_INCREMENTAL_UPGRADE)
    if strategy:
        return False
    return zero_downtime


def new_pending_side(name: str, *, incremental: bool, has_active: bool) -> Obj:
    """The pending side for a newly named cluster. Incremental: the first cluster takes all
    capacity and traffic at once, a later one starts from nothing. upstream: the new pending
    cluster block of ``calculateStatus``."""
    side: Obj = {"rayClusterName": name}
    if incremental:
        side["targetCapacity"] = 0 if has_active else gwb.FULL
        side["trafficRoutedPercent"] = 0 if has_active else gwb.FULL
    return side


def switch_target(
    svc: Obj,
    active: Obj | None,
    pending: Obj | None,
    *,
    active_ready: bool,
    pending_ready: bool,
    endpoints_ready: bool,
) -> Obj | None:
    """Blue/green: the cluster the head and serve Services should select. The pending cluster
    once its Serve applications run and it has serving endpoints (and it is still for the
    goal: one for an older goal is replaced, never promoted); else the active one while it
    serves; else none (the Services stay as they are). upstream: the target choice in
    ``Reconcile`` before ``reconcileServicesToReadyCluster``."""
    if (
        pending is not None
        and pending_ready
        and endpoints_ready
        and (rsb.matches_goal(svc, pending) or rsb.only_groups_appended(svc, pending))
    ):
        return pending
    if active is not None and active_ready:
        return active
    return None


def endpoints_wait(cluster_name: str) -> str:
    return f"waiting for the serve endpoints of RayCluster {cluster_name} to be ready"


# ---------------------------------------------------------------------- serve


SERVE_RECORD = "record"  # the config runs already; only this process's record of it is missing
SERVE_PUT = "put"


def serve_config_action(config: Obj, applied: str | None, want: str, details: Obj) -> str:
    """What to do about the Serve config on one cluster: ``SERVE_PUT`` when it has not got
    the goal (or runs no application at all, e.g. after a head restart without GCS FT),
    ``SERVE_RECORD`` when it runs the goal but ``applied`` does not say so (after a restart,
    or a crash right after the PUT), else "" (nothing, also when ``config`` is empty: not to
    be applied). upstream: ``checkIfNeedSubmitServeApplications``, whose in-memory cache is
    ``applied`` here, with Serve's own report consulted before a PUT."""
    if not config:
        return ""
    no_apps = not (details.get("applications") or {})
    if applied != want and not no_apps and rsb.runs_serve_config(details, config):
        return SERVE_RECORD
    if applied != want or no_apps:
        return SERVE_PUT
    return ""


def serve_state(details: Obj, capacity: int | None) -> ServeState:
    """What the dashboard's Serve details say: ready iff every application is RUNNING, and
    (when the pass tracks a capacity) the ``target_capacity`` Serve reports.
    upstream: ``getAndCheckServeStatus``."""
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


def serve_label(*, exclude_head: bool, probed: bool | None, apps: dict[str, Obj] | None) -> str:
    """The head pod's ``ray.io/serve`` label: the proxy probe's verdict (an unreachable proxy is
    unhealthy); with no probe run (None: none configured, or no pod IP yet) whether every
    application is RUNNING; always "false" when the head is excluded from the serve Service.
    upstream: ``updateHeadPodServeLabel``."""
    if exclude_head:
        return "false"
    healthy = probed
    if healthy is None:
        healthy = apps is not None and rsb.all_apps_running(apps)
    return "true" if healthy else "false"


# ---------------------------------------------------------------------- status


def side_status(old: Obj | None, cluster: Obj, serve: ServeState) -> Obj:
    """One side (active or pending) of the status after a pass: the cluster's name and status,
    and what its dashboard said (kept from before when it could not be asked). What Serve
    reports as ``target_capacity`` wins over the status: a PUT whose status write was lost is
    then neither repeated nor stepped over. upstream: the per-side part of ``calculateStatus``."""
    out = copy.deepcopy(old or {})
    out["rayClusterName"] = cluster["metadata"]["name"]
    if serve.apps is not None:
        out["applicationStatuses"] = serve.apps
    if serve.capacity is not None:
        out["targetCapacity"] = serve.capacity
    cluster_status = cluster.get("status")
    if cluster_status:
        out["rayClusterStatus"] = copy.deepcopy(cluster_status)
    return out


def waiting_for(
    svc: Obj, pending: Obj | None, apps: dict[str, Obj] | None, detail: str = ""
) -> str:
    """Beyond upstream: what the pending cluster is waiting for, in plain words; ``detail``
    is what the traffic switch itself waits for (endpoints, Gateway, migration steps)."""
    name = pending_name_of(svc)
    if not name:
        return ""
    if pending is None:
        return f"creating RayCluster {name}"
    if not head_ready(pending):
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
        return f"waiting for Serve applications on RayCluster {name} to be RUNNING: " + ", ".join(
            not_running
        )
    return detail or f"switching traffic to RayCluster {name}"


def upgrade_detail(svc: Obj, pending: Obj | None, apps: dict[str, Obj] | None, detail: str) -> str:
    """The text appended to the UpgradeInProgress message: ``waiting_for``, with the switch's
    own ``detail`` added when that does not already say it."""
    waiting = waiting_for(svc, pending, apps, detail)
    if detail and detail not in waiting:
        waiting = with_detail(waiting, detail) if waiting else detail
    return waiting


def comparable(status: Obj) -> Obj:
    """The status without what alone never warrants a write: the clusters' own statuses, the
    update time and transition times. upstream: ``inconsistentRayServiceStatuses``."""
    out = copy.deepcopy(status)
    out.pop("lastUpdateTime", None)
    for side in (ACTIVE, PENDING):
        if isinstance(out.get(side), dict):
            out[side].pop("rayClusterStatus", None)
    for cond in out.get("conditions") or []:
        cond.pop("lastTransitionTime", None)
    return out
