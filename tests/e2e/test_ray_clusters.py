"""Real Ray on the process node runtime, driven by this project's operator: a RayCluster forms
and runs a task on a worker; RayJobs in every submission mode; autoscaling with Ray's own
autoscaler sidecar; GCS fault tolerance with a real Redis.

The operator runs as a subprocess with ``--use-kubernetes-proxy``: it lives on the host, where
cluster DNS names do not resolve, and reaches each dashboard through the apiserver's service
proxy (the apiserver routes to pod addresses over the runtime's bridge). Tests talk to Ray at
pod addresses directly; nothing leaves the machine.
"""

from __future__ import annotations

import asyncio
import contextlib
import shutil
import socket
import subprocess
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from kuberay.api.constants import RAYCLUSTERS, RAYJOBS
from kuberay.devenv.plane import Plane
from kuberay.devenv.testing import skip_unless_strict, wait_for, wait_gone
from kuberay.runtime.client import EVENTS, PODS, KubeClient

from .raykube import (
    cluster_spec,
    head_ip,
    raycluster,
    run_job,
    wait_alive_nodes,
    worker_group,
)

pytestmark = [pytest.mark.e2e, pytest.mark.slow]

READY_TIMEOUT = 300.0


def cluster_ready(obj: dict[str, Any]) -> bool:
    return (obj.get("status") or {}).get("state") == "ready"


async def start_cluster(kube: KubeClient, ns: str, name: str, spec: dict[str, Any]) -> str:
    """Creates the RayCluster, waits for `ready`; returns its dashboard URL (head pod IP)."""
    await kube.create(RAYCLUSTERS, raycluster(name, spec), ns)
    await wait_for(kube, RAYCLUSTERS, name, ns, cluster_ready, timeout=READY_TIMEOUT, what="ready")
    return f"http://{await head_ip(kube, ns, name)}:8265"


async def test_raycluster_forms_and_runs_a_task_on_a_worker(
    process_kube: KubeClient, ns: str
) -> None:
    spec = cluster_spec(worker_group("small", 1), worker_group("other", 1))
    dashboard = await start_cluster(process_kube, ns, "forms", spec)
    await wait_alive_nodes(dashboard, 3)
    entry = (
        'python -c "import ray, socket; ray.init();'
        " f = ray.remote(num_cpus=1)(lambda: socket.gethostname());"
        " print('ran-on', ray.get(f.remote()))\""
    )
    state, logs = await run_job(dashboard, entry)
    assert state == "SUCCEEDED", logs
    assert "ran-on forms-" in logs, logs
    assert "-worker-" in logs, logs


def rayjob(name: str, entrypoint: str, **spec: Any) -> dict[str, Any]:
    body: dict[str, Any] = {
        "entrypoint": entrypoint,
        "shutdownAfterJobFinishes": True,
        "rayClusterSpec": cluster_spec(head_cpus="1"),
    }
    body.update(spec)
    return {"apiVersion": "ray.io/v1", "kind": "RayJob", "metadata": {"name": name}, "spec": body}


def finished(obj: dict[str, Any]) -> bool:
    return (obj.get("status") or {}).get("jobDeploymentStatus") in ("Complete", "Failed")


