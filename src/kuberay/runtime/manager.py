"""The operator process: shared informers, controllers, leader election, probes, metrics, shutdown.

Invariants and failure modes:
- Informers start at once (a standby keeps warm caches); controllers start only while this
  process is the leader, and only after their caches have synced.
- Losing leadership stops every controller before the lease could be taken by another process
  and makes ``run`` return 1, so the process exits and restarts as a standby (as
  controller-runtime does); no write happens after the renew deadline has passed.
- SIGTERM (``stop`` set) stops controllers, flushes events, releases the lease so a standby takes
  over at once, and returns 0.
- ``/readyz`` fails until every informer has synced.
- One ``ResourceCache`` per (resource, watched namespaces, label selector), shared by every
  controller that asks; its informers come from the same factory as ``informer()``, so code
  that still asks for informers one namespace at a time shares their stores and write trackers.
- Above ``merge_watches_above`` watched namespaces, a resource the operator may list and watch
  across the cluster (``cluster_wide`` holds its (group, plural), as the caller found out
  before building the manager) gets one filtered cluster-wide informer instead of one per
  namespace (``runtime.cache.merged_scope``); any other resource keeps one per namespace.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import os
import socket
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from kuberay.runtime.cache import ResourceCache, merged_scope, watched_scopes
from kuberay.runtime.client import KubeClient, Resource
from kuberay.runtime.controller import Controller
from kuberay.runtime.events import DROP_REASONS, EventRecorder
from kuberay.runtime.informer import Informer, InformerFactory, informer_key
from kuberay.runtime.leader import LeaderElector
from kuberay.runtime.memory import release_periodically
from kuberay.runtime.metrics import RuntimeMetrics
from kuberay.runtime.serving import Endpoints

log = logging.getLogger("kuberay.runtime.manager")


@dataclass
class ManagerOptions:
    metrics_addr: str | None = ":8080"
    probe_addr: str | None = ":8082"
    leader_election: bool = True
    leader_election_id: str = "ray-operator-leader"
    leader_election_namespace: str = "default"
    identity: str = ""
    lease_duration: float = 15.0
    renew_deadline: float = 10.0
    retry_period: float = 2.0
    sync_timeout: float = 120.0
    # How often freed heap pages go back to the OS (kuberay.runtime.memory); 0 never.
    memory_release_interval: float = 60.0
    # Watch more namespaces than this through one cluster-wide watch per resource (0: never),
    # for the resources in ``cluster_wide`` (group, plural): those listable cluster-wide.
    merge_watches_above: int = 0
    cluster_wide: frozenset[tuple[str, str]] = frozenset()


class Manager:
    def __init__(self, client: KubeClient, options: ManagerOptions | None = None) -> None:
        self.client = client
        self.options = options or ManagerOptions()
        if not self.options.identity:
            self.options.identity = f"{socket.gethostname()}_{os.getpid()}"
        self.metrics = RuntimeMetrics()
        self.metrics.instrument_client(client)
        self.informers = InformerFactory(client)
        self.caches: dict[tuple[str, ...], ResourceCache] = {}
        self.controllers: list[Controller] = []
        self.recorders: list[EventRecorder] = []
        self.endpoints = Endpoints(self.metrics.registry)
        self.endpoints.ready_checks["informers-synced"] = self._informers_synced
        self.elector: LeaderElector | None = None
        self.leading = asyncio.Event()

    def informer(self, resource: Resource, **kwargs: Any) -> Informer:
        known = set(self.informers.informers)
        inf = self.informers.get(resource, **kwargs)
        if len(self.informers.informers) != len(known):
            self.metrics.instrument_informer(inf)
        return inf

    def cache(
        self,
        resource: Resource,
        *,
        namespaces: Sequence[str] | None = None,
        label_selector: str | None = None,
        **kwargs: Any,
    ) -> ResourceCache:
        """The cache of ``resource`` in ``namespaces`` (all when empty or None): one informer
        per watched namespace, or one for the whole cluster. ``kwargs`` configure the informers
        (transform, indexers, ...) when they are created; a cache already made is shared."""
        opts = self.options
        merged = merged_scope(
            namespaces,
            above=opts.merge_watches_above,
            cluster_wide_allowed=(resource.group, resource.plural) in opts.cluster_wide,
        )
        if merged is not None:
            key: tuple[str, ...] = (informer_key(resource, None, label_selector, merged),)
            cache = self.caches.get(key)
            if cache is None:
                inf = self.informer(
                    resource, namespaces=merged, label_selector=label_selector, **kwargs
                )
                cache = self.caches[key] = ResourceCache(resource, [inf])
            return cache
        scopes = watched_scopes(namespaces)
        key = tuple(informer_key(resource, ns, label_selector) for ns in scopes)
        cache = self.caches.get(key)
        if cache is None:
            informers = [
                self.informer(resource, namespace=ns, label_selector=label_selector, **kwargs)
                for ns in scopes
            ]
            cache = self.caches[key] = ResourceCache(resource, informers)
        return cache

    def controller(self, name: str, reconcile: Any, *, concurrency: int = 4) -> Controller:
        ctrl = Controller(name, reconcile, concurrency=concurrency, metrics=self.metrics)
        self.controllers.append(ctrl)
        return ctrl

    def recorder(self, controller: str) -> EventRecorder:
        dropped = self.metrics.events_dropped
        for reason in DROP_REASONS:
            dropped.labels(controller, reason)  # the series exist at 0 from the start
        rec = EventRecorder(
            self.client,
            controller,
            self.options.identity,
            on_drop=lambda reason: dropped.labels(controller, reason).inc(),
        )
        self.recorders.append(rec)
        return rec

    def _informers_synced(self) -> bool:
        return all(i.synced.is_set() for i in self.informers.informers.values())

    async def run(self, stop: asyncio.Event) -> int:
        """Runs until ``stop`` is set (returns 0) or leadership is lost (returns 1)."""
        opts = self.options
        await self.endpoints.start(opts.probe_addr, opts.metrics_addr)
        self.informers.start_all()
        trimmer = asyncio.create_task(
            release_periodically(opts.memory_release_interval), name="memory-release"
        )
        for rec in self.recorders:
            rec.start()
        lost = asyncio.Event()
        elector_task: asyncio.Task[None] | None = None
        if opts.leader_election:
            self.elector = LeaderElector(
                self.client,
                name=opts.leader_election_id,
                namespace=opts.leader_election_namespace,
                identity=opts.identity,
                lease_duration=opts.lease_duration,
                renew_deadline=opts.renew_deadline,
                retry_period=opts.retry_period,
                on_stopped_leading=lost.set,
            )
            elector_task = asyncio.create_task(self.elector.run(), name="leader-election")
            gauge = self.metrics.leader.labels(opts.leader_election_id)
            gauge.set_function(
                lambda: float(bool(self.elector and self.elector.is_leader.is_set()))
            )
            await _first(self.elector.is_leader.wait(), stop.wait(), lost.wait())
        code = 0
        try:
            if not stop.is_set() and not lost.is_set():
                self.leading.set()
                log.info("starting %d controllers", len(self.controllers))
                await asyncio.gather(*(c.start(opts.sync_timeout) for c in self.controllers))
                await _first(stop.wait(), lost.wait())
            if lost.is_set():
                code = 1
        finally:
            self.leading.clear()
            await asyncio.gather(*(c.stop() for c in self.controllers))
            for rec in self.recorders:
                await rec.stop()
            if elector_task is not None:
                elector_task.cancel()
                with contextlib.suppress(asyncio.CancelledError):
                    await elector_task
            await self.informers.stop_all()
            await self.endpoints.stop()
            trimmer.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await trimmer
        return code


async def _first(*aws: Any) -> bool:
    """Waits until the first of ``aws`` finishes; cancels the rest."""
    tasks = [asyncio.ensure_future(a) for a in aws]
    try:
        done, _ = await asyncio.wait(tasks, return_when=asyncio.FIRST_COMPLETED)
        return bool(done)
    finally:
        for t in tasks:
            t.cancel()
        for t in tasks:
            with contextlib.suppress(asyncio.CancelledError):
                await t
