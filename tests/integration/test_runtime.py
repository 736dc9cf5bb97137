"""The controller runtime against the real apiserver: informers, relists, conflicts, rate limits,
events, metadata-only watches, probes and metrics."""

from __future__ import annotations

import asyncio
import time
from collections.abc import AsyncIterator

import aiohttp
import pytest

from kuberay.devenv.plane import Plane
from kuberay.devenv.testing import TcpProxy, wait_until
from kuberay.runtime.client import (
    CONFIGMAPS,
    LEASES,
    PODS,
    PODTEMPLATES,
    KubeClient,
    load_kubeconfig,
)
from kuberay.runtime.controller import Controller, Request, Result
from kuberay.runtime.events import EVENTS_V1, EventRecorder
from kuberay.runtime.informer import Handler, Informer
from kuberay.runtime.manager import Manager, ManagerOptions
from kuberay.runtime.store import POD_FIELDS, Obj, projector


def _cm(name: str, data: dict[str, str] | None = None, labels: dict[str, str] | None = None) -> Obj:
    return {"metadata": {"name": name, "labels": labels or {}}, "data": data or {}}


def _same_as_server(informer: Informer, items: list[Obj]) -> bool:
    server = {o["metadata"]["name"]: o["metadata"]["resourceVersion"] for o in items}
    cached = {
        o["metadata"]["name"]: o["metadata"]["resourceVersion"] for o in informer.store.values()
    }
    return server == cached


@pytest.fixture
async def informers() -> AsyncIterator[list[Informer]]:
    started: list[Informer] = []
    yield started
    for inf in started:
        await inf.stop()


async def test_informer_lists_watches_and_indexes(
    kube: KubeClient, namespace: str, informers: list[Informer]
) -> None:
    await kube.create(CONFIGMAPS, _cm("before", labels={"group": "x"}), namespace)
    seen: list[tuple[str, str]] = []
    inf = Informer(kube, CONFIGMAPS, namespace=namespace, label_selector="group")
    inf.add_handler(
        Handler(
            on_add=lambda o: seen.append(("add", o["metadata"]["name"])),
            on_update=lambda _o, n: seen.append(("update", n["metadata"]["name"])),
            on_delete=lambda o: seen.append(("delete", o["metadata"]["name"])),
        )
    )
    informers.append(inf)
    inf.start()
    await inf.wait_synced(10)
    assert seen == [("add", "before")]
    await kube.create(CONFIGMAPS, _cm("after", labels={"group": "y"}), namespace)
    await kube.create(CONFIGMAPS, _cm("unlabelled"), namespace)
    await kube.patch(CONFIGMAPS, "before", {"data": {"k": "v"}}, namespace)
    await kube.delete(CONFIGMAPS, "after", namespace)

    async def all_seen() -> bool:
        return ("delete", "after") in seen

    await wait_until(all_seen, timeout=10, what="the delete event")
    assert seen == [("add", "before"), ("add", "after"), ("update", "before"), ("delete", "after")]
    assert [o["metadata"]["name"] for o in inf.store.by_index("namespace", namespace)] == ["before"]
    assert "managedFields" not in inf.store.values()[0]["metadata"]


async def test_relist_after_410_reports_deletions_made_while_disconnected(
    plane: Plane, namespace: str, informers: list[Informer]
) -> None:
    # The informer talks to the apiserver through a proxy the test can cut. podtemplates bypass
    # the watch cache on the test plane, so the resumed watch reaches etcd and gets 410.
    proxy = TcpProxy("127.0.0.1", plane.ports["kube-apiserver"])
    await proxy.start()
    config = load_kubeconfig(plane.kubeconfig)
    config.server = f"https://127.0.0.1:{proxy.port}"
    config.qps = 0
    direct = load_kubeconfig(plane.kubeconfig)
    async with KubeClient(config) as via_proxy, KubeClient(direct) as kube:
        tpl = {"template": {"spec": {"containers": [{"name": "c", "image": "i"}]}}}
        for name in ("a", "b", "c"):
            await kube.create(PODTEMPLATES, {"metadata": {"name": name}, **tpl}, namespace)
        deleted: list[str] = []
        inf = Informer(via_proxy, PODTEMPLATES, namespace=namespace, stall_timeout=5)
        inf.add_handler(Handler(on_delete=lambda o: deleted.append(o["metadata"]["name"])))
        informers.append(inf)
        inf.start()
        await inf.wait_synced(10)
        relists = inf.relists

        proxy.cut()
        await kube.delete(PODTEMPLATES, "a", namespace)
        await kube.delete(PODTEMPLATES, "b", namespace)
        await kube.create(PODTEMPLATES, {"metadata": {"name": "d"}, **tpl}, namespace)
        plane.compact_etcd()
        proxy.restore()

        async def converged() -> bool:
            return sorted(inf.store.keys()) == [f"{namespace}/c", f"{namespace}/d"]

        await wait_until(converged, timeout=60, what="the informer to relist")
        assert sorted(deleted) == ["a", "b"]
        assert inf.relists > relists, "a 410 must lead to a relist"
    await proxy.stop()