async def test_rayjobs_in_every_submission_mode(
    process_kube: KubeClient, ns: str, process_plane: Plane
) -> None:
    ok = (
        'python -c "import ray; ray.init();'
        " print('job-says', ray.get(ray.remote(lambda: 6 * 7).remote()))\""
    )
    jobs = {
        "k8s": rayjob("k8s", ok),
        "http": rayjob("http", ok, submissionMode="HTTPMode"),
        "sidecar": rayjob("sidecar", ok, submissionMode="SidecarMode"),
        "fails": rayjob("fails", 'python -c "import sys; sys.exit(3)"'),
        "retries": rayjob("retries", 'python -c "import sys; sys.exit(4)"', backoffLimit=1),
    }
    # The sidecar goes first, alone: its `ray job submit` runs once (no SidecarSubmitterRestart
    # gate), and a head that five Ray clusters starve of CPU can pass the dashboard's health
    # check before its job agent registers, so Ray answers "No available agent to submit job"
    # and the job fails, with upstream's operator too (ray-project/kuberay#4285).
    await process_kube.create(RAYJOBS, jobs["sidecar"], ns)
    await wait_for(
        process_kube,
        RAYJOBS,
        "sidecar",
        ns,
        lambda o: bool((o.get("status") or {}).get("jobStatus")) or finished(o),
        timeout=600,
        what="submitted",
        interval=1,
    )
    for name, body in jobs.items():
        if name != "sidecar":
            await process_kube.create(RAYJOBS, body, ns)
    results = await asyncio.gather(
        *(
            wait_for(
                process_kube, RAYJOBS, name, ns, finished, timeout=600, what="finished", interval=1
            )
            for name in jobs
        )
    )
    status = {r["metadata"]["name"]: r["status"] for r in results}
    for name in ("k8s", "http", "sidecar"):
        assert status[name]["jobDeploymentStatus"] == "Complete", status[name]
        assert status[name]["jobStatus"] == "SUCCEEDED", status[name]
    for name in ("fails", "retries"):
        assert status[name]["jobDeploymentStatus"] == "Failed", status[name]
        assert status[name]["reason"] == "AppFailed", status[name]
    assert status["retries"].get("failed") == 2, status["retries"]

    # The submitters' logs carry the job's output (what `ray job submit` / the sidecar tails).
    # Read from the runtime's log files: the pods may be gone with their cluster by now.
    def logs(pattern: str) -> str:
        files = sorted(process_plane.pod_logs.glob(pattern))
        assert files, f"no log matches {pattern}"
        return "\n".join(f.read_text(errors="replace") for f in files)

    assert "job-says 42" in logs(f"{ns}_k8s-*/ray-job-submitter*.log")
    sidecar_cluster = status["sidecar"]["rayClusterName"]
    assert "job-says 42" in logs(f"{ns}_{sidecar_cluster}-head-*/ray-job-submitter*.log")


async def test_autoscaler_scales_a_group_up_and_back_down(
    process_kube: KubeClient, ns: str
) -> None:
    spec = cluster_spec(worker_group("auto", 0, min_replicas=0, max_replicas=2))
    spec["enableInTreeAutoscaling"] = True
    spec["autoscalerOptions"] = {"idleTimeoutSeconds": 15}
    dashboard = await start_cluster(process_kube, ns, "auto", spec)
    entry = (
        'python -c "import ray, time; ray.init();'
        " f = ray.remote(num_cpus=1)(lambda: time.sleep(5) or 1);"
        " print('sum', sum(ray.get([f.remote() for _ in range(2)])))\""
    )
    state, logs = await run_job(dashboard, entry, timeout=400)
    assert state == "SUCCEEDED", logs

    def scaled_up(obj: dict[str, Any]) -> bool:
        return int(obj["spec"]["workerGroupSpecs"][0].get("replicas") or 0) >= 1

    cluster = await wait_for(
        process_kube, RAYCLUSTERS, "auto", ns, scaled_up, timeout=30, what="scale-up"
    )
    assert cluster["spec"]["workerGroupSpecs"][0]["replicas"] >= 1

    async def workers() -> int:
        pods = await process_kube.list(
            PODS, ns, label_selector="ray.io/cluster=auto,ray.io/node-type=worker"
        )
        return len([p for p in pods["items"] if not p["metadata"].get("deletionTimestamp")])

    deadline = time.monotonic() + 240
    while await workers() > 0:
        assert time.monotonic() < deadline, "idle workers were never scaled down"
        await asyncio.sleep(3)
    final = await process_kube.get(RAYCLUSTERS, "auto", ns)
    group = final["spec"]["workerGroupSpecs"][0]
    assert group["replicas"] == 0
    # Ray's autoscaler names the idle pods it removes; the operator deletes exactly those.
    assert (group.get("scaleStrategy") or {}).get("workersToDelete"), group


def free_port(host: str) -> int:
    with socket.socket() as sock:
        sock.bind((host, 0))
        return int(sock.getsockname()[1])


