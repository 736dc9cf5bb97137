"""Two operator processes with leader election: SIGKILL the leader, the standby takes over
within the lease time, and no write is done twice."""

from __future__ import annotations

import asyncio
import signal
import subprocess
import sys
import time
from pathlib import Path

from kuberay.devenv.plane import Plane
from kuberay.devenv.testing import wait_until
from kuberay.runtime.client import CONFIGMAPS, LEASES, KubeClient
from kuberay.runtime.errors import NotFound

PROC = Path(__file__).with_name("leader_proc.py")


def _start(plane: Plane, ns: str, identity: str, log: Path) -> subprocess.Popen[bytes]:
    return subprocess.Popen(
        [
            sys.executable,
            str(PROC),
            f"--kubeconfig={plane.kubeconfig}",
            f"--namespace={ns}",
            f"--identity={identity}",
            f"--log={log}",
        ],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )


async def _holder(kube: KubeClient, ns: str) -> str:
    try:
        lease = await kube.get(LEASES, "ray-operator-leader", ns)
    except NotFound:
        return ""
    return str(lease["spec"].get("holderIdentity") or "")


async def _records(kube: KubeClient, ns: str) -> set[str]:
    items = (await kube.list(CONFIGMAPS, ns))["items"]
    return {o["metadata"]["name"] for o in items if o["metadata"]["name"].startswith("done-")}


async def test_standby_takes_over_after_sigkill_without_double_writes(
    plane: Plane, kube: KubeClient, namespace: str, tmp_path: Path
) -> None:
    log = tmp_path / "writes.log"
    log.touch()
    first = _start(plane, namespace, "alpha", log)
    second: subprocess.Popen[bytes] | None = None
    try:

        async def alpha_leads() -> bool:
            return await _holder(kube, namespace) == "alpha"

        await wait_until(alpha_leads, timeout=30, what="alpha to lead")
        second = _start(plane, namespace, "beta", log)
        for i in range(20):
            cm = {"metadata": {"name": f"item-{i}", "labels": {"work": "1"}}}
            await kube.create(CONFIGMAPS, cm, namespace)

        async def first_batch_done() -> bool:
            return len(await _records(kube, namespace)) == 20

        await wait_until(first_batch_done, timeout=30, what="alpha to process 20 items")

        first.send_signal(signal.SIGKILL)
        killed_at = time.monotonic()
        for i in range(20, 40):
            cm = {"metadata": {"name": f"item-{i}", "labels": {"work": "1"}}}
            await kube.create(CONFIGMAPS, cm, namespace)

        async def beta_leads() -> bool:
            return await _holder(kube, namespace) == "beta"

        await wait_until(beta_leads, timeout=40, what="beta to take over")
        takeover = time.monotonic() - killed_at

        async def all_done() -> bool:
            return len(await _records(kube, namespace)) == 40

        await wait_until(all_done, timeout=30, what="beta to process the rest")
        await asyncio.sleep(1)
        lines = log.read_text().split()
        writes = [lines[i + 1] for i in range(0, len(lines), 3) if lines[i] == "write"]
        assert "DUPLICATE" not in lines
        assert sorted(writes) == sorted(f"done-item-{i}" for i in range(40))
        # lease 15 s after the last renew we saw, plus one 2 s retry period and slack
        assert takeover <= 15 + 2 + 3, takeover
        print(f"takeover after SIGKILL: {takeover:.1f}s")
    finally:
        first.kill()
        if second is not None:
            second.send_signal(signal.SIGTERM)
            try:
                assert second.wait(20) == 0
            finally:
                second.kill()
