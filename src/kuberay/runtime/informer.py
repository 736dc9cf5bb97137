"""List+watch informer feeding an indexed store and event handlers.

Invariants and failure modes:
- The store converges to the server: after a list, the watch resumes from the last seen
  resourceVersion (bookmarks advance it too), so a dropped connection or an apiserver restart
  costs no events.
- 410 Gone (the resourceVersion was compacted away), or an ERROR event saying so, triggers a
  relist whose difference against the store is emitted as adds, updates and deletions: an object
  deleted while the informer was not watching is still reported as deleted.
- A watch that goes silent (no event and no bookmark for ``stall_timeout``) is abandoned and
  re-established from the same resourceVersion.
- Transport errors back off exponentially (capped) and never end the informer; only ``stop()``
  does. Handlers run inline and must be cheap (they enqueue keys); a handler exception is logged
  and does not break the watch.
- Read-your-writes: writers report the server's answer to their writes (``record_write``); until
  the watch delivers a version at least as new, ``get`` returns that answer and ``is_fresh`` is
  False (see ``runtime.freshness``). The store itself only holds what the server sent: the
  watch's objects, or a write's answer in place of exactly the version that write replaced.
- What reaches the store is stripped of ``managedFields`` and then transformed: by the
  informer's ``transform`` (a projection), or else only with its short strings interned
  (``store.interned``), so every cache is lean, projected or not.
- A cluster-wide informer given ``namespaces`` (a set) keeps only objects of those namespaces:
  every other one is dropped before it reaches the store or a handler, while its
  resourceVersion still advances the watch. One such informer stands in for one informer per
  namespace (one watch instead of N; see ``runtime.cache``) at the price of decoding the other
  namespaces' events of that resource.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import random
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

from kuberay.runtime.client import METADATA_LIST, METADATA_ONLY, KubeClient, Resource
from kuberay.runtime.errors import ApiError, Gone, WatchStalled
from kuberay.runtime.freshness import MinResourceVersionTracker, resource_version
from kuberay.runtime.store import (
    IndexFunc,
    Obj,
    Store,
    Transform,
    interned,
    object_key,
    strip_managed_fields,
)

log = logging.getLogger("kuberay.runtime.informer")


@dataclass
class Handler:
    on_add: Callable[[Obj], None] | None = None
    on_update: Callable[[Obj, Obj], None] | None = None
    on_delete: Callable[[Obj], None] | None = None


class Informer:
    """Keeps a ``Store`` of one resource (optionally one namespace / label selection) current."""

    def __init__(
        self,
        client: KubeClient,
        resource: Resource,
        *,
        namespace: str | None = None,
        namespaces: frozenset[str] | None = None,
        label_selector: str | None = None,
        field_selector: str | None = None,
        transform: Transform | None = None,
        indexers: Mapping[str, IndexFunc] | None = None,
        metadata_only: bool = False,
        watch_timeout: int = 300,
        stall_timeout: float = 120.0,
        page_size: int = 500,
    ) -> None:
        self.client = client
        self.resource = resource
        if namespaces is not None and namespace is not None:
            raise ValueError("a namespace filter applies to a cluster-wide informer only")
        self.namespace = namespace
        self.namespaces = namespaces
        self.label_selector = label_selector
        self.field_selector = field_selector
        self.transform = transform
        self.metadata_only = metadata_only
        self.watch_timeout = watch_timeout
        self.stall_timeout = stall_timeout
        self.page_size = page_size
        self.store = Store(indexers)
        self.writes = MinResourceVersionTracker()
        self.handlers: list[Handler] = []
        self.synced = asyncio.Event()
        self.resource_version: str | None = None
        self.relists = 0
        self.events_seen = 0
        # Called as observer(event_type) for each event applied (metrics hook).
        self.observers: list[Callable[[str], None]] = []
        self._stopped = asyncio.Event()
        self._task: asyncio.Task[None] | None = None

    @property
    def name(self) -> str:
        sel = f"[{self.label_selector}]" if self.label_selector else ""
        return f"{self.resource.plural}{sel}"

    def add_handler(self, handler: Handler) -> None:
        """Registers a handler; if the store already has objects they are replayed as adds."""
        self.handlers.append(handler)
        if handler.on_add is not None:
            for obj in self.store.values():
                handler.on_add(obj)

    def start(self) -> asyncio.Task[None]:
        if self._task is None:
            self._task = asyncio.create_task(self.run(), name=f"informer-{self.name}")
        return self._task

    async def stop(self) -> None:
        self._stopped.set()
        if self._task is not None:
            self._task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._task
            self._task = None

    async def wait_synced(self, timeout: float | None = None) -> None:
        async with asyncio.timeout(timeout):
            await self.synced.wait()

    # ------------------------------------------------------------------ main loop
    async def run(self) -> None:
        failures = 0
        while not self._stopped.is_set():
            progress = (self.events_seen, self.resource_version, self.relists)
            try:
                if self.resource_version is None:
                    await self._relist()
                await self._watch()
                failures = 0
            except Gone:
                log.info("informer %s: resourceVersion expired, relisting", self.name)
                self.resource_version = None
            except WatchStalled:
                log.info("informer %s: watch went silent; reconnecting", self.name)
            except ApiError as exc:
                # Back off only while nothing gets through; a watch that delivered something
                # before it broke is simply re-established.
                if progress != (self.events_seen, self.resource_version, self.relists):
                    failures = 0
                failures += 1
                delay = min(30.0, 0.25 * 2 ** min(failures, 7)) * (0.8 + 0.4 * random.random())
                log.warning(
                    "informer %s: %s; retrying in %.1fs",
                    self.name,
                    exc,
                    delay,
                    extra={"resource": self.resource.plural},
                )
                await asyncio.sleep(delay)

    async def _relist(self) -> None:
        listed = await self.client.list(
            self.resource,
            self.namespace,
            label_selector=self.label_selector,
            field_selector=self.field_selector,
            limit=self.page_size,
            accept=METADATA_LIST if self.metadata_only else None,
        )
        items = [self._prepare(obj) for obj in listed["items"] if self._keeps(obj)]
        added, updated, deleted = self.store.replace(items)
        self.resource_version = listed["metadata"]["resourceVersion"]
        self.relists += 1
        self.writes.observe_list(self.resource_version)
        for obj in added:
            self._emit("ADDED", None, obj)
        for old, new in updated:
            self._emit("MODIFIED", old, new)
        for obj in deleted:
            self._emit("DELETED", obj, None)
        self.synced.set()

    async def _watch(self) -> None:
        # Spread watch renewals so that many informers do not all reconnect at once.
        timeout = int(self.watch_timeout * (1 + random.random()))
        async for event in self.client.watch(
            self.resource,
            self.namespace,
            resource_version=self.resource_version,
            label_selector=self.label_selector,
            field_selector=self.field_selector,
            timeout_seconds=timeout,
            accept=METADATA_ONLY if self.metadata_only else None,
            stall_timeout=self.stall_timeout,
        ):
            if event.type == "ERROR":
                status = event.object
                if status.get("code") == 410:
                    raise Gone(410, status, "WATCH", self.resource.plural)
                raise ApiError(int(status.get("code") or 0), status, "WATCH", self.resource.plural)
            rv = event.object.get("metadata", {}).get("resourceVersion")
            if event.type == "BOOKMARK":
                self.resource_version = rv
                self.writes.observe_bookmark(rv)
                continue
            self._apply(event.type, event.object)
            if rv:
                self.resource_version = rv

    # ------------------------------------------------------------------ reads and own writes
    def get(self, namespace: str | None, name: str) -> Obj | None:
        """The newest known version of ``namespace/name``: our own write while the watch has
        not delivered it yet, else the stored copy."""
        key = f"{namespace}/{name}" if namespace else name
        pending = self.writes.pending(key)
        return pending if pending is not None else self.store.get(key)

    def is_fresh(self, namespace: str | None, name: str) -> bool:
        """Whether the watch has delivered every write recorded for ``namespace/name``."""
        return self.writes.is_fresh(f"{namespace}/{name}" if namespace else name)

    def record_write(self, written: Obj, based_on: str | None = None) -> bool:
        """Records the server's answer to our create, update, patch or status update, so that
        reads return it until the watch delivers a version at least as new.

        With ``based_on`` (the resourceVersion the write replaced), the answer also goes into
        the store when the store still holds exactly that version, so readers of the store
        itself (its indexes, metrics) see it too; then no older event can be in flight for the
        key (a write based on an outdated version fails), and the watch event that follows
        carries the same resourceVersion. No handlers run: nothing changed that we do not
        know. Returns True when the store was updated. An object outside this informer's
        namespace is ignored; label and field selectors are not evaluated, so record only
        objects the informer selects.
        """
        if not self.holds((written.get("metadata") or {}).get("namespace")):
            return False
        obj = self._prepare(written)
        key = object_key(obj)
        self.writes.record(key, obj, self.resource_version)
        current = self.store.get(key)
        if based_on is None or current is None or resource_version(current) != based_on:
            return False
        self.store.upsert(obj)
        return True

    def holds(self, namespace: str | None) -> bool:
        """Whether objects of ``namespace`` belong in this informer."""
        if self.namespace is not None:
            return namespace == self.namespace
        return self.namespaces is None or namespace in self.namespaces

    # ------------------------------------------------------------------ applying events
    def _keeps(self, raw: Obj) -> bool:
        return self.namespaces is None or (
            (raw.get("metadata") or {}).get("namespace") in self.namespaces
        )

    def _prepare(self, obj: Obj, key: str | None = None) -> Obj:
        obj = strip_managed_fields(obj)
        if self.metadata_only:
            obj.setdefault("apiVersion", self.resource.api_version)
            obj["kind"] = self.resource.kind
        if self.transform is None:
            return interned(obj)
        # The cached version lets the transform keep what did not change (see store.project).
        return self.transform(obj, self.store.get(key or object_key(obj)))

    def _apply(self, etype: str, raw: Obj) -> None:
        if not self._keeps(raw):
            return
        key = object_key(raw)  # the projection keeps name and namespace
        obj = self._prepare(raw, key)
        self.writes.observe(key, resource_version(obj), deleted=etype == "DELETED")
        if etype == "DELETED":
            old = self.store.delete(key)
            self._emit("DELETED", old or obj, None)
            return
        old = self.store.upsert(obj)
        self._emit("ADDED" if old is None else "MODIFIED", old, obj)

    def _emit(self, etype: str, old: Obj | None, new: Obj | None) -> None:
        self.events_seen += 1
        for observer in self.observers:
            observer(etype)
        for handler in self.handlers:
            try:
                if etype == "ADDED" and handler.on_add and new is not None:
                    handler.on_add(new)
                elif etype == "MODIFIED" and handler.on_update and old is not None and new:
                    handler.on_update(old, new)
                elif etype == "DELETED" and handler.on_delete and old is not None:
                    handler.on_delete(old)
            except Exception:
                log.exception("informer %s: event handler failed", self.name)


def informer_key(
    resource: Resource,
    namespace: str | None,
    label_selector: str | None,
    namespaces: frozenset[str] | None = None,
) -> str:
    scope = namespace or ",".join(sorted(namespaces or ()))
    return f"{resource.api_version}/{resource.plural}|{scope}|{label_selector or ''}"


class InformerFactory:
    """Shares one informer per (resource, namespace, selector) among controllers."""

    def __init__(self, client: KubeClient) -> None:
        self.client = client
        self.informers: dict[str, Informer] = {}

    def get(
        self,
        resource: Resource,
        *,
        namespace: str | None = None,
        namespaces: frozenset[str] | None = None,
        label_selector: str | None = None,
        **kwargs: Any,
    ) -> Informer:
        key = informer_key(resource, namespace, label_selector, namespaces)
        inf = self.informers.get(key)
        if inf is None:
            inf = Informer(
                self.client,
                resource,
                namespace=namespace,
                namespaces=namespaces,
                label_selector=label_selector,
                **kwargs,
            )
            self.informers[key] = inf
        return inf

    def start_all(self) -> None:
        for inf in self.informers.values():
            inf.start()

    async def wait_synced(self, timeout: float | None = None) -> None:
        await asyncio.gather(*(i.wait_synced(timeout) for i in self.informers.values()))

    async def stop_all(self) -> None:
        await asyncio.gather(*(i.stop() for i in self.informers.values()))
