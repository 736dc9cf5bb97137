"""The raycluster-mtls reconciler without a manager: the order of its writes, the SAN updates
that follow pods, and the events and requeues upstream's controller gives (texts users match)."""

from __future__ import annotations

import datetime as dt
from typing import Any, cast

import pytest

from kuberay.api.constants import CM_CERTIFICATES, CM_ISSUERS, RAYCLUSTERS
from kuberay.builders import mtls as b
from kuberay.builders.options import BuildOptions
from kuberay.controllers import mtls
from kuberay.runtime.cache import ResourceCache
from kuberay.runtime.client import PODS, KubeClient, Resource
from kuberay.runtime.controller import Request, Result
from kuberay.runtime.errors import error_for
from kuberay.runtime.events import EventRecorder
from kuberay.runtime.informer import Informer
from kuberay.runtime.store import index_by_label

REQ = Request("ns", "c")
OPTS = BuildOptions(mtls=True)


class Writes:
    """A client that records (verb, kind, name); ``fail`` maps a name to the error its create
    answers; Secrets are never found."""

    def __init__(self, fail: dict[str, Exception] | None = None) -> None:
        self.calls: list[tuple[str, str, str]] = []
        self.fail = fail or {}

    async def create(self, res: Resource, obj: dict[str, Any], ns: str) -> Any:
        self.calls.append(("create", res.kind, obj["metadata"]["name"]))
        if obj["metadata"]["name"] in self.fail:
            raise self.fail[obj["metadata"]["name"]]
        return obj

    async def update(self, res: Resource, obj: dict[str, Any]) -> Any:
        self.calls.append(("update", res.kind, obj["metadata"]["name"]))
        return obj

    async def get(self, res: Resource, name: str, ns: str) -> Any:
        self.calls.append(("get", res.kind, name))
        raise error_for(404, {"reason": "NotFound", "message": "m"}, "GET", "/x")


class Events:
    def __init__(self) -> None:
        self.seen: list[tuple[str, str, str]] = []

    def event(self, obj: Any, etype: str, reason: str, message: str, action: str = "") -> None:
        self.seen.append((etype, reason, message))


def _cache(res: Resource, *objs: dict[str, Any]) -> ResourceCache:
    inf = Informer(cast(KubeClient, None), res)
    for obj in objs:
        inf.store.upsert(obj)
    cache = ResourceCache(res, [inf])
    if res is PODS:
        cache.add_indexer("cluster", index_by_label("ray.io/cluster"))
    return cache


def _cluster() -> dict[str, Any]:
    return {
        "metadata": {"name": "c", "namespace": "ns", "uid": "0123456789"},
        "spec": {"tlsOptions": {"enabled": True}, "headGroupSpec": {}},
    }


def _ready(cert: dict[str, Any], **status: Any) -> dict[str, Any]:
    cert["metadata"].update(uid=f"u-{cert['metadata']['name']}", generation=1)
    cert["status"] = {
        "conditions": [{"type": "Ready", "status": "True", "observedGeneration": 1}],
        **status,
    }
    return cert


def _reconciler(
    client: Writes,
    *,
    certs: tuple[dict[str, Any], ...] = (),
    pods: tuple[dict[str, Any], ...] = (),
) -> tuple[mtls.MTLSReconciler, Events]:
    events = Events()
    r = mtls.MTLSReconciler(
        cast(KubeClient, client),
        cast(EventRecorder, events),
        OPTS,
        _cache(RAYCLUSTERS, _cluster()),
        _cache(PODS, *pods),
        _cache(CM_ISSUERS),
        _cache(CM_CERTIFICATES, *certs),
    )
    return r, events


async def test_first_pass_creates_the_chain_in_order_and_waits() -> None:
    client = Writes()
    r, events = _reconciler(client)
    assert await r.reconcile(REQ) == Result(requeue_after=30.0)
    assert [c for c in client.calls if c[0] == "create"] == [
        ("create", "Issuer", "ray-selfsigned-issuer-c"),
        ("create", "Certificate", "ray-ca-certificate-c"),
        ("create", "Issuer", "ray-ca-issuer-c"),
        ("create", "Certificate", "ray-head-cert-c"),
        ("create", "Certificate", "ray-worker-cert-c"),
    ]
    assert events.seen == [
        ("Normal", "MTLSCertsNotReady", "Waiting for cert-manager to issue mTLS certificates")
    ]


async def test_a_failed_step_stops_the_chain_with_upstreams_warning() -> None:
    denied = error_for(403, {"reason": "Forbidden", "message": "no"}, "POST", "/x")
    client = Writes(fail={"ray-ca-certificate-c": denied})
    r, events = _reconciler(client)
    with pytest.raises(mtls._StepFailed):
        await r.reconcile(REQ)
    assert [c[2] for c in client.calls] == ["ray-selfsigned-issuer-c", "ray-ca-certificate-c"]
    assert len(events.seen) == 1
    etype, reason, message = events.seen[0]
    assert (etype, reason) == ("Warning", "MTLSFailedToReconcile")
    assert message.startswith("Failed to reconcile mTLS CA certificate: ")


async def test_new_worker_ip_rewrites_the_sans_then_ready_pki_requeues_a_minute() -> None:
    cluster = _cluster()
    head = _ready(b.leaf_certificate(cluster, "head", ["127.0.0.1"], OPTS))
    worker = _ready(b.leaf_certificate(cluster, "worker", ["127.0.0.1"], OPTS))
    soon = (dt.datetime.now(dt.UTC) + dt.timedelta(hours=2)).isoformat()
    ca = _ready(b.ca_certificate(cluster), notAfter=soon)
    pod: dict[str, Any] = {
        "metadata": {
            "name": "w",
            "namespace": "ns",
            "labels": {"ray.io/cluster": "c", "ray.io/node-type": "worker"},
        },
        "status": {"podIP": "10.1.2.3", "phase": "Running"},
    }
    client = Writes()
    r, events = _reconciler(client, certs=(head, worker, ca), pods=(pod,))
    assert await r.reconcile(REQ) == Result(requeue_after=60.0)
    assert [c for c in client.calls if c[0] == "update"] == [
        ("update", "Certificate", "ray-worker-cert-c")
    ]
    assert (
        "Normal",
        "MTLSCertificatesUpdated",
        "Updated worker certificate SANs (IPs: [10.1.2.3 127.0.0.1])",
    ) in events.seen
    assert (
        "Normal",
        "MTLSPKIReady",
        "mTLS PKI is ready: CA, head, and worker certificates issued",
    ) in events.seen
    expiring = [e for e in events.seen if e[1] == "MTLSCertificateExpiringSoon"]
    assert len(expiring) == 1
    assert expiring[0][2].startswith("TLS certificate ray-ca-certificate-c expires in 2.0 hours;")