async def test_watch_resumes_across_an_apiserver_restart(
    plane: Plane, namespace: str, informers: list[Informer]
) -> None:
    config = load_kubeconfig(plane.kubeconfig)
    config.qps = 0
    async with KubeClient(config) as kube:
        inf = Informer(kube, CONFIGMAPS, namespace=namespace)
        informers.append(inf)
        inf.start()
        await kube.create(CONFIGMAPS, _cm("one"), namespace)
        await inf.wait_synced(10)
        await asyncio.to_thread(plane.restart_component, "kube-apiserver")
        await kube.create(CONFIGMAPS, _cm("two"), namespace)
        await kube.delete(CONFIGMAPS, "one", namespace)

        async def converged() -> bool:
            names = {k for k in inf.store if not k.endswith("kube-root-ca.crt")}
            return names == {f"{namespace}/two"}

        await wait_until(converged, timeout=60, what="the informer to catch up after restart")


async def test_ten_thousand_rapid_updates_end_with_cache_equal_to_server(
    kube: KubeClient, namespace: str, informers: list[Informer]
) -> None:
    objects, rounds = 100, 100
    for i in range(objects):
        await kube.create(CONFIGMAPS, _cm(f"cm-{i}", {"n": "0"}), namespace)
    inf = Informer(kube, CONFIGMAPS, namespace=namespace)
    informers.append(inf)
    inf.start()
    await inf.wait_synced(10)

    async def writer(i: int) -> None:
        for n in range(1, rounds + 1):
            await kube.patch(CONFIGMAPS, f"cm-{i}", {"data": {"n": str(n)}}, namespace)

    start = time.monotonic()
    await asyncio.gather(*(writer(i) for i in range(objects)))
    elapsed = time.monotonic() - start
    items = (await kube.list(CONFIGMAPS, namespace))["items"]
    items = [o for o in items if o["metadata"]["name"].startswith("cm-")]

    async def equal() -> bool:
        return _same_as_server(
            inf,
            [
                *items,
                *(o for o in inf.store.values() if not o["metadata"]["name"].startswith("cm-")),
            ],
        )

    await wait_until(equal, timeout=30, what="the cache to equal the server")
    assert all(o["data"]["n"] == str(rounds) for o in items)
    print(f"{objects * rounds} updates in {elapsed:.1f}s ({objects * rounds / elapsed:.0f}/s)")


async def test_controller_retries_conflicts_until_every_increment_lands(
    kube: KubeClient, namespace: str, informers: list[Informer]
) -> None:
    """Many requests race on read-modify-write of one counter; Conflict means requeue."""
    await kube.create(CONFIGMAPS, _cm("counter", {"n": "0"}), namespace)
    work = [f"req-{i}" for i in range(30)]
    applied: set[str] = set()

    async def reconcile(req: Request) -> Result | None:
        if req.name in applied:
            return None
        current = await kube.get(CONFIGMAPS, "counter", namespace)
        await asyncio.sleep(0.01)  # widen the race window
        current["data"]["n"] = str(int(current["data"]["n"]) + 1)
        await kube.update(CONFIGMAPS, current)  # raises Conflict when someone else won
        applied.add(req.name)
        return None

    ctrl = Controller("counter", reconcile, concurrency=8)
    await ctrl.start()
    for key in work:
        ctrl.queue.add(f"{namespace}/{key}")

    async def all_applied() -> bool:
        return len(applied) == len(work)

    await wait_until(all_applied, timeout=60, what="every increment")
    await ctrl.stop()
    final = await kube.get(CONFIGMAPS, "counter", namespace)
    assert final["data"]["n"] == str(len(work))
    assert ctrl.reconciles > len(work), "the race must have produced conflicts that were retried"


async def test_client_rate_limiter_holds_under_a_burst(plane: Plane, namespace: str) -> None:
    config = load_kubeconfig(plane.kubeconfig)
    config.qps, config.burst = 20, 5
    async with KubeClient(config) as limited:
        start = time.monotonic()
        await asyncio.gather(
            *(limited.get(CONFIGMAPS, "kube-root-ca.crt", namespace) for _ in range(45))
        )
        elapsed = time.monotonic() - start
    # 5 immediately, then 40 more at 20/s
    assert elapsed >= 1.9, elapsed


async def test_events_are_aggregated_into_a_series(kube: KubeClient, namespace: str) -> None:
    cm = await kube.create(CONFIGMAPS, _cm("subject"), namespace)
    cm.update(apiVersion="v1", kind="ConfigMap")
    rec = EventRecorder(kube, "test-controller", "test-1")
    rec.start()
    for _ in range(5):
        rec.event(cm, "Warning", "Stuck", "the same thing again")
    rec.event(cm, "Normal", "Created", "something else")
    await rec.stop()
    events = (await kube.list(EVENTS_V1, namespace))["items"]
    ours = {e["reason"]: e for e in events if e["regarding"]["name"] == "subject"}
    assert set(ours) == {"Stuck", "Created"}
    assert ours["Stuck"]["series"]["count"] == 5
    assert ours["Stuck"]["reportingController"] == "test-controller"
    assert "series" not in ours["Created"]


