"""Upstream's kuberay_cluster_*, kuberay_job_* and kuberay_service_* metrics: computed from the
cache at scrape time, except the RayJob attempt durations the controller records."""

from __future__ import annotations

from prometheus_client import CollectorRegistry, generate_latest

from kuberay.api.constants import RAYCLUSTERS, RAYJOBS, RAYSERVICES
from kuberay.controllers.crd_metrics import RayClusterMetrics, RayJobMetrics, RayServiceMetrics
from kuberay.runtime.cache import ResourceCache
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
    registry.register(RayClusterMetrics(ResourceCache(RAYCLUSTERS, [inf])))
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


def _text(collector: object) -> str:
    registry = CollectorRegistry()
    registry.register(collector)  # type: ignore[arg-type]
    return generate_latest(registry).decode()


def test_job_metrics_state_from_the_cache_and_attempts_from_the_controller() -> None:
    inf = Informer(object(), RAYJOBS)  # type: ignore[arg-type]
    job = {
        "metadata": {"name": "j", "namespace": "ns", "uid": "u1"},
        "status": {"jobDeploymentStatus": "Running"},
    }
    inf.store.upsert(job)
    metrics = RayJobMetrics(ResourceCache(RAYJOBS, [inf]))
    metrics.observe_execution(job, "Retrying", 0, 12.5)
    metrics.observe_execution(job, "Failed", 1, 3.0)
    text = _text(metrics)
    assert 'kuberay_job_info{name="j",namespace="ns",uid="u1"} 1.0' in text
    assert (
        'kuberay_job_deployment_status{deployment_status="Running",name="j",namespace="ns",'
        'uid="u1"} 1.0' in text
    )
    duration = "kuberay_job_execution_duration_seconds"
    labels = 'name="j",namespace="ns",retry_count'
    assert f'{duration}{{job_deployment_status="Retrying",{labels}="0",uid="u1"}} 12.5' in text
    assert f'{duration}{{job_deployment_status="Failed",{labels}="1",uid="u1"}} 3.0' in text
    # A RayJob recreated under the same name is a new object: the old attempts go.
    inf.store.delete("ns/j")
    inf.store.upsert({**job, "metadata": {**job["metadata"], "uid": "u2"}})
    text = _text(metrics)
    assert duration + "{" not in text
    assert 'uid="u2"' in text


def test_service_metrics_report_ready_and_upgrade_conditions() -> None:
    inf = Informer(object(), RAYSERVICES)  # type: ignore[arg-type]
    inf.store.upsert(
        {
            "metadata": {"name": "s", "namespace": "ns", "uid": "u1"},
            "status": {
                "conditions": [
                    {"type": "Ready", "status": "True"},
                    {"type": "UpgradeInProgress", "status": "False"},
                ]
            },
        }
    )
    inf.store.upsert({"metadata": {"name": "t", "namespace": "ns", "uid": "u2"}})
    text = _text(RayServiceMetrics(ResourceCache(RAYSERVICES, [inf])))
    assert 'kuberay_service_info{name="s",namespace="ns",uid="u1"} 1.0' in text
    ready = "kuberay_service_condition_ready"
    upgrading = "kuberay_service_condition_upgrade_in_progress"
    assert f'{ready}{{condition="true",name="s",namespace="ns",uid="u1"}} 1.0' in text
    assert f'{ready}{{condition="false",name="t",namespace="ns",uid="u2"}} 1.0' in text
    assert f'{upgrading}{{condition="false",name="s",namespace="ns",uid="u1"}} 1.0' in text
    assert f'{upgrading}{{condition="false",name="t",namespace="ns",uid="u2"}} 1.0' in text


def test_metrics_span_the_watched_namespaces_and_read_only_what_the_watch_delivered() -> None:
    informers = [Informer(object(), RAYJOBS, namespace=ns) for ns in ("a", "b")]  # type: ignore[arg-type]
    for inf in informers:
        inf.store.upsert(
            {"metadata": {"name": "j", "namespace": inf.namespace, "uid": inf.namespace}}
        )
    cache = ResourceCache(RAYJOBS, informers)
    # Our own write the watch has not delivered yet: the scrape thread leaves it alone.
    cache.record_write(
        {"metadata": {"name": "k", "namespace": "a", "uid": "k", "resourceVersion": "5"}}
    )
    text = _text(RayJobMetrics(cache))
    assert 'kuberay_job_info{name="j",namespace="a",uid="a"} 1.0' in text
    assert 'kuberay_job_info{name="j",namespace="b",uid="b"} 1.0' in text
    assert 'uid="k"' not in text
    assert "kuberay_job_info{" not in _text(RayJobMetrics())
