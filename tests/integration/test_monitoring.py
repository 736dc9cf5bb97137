"""A real Prometheus scrapes the real operator on the plane (KWOK): the scrape jobs find their
targets with the labels a ServiceMonitor/PodMonitor gives, the controller-runtime series are
there, and every query of the operator dashboard returns data after a workload.

The Ray pods' own series (``ray_*``) need pods that run: on KWOK their scrape targets are
discovered but down, which is what the test checks for them here.
"""

from __future__ import annotations

import asyncio
import contextlib
import datetime as dt
import json
import re
from collections.abc import AsyncIterator, Awaitable, Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
import yaml
from operator_fixture import OperatorProcess, install_crds
from test_raycluster import raycluster, wait_ready

from kuberay.api.constants import RAYCLUSTERS, RAYJOBS, RAYSERVICES
from kuberay.devenv.plane import Plane, free_port
from kuberay.devenv.prometheus import (
    HEAD_JOB,
    OPERATOR_JOB,
    WORKER_JOB,
    Prometheus,
    dashboard_panels,
    panels_without_data,
)
from kuberay.devenv.testing import wait_for, wait_until
from kuberay.runtime.client import (
    JSON_PATCH,
    LEASES,
    SERVICES,
    KubeClient,
    Resource,
)
from kuberay.runtime.errors import NotFound

RESOURCEQUOTAS = Resource("", "v1", "resourcequotas", kind="ResourceQuota")

GRAFANA = Path(__file__).parents[2] / "deploy" / "grafana"
RULES = Path(__file__).parents[2] / "deploy" / "prometheus" / "kuberay-alerts.rules.yaml"


@pytest.fixture(scope="module")
def metrics_port() -> int:
    return free_port()


@pytest.fixture(scope="module")
def monitored_operator(
    plane: Plane, tmp_path_factory: pytest.TempPathFactory, metrics_port: int
) -> Iterator[OperatorProcess]:
    op = OperatorProcess(
        plane,
        tmp_path_factory.mktemp("monitored-operator"),
        f"--metrics-addr=127.0.0.1:{metrics_port}",
        "--enable-metrics",  # the kuberay_* series, as the chart's metrics.enabled does
        "--enable-leader-election=true",  # as deployed: the leader gauge has a value
        "--leader-election-namespace=default",
    )
    yield op
    op.stop()


def compressed_rules(source: Path, target: Path) -> Path:
    """The shipped alert rules with time compressed for a test: every ``for`` becomes 2 s and
    every range window 20 s (the 6 h look-back of the GCS rule 2 min), so that a scenario can
    make each alert fire and resolve in seconds. The expressions are otherwise unchanged."""
    doc = yaml.safe_load(source.read_text())
    for group in doc["groups"]:
        group["interval"] = "1s"
        for rule in group["rules"]:
            rule["for"] = "2s"
            expr = re.sub(r"\[6h:5m\]", "[2m:1s]", rule["expr"])
            rule["expr"] = re.sub(r"\[\d+[mh]\]", "[20s]", expr)
    target.write_text(yaml.safe_dump(doc))
    return target


