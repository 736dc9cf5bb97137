"""One cache per resource: the informers behind it (one for all namespaces, one per watched
namespace, or one cluster-wide informer filtered to the watched namespaces) are an
implementation detail, as in controller-runtime's multi-namespace cache.

The filtered cluster-wide informer ("merged" scope) is beyond upstream: controller-runtime
opens one watch per namespace and resource, so an operator watching N namespaces holds about
a dozen N watches and, since kube-apiserver allows 100 streams per HTTP/2 connection, N/8
connections. One watch per resource keeps that constant. It needs list and watch across the
cluster (the operator's ClusterRole grants them in the usual install; a namespaced install
with one Role per namespace does not), so the caller decides per resource (``merged_scope``).

Invariants and failure modes:
- An object lives in exactly one of the informers (the one of its namespace, or the single
  cluster-wide one), so ``get`` asks that one and never another: a name in an unwatched
  namespace is simply absent, and ``list`` across namespaces is the union of disjoint sets.
- Reads are read-your-writes (see ``runtime.freshness``): after ``record_write`` a key reads as
  our write, and ``is_fresh`` is False, until the watch delivers a version at least as new. A
  controller that must not act before then (its decision depends on what the watch says after
  the write) requeues while ``is_fresh`` is False; one that only needs the newest data reads.
- The informers are shared through the manager's factory with any code that still asks for them
  one by one, so every reader of a resource sees one store and one write tracker.
- ``has_synced`` is True only when every informer has listed once; controllers start after it.
- A reconciler asks a ``CacheSource`` for the caches it reads: the ``Manager`` in the operator,
  ``StandaloneCaches`` when it is built without one (tests fill those informers' stores by
  hand; nothing ever starts them).
"""

from __future__ import annotations

import asyncio
import builtins
from collections.abc import Sequence
from typing import Any, Protocol

from kuberay.runtime.client import KubeClient, Resource
from kuberay.runtime.informer import Handler, Informer
from kuberay.runtime.store import IndexFunc, Obj, object_key


class ResourceCache:
    """Reads and event handlers of one resource across the watched namespaces."""

    def __init__(self, resource: Resource, informers: Sequence[Informer]) -> None:
        if not informers:
            raise ValueError(f"a cache of {resource.plural} needs at least one informer")
        self.resource = resource
        self.informers: tuple[Informer, ...] = tuple(informers)
        self._by_namespace = {inf.namespace: inf for inf in self.informers}
        self._cluster_wide = self._by_namespace.get(None)

    def informer_for(self, namespace: str | None) -> Informer | None:
        """The informer that holds ``namespace``'s objects; None when it is not watched."""
        if self._cluster_wide is not None:
            if namespace is None or self._cluster_wide.holds(namespace):
                return self._cluster_wide
            return None
        return self._by_namespace.get(namespace) if namespace else None

    # ------------------------------------------------------------------ reads
    def get(self, namespace: str | None, name: str) -> Obj | None:
        inf = self.informer_for(namespace)
        return inf.get(namespace, name) if inf is not None else None

    def list(
        self,
        namespace: str | None = None,
        *,
        index: str | None = None,
        value: str = "",
    ) -> builtins.list[Obj]:
        """Objects in ``namespace`` (all watched ones when None), or those under ``value`` of
        the secondary ``index`` (added with ``add_indexer``); our writes the watch has not
        delivered yet stand in for the versions they replaced, so a list agrees with ``get``."""
        if namespace is None:
            informers: Sequence[Informer] = self.informers
        else:
            inf = self.informer_for(namespace)
            informers = () if inf is None else (inf,)
        out: builtins.list[Obj] = []
        for inf in informers:
            out.extend(_list(inf, namespace, index, value))
        return out

    def is_fresh(self, namespace: str | None, name: str) -> bool:
        """Whether the watch has delivered every write recorded for the key (an unwatched
        namespace has nothing to wait for)."""
        inf = self.informer_for(namespace)
        return inf is None or inf.is_fresh(namespace, name)

    def record_write(self, written: Obj, based_on: str | None = None) -> bool:
        """Records the server's answer to our write of an object (create, update, patch or
        status update); see ``Informer.record_write`` for ``based_on`` and the return value."""
        inf = self.informer_for((written.get("metadata") or {}).get("namespace"))
        return inf.record_write(written, based_on) if inf is not None else False

    # ------------------------------------------------------------------ wiring
    def add_handler(self, handler: Handler) -> None:
        for inf in self.informers:
            inf.add_handler(handler)

    def add_indexer(self, name: str, func: IndexFunc) -> None:
        """Adds a secondary index to every informer's store (idempotent: the index is rebuilt)."""
        for inf in self.informers:
            inf.store.add_indexer(name, func)

    def has_synced(self) -> bool:
        return all(inf.synced.is_set() for inf in self.informers)

    async def wait_synced(self, timeout: float | None = None) -> None:
        await asyncio.gather(*(inf.wait_synced(timeout) for inf in self.informers))


