"""RayService controller logic that needs no API server: the serve proxy probe, the
conditions, "should a new cluster be prepared", and what counts as a status change."""

from __future__ import annotations

import asyncio
import copy
from typing import Any

from kuberay.builders import rayservice as rsb
from kuberay.controllers.rayservice import (
    ENDPOINTSLICE_FIELDS,
    RayServiceConfig,
    RayServiceReconciler,
    _comparable,
    proxy_healthz,
)
from kuberay.runtime.store import projector

SERVE = "applications:\n  - name: app\n    import_path: mod:app\n"
NOW = 1_700_000_000.0


def rayservice(**spec: Any) -> dict[str, Any]:
    cluster = {
        "headGroupSpec": {"template": {"spec": {"containers": [{"name": "h", "image": "a"}]}}},
        "workerGroupSpecs": [],
    }
    body: dict[str, Any] = {"serveConfigV2": SERVE, "rayClusterConfig": cluster}
    body.update(spec)
    return {
        "metadata": {"name": "svc", "namespace": "ns", "generation": 3},
        "spec": body,
        "status": {},
    }


def reconciler(**config: Any) -> RayServiceReconciler:
    # Only the pure parts are exercised: no Manager, informers or client are needed.
    rec = RayServiceReconciler.__new__(RayServiceReconciler)
    rec.config = RayServiceConfig(**{"clock": lambda: NOW, **config})
    return rec


