"""Replica and resource arithmetic behind RayCluster status and batch-scheduler gangs.

Replica counts follow upstream exactly: a group's desired count is ``replicas`` clamped into
``[minReplicas, maxReplicas]`` (max wins when min > max; 0 for a suspended group), times
``numOfHosts``; min/max totals skip suspended groups and the max total saturates at int32 max.
Resource totals use *unclamped* ``replicas`` (what the spec asks for) and add the head pod.
A negative ``replicas`` is accepted, as upstream does (only negative min/max are invalid), and
clamped like any other value; ``replica_warnings`` names each such group, the value given and
the value used, so the clamp is reported (event and condition) instead of silent.
Per container, requests are used with limits filling in missing keys.

Quantities are summed exactly and printed in Kubernetes canonical form; GPU is the sum of every
key ending in ``gpu`` or naming a MIG slice, TPU only ``google.com/tpu``. Unparseable
quantities are ignored here (status must still be written).
"""

from __future__ import annotations

import re
from typing import Any, Final

from kuberay.api import constants as c
from kuberay.api.quantity import Quantity, format_quantity, parse_quantity, pod_resources

# A Kubernetes object as stored: the one alias, imported by the builders too.
JsonDict = dict[str, Any]
_MIG_KEY: Final = re.compile(r"^nvidia\.com/mig-\d+g\.\d+gb$")


def owner_reference(owner: JsonDict, kind: str = c.KIND_RAYCLUSTER) -> JsonDict:
    """The controller reference every object made for a ray.io object (a RayCluster unless
    ``kind`` says otherwise) carries."""
    meta = _dict(owner.get("metadata"))
    return {
        "apiVersion": c.API_VERSION,
        "kind": kind,
        "name": meta.get("name"),
        "uid": meta.get("uid"),
        "controller": True,
        "blockOwnerDeletion": True,
    }


def is_gpu_resource_key(key: str) -> bool:
    return key.endswith("gpu") or _MIG_KEY.match(key) is not None


def _dict(value: Any) -> JsonDict:
    return value if isinstance(value, dict) else {}


def head_spec(cluster: JsonDict) -> JsonDict:
    return _dict(_dict(cluster.get("spec")).get("headGroupSpec"))


def worker_groups(cluster: JsonDict) -> list[JsonDict]:
    groups = _dict(cluster.get("spec")).get("workerGroupSpecs")
    return [_dict(g) for g in groups] if isinstance(groups, list) else []


INT32_MAX: Final = 2**31 - 1
TPU_KEY: Final = "google.com/tpu"


def _int(value: object, default: int) -> int:
    if value is None:
        return default
    try:
        return int(value)  # type: ignore[call-overload, no-any-return]
    except (TypeError, ValueError):
        return default


def _suspended(group: JsonDict) -> bool:
    return group.get("suspend") is True


def _hosts(group: JsonDict) -> int:
    return max(_int(group.get("numOfHosts"), 1), 1)


def desired_worker_replicas(group: JsonDict) -> int:
    """Replica count for one group, before multiplying by ``numOfHosts``."""
    if _suspended(group):
        return 0
    minimum = _int(group.get("minReplicas"), 0)
    maximum = _int(group.get("maxReplicas"), INT32_MAX)
    replicas = group.get("replicas")
    if minimum > maximum:
        return maximum
    if replicas is None or _int(replicas, 0) < minimum:
        return minimum
    return min(_int(replicas, 0), maximum)


def replica_warnings(cluster: JsonDict) -> list[str]:
    """One line per worker group whose ``replicas`` is negative: the group, the value given and
    the replica count used instead (the clamp of ``desired_worker_replicas``, ignoring a
    group's own ``suspend``, which only pauses it). Empty when every group is fine."""
    out: list[str] = []
    for group in worker_groups(cluster):
        replicas = group.get("replicas")
        if replicas is None or _int(replicas, 0) >= 0:
            continue
        used = desired_worker_replicas({**group, "suspend": False})
        bound = "minReplicas" if used == _int(group.get("minReplicas"), 0) else "maxReplicas"
        out.append(
            f"worker group {group.get('groupName', '')!r}: replicas {_int(replicas, 0)} is"
            f" negative, using {used} ({bound})"
        )
    return out


def desired_worker_pods(group: JsonDict) -> int:
    """Pods one group should have: desired replicas times ``numOfHosts``."""
    return desired_worker_replicas(group) * _hosts(group)


def total_desired_workers(cluster: JsonDict) -> int:
    return sum(desired_worker_replicas(g) * _hosts(g) for g in worker_groups(cluster))


def min_worker_replicas(cluster: JsonDict) -> int:
    total = sum(
        _int(g.get("minReplicas"), 0) * _hosts(g)
        for g in worker_groups(cluster)
        if not _suspended(g)
    )
    return min(total, INT32_MAX)


def max_worker_replicas(cluster: JsonDict) -> int:
    total = sum(
        _int(g.get("maxReplicas"), INT32_MAX) * _hosts(g)
        for g in worker_groups(cluster)
        if not _suspended(g)
    )
    return min(total, INT32_MAX)


def _accumulate(into: dict[str, Quantity], add: dict[str, Quantity], times: int) -> None:
    if times <= 0:
        return  # no pod of this kind: the key must not appear (its format would leak)
    for key, quantity in add.items():
        scaled = Quantity(quantity.value * times, quantity.format)
        into[key] = into[key] + scaled if key in into else scaled


def _cluster_resources(cluster: JsonDict, count_field: str) -> dict[str, Quantity]:
    totals: dict[str, Quantity] = {}
    _accumulate(totals, pod_resources(_dict(head_spec(cluster).get("template"))), 1)
    for group in worker_groups(cluster):
        if _suspended(group):
            continue
        count = max(_int(group.get(count_field), 0), 0) * _hosts(group)
        _accumulate(totals, pod_resources(_dict(group.get("template"))), count)
    return totals


def desired_resources(cluster: JsonDict) -> dict[str, Quantity]:
    return _cluster_resources(cluster, "replicas")


def minimum_resources(cluster: JsonDict) -> dict[str, Quantity]:
    """The head plus every group's ``minReplicas`` pods: what an autoscaling cluster needs at
    the least (suspended groups need nothing)."""
    return _cluster_resources(cluster, "minReplicas")


def pod_resource_totals(cluster: JsonDict) -> dict[str, str]:
    totals = desired_resources(cluster)
    zero = Quantity(parse_quantity("0").value)
    gpu = zero
    for key, quantity in totals.items():
        if is_gpu_resource_key(key):
            gpu = gpu + quantity
    return {
        "desiredCPU": format_quantity(totals.get("cpu", zero)),
        "desiredMemory": format_quantity(totals.get("memory", zero)),
        "desiredGPU": format_quantity(gpu),
        "desiredTPU": format_quantity(totals.get(TPU_KEY, zero)),
    }
