"""Benchmark of the local plane itself: build time, warm start, idle memory, raw pod ceiling.

    .venv/bin/python tests/bench/plane_ceiling.py [--pods 2000] [--concurrency 64] [--starts 3]

The ceiling is the rate at which a plain parallel client gets pods created, scheduled and made
Running and Ready by KWOK, with no operator involved; operator benchmarks report their pod rate
as a fraction of it. Prints a Markdown table and writes JSON to bench-results/plane.json.
Every loop is bounded by --pods and --timeout.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import statistics
import tempfile
import time
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any

from kuberay.devenv import binaries
from kuberay.devenv.plane import Plane, PlaneConfig
from kuberay.devenv.testing import create_namespace
from kuberay.runtime.client import PODS, KubeClient, load_kubeconfig
from kuberay.runtime.errors import ServerError


def _pod(i: int) -> dict[str, Any]:
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": f"p-{i}", "labels": {"bench": "ceiling"}},
        "spec": {
            "containers": [
                {
                    "name": "c",
                    "image": "busybox",
                    "resources": {"requests": {"cpu": "10m", "memory": "16Mi"}},
                }
            ]
        },
    }


async def list_retrying(kube: KubeClient, ns: str | None, attempts: int = 20) -> dict[str, Any]:
    """A pod list that rides out the apiserver's 504 "Too large resource version" (its watch
    cache briefly behind etcd under load) instead of ending the benchmark."""
    for _ in range(attempts - 1):
        try:
            return await kube.list(PODS, ns)
        except ServerError:
            await asyncio.sleep(0.5)
    return await kube.list(PODS, ns)


async def ceiling(  # noqa: C901
    plane: Plane,
    pods: int,
    concurrency: int,
    timeout: float,
    make_pod: Callable[[int], dict[str, Any]] = _pod,
    prepare: Callable[[KubeClient, str], Awaitable[None]] | None = None,
) -> dict[str, float]:
    """``make_pod`` lets an operator benchmark measure the ceiling with the very pods the
    operator would create (their size and shape cost the apiserver, scheduler and KWOK);
    ``prepare`` creates other objects in the namespace before the clock starts."""
    config = load_kubeconfig(plane.kubeconfig)
    config.qps = 0
    config.max_connections = concurrency  # one connection per request in flight
    async with KubeClient(config, user_agent="bench-ceiling") as kube:
        ns = "bench-ceiling"
        await create_namespace(kube, ns)
        if prepare is not None:
            await prepare(kube, ns)
        listed = await list_retrying(kube, ns)
        rv = listed["metadata"]["resourceVersion"]
        ready: set[str] = set()
        all_ready = asyncio.Event()

        def is_ready(pod: dict[str, Any]) -> bool:
            st = pod.get("status", {})
            return st.get("phase") == "Running" and any(
                c["type"] == "Ready" and c["status"] == "True" for c in st.get("conditions") or []
            )

        async def watch() -> None:
            version = rv
            while True:
                async for ev in kube.watch(PODS, ns, resource_version=version, timeout_seconds=600):
                    if ev.type == "ERROR":
                        break  # e.g. the watch cache lagging behind: relist below
                    version = ev.object["metadata"]["resourceVersion"]
                    if is_ready(ev.object):
                        ready.add(ev.object["metadata"]["name"])
                    if len(ready) >= pods:
                        all_ready.set()
                        return
                current = await list_retrying(kube, ns)
                ready.update(p["metadata"]["name"] for p in current["items"] if is_ready(p))
                version = current["metadata"]["resourceVersion"]

        watcher = asyncio.create_task(watch())
        queue: asyncio.Queue[int] = asyncio.Queue()
        for i in range(pods):
            queue.put_nowait(i)

        async def worker() -> None:
            while True:
                try:
                    i = queue.get_nowait()
                except asyncio.QueueEmpty:
                    return
                await kube.create(PODS, make_pod(i), ns)

        start = time.monotonic()
        await asyncio.gather(*(worker() for _ in range(concurrency)))
        created = time.monotonic() - start
        deadline = start + timeout
        try:
            while not all_ready.is_set():
                if watcher.done():
                    watcher.result()  # raises what the watch died of
                if time.monotonic() > deadline:
                    raise TimeoutError(f"{len(ready)}/{pods} pods Ready after {timeout:.0f}s")
                await asyncio.sleep(0.05)
        finally:
            watcher.cancel()
        total = time.monotonic() - start
        return {
            "pods": pods,
            "concurrency": concurrency,
            "create_seconds": round(created, 2),
            "ready_seconds": round(total, 2),
            "create_pods_per_second": round(pods / created, 1),
            "ceiling_pods_per_second": round(pods / total, 1),
        }


def main() -> int:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawTextHelpFormatter
    )
    parser.add_argument("--pods", type=int, default=2000)
    parser.add_argument("--concurrency", type=int, default=64)
    parser.add_argument("--nodes", type=int, default=10)
    parser.add_argument("--starts", type=int, default=3, help="warm starts to time")
    parser.add_argument("--timeout", type=float, default=300)
    parser.add_argument("--out", type=Path, default=Path("bench-results/plane.json"))
    args = parser.parse_args()

    binaries.ensure()
    result: dict[str, Any] = {"cold_build_seconds": binaries.build_times()}
    starts = []
    for _ in range(args.starts):
        with tempfile.TemporaryDirectory() as tmp:
            plane = Plane(PlaneConfig(directory=Path(tmp), nodes=4, log=lambda _: None))
            plane.start()
            starts.append(plane.ready_seconds)
            plane.stop()
    result["warm_start_seconds"] = {
        "median": round(statistics.median(starts), 2),
        "all": [round(s, 2) for s in starts],
    }
    with tempfile.TemporaryDirectory() as tmp:
        cfg = PlaneConfig(directory=Path(tmp), nodes=args.nodes, unlimited=True, log=lambda _: None)
        plane = Plane(cfg)
        plane.start()
        try:
            time.sleep(5)
            result["idle_rss_mib"] = {k: round(v / 1024, 1) for k, v in plane.rss_kib().items()}
            cpu_before = plane.cpu_seconds()
            client_before = time.process_time()
            result["ceiling"] = asyncio.run(
                ceiling(plane, args.pods, args.concurrency, args.timeout)
            )
            cpu_after = plane.cpu_seconds()
            result["ceiling_cpu_seconds"] = {
                k: round(cpu_after[k] - cpu_before.get(k, 0.0), 1) for k in cpu_after
            }
            result["ceiling_cpu_seconds"]["benchmark client"] = round(
                time.process_time() - client_before, 1
            )
            result["loaded_rss_mib"] = {k: round(v / 1024, 1) for k, v in plane.rss_kib().items()}
        finally:
            plane.stop()

    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps(result, indent=2))
    print("| figure | value |\n|---|---|")
    for comp, secs in result["cold_build_seconds"].items():
        print(f"| cold build {comp} | {secs:.0f} s |")
    print(f"| warm start (median of {args.starts}) | {result['warm_start_seconds']['median']} s |")
    for comp, mib in result["idle_rss_mib"].items():
        print(f"| idle RSS {comp} | {mib} MiB |")
    c = result["ceiling"]
    rate = c["create_pods_per_second"]
    print(f"| create rate ({c['pods']} pods, {c['concurrency']} parallel) | {rate} pods/s |")
    print(f"| **ceiling: created and Running+Ready** | **{c['ceiling_pods_per_second']} pods/s** |")
    for comp, secs in result["ceiling_cpu_seconds"].items():
        print(f"| CPU during the ceiling run, {comp} | {secs} s |")
    for comp, mib in result["loaded_rss_mib"].items():
        print(f"| RSS after {c['pods']} pods, {comp} | {mib} MiB |")
    print(f"\nJSON: {args.out}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
