"""Leader election with a coordination.k8s.io/v1 Lease, with client-go's timing rules.

Invariants and failure modes:
- At most one process acts at a time. A standby takes the lease only after it has seen the same
  lease record unchanged for a whole ``lease_duration`` by its own clock (clocks of different
  machines are never compared).
- Every write of the lease carries the resourceVersion that was read, so two candidates racing
  for an expired lease cannot both win: the loser gets a Conflict.
- The leader renews every ``retry_period``; if it has not renewed successfully for
  ``renew_deadline`` (shorter than ``lease_duration``) it gives up leadership *before* a standby
  could take over, and ``on_stopped_leading`` is called so the process stops acting.
- On a clean shutdown the lease is released (holder cleared, duration 1 s) so that a standby
  takes over at once instead of after the lease runs out.
"""

from __future__ import annotations

import asyncio
import contextlib
import datetime as dt
import logging
import time
from collections.abc import Callable
from typing import Any

from kuberay.runtime.client import LEASES, KubeClient
from kuberay.runtime.errors import ApiError, NotFound

log = logging.getLogger("kuberay.runtime.leader")


def _micro_time(now: dt.datetime | None = None) -> str:
    now = now or dt.datetime.now(dt.UTC)
    return now.strftime("%Y-%m-%dT%H:%M:%S.%fZ")


class LeaderElector:
    def __init__(
        self,
        client: KubeClient,
        *,
        name: str,
        namespace: str,
        identity: str,
        lease_duration: float = 15.0,
        renew_deadline: float = 10.0,
        retry_period: float = 2.0,
        on_started_leading: Callable[[], None] | None = None,
        on_stopped_leading: Callable[[], None] | None = None,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        if not retry_period < renew_deadline < lease_duration:
            raise ValueError("need retry_period < renew_deadline < lease_duration")
        self.client = client
        self.name = name
        self.namespace = namespace
        self.identity = identity
        self.lease_duration = lease_duration
        self.renew_deadline = renew_deadline
        self.retry_period = retry_period
        self.on_started_leading = on_started_leading
        self.on_stopped_leading = on_stopped_leading
        self.clock = clock
        self.is_leader = asyncio.Event()
        self.lost = asyncio.Event()
        self._observed_record: tuple[Any, ...] | None = None
        self._observed_at = 0.0
        self._last_renew = 0.0

    # ------------------------------------------------------------------ one attempt
    async def try_acquire_or_renew(self) -> bool:
        now_wall = _micro_time()
        try:
            lease = await self.client.get(LEASES, self.name, self.namespace)
        except NotFound:
            body: dict[str, Any] = {
                "apiVersion": "coordination.k8s.io/v1",
                "kind": "Lease",
                "metadata": {"name": self.name, "namespace": self.namespace},
                "spec": {
                    "holderIdentity": self.identity,
                    "leaseDurationSeconds": int(self.lease_duration),
                    "acquireTime": now_wall,
                    "renewTime": now_wall,
                    "leaseTransitions": 0,
                },
            }
            await self.client.create(LEASES, body, self.namespace)
            self._observe(body["spec"])
            return True
        spec = lease.get("spec") or {}
        self._observe(spec)
        holder = spec.get("holderIdentity") or ""
        duration = float(spec.get("leaseDurationSeconds") or self.lease_duration)
        if holder and holder != self.identity and self.clock() < self._observed_at + duration:
            return False  # someone else holds a lease that has not run out by our clock
        new_spec = dict(spec)
        new_spec["holderIdentity"] = self.identity
        new_spec["leaseDurationSeconds"] = int(self.lease_duration)
        new_spec["renewTime"] = now_wall
        if holder != self.identity:
            new_spec["acquireTime"] = now_wall
            new_spec["leaseTransitions"] = int(spec.get("leaseTransitions") or 0) + 1
        lease["spec"] = new_spec
        await self.client.update(LEASES, lease)  # carries the resourceVersion we read
        self._observe(new_spec)
        return True

    def _observe(self, spec: dict[str, Any]) -> None:
        record = (
            spec.get("holderIdentity"),
            spec.get("renewTime"),
            spec.get("acquireTime"),
            spec.get("leaseTransitions"),
        )
        if record != self._observed_record:
            self._observed_record = record
            self._observed_at = self.clock()

    # ------------------------------------------------------------------ loops
    async def run(self) -> None:
        """Acquires, then renews until leadership is lost (or the task is cancelled)."""
        while True:
            if await self._attempt():
                break
            await asyncio.sleep(self.retry_period)
        self._last_renew = self.clock()
        self.is_leader.set()
        log.info("%s became leader of %s/%s", self.identity, self.namespace, self.name)
        if self.on_started_leading:
            self.on_started_leading()
        try:
            while True:
                await asyncio.sleep(self.retry_period)
                if await self._attempt():
                    self._last_renew = self.clock()
                elif self.clock() - self._last_renew >= self.renew_deadline:
                    break
                # A failed renew is retried at the next period until the deadline passes.
        except asyncio.CancelledError:
            await self.release()
            raise
        self.is_leader.clear()
        self.lost.set()
        log.error("%s lost leadership of %s/%s", self.identity, self.namespace, self.name)
        if self.on_stopped_leading:
            self.on_stopped_leading()

    async def _attempt(self) -> bool:
        try:
            async with asyncio.timeout(self.retry_period * 2):
                return await self.try_acquire_or_renew()
        except (ApiError, TimeoutError) as exc:
            log.debug("lease attempt failed: %s", exc)
            return False

    async def release(self) -> None:
        if not self.is_leader.is_set():
            return
        self.is_leader.clear()
        with contextlib.suppress(ApiError, TimeoutError):
            async with asyncio.timeout(self.retry_period):
                lease = await self.client.get(LEASES, self.name, self.namespace)
                if (lease.get("spec") or {}).get("holderIdentity") != self.identity:
                    return
                lease["spec"]["holderIdentity"] = ""
                lease["spec"]["leaseDurationSeconds"] = 1
                lease["spec"]["renewTime"] = _micro_time()
                await self.client.update(LEASES, lease)
