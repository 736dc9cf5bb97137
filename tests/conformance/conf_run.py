"""Applying one batch of inputs to both operators and diffing what each made of it.

An input is one RayCluster, RayJob or RayService. Both operators get it under the same name,
each in its own namespace; once both namespaces are quiet (no object changed for a while, or a
bound passed), every child object is assigned to its input by name (children are named after
their custom resource), normalised, and compared with the other side's. The custom resource's
own status and the reasons of the events about it are compared too.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import re
import time
from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any

from conf_diff import diff, generic_name, normalize

from kuberay.controllers.common import RAYCLUSTERS
from kuberay.controllers.networkpolicy import NETWORKPOLICIES
from kuberay.controllers.raycluster import INGRESSES, ROLEBINDINGS, ROLES
from kuberay.controllers.rayjob import RAYJOBS
from kuberay.controllers.rayservice import RAYSERVICES
from kuberay.runtime.client import (
    JOBS,
    PODS,
    PVCS,
    SECRETS,
    SERVICEACCOUNTS,
    SERVICES,
    KubeClient,
    Resource,
)
from kuberay.runtime.errors import NotFound
from kuberay.runtime.events import EVENTS_V1

Obj = dict[str, Any]
REPLICA_NAME = "ray.io/worker-group-replica-name"

INPUT_KINDS: dict[str, Resource] = {
    "RayCluster": RAYCLUSTERS,
    "RayJob": RAYJOBS,
    "RayService": RAYSERVICES,
}
CHILD_KINDS: tuple[Resource, ...] = (
    PODS,
    SERVICES,
    JOBS,
    INGRESSES,
    SECRETS,
    SERVICEACCOUNTS,
    ROLES,
    ROLEBINDINGS,
    PVCS,
    NETWORKPOLICIES,
    RAYCLUSTERS,
)


@dataclass
class Input:
    """One custom resource to give both operators; ``origin`` names where it came from."""

    origin: str
    body: Obj

    @property
    def kind(self) -> str:
        return str(self.body["kind"])

    @property
    def name(self) -> str:
        return str(self.body["metadata"]["name"])


def _owner(name: str, inputs: Iterable[Input]) -> Input | None:
    """The input a child belongs to: the longest input name that is the child's name or its
    prefix followed by ``-``."""
    best: Input | None = None
    for item in inputs:
        if (name == item.name or name.startswith(item.name + "-")) and (
            best is None or len(item.name) > len(best.name)
        ):
            best = item
    return best


async def apply(kube: KubeClient, items: list[Input], namespace: str) -> None:
    for item in items:
        body = json.loads(json.dumps(item.body))
        body["metadata"].pop("namespace", None)
        await kube.create(INPUT_KINDS[item.kind], body, namespace)


async def _fingerprint(kube: KubeClient, namespaces: list[str]) -> set[tuple[str, str, str]]:
    out: set[tuple[str, str, str]] = set()
    for ns in namespaces:
        for res in (*INPUT_KINDS.values(), *CHILD_KINDS):
            try:
                items = (await kube.list(res, ns))["items"]
            except NotFound:
                continue
            out |= {
                (res.plural, ns + "/" + i["metadata"]["name"], i["metadata"]["resourceVersion"])
                for i in items
            }
    return out


async def wait_quiet(
    kube: KubeClient, namespaces: list[str], quiet: float = 4.0, limit: float = 90.0
) -> bool:
    """Waits until no object of interest changed for ``quiet`` seconds; False at ``limit``."""
    deadline = time.monotonic() + limit
    last = await _fingerprint(kube, namespaces)
    since = time.monotonic()
    while time.monotonic() < deadline:
        await asyncio.sleep(0.5)
        now = await _fingerprint(kube, namespaces)
        if now != last:
            last, since = now, time.monotonic()
        elif time.monotonic() - since >= quiet:
            return True
    return False


async def collect(kube: KubeClient, items: list[Input], namespace: str) -> dict[str, Obj]:
    """Per input, as read: its children, the custom resource and the reasons of its events."""
    children: dict[str, list[Obj]] = {i.name: [] for i in items}
    for res in CHILD_KINDS:
        try:
            listed = (await kube.list(res, namespace))["items"]
        except NotFound:
            continue
        for obj in listed:
            name = obj["metadata"]["name"]
            if res is SECRETS and obj.get("type") == "kubernetes.io/service-account-token":
                continue
            owner = _owner(name, items)
            if owner is None:
                continue
            if res is RAYCLUSTERS and name == owner.name and owner.kind == "RayCluster":
                continue  # the input itself
            obj["kind"] = res.kind
            children[owner.name].append(obj)
    events = (await kube.list(EVENTS_V1, namespace))["items"]
    out: dict[str, Obj] = {}
    for item in items:
        try:
            cr = await kube.get(INPUT_KINDS[item.kind], item.name, namespace)
        except NotFound:
            cr = {"kind": item.kind, "metadata": {}, "status": "<deleted>"}
        reasons = sorted(
            {e["reason"] for e in events if (e.get("regarding") or {}).get("name") == item.name}
        )
        out[item.name] = {"children": children[item.name], "cr": cr, "events": reasons}
    return out


def normalized(raw: Obj, namespace: str) -> Obj:
    """One input's collected objects, normalised and keyed by ``<kind>/<generic name>``."""
    objs: list[Obj] = raw["children"]
    cr: Obj = raw["cr"]
    generated = [
        o["metadata"]["name"]
        for o in objs
        if o["kind"] in ("Pod", "RayCluster")
        and generic_name(o["metadata"]["name"]) != o["metadata"]["name"]
    ]
    generated += _generated_in_status(cr)
    generated += [
        str(o["metadata"].get("labels", {})[REPLICA_NAME])
        for o in objs
        if REPLICA_NAME in (o["metadata"].get("labels") or {})
    ]
    grouped: dict[str, list[Obj]] = {}
    for obj in objs:
        norm = normalize(obj, namespace, generated)
        grouped.setdefault(f"{obj['kind']}/{norm['metadata']['name']}", []).append(norm)
    for group in grouped.values():
        group.sort(key=lambda o: json.dumps(o, sort_keys=True))
    crn = normalize(cr, namespace, generated)
    return {
        "children": grouped,
        "spec": crn.get("spec"),
        "status": crn.get("status"),
        "metadata": {k: crn["metadata"].get(k) for k in ("labels", "annotations", "finalizers")},
        "events": raw["events"],
    }


