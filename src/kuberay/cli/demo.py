"""``kuberay demo``: local plane up (built if needed), CRDs installed, the operator started, a
sample RayCluster applied and shown converging to ``ready``.

The plane and the operator keep running afterwards so the user can look around with kubectl;
``kuberay dev down`` stops both. The demo is idempotent: it reuses a running plane and operator
and re-applies its sample.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import os
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import yaml

from kuberay.api.constants import RAYCLUSTERS
from kuberay.cli import dev
from kuberay.devenv import binaries
from kuberay.devenv.manifests import REPO_ROOT, apply, install_crds
from kuberay.devenv.supervisor import add_plane_arguments
from kuberay.runtime.client import NAMESPACES, NODES, PODS, KubeClient, load_kubeconfig
from kuberay.runtime.errors import AlreadyExists

DEMO_NS = "kuberay-demo"
SAMPLE = REPO_ROOT / "deploy" / "samples" / "demo-raycluster.yaml"


def _table(rows: list[list[str]]) -> str:
    widths = [max(len(r[i]) for r in rows) for i in range(len(rows[0]))]
    return "\n".join("  ".join(c.ljust(w) for c, w in zip(r, widths, strict=True)) for r in rows)


def start_operator(plane: Path) -> int:
    """Starts the operator in the background (once per plane); returns its pid."""
    pid_file = plane / "operator.pid"
    try:
        pid = int(pid_file.read_text())
        os.kill(pid, 0)
        return pid
    except (FileNotFoundError, ValueError, ProcessLookupError):
        pass
    log = open(plane / "logs" / "operator.log", "ab")  # noqa: SIM115 - handed to the child
    proc = subprocess.Popen(
        [
            sys.executable,
            "-m",
            "kuberay.cli.main",
            "operator",
            f"--kubeconfig={plane / 'kubeconfig'}",
            "--enable-leader-election=false",
            "--metrics-addr=127.0.0.1:0",
            "--health-probe-bind-address=127.0.0.1:0",
            "--log-stdout-encoder=console",
        ],
        stdin=subprocess.DEVNULL,
        stdout=log,
        stderr=subprocess.STDOUT,
        start_new_session=True,
    )
    log.close()
    pid_file.write_text(str(proc.pid))
    return proc.pid


def _sample() -> dict[str, Any]:
    doc: dict[str, Any] = yaml.safe_load(SAMPLE.read_text())
    return doc


async def _show(plane: Path, timeout: float) -> int:
    async with KubeClient(load_kubeconfig(plane / "kubeconfig"), user_agent="kuberay-demo") as kube:
        nodes = (await kube.list(NODES))["items"]
        print(f"{len(nodes)} KWOK nodes Ready; installing the ray.io CRDs", flush=True)
        await install_crds(kube)
        pid = start_operator(plane)
        print(f"operator running (pid {pid}, log {plane / 'logs' / 'operator.log'})", flush=True)
        with contextlib.suppress(AlreadyExists):
            await kube.create(NAMESPACES, {"metadata": {"name": DEMO_NS}})
        sample = _sample()
        name = sample["metadata"]["name"]
        await apply(kube, sample, DEMO_NS)
        print(
            f"applied RayCluster {DEMO_NS}/{name} ({SAMPLE.relative_to(REPO_ROOT)})\n", flush=True
        )
        start = time.monotonic()
        last = ""
        while True:
            obj = await kube.get(RAYCLUSTERS, name, DEMO_NS)
            st = obj.get("status") or {}
            avail = st.get("availableWorkerReplicas", 0)
            desired = st.get("desiredWorkerReplicas", "?")
            line = (
                f"  t+{time.monotonic() - start:4.1f}s  state={st.get('state', '-'):<6} "
                f"workers {avail}/{desired}"
                f"  cpus={st.get('desiredCPU', '-')} memory={st.get('desiredMemory', '-')}"
            )
            if line.split("s ", 1)[1] != last:
                print(line, flush=True)
                last = line.split("s ", 1)[1]
            if st.get("state") == "ready":
                break
            if time.monotonic() - start > timeout:
                conds = st.get("conditions") or []
                print("the RayCluster did not become ready in time; conditions:")
                for cond in conds:
                    detail = f"{cond.get('reason')}: {cond.get('message')}"
                    print(f"  {cond['type']}={cond['status']} {detail}")
                return 1
            await asyncio.sleep(0.5)
        pods = (await kube.list(PODS, DEMO_NS, label_selector=f"ray.io/cluster={name}"))["items"]
        rows = [["POD", "TYPE", "GROUP", "PHASE", "NODE", "IP"]]
        for p in sorted(pods, key=lambda p: p["metadata"]["name"]):
            labels = p["metadata"]["labels"]
            rows.append(
                [
                    p["metadata"]["name"],
                    labels.get("ray.io/node-type", ""),
                    labels.get("ray.io/group", ""),
                    p["status"].get("phase", ""),
                    p["spec"].get("nodeName", ""),
                    p["status"].get("podIP", ""),
                ]
            )
        print("\n" + _table(rows), flush=True)
    return 0


def cmd_demo(args: argparse.Namespace) -> int:
    # `dev up`'s own defaults, so a plane option added there can never be missing here.
    plane_options = argparse.ArgumentParser(add_help=False)
    add_plane_arguments(plane_options)
    up_args = plane_options.parse_args([f"--nodes={args.nodes}"])
    up_args.name = args.name
    up_args.foreground = False
    if dev.cmd_up(up_args) != 0:
        return 1
    plane = dev.plane_dir(args.name)
    code = asyncio.run(_show(plane, args.timeout))
    kubectl = binaries.locate("kubectl")
    print("\nThe plane and the operator keep running. Explore:")
    print(f"  export KUBECONFIG={plane / 'kubeconfig'}")
    if kubectl:
        print(f"  {kubectl} get rayclusters,pods -n {DEMO_NS}")
    print("Stop both with: .venv/bin/kuberay dev down")
    return code


def register(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    demo = sub.add_parser("demo", help="start the local plane and the operator; show a RayCluster")
    demo.add_argument("--name", default="default", help="plane name")
    demo.add_argument("--nodes", type=int, default=4)
    demo.add_argument("--timeout", type=float, default=90.0)
    demo.set_defaults(func=cmd_demo)
