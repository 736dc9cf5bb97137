"""Upstream's kuberay_cluster_* metrics, computed from the cache at scrape time."""

from __future__ import annotations

from prometheus_client import CollectorRegistry, generate_latest

from kuberay.controllers.raycluster import RAYCLUSTERS
from kuberay.controllers.raycluster_metrics import RayClusterMetrics
from kuberay.runtime.informer import Informer


def test_metrics_follow_the_cache() -> None:
    inf = Informer(object(), RAYCLUSTERS)  # type: ignore[arg-type]
    inf.store.upsert(
        {
            "metadata": {
                "name": "a",
                "namespace": "ns",
                "uid": "u1",
                "creationTimestamp": "2026-01-01T00:00:00Z",
                "labels": {"ray.io/originated-from-crd": "RayJob"},
            },
            "status": {
                "conditions": [
                    {
                        "type": "RayClusterProvisioned",
                        "status": "True",
                        "lastTransitionTime": "2026-01-01T00:00:42Z",
                    }
                ]
            },
        }
    )
    inf.store.upsert(
        {
            "metadata": {
                "name": "b",
                "namespace": "ns",
                "uid": "u2",
                "creationTimestamp": "2026-01-01T00:00:00Z",
            }
        }
    )
    registry = CollectorRegistry()
    registry.register(RayClusterMetrics([inf]))
    text = generate_latest(registry).decode()
    assert 'kuberay_cluster_info{name="a",namespace="ns",owner_kind="RayJob",uid="u1"} 1.0' in text
    assert 'kuberay_cluster_info{name="b",namespace="ns",owner_kind="None",uid="u2"} 1.0' in text
    prov = "kuberay_cluster_condition_provisioned"
    assert f'{prov}{{condition="true",name="a",namespace="ns",uid="u1"}} 1.0' in text
    assert f'{prov}{{condition="false",name="b",namespace="ns",uid="u2"}} 1.0' in text
    assert (
        'kuberay_cluster_provisioned_duration_seconds{name="a",namespace="ns",uid="u1"} 42.0'
        in text
    )
    inf.store.delete("ns/a")
    assert 'name="a"' not in generate_latest(registry).decode()