def _generated_in_status(cr: Obj) -> list[str]:
    status = cr.get("status") or {}
    names = []
    if isinstance(status, dict):
        for key in ("rayClusterName", "jobId"):
            if status.get(key):
                names.append(str(status[key]))
        for side in ("activeServiceStatus", "pendingServiceStatus"):
            name = (status.get(side) or {}).get("rayClusterName")
            if name:
                names.append(str(name))
    return names


def rewrite(node: Any, rewrites: list[tuple[re.Pattern[str], str]]) -> Any:
    """Our strings with the allow-list's known text changes undone (e.g. a v1.7.0 change
    inside a longer command), so the rest of the text is still compared."""
    if isinstance(node, dict):
        return {k: rewrite(v, rewrites) for k, v in node.items()}
    if isinstance(node, list):
        return [rewrite(v, rewrites) for v in node]
    if isinstance(node, str):
        for pattern, replacement in rewrites:
            node = pattern.sub(replacement, node)
    return node


def compare(
    item: Input, ours: Obj, theirs: Obj, rewrites: list[tuple[re.Pattern[str], str]] | None = None
) -> list[str]:
    """Every difference of one input, each line prefixed with the input's origin."""
    ours = rewrite(ours, rewrites or [])
    lines: list[str] = []
    prefix = f"{item.origin} {item.kind}"
    for key in sorted(set(ours["children"]) | set(theirs["children"])):
        a = ours["children"].get(key)
        b = theirs["children"].get(key)
        if a is None:
            lines.append(f"{prefix} {key}: only upstream")
            continue
        if b is None:
            lines.append(f"{prefix} {key}: only ours")
            continue
        if len(a) != len(b):
            lines.append(f"{prefix} {key}: count ours {len(a)}, upstream {len(b)}")
        for x, y in zip(a, b, strict=False):
            lines += [f"{prefix} {key} {d}" for d in diff(x, y)]
    lines += [f"{prefix} spec.{d}" for d in diff(ours["spec"], theirs["spec"])]
    lines += [f"{prefix} status.{d}" for d in diff(ours["status"], theirs["status"])]
    lines += [f"{prefix} metadata.{d}" for d in diff(ours["metadata"], theirs["metadata"])]
    mine, other = set(ours["events"]), set(theirs["events"])
    lines += [f"{prefix} event {r}: only ours" for r in sorted(mine - other)]
    lines += [f"{prefix} event {r}: only upstream" for r in sorted(other - mine)]
    return lines


async def delete_all(kube: KubeClient, items: list[Input], namespace: str) -> None:
    for item in items:
        with contextlib.suppress(NotFound):
            await kube.delete(INPUT_KINDS[item.kind], item.name, namespace)
