"""NetworkPolicy controller (gate RayClusterNetworkPolicy): keeps each RayCluster's policies equal
to what ``spec.networkPolicy`` asks for.

Invariants and failure modes:
- A cluster with ``spec.networkPolicy`` has exactly the policies the pure builder makes (one for
  the head, one per worker group); the ones it owns and no longer wants (a removed group, or
  the whole field removed) are deleted. Nothing else is ever touched.
- A policy of the wanted name that this cluster does not own is never taken over: the cluster
  gets a NetworkPolicyNameCollision warning and the pass is retried later. Silently skipping it
  would leave pods without the isolation the user asked for; overwriting it would break
  whoever owns it.
- Creates are checked against the API, not only the cache: AlreadyExists means either our own
  create from a previous pass (owned: fine) or a collision (reported), so a stale cache cannot
  cause a duplicate or a takeover.
- Ports without a protocol are compared as TCP (the apiserver's default), so a policy the user
  wrote without protocols is not rewritten on every pass.
- Deleted clusters need no work here: their policies carry an owner reference and the garbage
  collector removes them. Clusters managed by another controller (``spec.managedBy``) and
  clusters being deleted are skipped.
"""

from __future__ import annotations

import contextlib
import copy
from collections.abc import Awaitable
from dataclasses import dataclass
from typing import Any

from kuberay.api import constants as c
from kuberay.api.constants import RAYCLUSTERS
from kuberay.builders.network_policy import build_network_policies
from kuberay.controllers.reconcile import child_events, working_copy, write_child
from kuberay.runtime.cache import ResourceCache
from kuberay.runtime.client import KubeClient, Resource
from kuberay.runtime.controller import Controller, Request, Result, generation_changed
from kuberay.runtime.errors import AlreadyExists, ApiError, Conflict, NotFound
from kuberay.runtime.events import WARNING, EventRecorder
from kuberay.runtime.manager import Manager
from kuberay.runtime.store import Obj

NETWORKPOLICIES = Resource("networking.k8s.io", "v1", "networkpolicies", kind="NetworkPolicy")
RETRY_SECONDS = 10.0


def _with_tcp(value: Any) -> Any:
    """``value`` with every ``ports[].protocol`` defaulted to TCP, as the apiserver stores it."""
    if isinstance(value, dict):
        out = {k: _with_tcp(v) for k, v in value.items()}
        if isinstance(out.get("ports"), list):
            out["ports"] = [
                {"protocol": "TCP", **p} if isinstance(p, dict) else p for p in out["ports"]
            ]
        return out
    if isinstance(value, list):
        return [_with_tcp(v) for v in value]
    return value


def policy_differs(want: Obj, have: Obj) -> bool:
    if _with_tcp(want.get("spec") or {}) != _with_tcp(have.get("spec") or {}):
        return True
    labels = have["metadata"].get("labels") or {}
    return any(labels.get(k) != v for k, v in (want["metadata"].get("labels") or {}).items())


def _owned_by(obj: Obj, uid: str) -> bool:
    return any(
        ref.get("uid") == uid and ref.get("controller")
        for ref in obj["metadata"].get("ownerReferences") or []
    )


