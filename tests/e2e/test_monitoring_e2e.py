"""The per-RayCluster Grafana dashboard against real Ray: a real Prometheus scrapes the operator
and the Ray head and worker processes of a RayCluster on the process runtime (the labels of
``deploy/prometheus/ray-podmonitors.yaml``), and every panel of ``raycluster.json`` shows data.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from kuberay.api.constants import RAYCLUSTERS
from kuberay.devenv.plane import Plane
from kuberay.devenv.prometheus import (
    OPERATOR_JOB,
    Prometheus,
    dashboard_panels,
    panels_without_data,
)
from kuberay.devenv.testing import wait_for
from kuberay.runtime.client import KubeClient

from .raykube import cluster_spec, head_ip, raycluster, run_job, worker_group

pytestmark = [pytest.mark.e2e, pytest.mark.slow]

DASHBOARD = Path(__file__).parents[2] / "deploy" / "grafana" / "raycluster.json"


@pytest.fixture
def prometheus(process_plane: Plane, ray_operator: Any) -> Iterator[Prometheus]:
    target = f"127.0.0.1:{ray_operator.metrics_port}"
    with Prometheus(process_plane, operator_targets=[target], interval="2s") as prom:
        yield prom


async def test_every_raycluster_dashboard_panel_shows_data_from_real_ray(
    process_kube: KubeClient, ns: str, prometheus: Prometheus
) -> None:
    await process_kube.create(
        RAYCLUSTERS, raycluster("mon", cluster_spec(worker_group("small", 1))), ns
    )
    await wait_for(
        process_kube,
        RAYCLUSTERS,
        "mon",
        ns,
        lambda o: (o.get("status") or {}).get("state") == "ready",
        timeout=300,
        what="ready",
    )
    # Work for the task and actor panels: one actor and a few tasks.
    entry = (
        'python -c "import ray; ray.init();'
        " C = ray.remote(type('C', (), {'f': lambda self: 1}));"
        " c = C.remote(); t = ray.remote(lambda: 2);"
        ' print(ray.get([c.f.remote()] + [t.remote() for _ in range(4)]))"'
    )
    state, logs = await run_job(f"http://{await head_ip(process_kube, ns, 'mon')}:8265", entry)
    assert state == "SUCCEEDED", logs
    values = {"namespace": ns, "cluster": "mon", "job": OPERATOR_JOB, "datasource": "prometheus"}
    panels = dashboard_panels(json.loads(DASHBOARD.read_text()))
    assert len(panels) >= 10

    empty = await panels_without_data(
        prometheus, json.loads(DASHBOARD.read_text()), values, timeout=180, interval=3
    )
    assert empty == [], "panels without data:\n" + "\n".join(empty)
    print(f"raycluster dashboard: {len(panels)} panels, all with data from real Ray")
