"""EventRecorder under a slow apiserver: one sender by default or several in parallel,
per-key order, Warnings first, counted drops and a bounded stop. The fake client stands in for
the two calls the recorder makes."""

from __future__ import annotations

import asyncio
import time
import zlib
from typing import Any

from kuberay.runtime.client import ClientConfig, KubeClient, Resource
from kuberay.runtime.events import NORMAL, WARNING, EventRecorder
from kuberay.runtime.manager import Manager, ManagerOptions


class SlowApi:
    """Records creates and patches; each takes ``latency`` seconds, like a busy apiserver."""

    def __init__(self, latency: float) -> None:
        self.latency = latency
        self.calls: list[tuple[str, str, dict[str, Any]]] = []  # (verb, event name, body)
        self.in_flight = 0
        self.max_in_flight = 0

    async def _call(self, verb: str, name: str, body: dict[str, Any]) -> dict[str, Any]:
        self.in_flight += 1
        self.max_in_flight = max(self.max_in_flight, self.in_flight)
        try:
            await asyncio.sleep(self.latency)
        finally:
            self.in_flight -= 1
        self.calls.append((verb, name, body))
        return body

    async def create(
        self, res: Resource, obj: dict[str, Any], namespace: str | None = None
    ) -> dict[str, Any]:
        return await self._call("create", obj["metadata"]["name"], obj)

    async def patch(
        self, res: Resource, name: str, patch: Any, namespace: str | None = None
    ) -> dict[str, Any]:
        return await self._call("patch", name, patch)


def _obj(uid: str) -> dict[str, Any]:
    return {
        "apiVersion": "ray.io/v1",
        "kind": "RayCluster",
        "metadata": {"name": f"rc-{uid}", "namespace": "ns", "uid": uid},
    }


async def test_by_default_one_event_is_in_flight_at_a_time() -> None:
    """As client-go's recorder: a slow apiserver slows the events down instead of getting
    more of them at once."""
    api = SlowApi(0.02)
    rec = EventRecorder(api, "test", "i-1")
    rec.start()
    for i in range(10):
        rec.event(_obj(f"obj-{i}"), NORMAL, "Created", f"created {i}")
    await rec.stop(flush_timeout=5)
    assert rec.sent == 10
    assert api.max_in_flight == 1


async def test_senders_work_in_parallel() -> None:
    api = SlowApi(0.2)
    rec = EventRecorder(api, "test", "i-1", senders=4)
    rec.start()
    start = time.monotonic()
    for i in range(40):
        rec.event(_obj(f"obj-{i}"), NORMAL, "Created", f"created {i}")
    await rec.stop(flush_timeout=5)  # returns once the backlog is sent
    elapsed = time.monotonic() - start
    assert rec.sent == 40
    # One sender would need 40 * 0.2 = 8 s; four take about 2 s.
    assert elapsed < 3.0, elapsed
    assert api.max_in_flight == 4
    assert len([c for c in api.calls if c[0] == "create"]) == 40
    assert rec.dropped == 0


async def test_repeats_of_one_key_are_one_create_and_ordered_patches() -> None:
    api = SlowApi(0.02)
    rec = EventRecorder(api, "test", "i-1", senders=4, burst=100)
    rec.start()
    # Interleave the repeats with other objects' events so every sender is busy.
    for i in range(12):
        rec.event(_obj("hot"), WARNING, "InvalidSpec", "spec is invalid", "Validate")
        rec.event(_obj(f"other-{i}"), NORMAL, "Created", "created")
    await rec.stop(flush_timeout=5)
    hot = [c for c in api.calls if c[0] == "create" and c[2]["regarding"]["uid"] == "hot"]
    assert len(hot) == 1
    name = hot[0][1]
    counts = [c[2]["series"]["count"] for c in api.calls if c[0] == "patch" and c[1] == name]
    assert counts == list(range(2, 13))
    assert rec.sent == 24


async def test_a_warning_overtakes_queued_normals_of_its_shard() -> None:
    api = SlowApi(0.05)
    rec = EventRecorder(api, "test", "i-1", burst=100)
    rec.start()
    # One object, so one shard: its sender is working through 50 Normals when the Warning comes.
    for i in range(50):
        rec.event(_obj("busy"), NORMAL, "Scaled", f"scaled to {i}")
    await asyncio.sleep(0.12)
    sent_before = len(api.calls)
    assert 0 < sent_before < 10
    rec.event(_obj("busy"), WARNING, "InvalidSpec", "spec is invalid")
    await rec.stop(flush_timeout=5)
    reasons = [c[2]["reason"] for c in api.calls if c[0] == "create"]
    assert len(reasons) == 51
    # Only the Normal already in flight goes before it.
    assert reasons.index("InvalidSpec") <= sent_before + 1


async def test_a_full_queue_drops_normals_and_counts_them_in_the_metric() -> None:
    client = KubeClient(ClientConfig(server="https://127.0.0.1:9"))
    try:
        mgr = Manager(client, ManagerOptions(metrics_addr=None, probe_addr=None))
        rec = mgr.recorder("raycluster-controller")
        rec.queue_size = 10  # not started: nothing leaves the queue

        def dropped(reason: str) -> float | None:
            return mgr.metrics.registry.get_sample_value(
                "kuberay_events_dropped_total",
                {"controller": "raycluster-controller", "reason": reason},
            )

        assert dropped("queue_full") == 0
        assert dropped("rate_limited") == 0
        for i in range(12):
            rec.event(_obj(f"obj-{i}"), NORMAL, "Created", "created")
        assert rec.backlog == 10
        assert dropped("queue_full") == 2
        # A Warning is not lost to a full queue of Normals: it takes the place of the oldest one.
        rec.event(_obj("bad"), WARNING, "InvalidSpec", "spec is invalid")
        assert rec.backlog == 10
        assert dropped("queue_full") == 3
        warnings = [s for s in rec._shards if s.warnings]
        assert len(warnings) == 1
        # The per-object spam filter is counted separately.
        for _ in range(30):
            rec.event(_obj("noisy"), NORMAL, "Tick", "tick")
        assert dropped("rate_limited") == 5
        assert rec.dropped == 3 + 5 + 25  # the noisy object's 25 found the queue full
    finally:
        await client.close()


async def test_stop_returns_promptly_with_a_backlog() -> None:
    api = SlowApi(10.0)
    rec = EventRecorder(api, "test", "i-1")
    rec.start()
    for i in range(200):
        rec.event(_obj(f"obj-{i}"), NORMAL, "Created", "created")
    await asyncio.sleep(0.05)  # the sender is inside a 10 s call
    start = time.monotonic()
    await rec.stop(flush_timeout=0.3)
    assert time.monotonic() - start < 1.0
    assert all(t.done() for t in asyncio.all_tasks() if t.get_name().startswith("events-test"))
    assert rec.sent == 0
    assert rec.backlog == 199  # the one sender holds the first


def test_an_object_always_maps_to_the_same_sender() -> None:
    rec = EventRecorder(SlowApi(0), "test", "i-1", senders=4, burst=100)
    for _ in range(3):
        rec.event(_obj("a"), NORMAL, "Created", "x")
    shard = zlib.crc32(b"a") % 4
    assert [len(s.normals) for s in rec._shards] == [3 if i == shard else 0 for i in range(4)]
