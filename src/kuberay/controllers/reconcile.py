"""What every ray.io reconciler does around its own logic: pick the object of a request out of
its ``ResourceCache`` as a private working copy (the reconcile preamble), find a cluster's live
head pod in the pod cache, and write an owned child with the events upstream records for that
write (including the one Service write that moves traffic, ``selector_patch``).

Invariants and failure modes:
- The working copy is a deep copy: a pass may mutate it freely (status, defaults) without ever
  touching the informer's object, which other passes and the cache's own diffing read.
- An object whose ``spec.managedBy`` names another controller (MultiKueue, for example) is
  never reconciled here, exactly as upstream: only an absent value or ``ray.io/kuberay-operator``
  is ours. A missing object (deleted meanwhile) simply ends the pass; a caller that keeps state
  per object looks the object up itself first so it can drop that state.
- A child write records one Normal event when the call succeeded and one Warning event when it
  failed, on the owner, with the reason constants of ``kuberay.api.constants`` and messages
  that stay byte-identical to what the controllers always said (users and tests match them).
  Outcomes the caller names ``benign`` (AlreadyExists on a create, Conflict or NotFound on an
  update, ...) are states, not failures: no event, and the exception goes back to the caller,
  who knows what each one means there. Non-API exceptions (cancellation, programming errors)
  pass through without an event.
- The API call itself is made by the caller and handed in as an awaitable, so each
  controller's source still names every verb and resource it uses: the RBAC check
  (``tests/unit/test_manifests.py``) reads them there.
"""

from __future__ import annotations

import copy
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass
from typing import TypeVar

from kuberay.api import constants as c
from kuberay.ray.dashboard import DashboardError
from kuberay.runtime.cache import ResourceCache
from kuberay.runtime.controller import Controller, Reconciler, Request
from kuberay.runtime.errors import ApiError
from kuberay.runtime.events import NORMAL, WARNING, EventRecorder
from kuberay.runtime.informer import Handler
from kuberay.runtime.manager import Manager
from kuberay.runtime.store import Obj

T = TypeVar("T")
# What a recorded write may fail with: the API server's answer or, for a Serve config PUT,
# the dashboard's.
Failure = ApiError | DashboardError


# ---------------------------------------------------------------------------- preamble
def managed_elsewhere(obj: Obj) -> bool:
    """True when ``spec.managedBy`` hands the object to another controller (upstream:
    the ``ManagedBy`` checks at the top of each Reconcile)."""
    managed_by = (obj.get("spec") or {}).get("managedBy")
    return managed_by is not None and managed_by != c.MANAGED_BY_KUBERAY


def working_copy(
    cached: Obj | None,
    kind: str,
    *,
    honour_managed_by: bool = True,
    skip_deleting: bool = False,
    ensure: tuple[str, ...] = (),
) -> Obj | None:
    """A deep copy of the cached object to reconcile, or None when there is nothing to do:
    no object, one being deleted (``skip_deleting``, for controllers with no finalizer work),
    or one managed by another controller (``honour_managed_by``; kinds without the field pass
    False). The copy carries ``apiVersion`` and ``kind`` (informer lists leave them out, events
    need them), and each top-level key in ``ensure`` is a dict afterwards, so the pass can
    write into ``status`` (or read ``spec``) without checking."""
    if cached is None:
        return None
    if skip_deleting and cached["metadata"].get("deletionTimestamp"):
        return None
    if honour_managed_by and managed_elsewhere(cached):
        return None
    obj = copy.deepcopy(cached)
    obj.setdefault("apiVersion", c.API_VERSION)
    obj.setdefault("kind", kind)
    for key in ensure:
        if not isinstance(obj.get(key), dict):
            obj[key] = {}
    return obj


def fetch_working_copy(
    cache: ResourceCache,
    req: Request,
    kind: str,
    *,
    honour_managed_by: bool = True,
    skip_deleting: bool = False,
    ensure: tuple[str, ...] = (),
) -> Obj | None:
    """``working_copy`` of the request's object as ``cache`` reads it (our own write while the
    watch has not delivered it yet)."""
    cached = cache.get(req.namespace or "", req.name)
    return working_copy(
        cached,
        kind,
        honour_managed_by=honour_managed_by,
        skip_deleting=skip_deleting,
        ensure=ensure,
    )


def cached_head_pod(pods: ResourceCache, ns: str, cluster: str) -> Obj | None:
    """The live head pod of ``ns/cluster`` from a pod cache indexed by ``cluster``
    (``ns/<ray.io/cluster>``); a head being deleted does not count (its successor may not
    exist yet)."""
    for pod in pods.list(index="cluster", value=f"{ns}/{cluster}"):
        meta = pod["metadata"]
        labels = meta.get("labels") or {}
        if labels.get(c.LABEL_NODE_TYPE) == c.NODE_TYPE_HEAD and not meta.get("deletionTimestamp"):
            return pod
    return None