@contextlib.contextmanager
def redis_server(host: str, directory: Path) -> Iterator[int]:
    binary = shutil.which("redis-server")
    if binary is None:
        skip_unless_strict("redis-server is not installed (scripts/bootstrap.sh installs it)")
    port = free_port(host)
    proc = subprocess.Popen(
        [
            binary,
            "--bind",
            host,
            "--port",
            str(port),
            "--save",
            "",
            "--appendonly",
            "no",
            "--protected-mode",
            "no",
            "--dir",
            str(directory),
        ],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    try:
        deadline = time.monotonic() + 20
        while True:
            with contextlib.suppress(OSError), socket.create_connection((host, port), 1):
                break
            assert time.monotonic() < deadline, "redis-server did not start"
            time.sleep(0.1)
        yield port
    finally:
        proc.terminate()
        with contextlib.suppress(subprocess.TimeoutExpired):
            proc.wait(10)
        if proc.poll() is None:
            proc.kill()
            proc.wait()


def redis_keys(host: str, port: int) -> int:
    with socket.create_connection((host, port), 5) as sock:
        sock.sendall(b"*1\r\n$6\r\nDBSIZE\r\n")
        reply = sock.recv(64)
    return int(reply.strip().lstrip(b":"))


async def test_gcs_fault_tolerance_with_redis(
    process_kube: KubeClient, ns: str, process_plane: Plane, tmp_path: Path
) -> None:
    host = process_plane.pod_gateway
    with redis_server(host, tmp_path) as port:
        spec = cluster_spec(worker_group("w", 1))
        spec["gcsFaultToleranceOptions"] = {"redisAddress": f"{host}:{port}"}
        dashboard = await start_cluster(process_kube, ns, "ft", spec)
        make_actor = (
            "python -c \"import ray; ray.init(namespace='ft');"
            " C = ray.remote(num_cpus=0.1)(type('C', (), {'__init__': lambda s: setattr(s, 'n', 0),"
            " 'inc': lambda s: setattr(s, 'n', s.n + 1) or s.n}));"
            " a = C.options(name='counter', lifetime='detached').remote();"
            " print('count', ray.get(a.inc.remote()))\""
        )
        state, logs = await run_job(dashboard, make_actor)
        assert state == "SUCCEEDED", logs
        assert "count 1" in logs, logs
        before = {
            p["metadata"]["name"]: p["metadata"]["uid"]
            for p in (await process_kube.list(PODS, ns, label_selector="ray.io/cluster=ft"))[
                "items"
            ]
        }
        head = next(n for n in before if "-head" in n)
        await process_kube.delete(PODS, head, ns)

        async def new_head_ready() -> str:
            deadline = time.monotonic() + READY_TIMEOUT
            while time.monotonic() < deadline:
                pods = (
                    await process_kube.list(
                        PODS, ns, label_selector="ray.io/cluster=ft,ray.io/node-type=head"
                    )
                )["items"]
                for pod in pods:
                    ready = any(
                        c["type"] == "Ready" and c["status"] == "True"
                        for c in (pod.get("status") or {}).get("conditions") or []
                    )
                    if pod["metadata"]["uid"] not in before.values() and ready:
                        return str(pod["status"]["podIP"])
                await asyncio.sleep(2)
            raise AssertionError("the head pod was not recreated and ready")

        dashboard = f"http://{await new_head_ready()}:8265"
        use_actor = (
            "python -c \"import ray; ray.init(namespace='ft');"
            " a = ray.get_actor('counter'); print('count', ray.get(a.inc.remote()))\""
        )
        state, logs = await run_job(dashboard, use_actor, timeout=240)
        assert state == "SUCCEEDED", logs
        assert "count 2" in logs, logs
        workers = (
            await process_kube.list(
                PODS, ns, label_selector="ray.io/cluster=ft,ray.io/node-type=worker"
            )
        )["items"]
        assert [p["metadata"]["uid"] for p in workers] == [
            uid for name, uid in before.items() if "-worker-" in name
        ], "the worker pod was replaced: it should have survived the head's loss"
        assert redis_keys(host, port) > 0
        await process_kube.delete(RAYCLUSTERS, "ft", ns)
        # The finalizer holds the RayCluster until the cleanup Job has succeeded; the Job is
        # owned by the cluster and goes with it, so its success shows in events and in Redis.
        await wait_gone(process_kube, RAYCLUSTERS, "ft", ns, timeout=240)
        events = await process_kube.list(
            EVENTS, ns, field_selector="involvedObject.name=ft-redis-cleanup"
        )
        reasons = {e.get("reason") for e in events["items"]}
        assert "Completed" in reasons, reasons
        assert redis_keys(host, port) == 0
