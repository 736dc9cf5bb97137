"""Upstream's RayCluster Prometheus metrics (served with ``--enable-metrics``).

Computed at scrape time from the informer cache rather than kept as per-object gauges: a deleted
RayCluster disappears from the metrics with no clean-up step to forget, and a scrape costs one
pass over the cached clusters.
- ``kuberay_cluster_info`` {name, namespace, uid, owner_kind}: 1 per cluster; owner_kind is the
  ``ray.io/originated-from-crd`` label (RayJob, RayService) or None.
- ``kuberay_cluster_condition_provisioned`` {name, namespace, uid, condition}: 1, condition
  "true"/"false" from RayClusterProvisioned.
- ``kuberay_cluster_provisioned_duration_seconds`` {name, namespace, uid}: creation to the first
  time RayClusterProvisioned became True (the condition latches, so its transition time is it).
"""

from __future__ import annotations

import datetime as dt
from collections.abc import Iterable, Iterator

from prometheus_client.core import GaugeMetricFamily
from prometheus_client.registry import Collector

from kuberay.api import constants as c
from kuberay.runtime.informer import Informer


def _ts(text: str | None) -> float | None:
    if not text:
        return None
    return dt.datetime.fromisoformat(text.replace("Z", "+00:00")).timestamp()


class RayClusterMetrics(Collector):
    def __init__(self, informers: Iterable[Informer]) -> None:
        self.informers = list(informers)

    def collect(self) -> Iterator[GaugeMetricFamily]:
        info = GaugeMetricFamily(
            "kuberay_cluster_info",
            "Metadata of RayClusters.",
            labels=["name", "namespace", "uid", "owner_kind"],
        )
        provisioned = GaugeMetricFamily(
            "kuberay_cluster_condition_provisioned",
            "Whether the RayCluster has been provisioned (all pods ready once).",
            labels=["name", "namespace", "uid", "condition"],
        )
        duration = GaugeMetricFamily(
            "kuberay_cluster_provisioned_duration_seconds",
            "Seconds from creation until the RayCluster was first provisioned.",
            labels=["name", "namespace", "uid"],
        )
        for inf in self.informers:
            for obj in inf.store.values():
                meta = obj.get("metadata") or {}
                ident = [meta.get("name", ""), meta.get("namespace", ""), meta.get("uid", "")]
                owner = (meta.get("labels") or {}).get(c.LABEL_ORIGINATED_FROM_CRD) or "None"
                info.add_metric([*ident, owner], 1.0)
                cond = next(
                    (
                        x
                        for x in (obj.get("status") or {}).get("conditions") or []
                        if x.get("type") == c.COND_RAYCLUSTER_PROVISIONED
                    ),
                    None,
                )
                is_true = bool(cond and cond.get("status") == "True")
                provisioned.add_metric([*ident, "true" if is_true else "false"], 1.0)
                created = _ts(meta.get("creationTimestamp"))
                if is_true and cond is not None and created is not None:
                    first_true = _ts(cond.get("lastTransitionTime"))
                    if first_true is not None:
                        duration.add_metric(ident, max(0.0, first_true - created))
        yield info
        yield provisioned
        yield duration