# ---------------------------------------------------------------------------- child writes
def selector_patch(have: Obj, want: Obj) -> Obj | None:
    """The merge patch that points the Service ``have`` at the cluster ``want`` selects (its
    whole selector, guarded by the resourceVersion read), or None when it already selects that
    cluster. Only the selector moves: traffic switches without touching anything else of a
    Service users may have customised."""
    selector = (have.get("spec") or {}).get("selector") or {}
    want_selector = want["spec"]["selector"]
    if selector.get(c.LABEL_CLUSTER) == want_selector.get(c.LABEL_CLUSTER):
        return None
    return {
        "metadata": {"resourceVersion": have["metadata"]["resourceVersion"]},
        "spec": {"selector": want_selector},
    }


@dataclass(frozen=True)
class WriteEvents:
    """The two events one write may record on the owner, with the event's action."""

    action: str  # "Create", "Update" or "Delete": the events' action field
    done_reason: str
    done_message: str
    failed_reason: str | None  # None: a failure records nothing (the caller reports it)
    failed_message: str  # the Warning's text before ": <error>"
    # The error as the API server's message (``exc.message``, else the whole error) or, as
    # some of upstream's events do, the whole error text.
    server_message: bool = True

    def failure(self, exc: Failure) -> str:
        """The Warning's message for ``exc``; also what a caller reports as the problem."""
        detail = (exc.message or exc) if self.server_message and isinstance(exc, ApiError) else exc
        return f"{self.failed_message}: {detail}"


def child_events(
    action: str, what: str, done: str, failed: str | None, *, server_message: bool = True
) -> WriteEvents:
    """The usual wording: ``Created service ns/x`` and ``Failed to create service ns/x: ...``
    (``what`` names the child; the verb comes from ``action``)."""
    return WriteEvents(
        action,
        done,
        f"{action}d {what}",
        failed,
        f"Failed to {action.lower()} {what}",
        server_message,
    )


async def write_child(
    recorder: EventRecorder,
    owner: Obj,
    events: WriteEvents,
    call: Awaitable[T],
    *,
    benign: tuple[type[Failure], ...] = (),
    failures: tuple[type[Failure], ...] = (ApiError,),
) -> T:
    """Awaits one write and records its event on ``owner``; returns what the call returned.
    A failure (any of ``failures``, API errors by default) is re-raised after its Warning, a
    ``benign`` one without any event. Upstream: the ``r.Recorder.Eventf`` pairs around each
    ``Create``/``Update``/``Delete`` of a child in the controllers."""
    try:
        out = await call
    except failures as exc:
        if events.failed_reason is not None and not isinstance(exc, benign):
            message = events.failure(exc)
            recorder.event(owner, WARNING, events.failed_reason, message, events.action)
        raise
    recorder.event(owner, NORMAL, events.done_reason, events.done_message, events.action)
    return out


async def try_write_child(
    recorder: EventRecorder,
    owner: Obj,
    events: WriteEvents,
    call: Awaitable[T],
    *,
    benign: tuple[type[Failure], ...] = (),
    failures: tuple[type[Failure], ...] = (ApiError,),
) -> tuple[T | None, str]:
    """``write_child`` for callers that carry on after a failure: (what the call returned, "")
    or, after the Warning, (None, the Warning's message), which such callers report as the
    reason something is not done yet. ``benign`` outcomes are still raised."""
    try:
        out = await write_child(recorder, owner, events, call, benign=benign, failures=failures)
    except failures as exc:
        if isinstance(exc, benign):
            raise
        return None, events.failure(exc)
    return out, ""


def wire_controller(
    mgr: Manager,
    name: str,
    reconcile: Reconciler,
    concurrency: int,
    primary: ResourceCache,
    forget: Callable[[Obj], None],
    owned: Sequence[ResourceCache],
    owner_kind: str,
) -> Controller:
    """The controller of one kind: reconciles ``primary``, drops per-object state (``forget``)
    when a primary object is deleted, and is woken by the children it owns. Upstream:
    ``SetupWithManager``'s ``For``/``Owns`` chain."""
    ctrl = mgr.controller(name, reconcile, concurrency=concurrency)
    ctrl.for_(primary)
    primary.add_handler(Handler(on_delete=forget))
    for cache in owned:
        ctrl.owns(cache, owner_kind, c.GROUP)
    return ctrl
