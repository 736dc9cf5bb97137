"""Pure pieces of the incremental (Gateway API) RayService upgrade: the Gateway, the HTTPRoute,
the per-cluster serve Services, and the stepping arithmetic for Serve ``target_capacity`` and
route weights (upstream: the Gateway and HTTPRoute
builders of rayservice_controller.go, v1.7).

Invariants and failure modes:
- No I/O and no clock: every decision takes ``now`` and the persisted status values as inputs,
  so a pass repeated after a crash decides exactly what the interrupted pass decided (which is
  what makes the dashboard PUT and the HTTPRoute write safe to redo).
- Capacities and weights are integers in [0, 100]; active + pending traffic is always 100.
- Stepping is one move per call: either one capacity change (the gaining side up by
  ``maxSurgePercent`` while the total is <= 100 and its traffic has caught up with its capacity,
  else the losing side down by ``maxSurgePercent``) or one traffic step (``stepSizePercent``,
  at most up to the gaining side's capacity, once ``intervalSeconds`` have passed). The same
  functions run a rollback with the roles swapped (the active cluster gains).
- Drift checks compare only the fields the operator sets; what the API server defaults
  (listener ``allowedRoutes``, backendRef ``group``/``kind``, parentRef ``group``/``kind``) is
  never a reason to write.
"""

from __future__ import annotations

import copy
from dataclasses import dataclass
from typing import Any

from kuberay.api import constants as c
from kuberay.builders import names
from kuberay.builders.common import JsonDict, as_dict, as_list, spec_of
from kuberay.builders.common import owner_reference as cluster_owner_reference
from kuberay.builders.options import BuildOptions
from kuberay.builders.rayservice import (
    build_serve_service_for,
    originated_labels,
    owner_reference,
    service_name,
)

GATEWAY_API_VERSION = "gateway.networking.k8s.io/v1"
FULL = 100
GATEWAY_READY_CONDITIONS = ("Accepted", "Programmed")
ROUTE_READY_CONDITIONS = ("Accepted", "ResolvedRefs")


def gateway_name(svc_name: str) -> str:
    return f"{svc_name}-gateway"


def httproute_name(svc_name: str) -> str:
    return f"{svc_name}-httproute"


@dataclass(frozen=True)
class UpgradeOptions:
    max_surge_percent: int
    step_size_percent: int
    interval_seconds: int
    gateway_class_name: str


def upgrade_options(svc: JsonDict) -> UpgradeOptions:
    """``upgradeStrategy.clusterUpgradeOptions`` with upstream's default (maxSurge 100);
    validation has already rejected a missing block.
    upstream: GetRayServiceClusterUpgradeOptions."""
    options = as_dict(as_dict(spec_of(svc).get("upgradeStrategy")).get("clusterUpgradeOptions"))
    surge = options.get("maxSurgePercent")
    return UpgradeOptions(
        max_surge_percent=FULL if surge is None else int(surge),
        step_size_percent=int(options.get("stepSizePercent") or 0),
        interval_seconds=int(options.get("intervalSeconds") or 0),
        gateway_class_name=str(options.get("gatewayClassName") or ""),
    )


# --------------------------------------------------------------------------- objects


def _meta(svc: JsonDict, name: str) -> JsonDict:
    return {
        "name": name,
        "namespace": as_dict(svc.get("metadata")).get("namespace"),
        "labels": {**originated_labels(service_name(svc)), c.LABEL_CREATED_BY: c.CREATED_BY},
        "ownerReferences": [owner_reference(svc)],
    }


def build_gateway(svc: JsonDict) -> JsonDict:
    """``<svc>-gateway``: one HTTP listener on port 80 of the configured GatewayClass.
    upstream: createGateway."""
    return {
        "apiVersion": GATEWAY_API_VERSION,
        "kind": "Gateway",
        "metadata": _meta(svc, gateway_name(service_name(svc))),
        "spec": {
            "gatewayClassName": upgrade_options(svc).gateway_class_name,
            "listeners": [
                {
                    "name": c.GATEWAY_LISTENER_NAME,
                    "protocol": "HTTP",
                    "port": c.GATEWAY_LISTENER_PORT,
                }
            ],
        },
    }


