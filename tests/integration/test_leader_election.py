"""Operator processes with leader election: SIGKILL the leader, the standby takes over within
the lease time, no write is done twice, and a standby writes nothing at all.

Two levels: a minimal controller on the runtime (``leader_proc.py``) that logs every write, which
proves exactly-once across the change; and the real ``kuberay operator``, whose standby's own
request metrics must show no write while the leader scales clusters."""

from __future__ import annotations

import asyncio
import signal
import socket
import subprocess
import sys
import time
import urllib.request
from pathlib import Path

from operator_fixture import OperatorProcess

from kuberay.devenv.plane import Plane, free_port
from kuberay.devenv.testing import wait_until
from kuberay.runtime.client import CONFIGMAPS, JSON_PATCH, LEASES, KubeClient
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


# ----------------------------------------------------------------- the real `kuberay operator`


def _scrape(port: int) -> dict[str, float]:
    """The operator's /metrics as {'name{labels}': value}; empty when it does not answer."""
    try:
        with urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=5) as resp:
            text = resp.read().decode()
    except OSError:
        return {}
    samples: dict[str, float] = {}
    for line in text.splitlines():
        if line and not line.startswith("#"):
            key, _, value = line.rpartition(" ")
            samples[key] = float(value)
    return samples


def _writes(samples: dict[str, float]) -> dict[str, float]:
    """API writes the process made, by 'METHOD resource' (from its per-resource request counter)."""
    out: dict[str, float] = {}
    for key, value in samples.items():
        if not key.startswith("kuberay_rest_client_requests_by_resource_total{") or not value:
            continue
        labels = dict(
            part.split("=", 1) for part in key[key.index("{") + 1 : -1].split(",") if "=" in part
        )
        method, resource = (labels[k].strip('"') for k in ("method", "resource"))
        if method in ("POST", "PUT", "PATCH", "DELETE"):
            name = f"{method} {resource}"
            out[name] = out.get(name, 0.0) + value
    return out


class _Replica:
    """One `kuberay operator` with leader election on, its metrics on a known port."""

    def __init__(self, plane: Plane, log_dir: Path, ns: str) -> None:
        self.port = free_port()
        log_dir.mkdir(parents=True, exist_ok=True)
        self.proc = OperatorProcess(
            plane,
            log_dir,
            "--enable-leader-election=true",
            f"--leader-election-namespace={ns}",
            f"--watch-namespace={ns}",
            f"--metrics-addr=127.0.0.1:{self.port}",
        )
        self.proc.start()
        assert self.proc.proc is not None
        self.identity = f"{socket.gethostname()}_{self.proc.proc.pid}"

    async def metrics(self) -> dict[str, float]:
        return await asyncio.to_thread(_scrape, self.port)


async def test_real_operator_standby_writes_nothing_and_takes_over(
    plane: Plane, kube: KubeClient, namespace: str, tmp_path: Path
) -> None:
    from operator_fixture import install_crds
    from test_raycluster import pods_of, raycluster, wait_ready

    from kuberay.api.constants import RAYCLUSTERS

    await install_crds(kube)
    alpha = _Replica(plane, tmp_path / "alpha", namespace)
    beta: _Replica | None = None
    try:

        async def leads(replica: _Replica) -> bool:
            return await _holder(kube, namespace) == replica.identity

        await wait_until(lambda: leads(alpha), timeout=30, what="alpha to lead")
        beta = _Replica(plane, tmp_path / "beta", namespace)
        for i in range(3):
            await kube.create(RAYCLUSTERS, raycluster(f"le-{i}", replicas=2), namespace)
        for i in range(3):
            await wait_ready(kube, namespace, f"le-{i}")
        await kube.patch(RAYCLUSTERS, "le-0", _replicas(3), namespace, content_type=JSON_PATCH)

        async def scaled() -> bool:
            return len(await pods_of(kube, namespace, "le-0", "ray.io/node-type=worker")) == 3

        await wait_until(scaled, timeout=60, what="alpha to scale le-0 to 3 workers")

        standby = beta

        async def standby_saw_everything() -> bool:
            # Its caches hold the clusters and their pods: it had every chance to act on them.
            samples = await standby.metrics()
            key = 'kuberay_informer_objects{resource="rayclusters"}'
            return (
                samples.get(key, 0) >= 3
                and samples.get('leader_election_master_status{name="ray-operator-leader"}', -1)
                == 0
            )

        await wait_until(standby_saw_everything, timeout=30, what="beta's caches to sync")
        assert _writes(await beta.metrics()) == {}, "a standby must not write anything"
        assert _writes(await alpha.metrics()), "the leader's writes are counted"

        assert alpha.proc.proc is not None
        alpha.proc.proc.send_signal(signal.SIGKILL)
        killed_at = time.monotonic()
        await wait_until(lambda: leads(standby), timeout=40, what="beta to take over")
        takeover = time.monotonic() - killed_at
        await kube.patch(RAYCLUSTERS, "le-1", _replicas(4), namespace, content_type=JSON_PATCH)

        async def beta_scaled() -> bool:
            return len(await pods_of(kube, namespace, "le-1", "ray.io/node-type=worker")) == 4

        await wait_until(beta_scaled, timeout=60, what="beta to scale le-1 to 4 workers")
        await wait_ready(kube, namespace, "le-1")
        for i, workers in ((0, 3), (1, 4), (2, 2)):
            heads = await pods_of(kube, namespace, f"le-{i}", "ray.io/node-type=head")
            got = await pods_of(kube, namespace, f"le-{i}", "ray.io/node-type=worker")
            assert (len(heads), len(got)) == (1, workers), f"le-{i}"
        assert _writes(await beta.metrics()), "the new leader writes"
        assert takeover <= 15 + 2 + 3, takeover
        print(f"real operator takeover after SIGKILL: {takeover:.1f}s")
    finally:
        alpha.proc.kill()
        if beta is not None:
            assert beta.proc.stop() == 0, beta.proc.tail()


def _replicas(n: int) -> list[dict[str, object]]:
    return [{"op": "replace", "path": "/spec/workerGroupSpecs/0/replicas", "value": n}]
