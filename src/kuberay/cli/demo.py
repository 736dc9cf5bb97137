"""``kuberay demo``: bring the local plane up (building it if needed) and show a workload converge.

The plane is left running afterwards so the user can look around with kubectl; the demo is
idempotent (it re-applies its objects, so running it twice is fine).
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import time
from typing import Any

from kuberay.cli import dev
from kuberay.devenv import binaries
from kuberay.runtime.client import DEPLOYMENTS, NAMESPACES, NODES, PODS, KubeClient, load_kubeconfig
from kuberay.runtime.errors import AlreadyExists

DEMO_NS = "kuberay-demo"


def _deployment() -> dict[str, Any]:
    labels = {"app": "hello"}
    return {
        "apiVersion": "apps/v1",
        "kind": "Deployment",
        "metadata": {"name": "hello", "namespace": DEMO_NS},
        "spec": {
            "replicas": 3,
            "selector": {"matchLabels": labels},
            "template": {
                "metadata": {"labels": labels},
                "spec": {"containers": [{"name": "hello", "image": "hello:1"}]},
            },
        },
    }


def _table(rows: list[list[str]]) -> str:
    widths = [max(len(r[i]) for r in rows) for i in range(len(rows[0]))]
    return "\n".join("  ".join(c.ljust(w) for c, w in zip(r, widths, strict=True)) for r in rows)


async def _show(kubeconfig: str, timeout: float) -> int:
    async with KubeClient(load_kubeconfig(kubeconfig), user_agent="kuberay-demo") as kube:
        nodes = (await kube.list(NODES))["items"]
        rows = [["NODE", "CPU", "MEMORY", "READY"]]
        for n in nodes:
            ready = any(
                c["type"] == "Ready" and c["status"] == "True" for c in n["status"]["conditions"]
            )
            cap = n["status"]["capacity"]
            rows.append([n["metadata"]["name"], cap["cpu"], cap["memory"], str(ready)])
        print(_table(rows), flush=True)
        with contextlib.suppress(AlreadyExists):
            await kube.create(NAMESPACES, {"metadata": {"name": DEMO_NS}})
        try:
            await kube.create(DEPLOYMENTS, _deployment(), DEMO_NS)
            print(f"\napplied deployment {DEMO_NS}/hello (3 replicas)", flush=True)
        except AlreadyExists:
            print(f"\ndeployment {DEMO_NS}/hello already exists", flush=True)
        start = time.monotonic()
        while True:
            pods = (await kube.list(PODS, DEMO_NS, label_selector="app=hello"))["items"]
            running = [p for p in pods if p.get("status", {}).get("phase") == "Running"]
            print(
                f"  t+{time.monotonic() - start:4.1f}s  pods running: {len(running)}/3", flush=True
            )
            if len(running) >= 3:
                break
            if time.monotonic() - start > timeout:
                print("the workload did not converge; see `kuberay dev status` and the logs")
                return 1
            await asyncio.sleep(0.5)
        rows = [["POD", "PHASE", "NODE", "IP"]]
        rows += [
            [
                p["metadata"]["name"],
                p["status"]["phase"],
                p["spec"].get("nodeName", ""),
                p["status"].get("podIP", ""),
            ]
            for p in running
        ]
        print("\n" + _table(rows), flush=True)
    return 0


def cmd_demo(args: argparse.Namespace) -> int:
    up_args = argparse.Namespace(
        name=args.name,
        foreground=False,
        nodes=args.nodes,
        node_cpu="64",
        node_memory="512Gi",
        node_gpus=0,
        unlimited=False,
    )
    if dev.cmd_up(up_args) != 0:
        return 1
    kubeconfig = str(dev.plane_dir(args.name) / "kubeconfig")
    code = asyncio.run(_show(kubeconfig, args.timeout))
    kubectl = binaries.locate("kubectl")
    print("\nThe plane keeps running. Explore it:")
    print(f"  export KUBECONFIG={kubeconfig}")
    if kubectl:
        print(f"  {kubectl} get pods -A")
    print("Stop it with: .venv/bin/kuberay dev down")
    return code


def register(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    demo = sub.add_parser("demo", help="start the local plane and show a workload converge")
    demo.add_argument("--name", default="default", help="plane name")
    demo.add_argument("--nodes", type=int, default=4)
    demo.add_argument("--timeout", type=float, default=60.0)
    demo.set_defaults(func=cmd_demo)
