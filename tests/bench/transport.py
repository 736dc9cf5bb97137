"""Client CPU per request and per watch event, HTTP/1.1 vs HTTP/2, against a real apiserver.

    .venv/bin/python tests/bench/transport.py                  # its own local plane
    .venv/bin/python tests/bench/transport.py --kubeconfig K   # an existing cluster

Requests: ``--requests`` GETs of one small object, ``--concurrency`` at a time. Watch events:
``--events`` ConfigMaps (~1 KiB each) are created first, then a watch from the version before
them replays them all; only the watching is timed. CPU is this process's own (process_time), so
it is the client's cost, little affected by the apiserver sharing the cores; wall times are
noisy on a shared machine. Prints a Markdown table.
"""

from __future__ import annotations

import argparse
import asyncio
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).parent))
from scale import bench_plane

from kuberay.devenv.testing import create_namespace
from kuberay.runtime.client import CONFIGMAPS, KubeClient, load_kubeconfig


async def requests(client: KubeClient, count: int, concurrency: int) -> tuple[float, float]:
    sem = asyncio.Semaphore(concurrency)

    async def one() -> None:
        async with sem:
            await client.request("GET", "/api/v1/namespaces/default")

    await one()  # connect outside the timing
    cpu, wall = time.process_time(), time.monotonic()
    await asyncio.gather(*(one() for _ in range(count)))
    return time.process_time() - cpu, time.monotonic() - wall


async def watch_events(client: KubeClient, ns: str, rv: str, count: int) -> tuple[float, float]:
    cpu, wall = time.process_time(), time.monotonic()
    seen = 0
    async for event in client.watch(CONFIGMAPS, ns, resource_version=rv, timeout_seconds=300):
        if event.type == "ADDED":
            seen += 1
            if seen == count:
                break
    return time.process_time() - cpu, time.monotonic() - wall


async def run_all(args: argparse.Namespace, kubeconfig: Path) -> list[dict[str, Any]]:
    config = load_kubeconfig(kubeconfig)
    config.qps = 0
    out = []
    async with KubeClient(config, user_agent="bench-transport") as kube:
        ns = f"bench-transport-{int(time.time())}"
        await create_namespace(kube, ns)
        before = await kube.list(CONFIGMAPS, ns)
        rv = before["metadata"]["resourceVersion"]
        sem = asyncio.Semaphore(32)
        payload = {f"k{i}": "x" * 64 for i in range(12)}

        async def make(i: int) -> None:
            async with sem:
                body = {"metadata": {"name": f"cm-{i:05d}"}, "data": payload}
                await kube.create(CONFIGMAPS, body, ns)

        await asyncio.gather(*(make(i) for i in range(args.events)))
        for protocol in ("http1", "http2"):
            cfg = load_kubeconfig(kubeconfig)
            cfg.qps = 0
            cfg.http2 = protocol == "http2"
            async with KubeClient(cfg, user_agent=f"bench-{protocol}") as client:
                req_cpu, req_wall = await requests(client, args.requests, args.concurrency)
                ev_cpu, ev_wall = await watch_events(client, ns, rv, args.events)
                version = client.http_version
            out.append(
                {
                    "protocol": version,
                    "cpu_us_per_request": round(req_cpu / args.requests * 1e6),
                    "requests_per_s": round(args.requests / req_wall),
                    "cpu_us_per_event": round(ev_cpu / args.events * 1e6),
                    "events_per_s": round(args.events / ev_wall),
                }
            )
            print(out[-1], flush=True)
    return out


def main() -> int:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawTextHelpFormatter
    )
    parser.add_argument("--requests", type=int, default=2000)
    parser.add_argument("--concurrency", type=int, default=16)
    parser.add_argument("--events", type=int, default=3000)
    parser.add_argument("--kubeconfig", type=Path, default=None)
    args = parser.parse_args()
    if args.kubeconfig:
        results = asyncio.run(run_all(args, args.kubeconfig))
    else:
        with tempfile.TemporaryDirectory() as tmp, bench_plane(Path(tmp), 1) as plane:
            results = asyncio.run(run_all(args, plane.kubeconfig))
    print("| protocol | CPU µs/request | requests/s | CPU µs/watch event | events/s |")
    print("| --- | ---: | ---: | ---: | ---: |")
    for r in results:
        print(
            f"| {r['protocol']} | {r['cpu_us_per_request']} | {r['requests_per_s']} | "
            f"{r['cpu_us_per_event']} | {r['events_per_s']} |"
        )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
