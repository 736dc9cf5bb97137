"""Upstream's per-resource Prometheus metrics (served with ``--enable-metrics``).

Everything that can be read off an object is computed at scrape time from the controllers'
caches (one ``ResourceCache`` per kind) rather than kept as per-object gauges: a deleted object
disappears from the metrics with no clean-up step to forget, and a scrape costs one pass over
the cached objects. A collector without a cache exports its families with no series.
The scrape runs on the exporter's thread while the event loop applies watch events, so it reads
only the informers' stores (each ``values()`` is one atomic copy), not the cache's pending own
writes, whose tracker is not safe to iterate from another thread: a status we wrote shows up
once the watch has delivered it.
- ``kuberay_cluster_info`` {name, namespace, uid, owner_kind}: 1 per RayCluster; owner_kind is
  the ``ray.io/originated-from-crd`` label (RayJob, RayService) or None.
- ``kuberay_cluster_condition_provisioned`` {name, namespace, uid, condition}: 1, condition
  "true"/"false" from RayClusterProvisioned.
- ``kuberay_cluster_provisioned_duration_seconds`` {name, namespace, uid}: creation to the first
  time RayClusterProvisioned became True (the condition latches, so its transition time is it).
- ``kuberay_job_info`` {name, namespace, uid} and ``kuberay_job_deployment_status`` {...,
  deployment_status}: 1 per RayJob.
- ``kuberay_service_info`` {name, namespace, uid}, ``kuberay_service_condition_ready`` and
  ``kuberay_service_condition_upgrade_in_progress`` {..., condition "true"/"false"}.

One figure is an event, not a state: ``kuberay_job_execution_duration_seconds`` {name,
namespace, uid, job_deployment_status, retry_count} is recorded by the RayJob controller when an
attempt ends (a non-terminal deployment status becomes Complete, Failed or Retrying), and each
attempt keeps its own series. Those records live in memory, as upstream's do, so a restarted
operator starts without them; they are dropped at scrape time once their RayJob (by uid) has
left the cache.
"""

from __future__ import annotations

import threading
from collections.abc import Iterator

from prometheus_client.core import GaugeMetricFamily
from prometheus_client.registry import Collector

from kuberay.api import constants as c
from kuberay.runtime import rfc3339
from kuberay.runtime.cache import ResourceCache
from kuberay.runtime.store import Obj

IDENT = ["name", "namespace", "uid"]


def _ts(text: str | None) -> float | None:
    if not text:
        return None
    return rfc3339.parse(text).timestamp()


def _ident(obj: Obj) -> list[str]:
    meta = obj.get("metadata") or {}
    return [meta.get("name", ""), meta.get("namespace", ""), meta.get("uid", "")]


def _condition(obj: Obj, kind: str) -> Obj | None:
    for cond in (obj.get("status") or {}).get("conditions") or []:
        if cond.get("type") == kind:
            return dict(cond)
    return None


def _is_true(obj: Obj, kind: str) -> str:
    cond = _condition(obj, kind)
    return "true" if cond is not None and cond.get("status") == "True" else "false"


def _cached(cache: ResourceCache | None) -> Iterator[Obj]:
    for inf in cache.informers if cache is not None else ():
        yield from inf.store.values()


