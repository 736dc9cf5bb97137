"""Incremental RayService upgrades (``NewClusterWithIncrementalUpgrade``): pure decisions of one
pass, from the status, the observed Gateway and HTTPRoute, what Serve reported and the clock
reading passed in. The reconciler does the writes these decisions ask for.

upstream: ``checkIfNeedTargetCapacityUpdate``, ``reconcileServeTargetCapacity``,
``calculateTrafficRoutedPercent`` and ``createHTTPRoute`` (rayservice_controller.go); the
arithmetic of one capacity or traffic step is in ``kuberay.builders.gateway``.

Invariants and failure modes:
- One move per pass at most: a plan asks either for one ``target_capacity`` PUT or for one
  traffic step, never both, and only while the Gateway reports Accepted+Programmed and the
  route Accepted+ResolvedRefs; otherwise the plan says what is missing and moves nothing.
- The status is the stepping state, and what was really applied wins over it: weights found
  on the route that differ from the status are adopted (with ``now`` as the migration time, so
  the next step waits a full interval), and the capacity Serve reports is adopted by
  ``side_status``. A crash between a write and the status update therefore never leads to a
  repeated PUT or a double step.
- Traffic only moves to a cluster whose Serve applications all run and which has at least one
  serving pod, and never beyond that cluster's capacity.
- A rollback runs the same stepping with the roles swapped (the active cluster gains); it
  starts when the goal stops being the pending cluster's spec and is cancelled when the goal
  returns to it. A migration completes (promotion, or the end of a rollback) exactly when the
  losing cluster has capacity 0 and the gaining one all traffic.
"""

from __future__ import annotations

import copy
from dataclasses import dataclass

from kuberay.api import constants as c
from kuberay.api import features
from kuberay.api.features import FeatureGates
from kuberay.builders import gateway as gwb
from kuberay.builders import rayservice as rsb
from kuberay.controllers.common import parse_time, rfc3339
from kuberay.controllers.rayservice_status import (
    ACTIVE,
    PENDING,
    drop_condition,
    endpoints_wait,
    is_true,
    serve_port,
    set_service_condition,
)
from kuberay.runtime.store import Obj


def is_incremental(svc: Obj, gates: FeatureGates) -> bool:
    """The RayService asks for incremental upgrades and the gate allows them.
    upstream: ``IsIncrementalUpgradeEnabled`` (utils)."""
    strategy = (svc["spec"].get("upgradeStrategy") or {}).get("type")
    return strategy == c.RAYSERVICE_UPGRADE_INCREMENTAL and gates.enabled(
        features.RAY_SERVICE_INCREMENTAL_UPGRADE
    )


def side_capacity(svc: Obj, side: str, default: int) -> int:
    """``targetCapacity`` of one side of the status, ``default`` when unset or invalid."""
    value = (svc["status"].get(side) or {}).get("targetCapacity")
    return gwb.normalize_capacity(value, default)


def reconcile_rollback_state(svc: Obj, active: Obj, pending: Obj, now: float) -> bool:
    """True while the upgrade runs backwards: the goal is the active cluster's spec again, or
    a third spec (rolled back first, then upgraded to from the active cluster). Sets
    RollbackInProgress when a rollback starts and drops it when the goal returns to the
    pending cluster. Beyond upstream (which has no rollback at the version ported)."""
    if rsb.matches_goal(svc, pending) or rsb.only_groups_appended(svc, pending):
        drop_condition(svc, c.COND_ROLLBACK_IN_PROGRESS)  # the goal came back
        return False
    if not is_true(svc, c.COND_ROLLBACK_IN_PROGRESS):
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
        set_service_condition(
            svc,
            c.COND_ROLLBACK_IN_PROGRESS,
            "True",
            c.REASON_DESIRED_CLUSTER_SPEC_CHANGED,
            message,
            now,
        )
    return True


def set_traffic(svc: Obj, pending_percent: int, now: float) -> None:
    """Records a traffic split on both sides, with ``now`` as their migration time.
    upstream: the TrafficRoutedPercent / LastTrafficMigratedTime update in ``calculateStatus``."""
    status = svc["status"]
    when = rfc3339(now)
    for side, value in (
        (status[ACTIVE], gwb.FULL - pending_percent),
        (status[PENDING], pending_percent),
    ):
        side["trafficRoutedPercent"] = value
        side["lastTrafficMigratedTime"] = when


@dataclass(frozen=True)
class Step:
    """The plan of one pass. ``put_side`` (a status side key) names the cluster whose
    ``target_capacity`` is to be PUT as ``put_capacity``; the reconciler then records it on
    that side when the PUT succeeded and comes back at once (else on the usual requeue).
    Without a PUT, ``wait`` is when the next traffic step may be taken (None: nothing is
    timed). ``detail`` says what the switch is doing or waiting for."""

    detail: str = ""
    wait: float | None = None
    put_side: str = ""
    put_capacity: int = 0