async def test_event_rate_limit_per_object(kube: KubeClient, namespace: str) -> None:
    cm = await kube.create(CONFIGMAPS, _cm("noisy"), namespace)
    rec = EventRecorder(kube, "test-controller", "test-1", burst=3)
    rec.start()
    for i in range(10):
        rec.event(cm, "Normal", "Tick", f"tick {i}")
    await rec.stop()
    assert rec.sent == 3
    assert rec.dropped == 7


async def test_metadata_only_informer(
    kube: KubeClient, namespace: str, informers: list[Informer]
) -> None:
    await kube.create(CONFIGMAPS, _cm("big", {"payload": "x" * 10000}), namespace)
    inf = Informer(kube, CONFIGMAPS, namespace=namespace, metadata_only=True)
    informers.append(inf)
    inf.start()
    await inf.wait_synced(10)
    obj = inf.store.get_by_name(namespace, "big")
    assert obj is not None
    assert obj["kind"] == "ConfigMap"
    assert "data" not in obj
    assert obj["metadata"]["uid"]


async def test_manager_probes_metrics_and_clean_stop(plane: Plane, namespace: str) -> None:
    config = load_kubeconfig(plane.kubeconfig)
    async with KubeClient(config) as kube:
        mgr = Manager(
            kube,
            ManagerOptions(
                metrics_addr="127.0.0.1:0",
                probe_addr="127.0.0.1:0",
                leader_election=True,
                leader_election_namespace=namespace,
                identity="mgr-test",
            ),
        )
        seen: list[str] = []

        async def reconcile(req: Request) -> None:
            seen.append(req.name)

        inf = mgr.informer(CONFIGMAPS, namespace=namespace)
        mgr.controller("cm", reconcile, concurrency=2).for_(inf)
        stop = asyncio.Event()
        task = asyncio.create_task(mgr.run(stop))
        await asyncio.wait_for(mgr.leading.wait(), 20)
        await kube.create(CONFIGMAPS, _cm("hello"), namespace)

        async def reconciled() -> bool:
            return "hello" in seen

        await wait_until(reconciled, timeout=10, what="a reconcile")
        # probes and metrics share the one address given, so they share a port
        port = mgr.endpoints.bound[0][1]
        async with aiohttp.ClientSession() as http:
            async with http.get(f"http://127.0.0.1:{port}/healthz") as resp:
                assert resp.status == 200
            async with http.get(f"http://127.0.0.1:{port}/readyz") as resp:
                assert resp.status == 200
            async with http.get(f"http://127.0.0.1:{port}/metrics") as resp:
                text = await resp.text()
        for name in (
            'controller_runtime_reconcile_total{controller="cm",result="success"}',
            'workqueue_adds_total{controller="cm",name="cm"}',
            "rest_client_requests_total",
            'kuberay_informer_events_total{resource="configmaps",type="ADDED"}',
            'leader_election_master_status{name="ray-operator-leader"} 1.0',
        ):
            assert name in text, name
        stop.set()
        assert await asyncio.wait_for(task, 20) == 0
        lease = await kube.get(LEASES, "ray-operator-leader", namespace)
        assert lease["spec"]["holderIdentity"] == "", "the lease is released on a clean stop"


def _pod(name: str) -> Obj:
    return {"metadata": {"name": name}, "spec": {"containers": [{"name": "c", "image": "i"}]}}


async def test_client_pool_is_capped_and_serves_text(plane: Plane, namespace: str) -> None:
    """More requests in flight than connections: all complete over at most max_connections
    sockets; a text endpoint (the apiserver's /metrics) comes back as text."""
    config = load_kubeconfig(plane.kubeconfig)
    config.qps, config.max_connections = 0, 3
    async with KubeClient(config) as capped:
        results = await asyncio.gather(
            *(capped.get(CONFIGMAPS, "kube-root-ca.crt", namespace) for _ in range(40))
        )
        assert len(results) == 40
        connector = capped._session.connector
        assert connector is not None
        assert connector.limit == 3
        text = await capped.request("GET", "/metrics", accept="text/plain")
        assert isinstance(text, str)
        assert "apiserver_request_total{" in text


async def test_pod_informer_with_label_scope_and_projection(
    kube: KubeClient, namespace: str, informers: list[Informer]
) -> None:
    labelled = _pod("ray-pod")
    labelled["metadata"]["labels"] = {"ray.io/node-type": "worker"}
    await kube.create(PODS, labelled, namespace)
    await kube.create(PODS, _pod("other-pod"), namespace)
    inf = Informer(
        kube,
        PODS,
        namespace=namespace,
        label_selector="ray.io/node-type",
        transform=projector(POD_FIELDS),
    )
    informers.append(inf)
    inf.start()
    await inf.wait_synced(10)
    assert inf.store.keys() == [f"{namespace}/ray-pod"]
    pod = inf.store.get_by_name(namespace, "ray-pod")
    assert pod is not None
    assert "volumes" not in pod["spec"]