async def _serve_once(answer: bytes) -> tuple[asyncio.Server, int]:
    async def handle(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        await reader.readline()
        writer.write(answer)
        await writer.drain()
        writer.close()

    server = await asyncio.start_server(handle, "127.0.0.1", 0)
    port = server.sockets[0].getsockname()[1]
    return server, int(port)


async def test_proxy_probe_healthy_unhealthy_unreachable() -> None:
    server, port = await _serve_once(b"HTTP/1.1 200 OK\r\nContent-Length: 7\r\n\r\nsuccess")
    async with server:
        assert await proxy_healthz("127.0.0.1", port) is True
    server, port = await _serve_once(b"HTTP/1.1 503 Service Unavailable\r\n\r\n")
    async with server:
        assert await proxy_healthz("127.0.0.1", port) is False
    assert await proxy_healthz("127.0.0.1", port, timeout=0.5) is None


def test_should_prepare_new_cluster() -> None:
    rec = reconciler()
    svc = rayservice()
    assert rec._should_prepare_new_cluster(svc, None, None), "first cluster"
    active = rsb.build_cluster(svc, "svc-aaaaa")
    assert not rec._should_prepare_new_cluster(svc, active, None), "nothing changed"
    changed = copy.deepcopy(svc)
    changed["spec"]["rayClusterConfig"]["headGroupSpec"]["template"]["spec"]["containers"][0][
        "image"
    ] = "b"
    assert rec._should_prepare_new_cluster(changed, active, None), "NewCluster by default"
    none = copy.deepcopy(changed)
    none["spec"]["upgradeStrategy"] = {"type": "None"}
    assert not rec._should_prepare_new_cluster(none, active, None)
    assert not reconciler(zero_downtime=False)._should_prepare_new_cluster(changed, active, None)
    explicit = copy.deepcopy(changed)
    explicit["spec"]["upgradeStrategy"] = {"type": "NewCluster"}
    assert reconciler(zero_downtime=False)._should_prepare_new_cluster(explicit, active, None)
    # A pending cluster for the goal is kept; one for an older goal is replaced.
    pending = rsb.build_cluster(changed, "svc-bbbbb")
    assert not rec._should_prepare_new_cluster(changed, active, pending)
    assert rec._should_prepare_new_cluster(svc, active, pending)
    # A chosen but not yet created pending cluster is never replaced by another name.
    changed["status"]["pendingServiceStatus"] = {"rayClusterName": "svc-ccccc"}
    assert not rec._should_prepare_new_cluster(changed, active, None)


def test_initializing_timeout() -> None:
    rec = reconciler()
    svc = rayservice()
    svc["metadata"]["annotations"] = {"ray.io/initializing-timeout": "30"}
    rec._init_conditions(svc)
    assert not rec._initializing_timed_out(svc)
    ready = rec._condition(svc, "Ready")
    assert ready is not None
    later = reconciler(clock=lambda: NOW + 31)
    later.recorder = _Recorder()  # type: ignore[assignment]
    assert later._initializing_timed_out(svc)
    ready = later._condition(svc, "Ready")
    assert ready is not None
    assert ready["reason"] == "InitializingTimeout"
    assert later._initializing_timed_out(svc), "terminal"


class _Recorder:
    def __init__(self) -> None:
        self.events: list[tuple[str, str]] = []

    def event(self, obj: Any, etype: str, reason: str, message: str, action: str) -> None:
        self.events.append((etype, reason))


def test_status_changes_that_warrant_a_write() -> None:
    base: dict[str, Any] = {
        "activeServiceStatus": {"rayClusterName": "a", "rayClusterStatus": {"state": "ready"}},
        "lastUpdateTime": "t1",
        "conditions": [{"type": "Ready", "status": "True", "lastTransitionTime": "t1"}],
    }
    other = copy.deepcopy(base)
    other["activeServiceStatus"]["rayClusterStatus"] = {"state": "suspended"}
    other["lastUpdateTime"] = "t2"
    assert _comparable(base) == _comparable(other)
    other["activeServiceStatus"]["rayClusterName"] = "b"
    assert _comparable(base) != _comparable(other)


def test_waiting_for_says_why_an_upgrade_waits() -> None:
    rec = reconciler()
    svc = rayservice()
    assert rec._waiting_for(svc, None, None) == ""
    svc["status"]["pendingServiceStatus"] = {"rayClusterName": "svc-bbbbb"}
    assert rec._waiting_for(svc, None, None) == "creating RayCluster svc-bbbbb"
    pending = rsb.build_cluster(svc, "svc-bbbbb")
    assert "head pod" in rec._waiting_for(svc, pending, None)
    pending["status"] = {"conditions": [{"type": "HeadPodReady", "status": "True"}]}
    assert "dashboard" in rec._waiting_for(svc, pending, None)
    apps = {"a": {"status": "RUNNING"}, "b": {"status": "DEPLOYING"}}
    assert rec._waiting_for(svc, pending, apps).endswith("to be RUNNING: b=DEPLOYING")


def test_endpointslice_projection_keeps_what_counting_ready_endpoints_needs() -> None:
    def endpoint(uid: str | None, ready: bool) -> dict[str, object]:
        ep: dict[str, object] = {
            "addresses": ["10.0.0.1"],
            "conditions": {"ready": ready, "serving": ready, "terminating": False},
            "nodeName": "n1",
        }
        if uid:
            ep["targetRef"] = {"kind": "Pod", "name": f"p-{uid}", "namespace": "ns", "uid": uid}
        return ep

    full = {
        "apiVersion": "discovery.k8s.io/v1",
        "kind": "EndpointSlice",
        "metadata": {
            "name": "svc-abc",
            "namespace": "ns",
            "uid": "s1",
            "resourceVersion": "7",
            "labels": {"kubernetes.io/service-name": "svc"},
            "ownerReferences": [{"kind": "Service", "name": "svc", "uid": "x"}],
        },
        "addressType": "IPv4",
        "ports": [{"name": "serve", "port": 8000, "protocol": "TCP"}],
        "endpoints": [endpoint("a", True), endpoint("b", False), endpoint(None, True)],
    }
    transform = projector(ENDPOINTSLICE_FIELDS)
    slim = transform(copy.deepcopy(full))
    assert rsb.count_ready_endpoints([slim]) == rsb.count_ready_endpoints([full]) == 2
    assert slim["metadata"]["labels"] == {"kubernetes.io/service-name": "svc"}
    assert "ports" not in slim
    assert slim["endpoints"][0] == {"conditions": {"ready": True}, "targetRef": {"uid": "a"}}