class RayClusterMetrics(Collector):
    def __init__(self, cache: ResourceCache | None = None) -> None:
        self.cache = cache

    def collect(self) -> Iterator[GaugeMetricFamily]:
        info = GaugeMetricFamily(
            "kuberay_cluster_info", "Metadata of RayClusters.", labels=[*IDENT, "owner_kind"]
        )
        provisioned = GaugeMetricFamily(
            "kuberay_cluster_condition_provisioned",
            "Whether the RayCluster has been provisioned (all pods ready once).",
            labels=[*IDENT, "condition"],
        )
        duration = GaugeMetricFamily(
            "kuberay_cluster_provisioned_duration_seconds",
            "Seconds from creation until the RayCluster was first provisioned.",
            labels=IDENT,
        )
        for obj in _cached(self.cache):
            meta = obj.get("metadata") or {}
            ident = _ident(obj)
            owner = (meta.get("labels") or {}).get(c.LABEL_ORIGINATED_FROM_CRD) or "None"
            info.add_metric([*ident, owner], 1.0)
            cond = _condition(obj, c.COND_RAYCLUSTER_PROVISIONED)
            is_true = cond is not None and cond.get("status") == "True"
            provisioned.add_metric([*ident, "true" if is_true else "false"], 1.0)
            created = _ts(meta.get("creationTimestamp"))
            if is_true and cond is not None and created is not None:
                first_true = _ts(cond.get("lastTransitionTime"))
                if first_true is not None:
                    duration.add_metric(ident, max(0.0, first_true - created))
        yield info
        yield provisioned
        yield duration


class RayJobMetrics(Collector):
    def __init__(self, cache: ResourceCache | None = None) -> None:
        self.cache = cache
        # (name, namespace, uid, deployment status, retry count) -> seconds; written from the
        # controller's event loop, read by the scrape thread.
        self._durations: dict[tuple[str, str, str, str, str], float] = {}
        self._lock = threading.Lock()

    def observe_execution(
        self, job: Obj, deployment_status: str, retry_count: int, seconds: float
    ) -> None:
        """One attempt of ``job`` ended in ``deployment_status`` after ``seconds``."""
        name, namespace, uid = _ident(job)
        key = (name, namespace, uid, deployment_status, str(retry_count))
        with self._lock:
            self._durations[key] = max(0.0, seconds)

    def collect(self) -> Iterator[GaugeMetricFamily]:
        info = GaugeMetricFamily("kuberay_job_info", "Metadata of RayJobs.", labels=IDENT)
        state = GaugeMetricFamily(
            "kuberay_job_deployment_status",
            "The RayJob's current jobDeploymentStatus.",
            labels=[*IDENT, "deployment_status"],
        )
        duration = GaugeMetricFamily(
            "kuberay_job_execution_duration_seconds",
            "Seconds from an attempt's start until it ended (Complete, Failed or Retrying).",
            labels=[*IDENT, "job_deployment_status", "retry_count"],
        )
        live: set[str] = set()
        for obj in _cached(self.cache):
            ident = _ident(obj)
            live.add(ident[2])
            info.add_metric(ident, 1.0)
            deployment = (obj.get("status") or {}).get("jobDeploymentStatus") or ""
            state.add_metric([*ident, deployment], 1.0)
        with self._lock:
            for key in [k for k in self._durations if k[2] not in live]:
                del self._durations[key]
            records = list(self._durations.items())
        for (name, namespace, uid, deployment, retries), seconds in records:
            duration.add_metric([name, namespace, uid, deployment, retries], seconds)
        yield info
        yield state
        yield duration


class RayServiceMetrics(Collector):
    def __init__(self, cache: ResourceCache | None = None) -> None:
        self.cache = cache

    def collect(self) -> Iterator[GaugeMetricFamily]:
        info = GaugeMetricFamily("kuberay_service_info", "Metadata of RayServices.", labels=IDENT)
        ready = GaugeMetricFamily(
            "kuberay_service_condition_ready",
            "Whether the RayService serves traffic (Ready: serve endpoints above zero).",
            labels=[*IDENT, "condition"],
        )
        upgrading = GaugeMetricFamily(
            "kuberay_service_condition_upgrade_in_progress",
            "Whether the RayService is in a zero-downtime upgrade.",
            labels=[*IDENT, "condition"],
        )
        for obj in _cached(self.cache):
            ident = _ident(obj)
            info.add_metric(ident, 1.0)
            ready.add_metric([*ident, _is_true(obj, c.COND_READY)], 1.0)
            upgrading.add_metric([*ident, _is_true(obj, c.COND_UPGRADE_IN_PROGRESS)], 1.0)
        yield info
        yield ready
        yield upgrading