def plan_step(
    svc: Obj,
    active_name: str,
    pending_name: str,
    *,
    rolling_back: bool,
    gaining_ready: bool,
    gaining_endpoints: int,
    gateway: Obj | None,
    route: Obj | None,
    now: float,
) -> Step:
    """At most one move toward the gaining cluster (pending; active in a rollback), and only
    through a Gateway and HTTPRoute their controller reports as working. Updates the traffic
    fields of the status in place (adopting the route's weights when they are ahead of it,
    or the one traffic step taken). ``gaining_ready``: every Serve application on the gaining
    cluster is RUNNING; ``gaining_endpoints``: its serving pods.
    upstream: ``checkIfNeedTargetCapacityUpdate``, ``reconcileServeTargetCapacity`` and
    ``calculateTrafficRoutedPercent``."""
    status = svc["status"]
    ns, name = svc["metadata"]["namespace"], svc["metadata"]["name"]
    a_side, p_side = status[ACTIVE], status[PENDING]
    p_side.setdefault("targetCapacity", 0)
    p_traffic = gwb.normalize_capacity(p_side.get("trafficRoutedPercent"), 0)
    observed = gwb.route_weights(route, active_name, pending_name)
    if observed is not None and observed[1] != p_traffic:
        # The route is ahead of the status (its write happened, the status write did not):
        # believe the route and wait a full interval from now.
        p_traffic = observed[1]
        set_traffic(svc, p_traffic, now)
    else:
        a_side["trafficRoutedPercent"] = gwb.FULL - p_traffic
        p_side["trafficRoutedPercent"] = p_traffic
    missing = gwb.gateway_not_ready(gateway)
    if missing:
        return Step(
            f"waiting for Gateway {ns}/{gwb.gateway_name(name)} to be " + " and ".join(missing)
        )
    missing = gwb.httproute_not_ready(route, gwb.gateway_name(name))
    if missing:
        return Step(
            f"waiting for HTTPRoute {ns}/{gwb.httproute_name(name)} to be " + " and ".join(missing)
        )
    if rolling_back:
        g_key, l_key, g_name, l_name = ACTIVE, PENDING, active_name, pending_name
    else:
        g_key, l_key, g_name, l_name = PENDING, ACTIVE, pending_name, active_name
    g_side, l_side = status[g_key], status[l_key]
    m = gwb.Migration(
        gwb.normalize_capacity(g_side.get("targetCapacity"), 0),
        gwb.normalize_capacity(l_side.get("targetCapacity"), 0),
        gwb.normalize_capacity(g_side.get("trafficRoutedPercent"), 0),
    )
    if m.complete:
        return Step()
    if not gaining_ready:
        return Step(f"waiting for Serve applications on RayCluster {g_name} to be RUNNING")
    opts = gwb.upgrade_options(svc)
    want_gain, want_lose = gwb.next_capacities(m, opts.max_surge_percent)
    for key, cname, old, new in (
        (g_key, g_name, m.gaining_capacity, want_gain),
        (l_key, l_name, m.losing_capacity, want_lose),
    ):
        if new != old:
            return Step(
                f"setting target_capacity of RayCluster {cname} to {new}%",
                put_side=key,
                put_capacity=new,
            )
    if gaining_endpoints == 0:
        return Step(endpoints_wait(g_name))
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
    traffic, wait = gwb.next_traffic(m, opts.step_size_percent, opts.interval_seconds, last, now)
    if traffic != m.gaining_traffic:
        set_traffic(svc, gwb.FULL - traffic if rolling_back else traffic, now)
    verb = "rolling traffic back to" if rolling_back else "moving traffic to"
    return Step(
        f"{verb} RayCluster {g_name}: {traffic}% routed, target capacity "
        f"{m.gaining_capacity}% (RayCluster {l_name}: {m.losing_capacity}%)",
        wait,
    )


def complete_migration(svc: Obj, rolling_back: bool) -> bool:
    """True when the migration has just completed, and the status says so: forward, the
    pending side becomes the active one; a rollback drops the pending side and
    RollbackInProgress. Complete means the losing cluster is at capacity 0 and the gaining
    one takes all traffic. upstream: ``IsIncrementalUpgradeComplete`` (utils) and the
    promotion in ``reconcilePromotionAndServingStatus``."""
    status = svc["status"]
    a_side, p_side = status[ACTIVE], status[PENDING]
    if rolling_back:
        migration = gwb.Migration(
            side_capacity(svc, ACTIVE, gwb.FULL),
            side_capacity(svc, PENDING, 0),
            int(a_side.get("trafficRoutedPercent") or 0),
        )
    else:
        migration = gwb.Migration(
            side_capacity(svc, PENDING, 0),
            side_capacity(svc, ACTIVE, gwb.FULL),
            int(p_side.get("trafficRoutedPercent") or 0),
        )
    if not migration.complete:
        return False
    if rolling_back:
        status[PENDING] = {}
        drop_condition(svc, c.COND_ROLLBACK_IN_PROGRESS)
    else:
        status[ACTIVE] = p_side
        status[PENDING] = {}
    return True


def route_backends(status: Obj, active: Obj, pending: Obj | None) -> list[gwb.Backend]:
    """The HTTPRoute's backends: each cluster's own serve Service with the weight the status
    routes to it. upstream: the backendRefs of ``createHTTPRoute``."""
    return [
        gwb.Backend(
            str(cluster["metadata"]["name"]),
            serve_port(cluster),
            int(side.get("trafficRoutedPercent") or 0),
        )
        for cluster, side in ((active, status[ACTIVE]), (pending, status.get(PENDING) or {}))
        if cluster is not None
    ]


def capacity_config(svc: Obj, applied: str | None, deployed: Obj) -> Obj:
    """The Serve config to PUT for a ``target_capacity`` change (without the capacity): the
    goal's when ``applied`` (the hash of the config last PUT to the cluster) says it runs the
    goal, else what the dashboard reports as deployed, so that a capacity change never
    redeploys other applications. Empty when there is nothing to PUT.
    upstream: the config choice of ``applyServeTargetCapacity``."""
    if applied and applied == rsb.serve_config_hash(svc):
        return rsb.serve_config(svc) or {}
    return copy.deepcopy(deployed)
