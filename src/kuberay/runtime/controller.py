"""Controller loop: informer events -> work-queue keys -> concurrent, level-triggered reconciles.

Invariants and failure modes:
- Reconciling starts only after every informer the controller reads has synced, so the first
  reconcile of an object never sees a half-filled cache.
- Keys, not events, are queued: a burst of events for one object becomes one reconcile that
  reads the current state (level-triggered). A key is never reconciled by two workers at once.
- A reconcile that raises is retried with per-key exponential backoff; ``Conflict`` (a stale
  resourceVersion) is an expected outcome and is requeued at once without logging an error.
  Any other API error is logged as one line (the apiserver's message); only a failure that is
  not an API answer, i.e. a bug, is logged with its traceback.
- ``Result(requeue_after=...)`` schedules the next look; success resets the key's backoff.
- Workers are independent tasks, so one slow reconcile (for example waiting on a remote call)
  delays only its own key.
"""

from __future__ import annotations

import asyncio
import contextlib
import contextvars
import logging
import time
import uuid
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import NamedTuple, Protocol

from kuberay.runtime.errors import ApiError, Conflict
from kuberay.runtime.informer import Handler
from kuberay.runtime.metrics import RuntimeMetrics
from kuberay.runtime.store import Obj, object_key, split_key
from kuberay.runtime.workqueue import RateLimiter, WorkQueue

log = logging.getLogger("kuberay.runtime.controller")

# The object being reconciled and the reconcile's id, for log records (see runtime.logs).
reconcile_context: contextvars.ContextVar[dict[str, str] | None] = contextvars.ContextVar(
    "reconcile_context", default=None
)


class Request(NamedTuple):
    namespace: str | None
    name: str

    @property
    def key(self) -> str:
        return f"{self.namespace}/{self.name}" if self.namespace else self.name


@dataclass
class Result:
    requeue: bool = False
    requeue_after: float | None = None
    # The pass failed (a refused write, reported in status and events) but chose its own
    # requeue: counted as an error in the metrics, as upstream's reconcilers return the error
    # to controller-runtime, while the requeue above still decides when it runs again.
    failed: bool = False


class EventSource(Protocol):
    """What a controller watches: an ``Informer`` or a ``ResourceCache`` (its informers)."""

    def add_handler(self, handler: Handler) -> None: ...

    async def wait_synced(self, timeout: float | None = None) -> None: ...


Reconciler = Callable[[Request], Awaitable[Result | None]]
Predicate = Callable[[Obj | None, Obj], bool]
Mapper = Callable[[Obj], list[Request]]


# ---------------------------------------------------------------------- predicates
def generation_changed(old: Obj | None, new: Obj) -> bool:
    """Spec changes only (status writes do not bump metadata.generation)."""
    if old is None:
        return True
    return bool(old["metadata"].get("generation") != new["metadata"].get("generation"))


def labels_changed(old: Obj | None, new: Obj) -> bool:
    if old is None:
        return True
    return bool(old["metadata"].get("labels") != new["metadata"].get("labels"))


def annotations_changed(old: Obj | None, new: Obj) -> bool:
    if old is None:
        return True
    return bool(old["metadata"].get("annotations") != new["metadata"].get("annotations"))


def any_of(*preds: Predicate) -> Predicate:
    def pred(old: Obj | None, new: Obj) -> bool:
        return any(p(old, new) for p in preds)

    return pred


def always(old: Obj | None, new: Obj) -> bool:
    del old, new
    return True


def owner_mapper(owner_kind: str, owner_group: str, controller_only: bool = True) -> Mapper:
    """Maps an owned object to its owner's key (``group`` is the owner's API group, "" = core)."""

    def mapper(obj: Obj) -> list[Request]:
        meta = obj.get("metadata", {})
        out = []
        for ref in meta.get("ownerReferences") or []:
            if ref.get("kind") != owner_kind:
                continue
            if controller_only and not ref.get("controller"):
                continue
            api_version = ref.get("apiVersion", "")
            group = api_version.split("/", 1)[0] if "/" in api_version else ""
            if group == owner_group:
                out.append(Request(meta.get("namespace"), ref["name"]))
        return out

    return mapper


