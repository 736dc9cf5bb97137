"""RayService status conditions: pure functions of the observed clusters and endpoints.

upstream: ``calculateConditions`` (rayservice_controller.go).

Invariants and failure modes:
- ``Ready`` and ``UpgradeInProgress`` both exist from the first status on. Until a cluster
  first serves they are False with reason ``Initializing`` and the message "RayService is
  initializing", whether or not a pending cluster exists yet; ``UpgradeInProgress`` only turns
  ``Unknown``/``NoActiveCluster`` when a RayService that is past initializing has lost its
  active cluster (which upstream treats as a bug to report).
- ``Ready`` follows the serve endpoints of the active cluster; it only falls back to
  ``ZeroServeEndpoints`` after having been True, so a failed initialization keeps its own
  reason (``InitializingTimeout``, validation failures) instead of being overwritten.
- Beyond upstream, the "both clusters exist" message says what the pending cluster is waiting
  for (``waiting``), so a stalled upgrade explains itself in ``kubectl describe``.
"""

from __future__ import annotations

from typing import Any

from kuberay.api import constants as c
from kuberay.controllers.raycluster_status import find_condition, set_condition

Obj = dict[str, Any]

MSG_INITIALIZING = "RayService is initializing"
MSG_NON_ZERO_ENDPOINTS = "Number of serve endpoints is greater than 0"
MSG_ZERO_ENDPOINTS = "Number of serve endpoints dropped to 0"
MSG_BOTH_CLUSTERS = "Both active and pending Ray clusters exist"
MSG_NO_PENDING = "Active Ray cluster exists and no pending Ray cluster"
MSG_NO_ACTIVE = (
    "No active Ray cluster exists, and the RayService is not initializing. "
    "Please open a GitHub issue in the KubeRay repository."
)


def with_detail(message: str, detail: str) -> str:
    return f"{message}; {detail}" if detail else message


def init_conditions(conditions: list[Obj], generation: int | None, now: str) -> None:
    """Seeds both conditions as initializing; a validation failure that has since been fixed
    starts over from initializing too."""
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
    """Updates ``status.conditions`` and ``status.serviceStatus`` in place."""
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