@dataclass(frozen=True)
class Backend:
    cluster: str
    port: int
    weight: int


def build_httproute(svc: JsonDict, backends: list[Backend]) -> JsonDict:
    """``<svc>-httproute``: everything under ``/`` to the clusters' serve Services by weight.
    upstream: createHTTPRoute."""
    name = service_name(svc)
    ns = as_dict(svc.get("metadata")).get("namespace")
    refs = [
        {
            "name": names.serve_service_name(b.cluster),
            "namespace": ns,
            "port": b.port,
            "weight": b.weight,
        }
        for b in backends
    ]
    return {
        "apiVersion": GATEWAY_API_VERSION,
        "kind": "HTTPRoute",
        "metadata": _meta(svc, httproute_name(name)),
        "spec": {
            "parentRefs": [{"name": gateway_name(name), "namespace": ns}],
            "rules": [
                {
                    "matches": [{"path": {"type": "PathPrefix", "value": "/"}}],
                    "backendRefs": refs,
                }
            ],
        },
    }


def build_cluster_serve_service(
    svc: JsonDict, cluster: JsonDict, options: BuildOptions
) -> JsonDict:
    """``<cluster>-serve-svc``: the RayService's serve Service for one cluster (the HTTPRoute's
    backend), owned by that cluster so it goes away with it."""
    service = build_serve_service_for(svc, cluster, options)
    cluster_name = str(as_dict(cluster.get("metadata")).get("name") or "")
    service["metadata"]["name"] = names.serve_service_name(cluster_name)
    service["metadata"]["ownerReferences"] = [cluster_owner_reference(cluster)]
    return service


def _managed_gateway(obj: JsonDict) -> Any:
    spec = as_dict(obj.get("spec"))
    listeners = [
        (as_dict(x).get("name"), as_dict(x).get("protocol"), as_dict(x).get("port"))
        for x in as_list(spec.get("listeners"))
    ]
    return spec.get("gatewayClassName"), listeners, _owned_meta(obj)


def _managed_route(obj: JsonDict) -> Any:
    spec = as_dict(obj.get("spec"))
    parents = [
        (as_dict(p).get("name"), as_dict(p).get("namespace")) for p in spec.get("parentRefs") or []
    ]
    rules = []
    for rule in as_list(spec.get("rules")):
        rule = as_dict(rule)
        matches = [
            (
                as_dict(as_dict(m).get("path")).get("type"),
                as_dict(as_dict(m).get("path")).get("value"),
            )
            for m in as_list(rule.get("matches"))
        ]
        refs = [
            (
                as_dict(r).get("name"),
                as_dict(r).get("namespace"),
                as_dict(r).get("port"),
                as_dict(r).get("weight"),
            )
            for r in as_list(rule.get("backendRefs"))
        ]
        rules.append((matches, refs))
    return parents, rules, _owned_meta(obj)


def _owned_meta(obj: JsonDict) -> Any:
    meta = as_dict(obj.get("metadata"))
    labels = as_dict(meta.get("labels"))
    ours = (c.LABEL_ORIGINATED_FROM_CR_NAME, c.LABEL_ORIGINATED_FROM_CRD, c.LABEL_CREATED_BY)
    return {k: labels.get(k) for k in ours}


def gateway_drifted(have: JsonDict, want: JsonDict) -> bool:
    return bool(_managed_gateway(have) != _managed_gateway(want))


def httproute_drifted(have: JsonDict, want: JsonDict) -> bool:
    return bool(_managed_route(have) != _managed_route(want))


def drift_patch(want: JsonDict) -> JsonDict:
    """A merge patch that puts the operator's fields back (lists are replaced whole)."""
    return {
        "metadata": {"labels": copy.deepcopy(want["metadata"]["labels"])},
        "spec": copy.deepcopy(want["spec"]),
    }


# --------------------------------------------------------------------------- readiness


