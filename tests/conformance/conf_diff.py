"""Normalising two operators' objects so that only real behaviour differences remain.

Both operators' objects are read back from the same apiserver, so API defaulting is the same on
both sides; what differs without meaning is removed here: identities and versions (uids,
resourceVersions, timestamps), the namespace each operator was given, random name suffixes, pod
IPs, and Go's encoding of empty structs and lists (``resources: {}``), which the apiserver
stores as written. Everything else is compared.
"""

from __future__ import annotations

import json
import re
from typing import Any

Obj = dict[str, Any]

_DROPPED_META = (
    "uid",
    "resourceVersion",
    "creationTimestamp",
    "generation",
    "managedFields",
    "selfLink",
    "deletionTimestamp",
    "deletionGracePeriodSeconds",
    "generateName",  # ours names pods before creating them (README: Migrating)
)
_TIME_KEYS = {
    "lastTransitionTime",
    "lastUpdateTime",
    "startTime",
    "endTime",
    "lastScheduleTime",
    "startedAt",
    "finishedAt",
    "lastProbeTime",
    "lastHeartbeatTime",
}
_IP = re.compile(r"\b\d{1,3}\.\d{1,3}\.\d{1,3}\.\d{1,3}\b")
_PATTERNS = (
    (re.compile(r"\b[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}\b"), "<uid>"),
    (re.compile(r"\b\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d(\.\d+)?Z\b"), "<time>"),
    (re.compile(r"\bkube-api-access-[a-z0-9]{5}\b"), "kube-api-access-<rand>"),
    # The operators' version stamps (ray.io/kuberay-version, usage-stats tags).
    (re.compile(r"\bv1\.(6\.1|7\.0)\b"), "<kuberay-version>"),
)


def _prune(node: Any) -> Any:
    """Drops empty dicts and lists (Go's encoding of empty structs and nil slices) and the
    zero values ``omitempty`` leaves out (0, ""); ``false`` stays, it is often meaningful."""
    if isinstance(node, dict):
        out = {k: _prune(v) for k, v in node.items()}
        return {
            k: v
            for k, v in out.items()
            if not _empty(v) and not (k in _QUANTITY_TOTALS and v == "0")
        }
    if isinstance(node, list):
        return [_prune(v) for v in node]
    return node


# Go writes a zero resource.Quantity as "0" even in an otherwise empty status.
_QUANTITY_TOTALS = {"desiredCPU", "desiredGPU", "desiredMemory", "desiredTPU"}


def _empty(value: Any) -> bool:
    if isinstance(value, bool):
        return False
    return value is None or value in ("", 0) or value == {} or value == []


_ALLOCATED = {"nodePort", "healthCheckNodePort", "clusterIP", "clusterIPs"}


def _rewrite(node: Any, replace: list[tuple[str, str]], key: str = "") -> Any:
    if isinstance(node, dict):
        out: dict[str, Any] = {}
        for k, v in node.items():
            if k in _ALLOCATED and v not in (None, "None", ["None"]):
                out[k] = "<allocated>"  # chosen by the apiserver
            elif k == "endpoints" and isinstance(v, dict):
                # status.endpoints: a NodePort Service's allocated ports
                out[k] = {
                    n: "<allocated>" if str(p).isdigit() and 30000 <= int(p) <= 32767 else p
                    for n, p in v.items()
                }
            else:
                out[k] = _rewrite(v, replace, k)
        return out
    if isinstance(node, list):
        return [_rewrite(v, replace, key) for v in node]
    if isinstance(node, str):
        if key in _TIME_KEYS:
            return "<time>"
        for old, new in replace:
            node = node.replace(old, new)
        for pattern, generic in _PATTERNS:
            node = pattern.sub(generic, node)
        return _IP.sub("<ip>", node)
    return node


def normalize(obj: Obj, namespace: str, generated: list[str]) -> Obj:
    """``obj`` without identities, its namespace as ``<ns>`` and every name in ``generated``
    (names the operator chose with a random suffix) as ``<prefix>-<rand>``."""
    out: Obj = json.loads(json.dumps(obj))
    meta = out.setdefault("metadata", {})
    for key in _DROPPED_META:
        meta.pop(key, None)
    for ref in meta.get("ownerReferences") or []:
        ref.pop("uid", None)
    if out.get("kind") == "Secret":
        # generated credentials (the auth token): random on both sides
        out["data"] = {k: "<secret>" for k in out.get("data") or {}}
    if out.get("kind") == "Pod":
        # KWOK plays the kubelet: only the phase is the operator's concern.
        out["status"] = {"phase": (out.get("status") or {}).get("phase")}
        spec = out.get("spec") or {}
        spec.pop("nodeName", None)
    replace = [(name, generic_name(name)) for name in sorted(generated, key=len, reverse=True)]
    replace.append((namespace, "<ns>"))
    return dict(_prune(_rewrite(out, replace)))


def generic_name(name: str) -> str:
    """``raycluster-x-head-ab3c9`` -> ``raycluster-x-head-<rand>``."""
    return name[:-5] + "<rand>" if len(name) > 6 and name[-6] == "-" else name


def diff(ours: Any, theirs: Any, path: str = "") -> list[str]:
    """Every difference as ``path: ours X, upstream Y`` (``-`` for absent)."""
    if isinstance(ours, dict) and isinstance(theirs, dict):
        out: list[str] = []
        for key in sorted(set(ours) | set(theirs)):
            sub = f"{path}.{key}" if path else str(key)
            if key not in ours:
                out.append(f"{sub}: only upstream {_short(theirs[key])}")
            elif key not in theirs:
                out.append(f"{sub}: only ours {_short(ours[key])}")
            else:
                out += diff(ours[key], theirs[key], sub)
        return out
    if (
        isinstance(ours, list)
        and isinstance(theirs, list)
        and ours
        and theirs
        and all(isinstance(x, dict) and "name" in x for x in ours + theirs)
    ):
        mine = {x["name"]: x for x in ours}
        other = {x["name"]: x for x in theirs}
        if len(mine) == len(ours) and len(other) == len(theirs):
            order: list[str] = []
            common = [n for n in mine if n in other]
            if common != [n for n in other if n in mine]:
                order.append(f"{path}: order differs")
            return order + diff(mine, other, path)
    if isinstance(ours, list) and isinstance(theirs, list) and len(ours) == len(theirs):
        out = []
        for i, (a, b) in enumerate(zip(ours, theirs, strict=True)):
            out += diff(a, b, f"{path}[{i}]")
        return out
    if isinstance(ours, str) and isinstance(theirs, str) and ours != theirs:
        # Long texts (commands, scripts): show where they start to differ.
        at = next((i for i, (a, b) in enumerate(zip(ours, theirs, strict=False)) if a != b), None)
        at = min(len(ours), len(theirs)) if at is None else at
        start = max(0, at - 20)
        return [
            f"{path}: ours {_short(ours[start : start + 120])}, "
            f"upstream {_short(theirs[start : start + 120])} (from {start})"
        ]
    if ours != theirs:
        return [f"{path}: ours {_short(ours)}, upstream {_short(theirs)}"]
    return []


def _short(value: Any) -> str:
    text = json.dumps(value, sort_keys=True)
    return text if len(text) <= 160 else text[:157] + "..."
