"""Shared pieces of the real-Ray end-to-end tests on the process node runtime.

Manifests are small on purpose: every Ray node costs seconds of CPU to start on a 2-core
machine, so heads take no tasks (``num-cpus: 0``) unless a test needs them to, object stores are
capped, and each test uses as few pods as its claim needs. The image is mapped by the node agent
to this project's Python environment, which has the pinned Ray.
"""

from __future__ import annotations

import asyncio
import json
import time
import urllib.error
import urllib.request
import uuid
from typing import Any

from kuberay.runtime.client import ENDPOINTSLICES, KubeClient, Resource

RAY_VERSION = "2.59.0"
IMAGE = f"rayproject/ray:{RAY_VERSION}"
OBJECT_STORE = "80000000"


def container(name: str, cpu: str = "1", memory: str = "1Gi", **extra: Any) -> dict[str, Any]:
    return {
        "name": name,
        "image": IMAGE,
        "resources": {
            "limits": {"cpu": cpu, "memory": memory},
            "requests": {"cpu": "100m", "memory": "128Mi"},
        },
        **extra,
    }


def head_group(cpus: str = "0", **container_extra: Any) -> dict[str, Any]:
    return {
        "rayStartParams": {"num-cpus": cpus, "object-store-memory": OBJECT_STORE},
        "template": {
            "spec": {"containers": [container("ray-head", "1", "2Gi", **container_extra)]}
        },
    }


def worker_group(
    name: str, replicas: int, *, min_replicas: int = 0, max_replicas: int = 4, **extra: Any
) -> dict[str, Any]:
    return {
        "groupName": name,
        "replicas": replicas,
        "minReplicas": min_replicas,
        "maxReplicas": max_replicas,
        "rayStartParams": {"object-store-memory": OBJECT_STORE},
        "template": {"spec": {"containers": [container("ray-worker", **extra)]}},
    }


def cluster_spec(*groups: dict[str, Any], head_cpus: str = "0") -> dict[str, Any]:
    return {
        "rayVersion": RAY_VERSION,
        "headGroupSpec": head_group(head_cpus),
        "workerGroupSpecs": list(groups),
    }


def raycluster(name: str, spec: dict[str, Any]) -> dict[str, Any]:
    return {
        "apiVersion": "ray.io/v1",
        "kind": "RayCluster",
        "metadata": {"name": name},
        "spec": spec,
    }


def http(method: str, url: str, body: Any = None, timeout: float = 10.0) -> tuple[int, bytes]:
    """One request; (0, b"") when nothing answers. Only ever sent to pod addresses."""
    data = json.dumps(body).encode() if body is not None else None
    req = urllib.request.Request(url, data=data, method=method)
    if data is not None:
        req.add_header("Content-Type", "application/json")
    try:
        with urllib.request.urlopen(req, timeout=timeout) as resp:
            return int(resp.status), resp.read()
    except urllib.error.HTTPError as exc:
        return exc.code, exc.read()
    except (urllib.error.URLError, OSError):
        return 0, b""


async def ahttp(
    method: str, url: str, body: Any = None, timeout: float = 10.0
) -> tuple[int, bytes]:
    return await asyncio.to_thread(http, method, url, body, timeout)


async def head_ip(kube: KubeClient, ns: str, cluster: str) -> str:
    pods = await kube.list(
        Resource("", "v1", "pods"),
        ns,
        label_selector=f"ray.io/cluster={cluster},ray.io/node-type=head",
    )
    for pod in pods["items"]:
        ip = (pod.get("status") or {}).get("podIP")
        if ip and not pod["metadata"].get("deletionTimestamp"):
            return str(ip)
    raise AssertionError(f"no head pod with an IP for {ns}/{cluster}")


async def service_endpoints(kube: KubeClient, ns: str, service: str) -> list[str]:
    """Ready endpoint addresses of a Service (there is no kube-proxy: clients dial pods)."""
    slices = await kube.list(
        ENDPOINTSLICES, ns, label_selector=f"kubernetes.io/service-name={service}"
    )
    out: list[str] = []
    for sl in slices["items"]:
        for ep in sl.get("endpoints") or []:
            if (ep.get("conditions") or {}).get("ready"):
                out.extend(ep.get("addresses") or [])
    return out


async def alive_nodes(dashboard: str) -> int:
    status, body = await ahttp("GET", f"{dashboard}/nodes?view=summary")
    if status != 200:
        return -1
    data = json.loads(body).get("data", {})
    summary = data.get("summary") or []
    return sum(1 for n in summary if (n.get("raylet") or {}).get("state") == "ALIVE")


async def wait_alive_nodes(dashboard: str, count: int, timeout: float = 120.0) -> None:
    """Until the dashboard lists ``count`` alive raylets (head included)."""
    deadline = time.monotonic() + timeout
    while await alive_nodes(dashboard) < count:
        assert time.monotonic() < deadline, f"the dashboard never listed {count} alive nodes"
        await asyncio.sleep(2)


async def run_job(dashboard: str, entrypoint: str, timeout: float = 180.0) -> tuple[str, str]:
    """Submits a job through the dashboard and waits for a terminal state: (status, logs).

    A head that has just become Ready (its probes ask the raylet and the GCS) may not serve the
    dashboard's job API yet, so the submission is retried while nothing answers or the answer
    is a 5xx, for up to a minute. The submission id is ours, so a retry of a request that did
    reach the dashboard cannot start the job twice: Ray refuses a known id."""
    job_id = f"t-{uuid.uuid4().hex[:12]}"
    request = {"entrypoint": entrypoint, "submission_id": job_id}
    submit_deadline = time.monotonic() + 60
    while True:
        status, body = await ahttp("POST", f"{dashboard}/api/jobs/", request)
        if status == 200 or b"already exists" in body:
            break
        assert status == 0 or status >= 500, (status, body)
        assert time.monotonic() < submit_deadline, (status, body)
        await asyncio.sleep(2)
    deadline = time.monotonic() + timeout
    state = ""
    while time.monotonic() < deadline:
        status, body = await ahttp("GET", f"{dashboard}/api/jobs/{job_id}")
        if status == 200:
            state = json.loads(body).get("status", "")
            if state in ("SUCCEEDED", "FAILED", "STOPPED"):
                break
        await asyncio.sleep(1)
    _, logs = await ahttp("GET", f"{dashboard}/api/jobs/{job_id}/logs")
    text = json.loads(logs).get("logs", "") if logs else ""
    return state, text