def _true_conditions(conditions: Any) -> set[str]:
    return {
        str(as_dict(x).get("type"))
        for x in as_list(conditions)
        if as_dict(x).get("status") == "True"
    }


def gateway_not_ready(gateway: JsonDict | None) -> list[str]:
    """The readiness conditions (Accepted, Programmed) the Gateway does not report True.
    upstream: IsGatewayReady."""
    if gateway is None:
        return list(GATEWAY_READY_CONDITIONS)
    true = _true_conditions(as_dict(gateway.get("status")).get("conditions"))
    return [x for x in GATEWAY_READY_CONDITIONS if x not in true]


def httproute_not_ready(route: JsonDict | None, gateway: str) -> list[str]:
    """The conditions (Accepted, ResolvedRefs) the route's status for our Gateway lacks.
    upstream: IsHTTPRouteReady."""
    if route is None:
        return list(ROUTE_READY_CONDITIONS)
    for parent in as_list(as_dict(route.get("status")).get("parents")):
        parent = as_dict(parent)
        if as_dict(parent.get("parentRef")).get("name") == gateway:
            true = _true_conditions(parent.get("conditions"))
            return [x for x in ROUTE_READY_CONDITIONS if x not in true]
    return list(ROUTE_READY_CONDITIONS)


def route_weights(route: JsonDict | None, active: str, pending: str) -> tuple[int, int] | None:
    """(active, pending) weights when the route sends to exactly these two clusters, else None.
    upstream: GetWeightsFromHTTPRoute."""
    if route is None:
        return None
    rules = as_list(as_dict(route.get("spec")).get("rules"))
    if len(rules) != 1:
        return None
    weights: dict[str, int] = {}
    for ref in as_list(as_dict(rules[0]).get("backendRefs")):
        ref = as_dict(ref)
        weights[str(ref.get("name"))] = int(ref.get("weight", 1))
    want = (names.serve_service_name(active), names.serve_service_name(pending))
    if set(weights) != set(want) or sum(weights.values()) != FULL:
        return None
    return weights[want[0]], weights[want[1]]


# --------------------------------------------------------------------------- stepping


@dataclass(frozen=True)
class Migration:
    """One direction of a traffic move: ``gaining`` takes over from ``losing``. Forward upgrade:
    gaining = pending; rollback: gaining = active."""

    gaining_capacity: int
    losing_capacity: int
    gaining_traffic: int

    @property
    def complete(self) -> bool:
        return self.losing_capacity <= 0 and self.gaining_traffic >= FULL


def next_capacities(m: Migration, max_surge: int) -> tuple[int, int]:
    """(gaining, losing) target capacities after at most one change.

    Capacity moves only once traffic has caught up with it: the gaining side grows while the
    total is at most 100, the losing side shrinks while the total is above 100.
    """
    gaining, losing = m.gaining_capacity, m.losing_capacity
    if m.gaining_traffic < gaining:
        return gaining, losing
    if gaining + losing <= FULL and gaining < FULL:
        return min(FULL, gaining + max_surge), losing
    if gaining + losing > FULL:
        return gaining, max(0, losing - max_surge)
    return gaining, losing


def next_traffic(
    m: Migration, step: int, interval: float, last_migrated: float | None, now: float
) -> tuple[int, float | None]:
    """(gaining traffic, seconds until the next step may be taken or None when nothing is left
    to do at this capacity). Traffic never exceeds the gaining side's capacity."""
    cap = min(FULL, m.gaining_capacity)
    if m.gaining_traffic >= cap:
        return m.gaining_traffic, None
    if last_migrated is not None and now - last_migrated < interval:
        return m.gaining_traffic, interval - (now - last_migrated)
    return min(cap, m.gaining_traffic + step), float(interval)


def normalize_capacity(value: Any, default: int) -> int:
    """A target capacity from status or the dashboard (Ray reports floats; None means 100)."""
    if value is None:
        return default
    try:
        return max(0, min(FULL, round(float(value))))
    except (TypeError, ValueError):
        return default
