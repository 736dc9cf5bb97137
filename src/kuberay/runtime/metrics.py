"""Prometheus metrics of the runtime, under the names controller-runtime and client-go use.

Dashboards and alerts written for Go operators (``controller_runtime_reconcile_total``,
``workqueue_depth``, ``rest_client_requests_total`` ...) keep working. Each ``RuntimeMetrics``
owns its registry so that tests and several managers in one process do not collide.
"""

from __future__ import annotations

from prometheus_client import CollectorRegistry, Counter, Gauge, Histogram

from kuberay.runtime.client import KubeClient
from kuberay.runtime.informer import Informer
from kuberay.runtime.workqueue import WorkQueue

_LATENCY_BUCKETS = (
    0.005,
    0.01,
    0.025,
    0.05,
    0.1,
    0.25,
    0.5,
    1.0,
    2.5,
    5.0,
    10.0,
    30.0,
    60.0,
)


class RuntimeMetrics:
    def __init__(self, registry: CollectorRegistry | None = None) -> None:
        self.registry = registry or CollectorRegistry()
        r = self.registry
        self.reconcile_total = Counter(
            "controller_runtime_reconcile_total",
            "Reconciliations per controller and result.",
            ["controller", "result"],
            registry=r,
        )
        self.reconcile_errors = Counter(
            "controller_runtime_reconcile_errors_total",
            "Reconciliations that returned an error.",
            ["controller"],
            registry=r,
        )
        self.reconcile_time = Histogram(
            "controller_runtime_reconcile_time_seconds",
            "Time per reconciliation.",
            ["controller"],
            buckets=_LATENCY_BUCKETS,
            registry=r,
        )
        self.active_workers = Gauge(
            "controller_runtime_active_workers",
            "Workers currently reconciling.",
            ["controller"],
            registry=r,
        )
        self.queue_depth = Gauge("workqueue_depth", "Items waiting.", ["name"], registry=r)
        self.queue_adds = Counter("workqueue_adds_total", "Items added.", ["name"], registry=r)
        self.queue_retries = Counter(
            "workqueue_retries_total", "Rate-limited re-adds.", ["name"], registry=r
        )
        self.queue_latency = Histogram(
            "workqueue_queue_duration_seconds",
            "Time an item waits before a worker takes it.",
            ["name"],
            buckets=_LATENCY_BUCKETS,
            registry=r,
        )
        self.queue_work = Histogram(
            "workqueue_work_duration_seconds",
            "Time a worker spends on an item.",
            ["name"],
            buckets=_LATENCY_BUCKETS,
            registry=r,
        )
        self.rest_requests = Counter(
            "rest_client_requests_total",
            "API requests by method and HTTP code (0 = transport failure).",
            ["code", "method"],
            registry=r,
        )
        self.rest_requests_by_resource = Counter(
            "kuberay_rest_client_requests_by_resource_total",
            "API requests by method, resource (with subresource) and HTTP code.",
            ["method", "resource", "code"],
            registry=r,
        )
        self.rest_latency = Histogram(
            "rest_client_request_duration_seconds",
            "API request latency.",
            ["verb"],
            buckets=_LATENCY_BUCKETS,
            registry=r,
        )
        self.informer_events = Counter(
            "kuberay_informer_events_total",
            "Events applied to informer caches.",
            ["resource", "type"],
            registry=r,
        )
        self.informer_objects = Gauge(
            "kuberay_informer_objects",
            "Objects held in informer caches.",
            ["resource"],
            registry=r,
        )
        self.leader = Gauge(
            "leader_election_master_status",
            "1 while this process holds the leader lease.",
            ["name"],
            registry=r,
        )

    def instrument_client(self, client: KubeClient) -> None:
        def observe(method: str, status: int, seconds: float, resource: str) -> None:
            self.rest_requests.labels(str(status), method).inc()
            self.rest_requests_by_resource.labels(method, resource, str(status)).inc()
            self.rest_latency.labels(method).observe(seconds)

        client.observers.append(observe)

    def instrument_queue(self, queue: WorkQueue) -> None:
        name = queue.name
        depth = self.queue_depth.labels(name)
        adds = self.queue_adds.labels(name)
        latency = self.queue_latency.labels(name)
        work = self.queue_work.labels(name)
        retries = self.queue_retries.labels(name)
        depth.set_function(lambda: float(queue.depth))
        queue.on_add = lambda _k: adds.inc()
        queue.on_get = lambda _k, s: latency.observe(s)
        queue.on_done = lambda _k, s: work.observe(s)
        queue.on_retry = lambda _k: retries.inc()

    def instrument_informer(self, informer: Informer) -> None:
        name = informer.resource.plural
        counters = {
            t: self.informer_events.labels(name, t) for t in ("ADDED", "MODIFIED", "DELETED")
        }
        informer.observers.append(lambda etype: counters[etype].inc())
        self.informer_objects.labels(name).set_function(lambda: float(len(informer.store)))
