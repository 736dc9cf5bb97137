"""Defects the real-stack fuzz benchmark (tests/bench/fuzz.py) found, pinned as unit tests.

- Two worker groups of one name (accepted by the CRD schema; upstream refuses them in its
  webhook only, which is off by default) made the operator create and delete the same workers
  for ever: each group counted the other's pods as its own. The controllers' validation now
  refuses such a spec, for RayCluster and for the clusters RayJob and RayService embed.
"""

from __future__ import annotations

import copy
from typing import Any

import pytest

from kuberay.api import validation as v
from kuberay.api.raycluster import RayCluster
from kuberay.api.rayjob import RayJob
from kuberay.api.rayservice import RayService
from kuberay.ray.fake import FakeDashboardRegistry

Obj = dict[str, Any]


def _group(name: str, replicas: int) -> Obj:
    return {
        "groupName": name,
        "replicas": replicas,
        "minReplicas": 0,
        "maxReplicas": 5,
        "rayStartParams": {},
        "template": {"spec": {"containers": [{"name": "ray-worker", "image": "ray"}]}},
    }


def _cluster_spec(*names: str) -> Obj:
    return {
        "headGroupSpec": {
            "rayStartParams": {},
            "template": {"spec": {"containers": [{"name": "ray-head", "image": "ray"}]}},
        },
        "workerGroupSpecs": [_group(n, i + 1) for i, n in enumerate(names)],
    }


def _errors(*names: str) -> dict[str, str | None]:
    spec = _cluster_spec(*names)
    rc = RayCluster.model_validate({"metadata": {"name": "c"}, "spec": copy.deepcopy(spec)})
    job = RayJob.model_validate(
        {
            "metadata": {"name": "j"},
            "spec": {"entrypoint": "python x.py", "rayClusterSpec": copy.deepcopy(spec)},
        }
    )
    svc = RayService.model_validate(
        {"metadata": {"name": "s"}, "spec": {"rayClusterConfig": copy.deepcopy(spec)}}
    )
    assert rc.spec is not None
    return {
        "RayCluster": v.validate_raycluster_spec(rc.spec),
        "RayJob": v.validate_rayjob_spec(job),
        "RayService": v.validate_rayservice_spec(svc),
    }


@pytest.mark.parametrize("names", [("g", "g"), ("a", "b", "a"), ("", "")])
def test_duplicate_worker_group_names_are_invalid(names: tuple[str, ...]) -> None:
    for kind, err in _errors(*names).items():
        assert err is not None, kind
        assert "worker group names must be unique" in err, (kind, err)
    assert _errors(*names)["RayJob"].startswith(v.RAYJOB_PREFIX)  # type: ignore[union-attr]
    assert _errors(*names)["RayService"].startswith(v.RAYSERVICE_PREFIX)  # type: ignore[union-attr]


@pytest.mark.parametrize("names", [(), ("g",), ("a", "b"), ("g0", "g1", "g2")])
def test_distinct_worker_group_names_stay_valid(names: tuple[str, ...]) -> None:
    assert _errors(*names) == {"RayCluster": None, "RayJob": None, "RayService": None}


async def test_deleted_rayjobs_and_rayservices_release_their_event_state() -> None:
    """The recorders keep a token bucket (and aggregation state) per object uid; RayCluster
    dropped it on deletion, RayJob and RayService kept it for ever, so a long fuzz run (10,000
    objects) grew the operator by one bucket per object it had ever seen."""
    from kuberay.controllers import rayjob, rayservice
    from kuberay.runtime.client import ClientConfig, KubeClient
    from kuberay.runtime.manager import Manager, ManagerOptions

    client = KubeClient(ClientConfig(server="https://127.0.0.1:9"))
    try:
        mgr = Manager(client, ManagerOptions(metrics_addr=None, probe_addr=None))
        dashboards = FakeDashboardRegistry()  # never called: only the registration is inspected
        job = rayjob.register(mgr, rayjob.RayJobConfig(), ["ns"], dashboards)
        svc = rayservice.register(mgr, rayservice.RayServiceConfig(), ["ns"], dashboards)
        for reconciler, cache, kind in (
            (job, job.rayjobs, "RayJob"),
            (svc, svc.rayservices, "RayService"),
        ):
            obj = {
                "apiVersion": "ray.io/v1",
                "kind": kind,
                "metadata": {"name": "x", "namespace": "ns", "uid": f"uid-{kind}"},
            }
            cache.informers[0]._apply("ADDED", obj)
            reconciler.recorder.event(obj, "Warning", "InvalidSpec", "bad", "Validate")
            assert f"uid-{kind}" in reconciler.recorder._buckets
            cache.informers[0]._apply("DELETED", obj)
            assert f"uid-{kind}" not in reconciler.recorder._buckets, kind
    finally:
        await client.close()
