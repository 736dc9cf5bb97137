"""ResourceCache and the informer's read-your-writes: routing by namespace, own writes read
back until the watch delivers them, and a 410 Gone relist that clears writes whose object is
gone."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from typing import Any

from kuberay.runtime.cache import ResourceCache
from kuberay.runtime.client import CONFIGMAPS, ClientConfig, KubeClient, WatchEvent
from kuberay.runtime.controller import Controller, Request
from kuberay.runtime.informer import Handler, Informer
from kuberay.runtime.manager import Manager, ManagerOptions
from kuberay.runtime.store import index_by_label


def _obj(name: str, rv: str, ns: str = "n", **labels: str) -> dict[str, Any]:
    return {
        "metadata": {"name": name, "namespace": ns, "resourceVersion": rv, "labels": labels},
        "data": {"rv": rv},
    }


def _informer(ns: str | None = "n") -> Informer:
    inf = Informer(object(), CONFIGMAPS, namespace=ns)  # type: ignore[arg-type]
    inf.resource_version = "10"
    return inf


def _rv(obj: dict[str, Any] | None) -> str | None:
    return None if obj is None else str(obj["metadata"]["resourceVersion"])


def test_write_through_and_reads_until_the_watch_delivers() -> None:
    inf = _informer()
    inf.store.upsert(_obj("a", "10"))
    assert inf.record_write(_obj("a", "12"), based_on="10")  # the store held the base
    assert _rv(inf.store.get("n/a")) == "12"
    assert not inf.is_fresh("n", "a")
    # An older event still in flight (a write without precondition raced another writer)
    # moves the store back; reads keep returning the newest known version.
    inf._apply("MODIFIED", _obj("a", "11"))
    assert _rv(inf.store.get("n/a")) == "11"
    assert _rv(inf.get("n", "a")) == "12"
    assert [_rv(o) for o in ResourceCache(CONFIGMAPS, [inf]).list("n")] == ["12"]
    inf._apply("MODIFIED", _obj("a", "12"))
    assert inf.is_fresh("n", "a")
    assert _rv(inf.get("n", "a")) == "12"


def test_no_write_through_without_the_base_version() -> None:
    inf = _informer()
    inf.store.upsert(_obj("a", "11"))
    assert not inf.record_write(_obj("a", "12"), based_on="10")
    assert not inf.record_write(_obj("b", "13"))  # created: not in the store yet
    assert _rv(inf.store.get("n/a")) == "11"
    assert inf.store.get("n/b") is None
    assert _rv(inf.get("n", "a")) == "12"
    assert _rv(inf.get("n", "b")) == "13"
    assert sorted(_rv(o) or "" for o in ResourceCache(CONFIGMAPS, [inf]).list()) == ["12", "13"]


def test_a_write_outside_the_informers_namespace_is_ignored() -> None:
    inf = _informer("n")
    assert not inf.record_write(_obj("a", "12", ns="other"))
    assert inf.is_fresh("other", "a")
    assert inf.get("other", "a") is None


def test_list_by_index_follows_our_writes() -> None:
    inf = _informer()
    cache = ResourceCache(CONFIGMAPS, [inf])
    cache.add_indexer("app", index_by_label("app"))
    inf.store.upsert(_obj("a", "10", app="x"))
    cache.record_write(_obj("a", "12", app="y"))  # relabelled by our write
    cache.record_write(_obj("b", "13", app="x"))  # created by us
    assert [o["metadata"]["name"] for o in cache.list(index="app", value="n/x")] == ["b"]
    assert [o["metadata"]["name"] for o in cache.list(index="app", value="n/y")] == ["a"]


def test_cache_routes_by_namespace() -> None:
    one, two = _informer("one"), _informer("two")
    cache = ResourceCache(CONFIGMAPS, [one, two])
    one.store.upsert(_obj("a", "5", ns="one"))
    two.store.upsert(_obj("a", "6", ns="two"))
    assert _rv(cache.get("one", "a")) == "5"
    assert _rv(cache.get("two", "a")) == "6"
    assert cache.get("three", "a") is None
    assert cache.is_fresh("three", "a")  # unwatched: nothing to wait for
    assert not cache.record_write(_obj("a", "12", ns="three"))
    assert sorted(_rv(o) or "" for o in cache.list()) == ["5", "6"]
    assert [_rv(o) for o in cache.list("two")] == ["6"]
    assert cache.list("three") == []
    assert cache.record_write(_obj("a", "12", ns="two"), based_on="6")
    assert _rv(cache.get("two", "a")) == "12"
    assert not cache.is_fresh("two", "a")
    assert cache.is_fresh("one", "a")
    assert one.writes.is_fresh("two/a")  # recorded only where the object lives


def test_cache_wiring_reaches_every_informer() -> None:
    one, two = _informer("one"), _informer("two")
    cache = ResourceCache(CONFIGMAPS, [one, two])
    seen: list[str] = []
    cache.add_handler(Handler(on_add=lambda o: seen.append(o["metadata"]["namespace"])))
    cache.add_indexer("app", index_by_label("app"))
    one._apply("ADDED", _obj("a", "11", ns="one", app="x"))
    two._apply("ADDED", _obj("a", "12", ns="two", app="x"))
    assert seen == ["one", "two"]
    assert [_rv(o) for o in cache.list(index="app", value="two/x")] == ["12"]
    assert not cache.has_synced()
    one.synced.set()
    two.synced.set()
    assert cache.has_synced()


def test_cluster_wide_cache_serves_every_namespace() -> None:
    inf = _informer(None)
    cache = ResourceCache(CONFIGMAPS, [inf])
    inf.store.upsert(_obj("a", "5", ns="x"))
    assert _rv(cache.get("x", "a")) == "5"
    assert cache.record_write(_obj("a", "12", ns="y")) is False
    assert _rv(cache.get("y", "a")) == "12"


async def test_manager_shares_caches_and_informers() -> None:
    client = KubeClient(ClientConfig(server="https://127.0.0.1:9"))
    try:
        mgr = Manager(client, ManagerOptions(metrics_addr=None, probe_addr=None))
        cache = mgr.cache(CONFIGMAPS, namespaces=["a", "b"], label_selector="x=1")
        assert mgr.cache(CONFIGMAPS, namespaces=["a", "b"], label_selector="x=1") is cache
        assert [i.namespace for i in cache.informers] == ["a", "b"]
        # Code that still asks for one namespace's informer gets the cache's own.
        assert mgr.informer(CONFIGMAPS, namespace="b", label_selector="x=1") is cache.informers[1]
        assert len(mgr.cache(CONFIGMAPS, namespaces=["a", "a"]).informers) == 1
        everywhere = mgr.cache(CONFIGMAPS)
        assert [i.namespace for i in everywhere.informers] == [None]
        assert everywhere is not cache
    finally:
        await client.close()


class _RelistingClient:
    """Lists ``lists`` in turn; the first watch fails with 410 Gone once ``expire`` is set,
    later ones stay open."""

    def __init__(self, lists: list[dict[str, Any]]) -> None:
        self.lists = lists
        self.watches = 0
        self.expire = asyncio.Event()

    async def list(self, *args: Any, **kwargs: Any) -> dict[str, Any]:
        return self.lists.pop(0)

    async def watch(self, *args: Any, **kwargs: Any) -> AsyncIterator[WatchEvent]:
        self.watches += 1
        if self.watches == 1:
            await self.expire.wait()
            yield WatchEvent("ERROR", {"code": 410, "reason": "Expired"})
        await asyncio.Event().wait()


async def test_relist_after_gone_clears_a_write_whose_object_was_deleted() -> None:
    first = {"metadata": {"resourceVersion": "10"}, "items": [_obj("a", "10")]}
    second = {"metadata": {"resourceVersion": "30"}, "items": []}  # deleted meanwhile
    client = _RelistingClient([first, second])
    inf = Informer(client, CONFIGMAPS, namespace="n")  # type: ignore[arg-type]
    deleted: list[str] = []
    gone = asyncio.Event()

    def on_delete(obj: dict[str, Any]) -> None:
        deleted.append(obj["metadata"]["name"])
        gone.set()

    inf.add_handler(Handler(on_delete=on_delete))
    inf.start()
    try:
        await inf.wait_synced(5)
        assert inf.record_write(_obj("a", "12"), based_on="10")
        assert not inf.is_fresh("n", "a")
        client.expire.set()
        async with asyncio.timeout(5):
            await gone.wait()
        assert inf.relists == 2
        assert deleted == ["a"]
        assert inf.is_fresh("n", "a")
        assert inf.get("n", "a") is None
    finally:
        await inf.stop()


async def test_a_controller_watches_a_cache_through_all_its_informers() -> None:
    one, two = _informer("one"), _informer("two")
    cache = ResourceCache(CONFIGMAPS, [one, two])
    seen: list[str] = []
    both = asyncio.Event()

    async def reconcile(req: Request) -> None:
        seen.append(req.key)
        if len(seen) == 2:
            both.set()

    ctrl = Controller("test", reconcile, concurrency=1)
    ctrl.for_(cache)
    assert ctrl.sources == [cache]
    one._apply("ADDED", _obj("a", "11", ns="one"))
    two._apply("ADDED", _obj("b", "12", ns="two"))
    one.synced.set()
    two.synced.set()
    await ctrl.start(1)
    try:
        async with asyncio.timeout(5):
            await both.wait()
    finally:
        await ctrl.stop()
    assert sorted(seen) == ["one/a", "two/b"]


async def test_standalone_caches_scope_like_the_manager_and_start_nothing() -> None:
    from kuberay.runtime.cache import CacheSource, StandaloneCaches

    client = KubeClient(ClientConfig(server="https://127.0.0.1:9"))
    try:
        mgr = Manager(client, ManagerOptions(metrics_addr=None, probe_addr=None))
        sources: list[CacheSource] = [StandaloneCaches(client), mgr]
        for caches in sources:
            scoped = caches.cache(CONFIGMAPS, namespaces=["a", "b", "a"], label_selector="x=1")
            assert [(i.namespace, i.label_selector) for i in scoped.informers] == [
                ("a", "x=1"),
                ("b", "x=1"),
            ]
            assert [i.namespace for i in caches.cache(CONFIGMAPS).informers] == [None]
        standalone = StandaloneCaches(client).cache(CONFIGMAPS)
        assert not standalone.has_synced()
        assert all(inf._task is None for inf in standalone.informers)
    finally:
        await client.close()