@dataclass(eq=False)
class NetworkPolicyReconciler:
    """Keeps each RayCluster's NetworkPolicies in line, over a client, a recorder and the
    caches of clusters and policies; built without a manager, wired in by ``register``."""

    client: KubeClient
    recorder: EventRecorder
    clusters: ResourceCache
    policies: ResourceCache
    controller: Controller | None = None

    def _owned_policies(self, ns: str, cluster: str, uid: str) -> dict[str, Obj]:
        out: dict[str, Obj] = {}
        for obj in self.policies.list(ns):
            meta = obj["metadata"]
            if (meta.get("labels") or {}).get(c.LABEL_CLUSTER) == cluster and _owned_by(obj, uid):
                out[meta["name"]] = obj
        return out

    async def reconcile(self, req: Request) -> Result | None:
        ns = req.namespace or ""
        cluster = working_copy(
            self.clusters.get(ns, req.name), c.KIND_RAYCLUSTER, skip_deleting=True
        )
        if cluster is None:
            return None
        spec = cluster.get("spec") or {}
        uid = cluster["metadata"].get("uid", "")
        want = build_network_policies(cluster) if spec.get("networkPolicy") else []
        owned = self._owned_policies(ns, req.name, uid)
        blocked = False
        for policy in want:
            name = policy["metadata"]["name"]
            have = owned.pop(name, None)
            if have is None:
                blocked |= not await self._create(cluster, policy)
            elif policy_differs(policy, have):
                await self._update(cluster, policy, have)
        for stale in owned.values():
            await self._delete(cluster, stale)
        return Result(requeue_after=RETRY_SECONDS) if blocked else None

    async def _create(self, cluster: Obj, policy: Obj) -> bool:
        """False when the name belongs to a policy this cluster does not own."""
        ns, name = policy["metadata"]["namespace"], policy["metadata"]["name"]
        try:
            await self._write(
                cluster,
                policy,
                "Create",
                (c.EVENT_CREATED_NETWORK_POLICY, c.EVENT_FAILED_TO_CREATE_NETWORK_POLICY),
                self.client.create(NETWORKPOLICIES, policy, ns),
                (AlreadyExists,),
            )
        except AlreadyExists:
            try:
                existing = await self.client.get(NETWORKPOLICIES, name, ns)
            except NotFound:
                return False  # deleted meanwhile: the retry creates it
            if _owned_by(existing, cluster["metadata"].get("uid", "")):
                return True  # our own earlier create; the cache had not seen it yet
            self.recorder.event(
                cluster,
                WARNING,
                c.EVENT_NETWORK_POLICY_NAME_COLLISION,
                f"NetworkPolicy {ns}/{name} exists and is not owned by this RayCluster; "
                "rename or delete it so the cluster can be isolated",
                "Create",
            )
            return False
        return True

    async def _update(self, cluster: Obj, policy: Obj, have: Obj) -> None:
        """Conflict and NotFound are raised without an event: a newer version or a deletion is
        on its way, and the next pass redoes the update."""
        body = copy.deepcopy(have)
        body["spec"] = policy["spec"]
        body["metadata"]["labels"] = {
            **(have["metadata"].get("labels") or {}),
            **policy["metadata"]["labels"],
        }
        await self._write(
            cluster,
            policy,
            "Update",
            (c.EVENT_UPDATED_NETWORK_POLICY, c.EVENT_FAILED_TO_UPDATE_NETWORK_POLICY),
            self.client.update(NETWORKPOLICIES, body),
            (Conflict, NotFound),
        )

    async def _delete(self, cluster: Obj, policy: Obj) -> None:
        meta = policy["metadata"]
        with contextlib.suppress(NotFound):  # gone already
            await self._write(
                cluster,
                policy,
                "Delete",
                (c.EVENT_DELETED_NETWORK_POLICY, c.EVENT_FAILED_TO_DELETE_NETWORK_POLICY),
                self.client.delete(
                    NETWORKPOLICIES, meta["name"], meta["namespace"], uid=meta.get("uid")
                ),
                (NotFound,),
            )

    async def _write(
        self,
        cluster: Obj,
        policy: Obj,
        action: str,
        reasons: tuple[str, str],
        call: Awaitable[Obj],
        benign: tuple[type[ApiError], ...],
    ) -> None:
        """One write of ``policy`` with its events on ``cluster`` (``Created NetworkPolicy
        ns/name``, ``Failed to create NetworkPolicy ns/name: ...``); ``reasons`` are the done
        and failed reasons, ``benign`` outcomes are raised without an event."""
        meta = policy["metadata"]
        what = f"NetworkPolicy {meta['namespace']}/{meta['name']}"
        events = child_events(action, what, *reasons)
        await write_child(self.recorder, cluster, events, call, benign=benign)


def register(
    mgr: Manager, namespaces: list[str] | None = None, concurrency: int = 1
) -> NetworkPolicyReconciler:
    """Builds the reconciler over ``mgr``'s caches (the clusters, and the policies labelled
    with a cluster) and a controller for spec changes of clusters that owns their policies."""
    reconciler = NetworkPolicyReconciler(
        mgr.client,
        mgr.recorder(c.RECORDER_NETWORKPOLICY),
        mgr.cache(RAYCLUSTERS, namespaces=namespaces),
        mgr.cache(NETWORKPOLICIES, namespaces=namespaces, label_selector=c.LABEL_CLUSTER),
    )
    ctrl = mgr.controller("networkpolicy", reconciler.reconcile, concurrency=concurrency)
    ctrl.for_(reconciler.clusters, generation_changed)
    ctrl.owns(reconciler.policies, c.KIND_RAYCLUSTER, c.GROUP)
    reconciler.controller = ctrl
    return reconciler