class CacheSource(Protocol):
    """Where a reconciler gets its caches: ``Manager`` (shared, started with the operator) or
    ``StandaloneCaches``. ``informer_kwargs`` configure the informers when they are created."""

    def cache(
        self,
        resource: Resource,
        *,
        namespaces: Sequence[str] | None = None,
        label_selector: str | None = None,
        **informer_kwargs: Any,
    ) -> ResourceCache: ...


class StandaloneCaches:
    """A ``CacheSource`` for a reconciler built without a manager: every call makes a new cache
    whose informers (one per namespace, or one for the cluster) are never started, so their
    stores stay empty unless filled by hand."""

    def __init__(self, client: KubeClient) -> None:
        self.client = client

    def cache(
        self,
        resource: Resource,
        *,
        namespaces: Sequence[str] | None = None,
        label_selector: str | None = None,
        **informer_kwargs: Any,
    ) -> ResourceCache:
        informers = [
            Informer(
                self.client,
                resource,
                namespace=ns,
                label_selector=label_selector,
                **informer_kwargs,
            )
            for ns in watched_scopes(namespaces)
        ]
        return ResourceCache(resource, informers)


def watched_scopes(namespaces: Sequence[str] | None) -> builtins.list[str | None]:
    """The informer namespaces of a cache of ``namespaces``: each once (two informers would
    list it twice), or None alone (the whole cluster) when none is given."""
    return list(dict.fromkeys(namespaces)) if namespaces else [None]


def merged_scope(
    namespaces: Sequence[str] | None, *, above: int, cluster_wide_allowed: bool
) -> frozenset[str] | None:
    """The namespace filter of one cluster-wide informer standing in for one informer per
    namespace: used when more than ``above`` namespaces are watched (0: never) and listing
    and watching the resource across the cluster is allowed; else None."""
    scopes = watched_scopes(namespaces)
    if above <= 0 or None in scopes or len(scopes) <= above or not cluster_wide_allowed:
        return None
    return frozenset(str(ns) for ns in scopes)


def _list(inf: Informer, namespace: str | None, index: str | None, value: str) -> list[Obj]:
    """One informer's objects, with its pending writes in place of what they replaced (a
    write that moved an object into or out of the selection moves it in the answer too)."""
    store = inf.store
    items = store.by_index(index, value) if index is not None else store.values()
    if namespace is not None:
        items = [o for o in items if o.get("metadata", {}).get("namespace") == namespace]
    if not inf.writes:
        return items
    out = {object_key(o): o for o in items}
    for key, obj in inf.writes.items():
        if (namespace is None or obj["metadata"].get("namespace") == namespace) and (
            index is None or store.in_index(index, value, obj)
        ):
            out[key] = obj
        else:
            out.pop(key, None)
    return list(out.values())
