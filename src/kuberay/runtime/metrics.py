"""Prometheus metrics of the runtime, under the names controller-runtime and client-go use.

Dashboards and alerts written for Go operators (``controller_runtime_reconcile_total``,
``workqueue_depth``, ``rest_client_requests_total`` ...) keep working: names, label names and
histogram buckets follow controller-runtime v0.22 (the ``workqueue_*`` series carry both
``name`` and ``controller``, ``rest_client_requests_total`` carries ``host``), the per-controller
series exist with value 0 from the moment a controller is registered (so ``rate()`` and
``absent()`` alerts work before the first error), and ``process_*`` comes from the same
collector names Go's process collector uses. The ``kuberay_*`` series are ours, beyond upstream.
Each ``RuntimeMetrics`` owns its registry so that tests and several managers in one process do
not collide.

A Python exception that is not an answer from the apiserver is a bug in the reconciler, the
counterpart of a recovered Go panic: it is counted in ``controller_runtime_reconcile_panics_total``
as well as in the error counters.
"""

from __future__ import annotations

from urllib.parse import urlsplit

from prometheus_client import (
    CollectorRegistry,
    Counter,
    Gauge,
    GCCollector,
    Histogram,
    ProcessCollector,
    disable_created_metrics,
)

from kuberay.runtime.client import KubeClient
from kuberay.runtime.informer import Informer
from kuberay.runtime.workqueue import WorkQueue

# Go's client library exports no ``*_created`` series; without this every counter and histogram
# would carry one, doubling the series count and showing names no upstream dashboard knows.
disable_created_metrics()  # type: ignore[no-untyped-call]

# controller-runtime's reconcile-time buckets (seconds).
_RECONCILE_BUCKETS = (
    *(0.005, 0.01, 0.025, 0.05, 0.1, 0.15, 0.2, 0.25, 0.3, 0.35, 0.4, 0.45, 0.5),
    *(0.6, 0.7, 0.8, 0.9, 1.0, 1.25, 1.5, 1.75, 2.0, 2.5, 3.0, 3.5, 4.0, 4.5, 5.0),
    *(6.0, 7.0, 8.0, 9.0, 10.0, 15.0, 20.0, 25.0, 30.0, 40.0, 50.0, 60.0),
)
# client-go's workqueue buckets: 10 ns to 1,000 s, times ten each.
_QUEUE_BUCKETS = tuple(1e-8 * 10**i for i in range(12))
# Reconcile results, pre-created at 0 for each controller as controller-runtime does.
RESULTS = ("error", "requeue_after", "requeue", "success")

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
        self.terminal_errors = Counter(
            "controller_runtime_terminal_reconcile_errors_total",
            "Reconciliations that ended in an error not worth retrying.",
            ["controller"],
            registry=r,
        )
        self.reconcile_panics = Counter(
            "controller_runtime_reconcile_panics_total",
            "Reconciliations that raised an unexpected exception (a bug).",
            ["controller"],
            registry=r,
        )
        self.reconcile_time = Histogram(
            "controller_runtime_reconcile_time_seconds",
            "Time per reconciliation.",
            ["controller"],
            buckets=_RECONCILE_BUCKETS,
            registry=r,
        )
        self.max_concurrent = Gauge(
            "controller_runtime_max_concurrent_reconciles",
            "Workers each controller may run at once.",
            ["controller"],
            registry=r,
        )
        self.active_workers = Gauge(
            "controller_runtime_active_workers",
            "Workers currently reconciling.",
            ["controller"],
            registry=r,
        )
        queue_labels = ["name", "controller"]
        self.queue_depth = Gauge(
            "workqueue_depth", "Items waiting.", [*queue_labels, "priority"], registry=r
        )
        self.queue_adds = Counter("workqueue_adds_total", "Items added.", queue_labels, registry=r)
        self.queue_retries = Counter(
            "workqueue_retries_total", "Rate-limited re-adds.", queue_labels, registry=r
        )
        self.queue_latency = Histogram(
            "workqueue_queue_duration_seconds",
            "Time an item waits before a worker takes it.",
            queue_labels,
            buckets=_QUEUE_BUCKETS,
            registry=r,
        )
        self.queue_work = Histogram(
            "workqueue_work_duration_seconds",
            "Time a worker spends on an item.",
            queue_labels,
            buckets=_QUEUE_BUCKETS,
            registry=r,
        )
        self.queue_unfinished = Gauge(
            "workqueue_unfinished_work_seconds",
            "Seconds of work in progress not yet finished, summed over items.",
            queue_labels,
            registry=r,
        )
        self.queue_longest = Gauge(
            "workqueue_longest_running_processor_seconds",
            "Seconds the longest-running item in progress has been running.",
            queue_labels,
            registry=r,
        )
        self.rest_requests = Counter(
            "rest_client_requests_total",
            "API requests by method and HTTP code (0 = transport failure).",
            ["code", "method", "host"],
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
            ["verb", "host"],
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
        self.events_dropped = Counter(
            "kuberay_events_dropped_total",
            "Kubernetes Events not sent: rate_limited (per-object spam filter) or queue_full.",
            ["controller", "reason"],
            registry=r,
        )
        # process_cpu_seconds_total, process_resident_memory_bytes, process_open_fds,
        # process_start_time_seconds ...: the names Go's process collector exports.
        ProcessCollector(registry=r)
        GCCollector(registry=r)

    def instrument_client(self, client: KubeClient) -> None:
        host = urlsplit(client.config.server).netloc

        def observe(method: str, status: int, seconds: float, resource: str) -> None:
            self.rest_requests.labels(str(status), method, host).inc()
            self.rest_requests_by_resource.labels(method, resource, str(status)).inc()
            self.rest_latency.labels(method, host).observe(seconds)

        client.observers.append(observe)

    def instrument_controller(self, name: str, concurrency: int) -> None:
        """Creates the controller's series at 0, as controller-runtime's initMetrics does."""
        for result in RESULTS:
            self.reconcile_total.labels(name, result)
        self.reconcile_errors.labels(name)
        self.terminal_errors.labels(name)
        self.reconcile_panics.labels(name)
        self.max_concurrent.labels(name).set(concurrency)
        self.active_workers.labels(name).set(0)

    def instrument_queue(self, queue: WorkQueue) -> None:
        # A controller's queue is named after it; both labels carry the name, as upstream.
        name = queue.name
        depth = self.queue_depth.labels(name, name, "")
        adds = self.queue_adds.labels(name, name)
        latency = self.queue_latency.labels(name, name)
        work = self.queue_work.labels(name, name)
        retries = self.queue_retries.labels(name, name)
        self.queue_unfinished.labels(name, name).set_function(queue.unfinished_work_seconds)
        self.queue_longest.labels(name, name).set_function(queue.longest_running_processor_seconds)
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
