"""Which owned-object events reach the work queue's urgent lane (``Controller.owns(urgent=)``)."""

from __future__ import annotations

import pytest

from kuberay.controllers.raycluster_status import pod_turned_ready
from kuberay.runtime.controller import Controller, Result
from kuberay.runtime.informer import Handler
from kuberay.runtime.store import Obj


class Source:
    """An event source that hands its handler to the test."""

    def __init__(self) -> None:
        self.handlers: list[Handler] = []

    def add_handler(self, handler: Handler) -> None:
        self.handlers.append(handler)

    async def wait_synced(self, timeout: float | None = None) -> None:
        del timeout


def pod(name: str, ready: str | None) -> Obj:
    status: Obj = {"phase": "Running"}
    if ready is not None:
        status["conditions"] = [{"type": "Ready", "status": ready}]
    return {
        "metadata": {
            "namespace": "ns",
            "name": name,
            "ownerReferences": [
                {"apiVersion": "ray.io/v1", "kind": "RayCluster", "name": "rc", "controller": True}
            ],
        },
        "status": status,
    }


@pytest.mark.parametrize(
    ("old", "new", "want"),
    [
        (None, "True", True),
        ("False", "True", True),
        ("True", "True", False),
        ("True", "False", False),
        ("False", "False", False),
        (None, None, False),
    ],
)
def test_pod_turned_ready(old: str | None, new: str | None, want: bool) -> None:
    assert pod_turned_ready(pod("p", old), pod("p", new)) is want
    assert pod_turned_ready(None, pod("p", new)) is (new == "True")


async def test_a_pod_turning_ready_queues_its_cluster_ahead() -> None:
    async def reconcile(_req: object) -> Result:
        return Result()

    ctrl = Controller("t", reconcile)
    pods = Source()
    ctrl.owns(pods, "RayCluster", "ray.io", urgent=pod_turned_ready)
    handler = pods.handlers[0]
    assert handler.on_update is not None
    for name in ("a", "b"):
        ctrl.queue.add(f"ns/{name}")
    handler.on_update(pod("p", "False"), pod("p", "False"))  # a plain change: back of the queue
    assert [await ctrl.queue.get() for _ in range(3)] == ["ns/a", "ns/b", "ns/rc"]
    for key in ("ns/a", "ns/b", "ns/rc"):
        ctrl.queue.done(key)
    for name in ("a", "b"):
        ctrl.queue.add(f"ns/{name}")
    handler.on_update(pod("p", "False"), pod("p", "True"))
    assert [await ctrl.queue.get() for _ in range(3)] == ["ns/rc", "ns/a", "ns/b"]