class Controller:
    def __init__(
        self,
        name: str,
        reconcile: Reconciler,
        *,
        concurrency: int = 4,
        metrics: RuntimeMetrics | None = None,
        rate_limiter: RateLimiter | None = None,
    ) -> None:
        self.name = name
        self.reconcile = reconcile
        self.concurrency = max(1, concurrency)
        self.queue = WorkQueue(name, rate_limiter)
        self.metrics = metrics
        self.sources: list[EventSource] = []
        # The primary resource's kind, named in log records as upstream's do ({"RayCluster": ...}).
        self.kind = ""
        self._workers: list[asyncio.Task[None]] = []
        self.reconciles = 0
        if metrics is not None:
            metrics.instrument_queue(self.queue)
            metrics.instrument_controller(name, self.concurrency)

    # ------------------------------------------------------------------ wiring
    def for_(self, source: EventSource, predicate: Predicate = always) -> Controller:
        """The primary resource: its own key is reconciled."""
        self.kind = getattr(getattr(source, "resource", None), "kind", "") or self.kind
        return self.watches(source, lambda o: [_request_of(o)], predicate)

    def owns(
        self,
        source: EventSource,
        owner_kind: str,
        owner_group: str,
        predicate: Predicate = always,
        urgent: Predicate | None = None,
    ) -> Controller:
        """Owned objects map to their controlling owner."""
        return self.watches(source, owner_mapper(owner_kind, owner_group), predicate, urgent)

    def watches(
        self,
        source: EventSource,
        mapper: Mapper,
        predicate: Predicate = always,
        urgent: Predicate | None = None,
    ) -> Controller:
        """Events that pass ``predicate`` queue the keys ``mapper`` gives; an update that also
        passes ``urgent`` queues them in the work queue's urgent lane (see ``WorkQueue``)."""

        def enqueue(obj: Obj, first: bool = False) -> None:
            for req in mapper(obj):
                self.queue.add(req.key, first)

        def on_add(obj: Obj) -> None:
            if predicate(None, obj):
                enqueue(obj)

        def on_update(old: Obj, new: Obj) -> None:
            if predicate(old, new):
                enqueue(new, urgent is not None and urgent(old, new))

        source.add_handler(Handler(on_add=on_add, on_update=on_update, on_delete=enqueue))
        if source not in self.sources:
            self.sources.append(source)
        return self

    # ------------------------------------------------------------------ running
    async def start(self, sync_timeout: float | None = None) -> None:
        """Waits for the caches, then starts the workers (returns once they run)."""
        await asyncio.gather(*(s.wait_synced(sync_timeout) for s in self.sources))
        self._workers = [
            asyncio.create_task(self._worker(), name=f"{self.name}-worker-{i}")
            for i in range(self.concurrency)
        ]

    async def stop(self) -> None:
        self.queue.shutdown()
        for task in self._workers:
            task.cancel()
        for task in self._workers:
            with contextlib.suppress(asyncio.CancelledError):
                await task
        self._workers = []

    async def _worker(self) -> None:
        while True:
            key = await self.queue.get()
            if key is None:
                return
            try:
                await self._process(key)
            finally:
                self.queue.done(key)

    async def _process(self, key: str) -> None:
        ns, name = split_key(key)
        req = Request(ns, name)
        ctx = {"controller": self.name, "kind": self.kind, "namespace": ns or "", "name": name}
        ctx["reconcileID"] = str(uuid.uuid4())
        token = reconcile_context.set(ctx)
        started = time.monotonic()
        outcome = "success"
        m = self.metrics
        if m is not None:
            m.active_workers.labels(self.name).inc()
        try:
            result = await self.reconcile(req)
        except Conflict:
            outcome = "requeue"
            log.debug("conflict; requeueing %s", key)
            self.queue.add_rate_limited(key)
        except asyncio.CancelledError:
            raise
        except Exception as exc:
            # An answer from the apiserver (a missing object, a rejected write) is an expected
            # state, retried with back-off: one line with the server's words. A traceback is
            # for anything else, i.e. a bug.
            outcome = "error"
            if isinstance(exc, ApiError):
                log.error("reconcile of %s failed: %s", key, exc)
            else:
                log.exception("reconcile of %s failed", key)
                if m is not None:
                    m.reconcile_panics.labels(self.name).inc()
            if m is not None:
                m.reconcile_errors.labels(self.name).inc()
            self.queue.add_rate_limited(key)
        else:
            self._after_success(key, result)
            if result is not None and result.failed:
                outcome = "error"
                if m is not None:
                    m.reconcile_errors.labels(self.name).inc()
            elif result is not None and (result.requeue or result.requeue_after):
                outcome = "requeue_after" if result.requeue_after else "requeue"
        finally:
            self.reconciles += 1
            reconcile_context.reset(token)
            if m is not None:
                m.active_workers.labels(self.name).dec()
                m.reconcile_total.labels(self.name, outcome).inc()
                m.reconcile_time.labels(self.name).observe(time.monotonic() - started)

    def _after_success(self, key: str, result: Result | None) -> None:
        if result is not None and result.requeue_after:
            self.queue.forget(key)
            self.queue.add_after(key, result.requeue_after)
        elif result is not None and result.requeue:
            self.queue.add_rate_limited(key)
        else:
            self.queue.forget(key)


def _request_of(obj: Obj) -> Request:
    ns, name = split_key(object_key(obj))
    return Request(ns, name)