@pytest.fixture(scope="module")
def prometheus(
    plane: Plane, metrics_port: int, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[Prometheus]:
    rules = compressed_rules(RULES, tmp_path_factory.mktemp("rules") / "alerts.rules.yaml")
    with Prometheus(
        plane, operator_targets=[f"127.0.0.1:{metrics_port}"], interval="1s", rule_files=[rules]
    ) as prom:
        yield prom


@pytest.fixture(scope="module")
async def workload(
    kube: KubeClient,
    monitored_operator: OperatorProcess,
    prometheus: Prometheus,
) -> AsyncIterator[str]:
    """A namespace with what the dashboards show: a ready RayCluster, one whose head cannot be
    scheduled, one whose head Service name is taken (failed writes), a RayJob that fails on its
    deadline (a finished attempt) and a RayService that cannot become ready."""
    from kuberay.devenv.testing import create_namespace, delete_namespace, unique_name

    await install_crds(kube)
    monitored_operator.start()
    ns = unique_name("mon")
    await create_namespace(kube, ns)
    await kube.create(RAYCLUSTERS, raycluster("mon-ok", replicas=2), ns)
    huge = raycluster("mon-stuck", replicas=1)
    huge["spec"]["headGroupSpec"]["template"]["spec"]["containers"][0]["resources"] = {
        "requests": {"cpu": "100000"},
        "limits": {"cpu": "100000"},
    }
    await kube.create(RAYCLUSTERS, huge, ns)
    taken = {"metadata": {"name": "mon-taken-head-svc"}, "spec": {"ports": [{"port": 1}]}}
    await kube.create(SERVICES, taken, ns)
    await kube.create(RAYCLUSTERS, raycluster("mon-taken", replicas=0), ns)
    spec = raycluster("x")["spec"]
    job = {"entrypoint": "python -c 1", "rayClusterSpec": spec, "activeDeadlineSeconds": 1}
    await kube.create(RAYJOBS, _cr("RayJob", "mon-job", job), ns)
    service = {"serveConfigV2": "applications: []\n", "rayClusterConfig": spec}
    await kube.create(RAYSERVICES, _cr("RayService", "mon-svc", service), ns)
    await wait_ready(kube, ns, "mon-ok")
    await wait_for(
        kube,
        RAYJOBS,
        "mon-job",
        ns,
        lambda o: (o.get("status") or {}).get("jobDeploymentStatus") == "Failed",
        timeout=60,
        what="the RayJob to fail on its deadline",
    )
    yield ns
    await delete_namespace(kube, ns)


def _cr(kind: str, name: str, spec: dict[str, Any]) -> dict[str, Any]:
    return {"apiVersion": "ray.io/v1", "kind": kind, "metadata": {"name": name}, "spec": spec}


async def _has_data(prom: Prometheus, expr: str) -> bool:
    return bool(await asyncio.to_thread(prom.query, expr))


async def test_operator_target_is_up_with_service_monitor_labels(
    prometheus: Prometheus, workload: str
) -> None:
    await wait_until(
        lambda: _has_data(prometheus, f'up{{job="{OPERATOR_JOB}"}} == 1'),
        timeout=60,
        what="the operator's scrape target to be up",
    )
    (sample,) = prometheus.query(f'up{{job="{OPERATOR_JOB}"}}')
    assert sample["metric"]["service"] == OPERATOR_JOB
    assert sample["metric"]["namespace"] == "ray-system"
    # honor_labels, as the chart's ServiceMonitor: the object's namespace wins over the target's.
    await wait_until(
        lambda: _has_data(
            prometheus, f'kuberay_cluster_info{{name="mon-ok",namespace="{workload}"}}'
        ),
        timeout=30,
        what="kuberay_cluster_info with the cluster's own namespace",
    )


async def test_ray_pods_are_discovered_with_pod_monitor_labels(
    prometheus: Prometheus, workload: str
) -> None:
    async def discovered() -> bool:
        # Every expected target, not just one of each job: service discovery adds pods as they
        # get IPs, so the stuck cluster's worker may come a refresh after the others.
        found = [
            (t["labels"].get("job"), t["labels"].get("ray_io_cluster"))
            for t in await asyncio.to_thread(prometheus.targets)
            if t["labels"].get("namespace") == workload
        ]
        workers = [cluster for job, cluster in found if job == WORKER_JOB]
        return (HEAD_JOB, "mon-ok") in found and (
            workers.count("mon-ok"),
            workers.count("mon-stuck"),
        ) == (2, 1)

    await wait_until(discovered, timeout=60, what="every head and worker pod as a scrape target")
    ours = [
        t
        for t in await asyncio.to_thread(prometheus.targets)
        if t["labels"].get("namespace") == workload
    ]
    heads = [t for t in ours if t["labels"]["job"] == HEAD_JOB]
    head_clusters = {t["labels"]["ray_io_cluster"] for t in heads}
    assert "mon-ok" in head_clusters
    assert "mon-stuck" not in head_clusters, "a pending pod has no IP, so no target"
    for t in ours:
        assert t["labels"]["pod"].startswith(t["labels"]["ray_io_cluster"] + "-"), t["labels"]
    # mon-stuck's head cannot be scheduled; its worker can.
    workers = [t["labels"]["ray_io_cluster"] for t in ours if t["labels"]["job"] == WORKER_JOB]
    assert (workers.count("mon-ok"), workers.count("mon-stuck")) == (2, 1)


async def test_controller_runtime_series_have_upstream_labels(
    prometheus: Prometheus, workload: str
) -> None:
    wanted = [
        'controller_runtime_reconcile_total{controller="raycluster",result="success"}',
        'controller_runtime_max_concurrent_reconciles{controller="raycluster"}',
        'workqueue_depth{name="raycluster",controller="raycluster"}',
        'workqueue_longest_running_processor_seconds{controller="raycluster"}',
        f'rest_client_requests_total{{job="{OPERATOR_JOB}",host!=""}}',
        'process_resident_memory_bytes{job="kuberay-operator"}',
        'kuberay_cluster_info{name="mon-ok"}',
    ]
    for expr in wanted:

        async def has_data(e: str = expr) -> bool:
            return await _has_data(prometheus, e)

        await wait_until(has_data, timeout=60, what=expr)


async def test_every_operator_dashboard_panel_shows_data(
    prometheus: Prometheus, workload: str
) -> None:
    """Each panel has data after the workload. A panel with several queries may show a state
    the workload does not reach in one of them (say, an upgrade in progress) but not in all."""
    dashboard = json.loads((GRAFANA / "kuberay-operator.json").read_text())
    panels = dashboard_panels(dashboard)
    assert len(panels) >= 20, "the operator dashboard has its panels"

    values = {"namespace": workload, "cluster": "mon-ok", "controller": "raycluster"}
    values.update(job=OPERATOR_JOB, datasource="prometheus")
    empty = await panels_without_data(prometheus, dashboard, values, timeout=60)
    assert empty == [], "panels without data:\n" + "\n".join(empty)
    print(f"operator dashboard: {len(panels)} panels, all with data")


# ----------------------------------------------------------------------------- alerts


async def _alert(prom: Prometheus, name: str, labels: dict[str, str]) -> str:
    """The state of alert ``name`` whose labels include ``labels`` ('' when there is none)."""
    for alert in await asyncio.to_thread(prom.alerts):
        if alert["labels"].get("alertname") == name and labels.items() <= alert["labels"].items():
            return str(alert["state"])
    return ""


async def fires_then_resolves(
    prom: Prometheus, name: str, labels: dict[str, str], fix: Callable[[], Awaitable[object]]
) -> None:
    async def firing() -> bool:
        return await _alert(prom, name, labels) == "firing"

    async def resolved() -> bool:
        return await _alert(prom, name, labels) == ""

    await wait_until(firing, timeout=90, interval=1, what=f"{name} {labels} to fire")
    await fix()
    await wait_until(resolved, timeout=90, interval=1, what=f"{name} {labels} to resolve")


async def test_each_alert_fires_and_resolves_on_the_plane(
    kube: KubeClient,
    prometheus: Prometheus,
    monitored_operator: OperatorProcess,
    workload: str,
) -> None:
    """Each alert the plane can produce, made to fire by a real cause and resolved by removing
    it. Not here: KubeRayReconcilePanics (needs a bug) and RayServiceUpgradeStuck (needs a
    serving cluster); promtool's unit tests cover those."""
    from kuberay.devenv.testing import create_namespace, delete_namespace, unique_name

    ns = unique_name("alerts")
    await create_namespace(kube, ns)
    try:
        spec = raycluster("x", replicas=1)["spec"]
        stuck = raycluster("al-stuck", replicas=0)
        stuck["spec"]["headGroupSpec"]["template"]["spec"]["containers"][0]["resources"] = {
            "requests": {"cpu": "100000"},
            "limits": {"cpu": "100000"},
        }
        await kube.create(RAYCLUSTERS, stuck, ns)
        await kube.create(RAYCLUSTERS, raycluster("al-kwok", replicas=1), ns)
        job = {"entrypoint": "python -c 1", "rayClusterSpec": spec, "activeDeadlineSeconds": 1}
        await kube.create(RAYJOBS, _cr("RayJob", "al-job", job), ns)
        service = {"serveConfigV2": "applications: []\n", "rayClusterConfig": spec}
        await kube.create(RAYSERVICES, _cr("RayService", "al-svc", service), ns)

        await fires_then_resolves(
            prometheus,
            "RayClusterNotProvisioned",
            {"namespace": ns, "name": "al-stuck"},
            lambda: kube.delete(RAYCLUSTERS, "al-stuck", ns),
        )
        # KWOK pods never serve Ray's metrics: the worker and head scrapes fail.
        no_workers = [{"op": "replace", "path": "/spec/workerGroupSpecs/0/replicas", "value": 0}]
        await fires_then_resolves(
            prometheus,
            "RayClusterWorkersUnavailable",
            {"namespace": ns, "ray_io_cluster": "al-kwok"},
            lambda: kube.patch(RAYCLUSTERS, "al-kwok", no_workers, ns, content_type=JSON_PATCH),
        )
        await fires_then_resolves(
            prometheus,
            "RayHeadNotExportingGCSMetrics",
            {"namespace": ns, "ray_io_cluster": "al-kwok"},
            lambda: kube.delete(RAYCLUSTERS, "al-kwok", ns),
        )
        await fires_then_resolves(
            prometheus,
            "RayJobFailed",
            {"namespace": ns, "name": "al-job"},
            lambda: kube.delete(RAYJOBS, "al-job", ns),
        )
        await fires_then_resolves(
            prometheus,
            "RayServiceNotReady",
            {"namespace": ns, "name": "al-svc"},
            lambda: kube.delete(RAYSERVICES, "al-svc", ns),
        )
        # Reconcile errors: a quota that refuses every pod makes each RayCluster pass fail.
        quota = {"metadata": {"name": "no-pods"}, "spec": {"hard": {"pods": "0"}}}
        await kube.create(RESOURCEQUOTAS, quota, ns)
        for i in range(3):
            await kube.create(RAYCLUSTERS, raycluster(f"al-quota-{i}", replicas=0), ns)

        async def lift_quota() -> None:
            await kube.delete(RESOURCEQUOTAS, "no-pods", ns)
            for i in range(3):
                await kube.delete(RAYCLUSTERS, f"al-quota-{i}", ns)

        await fires_then_resolves(
            prometheus, "KubeRayReconcileErrors", {"controller": "raycluster"}, lift_quota
        )

        # No leader: another identity holds the lease while the operator (re)starts.
        monitored_operator.stop()
        now = dt.datetime.now(dt.UTC).strftime("%Y-%m-%dT%H:%M:%S.%fZ")
        lease = {
            "metadata": {"name": "ray-operator-leader"},
            "spec": {
                "holderIdentity": "someone-else",
                "leaseDurationSeconds": 3600,
                "acquireTime": now,
                "renewTime": now,
            },
        }
        with contextlib.suppress(NotFound):
            await kube.delete(LEASES, "ray-operator-leader", "default")
        await kube.create(LEASES, lease, "default")
        monitored_operator.start()
        await fires_then_resolves(
            prometheus,
            "KubeRayOperatorNoLeader",
            {"name": "ray-operator-leader"},
            lambda: kube.delete(LEASES, "ray-operator-leader", "default"),
        )

        async def restart() -> None:
            monitored_operator.start()

        monitored_operator.stop()
        await fires_then_resolves(prometheus, "KubeRayOperatorDown", {}, restart)
    finally:
        await delete_namespace(kube, ns)
