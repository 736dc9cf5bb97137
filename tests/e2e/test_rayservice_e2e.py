"""RayService with real Ray Serve on the process node runtime: the app deploys, a Serve config
change rolls out in place, and a cluster-level change runs a blue/green upgrade while a bounded
client keeps sending requests to the serve Service; no request may fail.

There is no kube-proxy: the client dials the ready endpoints of ``<name>-serve-svc`` (what a
Service routes to), re-reading them every second, which is how traffic follows the Service
when the operator re-points it.
"""

from __future__ import annotations

import asyncio
import time
from pathlib import Path
from typing import Any

import pytest
import yaml

from kuberay.api.constants import RAYCLUSTERS, RAYSERVICES
from kuberay.devenv.testing import wait_for
from kuberay.runtime.client import CONFIGMAPS, KubeClient

from .raykube import ahttp, cluster_spec, service_endpoints

pytestmark = [pytest.mark.e2e, pytest.mark.slow]

APP_SOURCE = (Path(__file__).parent / "apps" / "kuberay_e2e_app.py").read_text()
# The app reaches the pods through a ConfigMap volume, as it would on a real cluster (the
# checkout may not even be visible to pods: their /tmp is private).
APPS = "/tmp/kuberay-e2e-apps"


def serve_config(greeting: str) -> str:
    return yaml.safe_dump(
        {
            "applications": [
                {
                    "name": "hello",
                    "import_path": "kuberay_e2e_app:app",
                    "route_prefix": "/",
                    "runtime_env": {"env_vars": {"GREETING": greeting}},
                }
            ]
        }
    )


def rayservice(name: str, greeting: str, marker: str) -> dict[str, Any]:
    spec = cluster_spec(head_cpus="1")
    head = spec["headGroupSpec"]["template"]["spec"]["containers"][0]
    head["env"] = [{"name": "PYTHONPATH", "value": APPS}, {"name": "MARKER", "value": marker}]
    head["volumeMounts"] = [{"name": "apps", "mountPath": APPS}]
    spec["headGroupSpec"]["template"]["spec"]["volumes"] = [
        {"name": "apps", "configMap": {"name": "e2e-apps"}}
    ]
    return {
        "apiVersion": "ray.io/v1",
        "kind": "RayService",
        "metadata": {"name": name},
        "spec": {
            "serveConfigV2": serve_config(greeting),
            "rayClusterConfig": spec,
            "rayClusterDeletionDelaySeconds": 20,
        },
    }


def ready(obj: dict[str, Any]) -> bool:
    return any(
        c.get("type") == "Ready" and c.get("status") == "True"
        for c in (obj.get("status") or {}).get("conditions") or []
    )


class Client:
    """Sends one request at a time to the serve Service's endpoints; bounded by ``limit``."""

    def __init__(self, kube: KubeClient, ns: str, service: str, limit: int = 3000) -> None:
        self.kube, self.ns, self.service, self.limit = kube, ns, service, limit
        self.answers: list[str] = []
        self.failures: list[str] = []
        self.stopped = False

    async def run(self) -> None:
        endpoints: list[str] = []
        refreshed = 0.0
        while not self.stopped and len(self.answers) + len(self.failures) < self.limit:
            if time.monotonic() - refreshed > 1.0:
                endpoints = await service_endpoints(self.kube, self.ns, self.service)
                refreshed = time.monotonic()
            if not endpoints:
                await asyncio.sleep(0.2)
                continue
            status, body = await ahttp("GET", f"http://{endpoints[0]}:8000/", timeout=10)
            if status == 200:
                self.answers.append(body.decode())
            else:
                self.failures.append(f"{endpoints[0]}: HTTP {status} {body[:200]!r}")
            await asyncio.sleep(0.1)


async def test_serve_app_config_change_and_blue_green_upgrade(
    process_kube: KubeClient, ns: str
) -> None:
    app = {
        "apiVersion": "v1",
        "kind": "ConfigMap",
        "metadata": {"name": "e2e-apps"},
        "data": {"kuberay_e2e_app.py": APP_SOURCE},
    }
    await process_kube.create(CONFIGMAPS, app, ns)
    await process_kube.create(RAYSERVICES, rayservice("svc", "v1", "a"), ns)
    first = await wait_for(
        process_kube, RAYSERVICES, "svc", ns, ready, timeout=400, what="Ready", interval=1
    )
    first_cluster = first["status"]["activeServiceStatus"]["rayClusterName"]

    client = Client(process_kube, ns, "svc-serve-svc")
    task = asyncio.create_task(client.run())
    try:
        deadline = time.monotonic() + 60
        while not client.answers:
            assert time.monotonic() < deadline, (
                f"no answer from the serve Service: {client.failures[-3:]}"
            )
            await asyncio.sleep(0.5)
        assert client.answers[0].startswith("v1 from ")

        # A Serve config change is applied in place: same cluster, new greeting.
        await process_kube.patch(
            RAYSERVICES, "svc", {"spec": {"serveConfigV2": serve_config("v2")}}, ns
        )
        deadline = time.monotonic() + 180
        while not client.answers[-1].startswith("v2 "):
            assert time.monotonic() < deadline, f"config change never served: {client.answers[-3:]}"
            await asyncio.sleep(1)
        now = await process_kube.get(RAYSERVICES, "svc", ns)
        assert now["status"]["activeServiceStatus"]["rayClusterName"] == first_cluster

        # A cluster-level change: a new cluster comes up, traffic moves when it serves.
        changed = rayservice("svc", "v3", "b")["spec"]
        await process_kube.patch(RAYSERVICES, "svc", {"spec": changed}, ns)

        def promoted(obj: dict[str, Any]) -> bool:
            active = ((obj.get("status") or {}).get("activeServiceStatus") or {}).get(
                "rayClusterName"
            )
            return bool(active) and active != first_cluster and ready(obj)

        await wait_for(
            process_kube,
            RAYSERVICES,
            "svc",
            ns,
            promoted,
            timeout=500,
            what="promotion",
            interval=1,
        )
        deadline = time.monotonic() + 60
        while not client.answers[-1].startswith("v3 "):
            assert time.monotonic() < deadline, f"new cluster never served: {client.answers[-3:]}"
            await asyncio.sleep(1)
    finally:
        client.stopped = True
        await task
    assert not client.failures, client.failures[:10]
    assert len(client.answers) > 20

    async def old_cluster_gone() -> bool:
        clusters = await process_kube.list(RAYCLUSTERS, ns)
        return first_cluster not in {c["metadata"]["name"] for c in clusters["items"]}

    deadline = time.monotonic() + 120
    while not await old_cluster_gone():
        assert time.monotonic() < deadline, "the old cluster was not deleted after the delay"
        await asyncio.sleep(2)
