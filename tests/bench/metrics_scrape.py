"""Metrics benchmark: series per RayCluster, and the cost of one scrape at N clusters.

    .venv/bin/python tests/bench/metrics_scrape.py                    # 1,000 clusters
    .venv/bin/python tests/bench/metrics_scrape.py --clusters 100 --timeout 300

Starts its own KWOK plane, the operator (a subprocess, metrics on a known port) and a real
Prometheus scraping it every 2 s. Creates N head-only RayClusters (no workers: the figure of
interest is the operator's series per cluster, not pod churn), waits until the operator exports
every cluster as provisioned (``kuberay_cluster_provisioned_duration_seconds``), then reports:

- series the operator exports in total, and per RayCluster (the growth from 0 to N, over N);
- one scrape of ``/metrics`` as the client sees it: bytes and seconds (median of 5);
- Prometheus's own view of the same scrape: ``scrape_duration_seconds`` and
  ``scrape_samples_scraped`` of the operator's target;
- the operator's RSS before and after.
Writes bench-results/metrics.json and prints a Markdown table.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import statistics
import sys
import tempfile
import time
import urllib.request
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).parent))
from scale import proc_stats

from kuberay.api.constants import RAYCLUSTERS
from kuberay.devenv.manifests import install_crds
from kuberay.devenv.operatorproc import OperatorProcess
from kuberay.devenv.plane import Plane, PlaneConfig, free_port
from kuberay.devenv.prometheus import OPERATOR_JOB, Prometheus
from kuberay.devenv.testing import create_namespace
from kuberay.devenv.testing import small_raycluster as cluster
from kuberay.runtime.client import KubeClient, load_kubeconfig

NS = "bench-metrics"


def fetch(port: int) -> tuple[str, float]:
    started = time.monotonic()
    with urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=30) as resp:
        text = resp.read().decode()
    return text, time.monotonic() - started


def series(text: str) -> int:
    return sum(1 for line in text.splitlines() if line and not line.startswith("#"))


def head_only(name: str) -> dict[str, Any]:
    rc = cluster(name, 0)
    rc["spec"]["workerGroupSpecs"] = []
    return rc


async def create_all(kube: KubeClient, names: list[str], parallel: int = 32) -> None:
    sem = asyncio.Semaphore(parallel)

    async def one(name: str) -> None:
        async with sem:
            await kube.create(RAYCLUSTERS, head_only(name), NS)

    await asyncio.gather(*(one(n) for n in names))


async def run(args: argparse.Namespace, workdir: Path) -> dict[str, Any]:
    plane = Plane(PlaneConfig(directory=workdir / "plane", nodes=args.nodes, unlimited=True))
    plane.start()
    port = free_port()
    op = OperatorProcess(plane, workdir, f"--metrics-addr=127.0.0.1:{port}", "--enable-metrics")
    prom = Prometheus(plane, operator_targets=[f"127.0.0.1:{port}"], interval="2s")
    try:
        config = load_kubeconfig(plane.kubeconfig)
        config.qps = 0
        async with KubeClient(config, user_agent="bench-metrics") as kube:
            await install_crds(kube)
            await create_namespace(kube, NS)
            op.start()
            prom.start()
            deadline = time.monotonic() + 60
            while True:
                try:
                    empty_text, _ = fetch(port)
                    break
                except OSError:
                    if time.monotonic() > deadline:
                        raise
                    await asyncio.sleep(0.5)
            assert op.proc is not None
            rss_before = proc_stats(op.proc.pid)["VmRSS"]
            started = time.monotonic()
            await create_all(kube, [f"m-{i}" for i in range(args.clusters)])
            deadline = started + args.timeout
            while True:
                text, _ = fetch(port)
                # Steady state: every cluster exported and provisioned (its duration series too).
                have = text.count("kuberay_cluster_provisioned_duration_seconds{")
                if have >= args.clusters:
                    break
                if time.monotonic() > deadline:
                    raise TimeoutError(f"only {have}/{args.clusters} clusters exported")
                await asyncio.sleep(2)
            converged = time.monotonic() - started
            timings = []
            for _ in range(5):
                text, seconds = fetch(port)
                timings.append(seconds)
            target: dict[str, float] = {}
            deadline = time.monotonic() + 60
            while time.monotonic() < deadline:
                got = {
                    name: prom.query(f'{name}{{job="{OPERATOR_JOB}"}}')
                    for name in ("scrape_duration_seconds", "scrape_samples_scraped")
                }
                if all(got.values()):
                    target = {k: float(v[0]["value"][1]) for k, v in got.items()}
                    if target["scrape_samples_scraped"] >= series(text) * 0.95:
                        break
                await asyncio.sleep(2)
            rss_after = proc_stats(op.proc.pid)["VmRSS"]
    finally:
        prom.stop()
        op.stop()
        plane.stop()
    total = series(text)
    return {
        "clusters": args.clusters,
        "seconds_until_all_provisioned": round(converged, 1),
        "series_total": total,
        "series_with_no_cluster": series(empty_text),
        "series_per_cluster": round((total - series(empty_text)) / args.clusters, 2),
        "scrape_bytes": len(text.encode()),
        "scrape_seconds_median": round(statistics.median(timings), 4),
        "prometheus_scrape_duration_seconds": round(target.get("scrape_duration_seconds", -1), 4),
        "prometheus_samples_scraped": int(target.get("scrape_samples_scraped", -1)),
        "operator_rss_mib_before": round(rss_before, 1),
        "operator_rss_mib_after": round(rss_after, 1),
    }


def main() -> int:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawTextHelpFormatter
    )
    parser.add_argument("--clusters", type=int, default=1000)
    parser.add_argument("--nodes", type=int, default=20)
    parser.add_argument("--timeout", type=float, default=900)
    parser.add_argument("--out", type=Path, default=Path("bench-results/metrics.json"))
    args = parser.parse_args()
    with tempfile.TemporaryDirectory(prefix="bench-metrics-") as tmp:
        result = asyncio.run(run(args, Path(tmp)))
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps(result, indent=2) + "\n")
    print("| figure | value |\n|---|---|")
    for key, value in result.items():
        print(f"| {key} | {value} |")
    return 0


if __name__ == "__main__":
    sys.exit(main())
