"""Kubernetes Events (events.k8s.io/v1) with aggregation and rate limiting.

Invariants and failure modes:
- Recording never blocks or fails a reconcile: events go into a bounded queue drained by a
  background task; when the queue is full the event is dropped and counted.
- Repeats are aggregated: the same (object, type, reason, action, note) within
  ``series_window`` updates the existing Event's ``series`` (count, last observed time) instead of
  creating another object, so a hot loop cannot flood etcd.
- Each object has its own token bucket (burst 25, then one per 5 minutes, like client-go's spam
  filter): an object stuck in a loop can not drown the events of the others.
- If the aggregated Event was deleted (TTL) a new one is created.
"""

from __future__ import annotations

import asyncio
import contextlib
import datetime as dt
import logging
import time
import uuid
from dataclasses import dataclass
from typing import Any

from kuberay.runtime.client import KubeClient, Resource
from kuberay.runtime.errors import ApiError, NotFound

log = logging.getLogger("kuberay.runtime.events")

EVENTS_V1 = Resource("events.k8s.io", "v1", "events", kind="Event")

NORMAL = "Normal"
WARNING = "Warning"


def _micro_time() -> str:
    return dt.datetime.now(dt.UTC).strftime("%Y-%m-%dT%H:%M:%S.%fZ")


@dataclass
class _Series:
    name: str
    namespace: str
    count: int
    last_seen: float


class _Bucket:
    def __init__(self, burst: int, per_seconds: float, now: float) -> None:
        self.tokens = float(burst)
        self.burst = burst
        self.rate = 1.0 / per_seconds
        self.stamp = now

    def take(self, now: float) -> bool:
        self.tokens = min(self.burst, self.tokens + (now - self.stamp) * self.rate)
        self.stamp = now
        if self.tokens >= 1:
            self.tokens -= 1
            return True
        return False


class EventRecorder:
    def __init__(
        self,
        client: KubeClient,
        controller: str,
        instance: str,
        *,
        queue_size: int = 1000,
        series_window: float = 600.0,
        burst: int = 25,
        refill_seconds: float = 300.0,
    ) -> None:
        self.client = client
        self.controller = controller
        self.instance = instance
        self.series_window = series_window
        self.burst = burst
        self.refill_seconds = refill_seconds
        self.dropped = 0
        self.sent = 0
        self._queue: asyncio.Queue[dict[str, Any]] = asyncio.Queue(queue_size)
        self._series: dict[tuple[str, ...], _Series] = {}
        self._buckets: dict[str, _Bucket] = {}
        self._last_prune = time.monotonic()
        self._task: asyncio.Task[None] | None = None

    def start(self) -> None:
        if self._task is None:
            self._task = asyncio.create_task(self._drain(), name=f"events-{self.controller}")

    async def stop(self, flush_timeout: float = 2.0) -> None:
        if self._task is None:
            return
        with contextlib.suppress(TimeoutError):
            async with asyncio.timeout(flush_timeout):
                await self._queue.join()
        self._task.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await self._task
        self._task = None

    def event(
        self, obj: dict[str, Any], etype: str, reason: str, note: str, action: str = ""
    ) -> None:
        """Records an event about ``obj`` (a dict with apiVersion, kind and metadata)."""
        meta = obj.get("metadata", {})
        uid = meta.get("uid", "")
        now = time.monotonic()
        bucket = self._buckets.get(uid)
        if bucket is None:
            bucket = self._buckets[uid] = _Bucket(self.burst, self.refill_seconds, now)
        if not bucket.take(now):
            self.dropped += 1
            return
        item = {
            "regarding": {
                "apiVersion": obj.get("apiVersion", ""),
                "kind": obj.get("kind", ""),
                "name": meta.get("name", ""),
                "namespace": meta.get("namespace", "default"),
                "uid": uid,
                "resourceVersion": meta.get("resourceVersion", ""),
            },
            "type": etype,
            "reason": reason,
            "note": note[:1024],
            "action": action or reason,
        }
        try:
            self._queue.put_nowait(item)
        except asyncio.QueueFull:
            self.dropped += 1

    def forget(self, uid: str) -> None:
        """Drops per-object state for a deleted object."""
        self._buckets.pop(uid, None)
        for key in [k for k in self._series if k[0] == uid]:
            del self._series[key]

    async def _drain(self) -> None:
        while True:
            item = await self._queue.get()
            try:
                await self._send(item)
                self.sent += 1
            except ApiError as exc:
                log.warning("could not record event %s: %s", item["reason"], exc)
            except Exception:
                log.exception("could not record event %s", item["reason"])
            finally:
                self._queue.task_done()

    def _prune(self, now: float) -> None:
        """Drops aggregation state older than the series window, so a long-running operator's
        memory does not grow with every event it ever sent."""
        for key in [
            k for k, ser in self._series.items() if now - ser.last_seen >= self.series_window
        ]:
            del self._series[key]
        self._last_prune = now

    async def _send(self, item: dict[str, Any]) -> None:
        ref = item["regarding"]
        key = (ref["uid"], item["type"], item["reason"], item["action"], item["note"])
        now = time.monotonic()
        if now - self._last_prune > self.series_window:
            self._prune(now)
        series = self._series.get(key)
        if series is not None and now - series.last_seen < self.series_window:
            series.count += 1
            series.last_seen = now
            patch = {"series": {"count": series.count, "lastObservedTime": _micro_time()}}
            try:
                await self.client.patch(EVENTS_V1, series.name, patch, series.namespace)
                return
            except NotFound:
                pass  # expired meanwhile: create a new one below
        name = f"{ref['name']}.{uuid.uuid4().hex[:16]}"
        body = {
            "apiVersion": "events.k8s.io/v1",
            "kind": "Event",
            "metadata": {"name": name, "namespace": ref["namespace"]},
            "eventTime": _micro_time(),
            "reportingController": self.controller,
            "reportingInstance": self.instance,
            **item,
        }
        await self.client.create(EVENTS_V1, body, ref["namespace"])
        self._series[key] = _Series(name, ref["namespace"], 1, now)
