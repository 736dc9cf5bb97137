"""RayCluster throughput on KWOK: N clusters x M workers from creation to `ready`.

    .venv/bin/python tests/bench/raycluster_scale.py [--clusters 100] [--workers 10]
        [--concurrency 8] [--timeout 900]

Starts a local plane (inflight limits lifted), installs the CRDs, runs `kuberay operator` as a
subprocess, creates the clusters as fast as a client can, and reports the time until every pod
exists and until every cluster is ready, pods per second, the operator's CPU seconds and peak
RSS, and its status writes. Writes bench-results/raycluster.json. Bounded by --timeout.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

from kuberay.devenv.manifests import install_crds
from kuberay.devenv.plane import Plane, PlaneConfig
from kuberay.devenv.testing import create_namespace
from kuberay.runtime.client import PODS, KubeClient, Resource, load_kubeconfig

RAYCLUSTERS = Resource("ray.io", "v1", "rayclusters", kind="RayCluster")


def cluster(name: str, workers: int) -> dict[str, Any]:
    def container(n: str) -> dict[str, Any]:
        return {
            "name": n,
            "image": "rayproject/ray:2.52.0",
            "resources": {
                "limits": {"cpu": "1", "memory": "1Gi"},
                "requests": {"cpu": "1", "memory": "1Gi"},
            },
        }

    return {
        "apiVersion": "ray.io/v1",
        "kind": "RayCluster",
        "metadata": {"name": name},
        "spec": {
            "rayVersion": "2.52.0",
            "headGroupSpec": {
                "rayStartParams": {},
                "template": {"spec": {"containers": [container("ray-head")]}},
            },
            "workerGroupSpecs": [
                {
                    "groupName": "workers",
                    "replicas": workers,
                    "minReplicas": 0,
                    "maxReplicas": workers * 2,
                    "rayStartParams": {},
                    "template": {"spec": {"containers": [container("ray-worker")]}},
                }
            ],
        },
    }


def proc_stats(pid: int) -> tuple[float, int]:
    """(CPU seconds, peak RSS KiB) of a process."""
    tick = os.sysconf("SC_CLK_TCK")
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    cpu = (int(fields[11]) + int(fields[12])) / tick
    hwm = 0
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmHWM:"):
            hwm = int(line.split()[1])
    return cpu, hwm


async def run(plane: Plane, args: argparse.Namespace, op_pid: int) -> dict[str, Any]:
    config = load_kubeconfig(plane.kubeconfig)
    config.qps = 0
    async with KubeClient(config, user_agent="bench") as kube:
        ns = "bench"
        await create_namespace(kube, ns)
        total_pods = args.clusters * (args.workers + 1)
        cpu0, _ = proc_stats(op_pid)
        start = time.monotonic()
        sem = asyncio.Semaphore(16)

        async def make(i: int) -> None:
            async with sem:
                await kube.create(RAYCLUSTERS, cluster(f"rc-{i}", args.workers), ns)

        await asyncio.gather(*(make(i) for i in range(args.clusters)))
        created = time.monotonic() - start
        all_pods_at = None
        deadline = start + args.timeout
        peak = 0
        while time.monotonic() < deadline:
            _, hwm = proc_stats(op_pid)
            peak = max(peak, hwm)
            if all_pods_at is None:
                pods = await kube.list(PODS, ns, label_selector="ray.io/cluster")
                if len(pods["items"]) >= total_pods:
                    all_pods_at = time.monotonic() - start
            clusters = (await kube.list(RAYCLUSTERS, ns))["items"]
            ready = sum(1 for c in clusters if (c.get("status") or {}).get("state") == "ready")
            if ready == args.clusters and all_pods_at is not None:
                break
            await asyncio.sleep(1.0)
        else:
            raise TimeoutError(f"only {ready}/{args.clusters} clusters ready after {args.timeout}s")
        ready_at = time.monotonic() - start
        cpu1, hwm = proc_stats(op_pid)
        return {
            "clusters": args.clusters,
            "workers_per_cluster": args.workers,
            "pods": total_pods,
            "reconcile_concurrency": args.concurrency,
            "create_requests_seconds": round(created, 1),
            "all_pods_exist_seconds": round(all_pods_at or 0, 1),
            "all_ready_seconds": round(ready_at, 1),
            "pods_per_second": round(total_pods / (all_pods_at or ready_at), 1),
            "operator_cpu_seconds": round(cpu1 - cpu0, 1),
            "operator_peak_rss_mib": round(max(peak, hwm) / 1024, 1),
        }


def main() -> int:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawTextHelpFormatter
    )
    parser.add_argument("--clusters", type=int, default=100)
    parser.add_argument("--workers", type=int, default=10)
    parser.add_argument("--concurrency", type=int, default=8)
    parser.add_argument("--nodes", type=int, default=20)
    parser.add_argument("--timeout", type=float, default=900)
    parser.add_argument("--out", type=Path, default=Path("bench-results/raycluster.json"))
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        plane = Plane(
            PlaneConfig(directory=Path(tmp), nodes=args.nodes, unlimited=True, log=lambda _: None)
        )
        plane.start()
        op = None
        try:

            async def crds() -> None:
                async with KubeClient(load_kubeconfig(plane.kubeconfig)) as kube:
                    await install_crds(kube)

            asyncio.run(crds())
            log = open(Path(tmp) / "operator.log", "wb")  # noqa: SIM115
            op = subprocess.Popen(
                [
                    sys.executable,
                    "-m",
                    "kuberay.cli.main",
                    "operator",
                    f"--kubeconfig={plane.kubeconfig}",
                    "--enable-leader-election=false",
                    "--metrics-addr=127.0.0.1:0",
                    "--health-probe-bind-address=127.0.0.1:0",
                    f"--reconcile-concurrency={args.concurrency}",
                    "--qps=1000",
                    "--burst=2000",
                    "--log-stdout-encoder=console",
                ],
                stdout=log,
                stderr=subprocess.STDOUT,
            )
            time.sleep(2)
            _, idle_kib = proc_stats(op.pid)
            result = asyncio.run(run(plane, args, op.pid))
            result["operator_idle_rss_mib"] = round(idle_kib / 1024, 1)
        finally:
            if op is not None:
                op.terminate()
                op.wait(30)
            plane.stop()
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps(result, indent=2))
    print("| figure | value |\n|---|---|")
    for key, value in result.items():
        print(f"| {key} | {value} |")
    print(f"\nJSON: {args.out}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
