"""A negative worker ``replicas`` on the real plane: accepted and clamped to minReplicas as
upstream does, but reported with an ``InvalidReplicas`` Warning event and the
``WorkerReplicasAdjusted`` condition, which goes away once the spec is fixed."""

from __future__ import annotations

from typing import Any

from operator_fixture import OperatorProcess
from test_raycluster import raycluster

from kuberay.api.constants import RAYCLUSTERS
from kuberay.devenv.testing import condition, wait_for, wait_until
from kuberay.runtime.client import JSON_PATCH, PODS, KubeClient
from kuberay.runtime.events import EVENTS_V1

COND = "WorkerReplicasAdjusted"


async def workers_of(kube: KubeClient, ns: str, cluster: str) -> list[dict[str, Any]]:
    sel = f"ray.io/cluster={cluster},ray.io/node-type=worker"
    items = (await kube.list(PODS, ns, label_selector=sel))["items"]
    return [p for p in items if not p["metadata"].get("deletionTimestamp")]


async def replica_events(kube: KubeClient, ns: str, name: str) -> list[dict[str, Any]]:
    events = (await kube.list(EVENTS_V1, ns))["items"]
    return [
        e for e in events if e["reason"] == "InvalidReplicas" and e["regarding"]["name"] == name
    ]


async def set_replicas(kube: KubeClient, ns: str, name: str, value: int) -> None:
    patch = [{"op": "replace", "path": "/spec/workerGroupSpecs/0/replicas", "value": value}]
    await kube.patch(RAYCLUSTERS, name, patch, ns, content_type=JSON_PATCH)


async def test_negative_replicas_are_reported_then_cleared(
    kube: KubeClient, namespace: str, ray_operator: OperatorProcess
) -> None:
    await kube.create(RAYCLUSTERS, raycluster("neg", replicas=-2), namespace)
    want = "worker group 'workers': replicas -2 is negative, using 0 (minReplicas)"

    obj = await wait_for(
        kube,
        RAYCLUSTERS,
        "neg",
        namespace,
        lambda o: (condition(o, COND) or {}).get("message") == want,
        timeout=30,
        what=f"condition {COND}",
    )
    cond = condition(obj, COND)
    assert cond is not None
    assert (cond["status"], cond["reason"]) == ("True", "NegativeReplicas")
    assert obj["status"]["desiredWorkerReplicas"] == 0, "clamped to minReplicas, as upstream"

    async def warned() -> bool:
        return any(e["note"] == want for e in await replica_events(kube, namespace, "neg"))

    await wait_until(warned, timeout=20, what="an InvalidReplicas event")
    events = await replica_events(kube, namespace, "neg")
    assert [e["type"] for e in events] == ["Warning"]
    await wait_for(
        kube,
        RAYCLUSTERS,
        "neg",
        namespace,
        lambda o: o.get("status", {}).get("state") == "ready",
        timeout=60,
        what="state ready (head only)",
    )
    assert await workers_of(kube, namespace, "neg") == []
    # the passes since (pods, status writes) sent no second event for the same problem
    assert len(await replica_events(kube, namespace, "neg")) == 1

    await set_replicas(kube, namespace, "neg", 1)
    await wait_for(
        kube,
        RAYCLUSTERS,
        "neg",
        namespace,
        lambda o: (
            condition(o, COND) is None and o.get("status", {}).get("desiredWorkerReplicas") == 1
        ),
        timeout=30,
        what=f"condition {COND} removed",
    )

    async def one_worker() -> bool:
        return len(await workers_of(kube, namespace, "neg")) == 1

    await wait_until(one_worker, timeout=60, what="1 worker pod")
    assert len(await replica_events(kube, namespace, "neg")) == 1
