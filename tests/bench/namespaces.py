"""Connections, memory and CPU of the operator by number of watched namespaces, HTTP/1.1 vs 2.

    .venv/bin/python tests/bench/namespaces.py                       # 1, 100, 500 namespaces
    .venv/bin/python tests/bench/namespaces.py --counts 1,20 --protocols http2
    .venv/bin/python tests/bench/namespaces.py --protocols http1,http2,go   # + the Go operator

For each protocol and each count N the operator is started with ``--watch-namespace`` naming N
namespaces (one of them holds the workload), then a small workload (``--clusters`` RayClusters
of ``--workers`` workers) is created at once and timed to every cluster ``ready``. Reported per
run: the operator's established TCP connections to the apiserver (its own sockets, matched by
inode in /proc), its RSS and CPU seconds from start to convergence, and the time to converge
(which includes syncing N namespaces' informers). HTTP/1.1 is the operator with
KUBERAY_APISERVER_HTTP2=false. Its own local plane; prints a Markdown table and writes
bench-results/namespaces.json. Timings on a shared 2-core machine are noisy (+-20 %);
connection counts are exact.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import json
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).parent))
from scale import Bench, bench_plane, proc_stats, start_operator

from kuberay.api.constants import RAYCLUSTERS
from kuberay.devenv.binaries import go_operator_binary
from kuberay.devenv.manifests import install_crds
from kuberay.devenv.testing import create_namespace, tcp_connections
from kuberay.devenv.testing import small_raycluster as cluster
from kuberay.runtime.client import NAMESPACES, KubeClient, load_kubeconfig
from kuberay.runtime.errors import AlreadyExists


async def make_namespaces(kube: KubeClient, names: list[str]) -> None:
    sem = asyncio.Semaphore(32)

    async def one(name: str) -> None:
        async with sem:
            with contextlib.suppress(AlreadyExists):
                await kube.create(NAMESPACES, {"metadata": {"name": name}})

    await asyncio.gather(*(one(n) for n in names))


async def one_run(
    kube: KubeClient,
    kubeconfig: Path,
    workdir: Path,
    args: argparse.Namespace,
    protocol: str,
    n: int,
) -> dict[str, Any]:
    work = f"work-{protocol}-{n}"
    await create_namespace(kube, work)
    watched = [work, *(f"filler-{i:04d}" for i in range(n - 1))]
    port = int(kube.config.server.rsplit(":", 1)[1])
    started = time.monotonic()
    log = workdir / f"operator-{protocol}-{n}.log"
    proc, _ = start_operator(
        kubeconfig,
        log,
        4,
        extra=(f"--watch-namespace={','.join(watched)}",),
        env={"KUBERAY_APISERVER_HTTP2": "true" if protocol == "http2" else "false"},
        # The upstream Go operator (v1.6.1), built on first use.
        binary=[str(go_operator_binary(log=lambda _: None))] if protocol == "go" else None,
    )
    try:
        names = {f"rc-{i}" for i in range(args.clusters)}
        created = time.monotonic()
        await asyncio.gather(
            *(kube.create(RAYCLUSTERS, cluster(c, args.workers), work) for c in names)
        )
        bench = Bench(kube, proc.pid, 0, args.timeout)
        converge = await bench.wait_all_ready(work, names)
        await asyncio.sleep(2)  # let requests in flight finish: count the steady connections
        stats = proc_stats(proc.pid)
        conns = tcp_connections(proc.pid, port)
        return {
            "protocol": protocol,
            "namespaces": n,
            "connections": conns,
            "rss_mib": round(stats.get("VmRSS", 0), 1),
            "peak_rss_mib": round(stats.get("VmHWM", 0), 1),
            "cpu_s": round(stats["cpu"], 1),
            "converge_s": round(converge, 1),
            "start_to_ready_s": round(time.monotonic() - started, 1),
            "created_after_start_s": round(created - started, 1),
        }
    finally:
        proc.terminate()
        proc.wait(60)


async def run_all(
    args: argparse.Namespace, kubeconfig: Path, workdir: Path
) -> list[dict[str, Any]]:
    config = load_kubeconfig(kubeconfig)
    config.qps = 0
    counts = [int(c) for c in args.counts.split(",") if c]
    results = []
    async with KubeClient(config, user_agent="bench-namespaces") as kube:
        await install_crds(kube)
        pool = kube._h2
        if pool is not None and pool.connections:
            limit = pool.connections[0].max_streams
            print(f"apiserver MAX_CONCURRENT_STREAMS: {limit}", flush=True)
        await make_namespaces(kube, [f"filler-{i:04d}" for i in range(max(counts) - 1)])
        for protocol in args.protocols.split(","):
            for n in counts:
                r = await one_run(kube, kubeconfig, workdir, args, protocol, n)
                print(json.dumps(r), flush=True)
                results.append(r)
    return results


def markdown(results: list[dict[str, Any]]) -> str:
    lines = [
        "| protocol | namespaces | connections | RSS MiB (peak) | operator CPU s | converge s |",
        "| --- | ---: | ---: | ---: | ---: | ---: |",
    ]
    for r in results:
        lines.append(
            f"| {r['protocol']} | {r['namespaces']} | {r['connections']} | "
            f"{r['rss_mib']} ({r['peak_rss_mib']}) | {r['cpu_s']} | {r['converge_s']} |"
        )
    return "\n".join(lines)


def main() -> int:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawTextHelpFormatter
    )
    parser.add_argument("--counts", default="1,100,500")
    parser.add_argument(
        "--protocols",
        default="http1,http2",
        help="http1 and http2 (this operator), go (the upstream Go operator, for comparison)",
    )
    parser.add_argument("--clusters", type=int, default=3)
    parser.add_argument("--workers", type=int, default=2)
    parser.add_argument("--nodes", type=int, default=2)
    parser.add_argument("--timeout", type=float, default=600)
    parser.add_argument("--out", type=Path, default=Path("bench-results/namespaces.json"))
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as tmp, bench_plane(Path(tmp), args.nodes) as plane:
        results = asyncio.run(run_all(args, plane.kubeconfig, Path(tmp)))
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps(results, indent=2))
    print(markdown(results))
    print(f"\nJSON: {args.out}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
