"""Chaos benchmark on KWOK: a mixed workload under API faults, SIGKILLs, failovers and plane outages.

    .venv/bin/python tests/bench/chaos.py                  # full: 50 clusters, 20 jobs, 5 services,
                                                           # 100 kills, faults at 10 %
    .venv/bin/python tests/bench/chaos.py --fault-rate 0.2 --kills 100 --chaos-seconds 900
    .venv/bin/python tests/bench/chaos.py --short          # the CI slice (< 3 min)

What runs (everything on 127.0.0.1; nothing is sent beyond this machine):
- a local plane (etcd, kube-apiserver, controller-manager, scheduler, KWOK fake nodes);
- three real ``kuberay operator`` replicas with leader election (Lease ``default/ray-operator-
  leader``), each talking to the apiserver only through ``fault_proxy.py`` (a subprocess), which
  answers 5-20 % of requests with 429, 500, 503, slow answers, connection resets (some after a
  write went through), cut watches and 410 Gone;
- the fake Ray dashboards (``kuberay.ray.fake``) behind ``fake_dashboard_server.py``, an HTTP
  proxy in this process that the operators reach through ``HTTP_PROXY`` (their dashboard client
  honours it as upstream's does). The replicas run with the Serve proxy health probe off (as the
  RayService integration tests do): it would dial KWOK's fake pod IPs, which are not on this
  machine; the dashboard's application status decides instead, as when the probe cannot connect;
- this process plays the users and what KWOK cannot: it creates and scales RayClusters, deletes
  some, runs RayJobs in every submission mode (the K8sJobMode/SidecarMode submitter's effect,
  submit-if-absent, happens when the operator creates the submitter Job or head pod; the sidecar
  is marked finished once the Ray job is; InteractiveMode gets its jobId from the "user"), and
  upgrades RayServices (a Serve config change in place, then a cluster template change);
- faults: proxy faults throughout the chaos phase (``--chaos-seconds``, 900 by default, during
  which the workload keeps changing); ``--kills`` SIGKILLs at random times in it: every fifth
  one, and the last, of the current leader (a failover: its lease runs out first, ~15 s), the
  others of a random standby (restart, relist and resync under faults); killed replicas are
  restarted at once; one apiserver restart and one etcd pause (SIGSTOP, SIGCONT).

Then faults stop, and the benchmark measures how long until every object is where it must end
(convergence), and counts what must be zero: duplicate pods (more pods than desired in a group,
two heads), double job submissions (a Ray job started twice for one id, a second id or cluster
for one RayJob, a second submitter Job), lost deletions, leaked objects (pods, Services, Jobs or
RayClusters whose owner is gone, or clusters no owner uses) and unexpected operator exits.
Leadership-loss exits (by design: the lease could not be renewed for 10 s, e.g. while etcd was
paused) are reported beside them. Writes bench-results/chaos.json, prints a table, and exits 1
when a goal-0 figure is not 0 or the workload did not converge within ``--timeout``.
"""

from __future__ import annotations

import sys

if __name__ == "__main__" and sys.argv[1:2] == ["--operator-shim"]:
    # One operator replica: the real `kuberay operator` entry point, with the RayService Serve
    # proxy probe off (it would dial KWOK's fake pod IPs, off this machine).
    import functools

    import kuberay.cli.operator as _operator_cli
    from kuberay.cli.main import main as _kuberay_main
    from kuberay.controllers.rayservice import RayServiceConfig

    vars(_operator_cli)["RayServiceConfig"] = functools.partial(RayServiceConfig, health_probe=None)
    sys.exit(_kuberay_main(sys.argv[2:]))

import argparse
import asyncio
import contextlib
import copy
import json
import os
import random
import signal
import socket
import subprocess
import tempfile
import time
from collections import Counter
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, TypeVar

import yaml

sys.path.insert(0, str(Path(__file__).parent))
from fake_dashboard_server import FakeDashboardServer

from kuberay.api.constants import RAYCLUSTERS, RAYJOBS, RAYSERVICES
from kuberay.devenv.manifests import install_crds
from kuberay.devenv.plane import Plane, PlaneConfig
from kuberay.devenv.testing import create_namespace
from kuberay.ray.dashboard import TERMINAL_STATUSES, JobSubmitRequest
from kuberay.ray.fake import FakeDashboard, FakeDashboardRegistry
from kuberay.runtime.client import (
    JOBS,
    JSON_PATCH,
    LEASES,
    PODS,
    SERVICES,
    STRATEGIC_PATCH,
    KubeClient,
    Resource,
    load_kubeconfig,
)
from kuberay.runtime.errors import AlreadyExists, ApiError, Conflict, NotFound

ROOT = Path(__file__).resolve().parents[2]
NS = "chaos"
LEASE_NS = "default"
LEASE_NAME = "ray-operator-leader"
IMAGE = "rayproject/ray:2.52.0"
UPGRADED_IMAGE = "rayproject/ray:2.53.0"
MODES = ("HTTPMode", "K8sJobMode", "SidecarMode", "InteractiveMode")
SERVE_CONFIG = """\
applications:
  - name: fruit
    import_path: fruit.deployment_graph
    route_prefix: /fruit
    deployments:
      - name: MangoStand
        num_replicas: 1
  - name: math
    import_path: conditional_dag.serve_dag
    route_prefix: /calc
"""
UPGRADED_SERVE_CONFIG = SERVE_CONFIG.replace("num_replicas: 1", "num_replicas: 2")

T = TypeVar("T")


def log(msg: str) -> None:
    print(f"[{time.strftime('%H:%M:%S')}] {msg}", flush=True)


# --------------------------------------------------------------------------- manifests


def container(name: str, image: str = IMAGE, ports: bool = False) -> dict[str, Any]:
    res = {"cpu": "100m", "memory": "128Mi"}
    out: dict[str, Any] = {
        "name": name,
        "image": image,
        "resources": {"limits": res, "requests": res},
    }
    if ports:
        out["ports"] = [
            {"name": "gcs-server", "containerPort": 6379},
            {"name": "dashboard", "containerPort": 8265},
            {"name": "client", "containerPort": 10001},
            {"name": "serve", "containerPort": 8000},
        ]
    return out


def cluster_spec(workers: int, image: str = IMAGE, ports: bool = False) -> dict[str, Any]:
    return {
        "rayVersion": "2.52.0",
        "headGroupSpec": {
            "rayStartParams": {},
            "template": {"spec": {"containers": [container("ray-head", image, ports)]}},
        },
        "workerGroupSpecs": [
            {
                "groupName": "workers",
                "replicas": workers,
                "minReplicas": 0,
                "maxReplicas": 100,
                "rayStartParams": {},
                "template": {"spec": {"containers": [container("ray-worker", image)]}},
            }
        ],
    }


def raycluster(name: str, workers: int) -> dict[str, Any]:
    return {
        "apiVersion": "ray.io/v1",
        "kind": "RayCluster",
        "metadata": {"name": name},
        "spec": cluster_spec(workers),
    }


def rayjob(name: str, mode: str, shutdown: bool, entrypoint: str) -> dict[str, Any]:
    spec: dict[str, Any] = {
        "entrypoint": entrypoint,
        "submissionMode": mode,
        "rayClusterSpec": cluster_spec(1),
    }
    if shutdown:
        spec["shutdownAfterJobFinishes"] = True
        spec["ttlSecondsAfterFinished"] = 0
    return {"apiVersion": "ray.io/v1", "kind": "RayJob", "metadata": {"name": name}, "spec": spec}


def rayservice(name: str) -> dict[str, Any]:
    return {
        "apiVersion": "ray.io/v1",
        "kind": "RayService",
        "metadata": {"name": name},
        "spec": {
            "serveConfigV2": SERVE_CONFIG,
            "rayClusterConfig": cluster_spec(1, ports=True),
            "rayClusterDeletionDelaySeconds": 2,
        },
    }


def owner_uids(obj: dict[str, Any]) -> list[str]:
    return [o["uid"] for o in obj["metadata"].get("ownerReferences") or []]


def condition_true(obj: dict[str, Any], ctype: str) -> bool:
    for cond in (obj.get("status") or {}).get("conditions") or []:
        if cond.get("type") == ctype:
            return bool(cond.get("status") == "True")
    return False


def live(obj: dict[str, Any]) -> bool:
    return not obj["metadata"].get("deletionTimestamp")


# --------------------------------------------------------------------------- API helpers


async def retrying(what: str, call: Callable[[], Awaitable[T]], limit: float = 120.0) -> T:
    """``call`` until it answers, through apiserver restarts and etcd pauses (bounded)."""
    deadline = time.monotonic() + limit
    delay = 0.5
    while True:
        try:
            return await call()
        except (NotFound, Conflict):
            raise
        except ApiError as exc:
            if time.monotonic() + delay > deadline:
                raise RuntimeError(f"{what}: still failing after {limit:.0f}s: {exc}") from exc
            await asyncio.sleep(delay)
            delay = min(delay * 2, 4.0)


async def list_items(kube: KubeClient, res: Resource, **kw: Any) -> list[dict[str, Any]]:
    listed = await retrying(f"list {res.plural}", lambda: kube.list(res, NS, **kw))
    return list(listed["items"])


async def create(kube: KubeClient, res: Resource, obj: dict[str, Any]) -> None:
    with contextlib.suppress(AlreadyExists):  # an earlier attempt whose answer was lost
        await retrying(f"create {obj['metadata']['name']}", lambda: kube.create(res, obj, NS))


# --------------------------------------------------------------------------- operators


@dataclass
class Replica:
    index: int
    log_path: Path
    proc: subprocess.Popen[bytes] | None = None
    starts: int = 0
    killed_pids: set[int] = field(default_factory=set)


@dataclass
class ExitRecord:
    replica: int
    pid: int
    code: int
    kind: str  # "killed", "leadership-lost", "unexpected"
    at: float


class Operators:
    """Three (``--replicas``) real operator subprocesses; keeps them all running."""

    def __init__(self, kubeconfig: Path, workdir: Path, replicas: int, env: dict[str, str]):
        self.kubeconfig = kubeconfig
        self.env = env
        self.replicas = [Replica(i, workdir / f"operator-{i}.log") for i in range(replicas)]
        self.exits: list[ExitRecord] = []
        self.kills = 0
        self.leader_kills = 0
        self.failover_seconds: list[float] = []
        self.hostname = socket.gethostname()

    def start(self, rep: Replica) -> None:
        argv = [
            sys.executable,
            str(Path(__file__).resolve()),
            "--operator-shim",
            "operator",
            f"--kubeconfig={self.kubeconfig}",
            "--enable-leader-election=true",
            f"--leader-election-namespace={LEASE_NS}",
            "--metrics-addr=127.0.0.1:0",
            "--health-probe-bind-address=127.0.0.1:0",
            "--log-stdout-encoder=console",
        ]
        with open(rep.log_path, "ab") as out:
            out.write(f"\n==== start {time.strftime('%H:%M:%S')}\n".encode())
            out.flush()
            rep.proc = subprocess.Popen(
                argv,
                stdout=out,
                stderr=subprocess.STDOUT,
                env=dict(os.environ, **self.env),
                cwd=ROOT,
            )
        rep.starts += 1

    def start_all(self) -> None:
        for rep in self.replicas:
            self.start(rep)

    def reap(self) -> None:
        """Records exits and restarts every replica that is not running."""
        for rep in self.replicas:
            if rep.proc is None or rep.proc.poll() is None:
                continue
            pid, code = rep.proc.pid, int(rep.proc.returncode)
            if pid in rep.killed_pids:
                kind = "killed"
            elif code == 1 and "lost leadership" in tail(rep.log_path, 60):
                kind = "leadership-lost"
            else:
                kind = "unexpected"
            self.exits.append(ExitRecord(rep.index, pid, code, kind, time.time()))
            if kind != "killed":
                log(f"operator {rep.index} (pid {pid}) exited with {code}: {kind}")
            self.start(rep)

    def kill(self, rep: Replica) -> None:
        if rep.proc is None or rep.proc.poll() is not None:
            return
        rep.killed_pids.add(rep.proc.pid)
        with contextlib.suppress(ProcessLookupError):
            rep.proc.send_signal(signal.SIGKILL)
        rep.proc.wait(10)
        self.kills += 1

    def by_identity(self, identity: str) -> Replica | None:
        for rep in self.replicas:
            if rep.proc is not None and identity == f"{self.hostname}_{rep.proc.pid}":
                return rep
        return None

    def stop_all(self) -> None:
        for rep in self.replicas:
            if rep.proc is not None and rep.proc.poll() is None:
                rep.proc.terminate()
        for rep in self.replicas:
            if rep.proc is None:
                continue
            try:
                rep.proc.wait(20)
            except subprocess.TimeoutExpired:
                rep.proc.kill()
                rep.proc.wait()


def tail(path: Path, lines: int) -> str:
    if not path.exists():
        return ""
    with open(path, "rb") as fh:
        fh.seek(0, os.SEEK_END)
        fh.seek(max(0, fh.tell() - 64 * 1024))
        return "\n".join(fh.read().decode(errors="replace").splitlines()[-lines:])


async def lease_holder(kube: KubeClient) -> tuple[str, int]:
    try:
        lease = await kube.get(LEASES, LEASE_NAME, LEASE_NS)
    except ApiError:
        return "", 0
    spec = lease.get("spec") or {}
    return str(spec.get("holderIdentity") or ""), int(spec.get("leaseTransitions") or 0)


# --------------------------------------------------------------------------- the benchmark


@dataclass
class Workload:
    clusters: dict[str, int] = field(default_factory=dict)  # name -> desired workers (final)
    deleted: set[str] = field(default_factory=set)
    deleted_uids: dict[str, str] = field(default_factory=dict)
    jobs: dict[str, dict[str, Any]] = field(default_factory=dict)  # name -> manifest
    services: dict[str, dict[str, Any]] = field(default_factory=dict)
    scale_patches: int = 0


class Chaos:
    def __init__(self, args: argparse.Namespace, plane: Plane, kube: KubeClient, workdir: Path):
        self.args = args
        self.plane = plane
        self.kube = kube
        self.workdir = workdir
        self.rng = random.Random(args.seed)
        self.registry = FakeDashboardRegistry(serve_settle_seconds=1.0)
        self.dashboards = FakeDashboardServer(self.registry)
        self.work = Workload()
        self.proxy: subprocess.Popen[bytes] | None = None
        self.proxy_port = 0
        self.operators: Operators | None = None
        self.stop_chaos = asyncio.Event()
        self.stop_all = asyncio.Event()
        self.events: list[dict[str, Any]] = []
        # Observed over the run.
        self.submitter_uids: dict[str, set[str]] = {}  # RayJob -> submitter Job uids
        self.played: set[str] = set()  # submission ids the "submitter" already submitted
        self.sidecars_done: set[str] = set()
        self.cluster_uids_by_owner: dict[str, set[str]] = {}  # owner uid -> cluster uids seen
        self.max_heads: Counter[str] = Counter()
        self.user_jobs: set[str] = set()
        self.failover_tasks: list[asyncio.Task[None]] = []
        self.t0 = time.monotonic()

    # ------------------------------------------------------------------ infrastructure
    def start_proxy(self) -> None:
        pki = self.plane.pki
        from kuberay.devenv.pki import ADMIN

        port_file = self.workdir / "proxy.port"
        with open(self.workdir / "fault-proxy.log", "ab") as out:
            self.proxy = subprocess.Popen(
                [
                    sys.executable,
                    str(Path(__file__).with_name("fault_proxy.py")),
                    f"--upstream={self.plane.server}",
                    f"--ca={pki.ca_cert}",
                    f"--cert={pki.client_cert(ADMIN)}",
                    f"--key={pki.client_key(ADMIN)}",
                    "--rate=0",
                    f"--port-file={port_file}",
                    f"--seed={self.args.seed}",
                ],
                stdout=out,
                stderr=subprocess.STDOUT,
            )
        deadline = time.monotonic() + 30
        while not port_file.exists():
            if time.monotonic() > deadline or self.proxy.poll() is not None:
                raise RuntimeError("the fault proxy did not start; see fault-proxy.log")
            time.sleep(0.1)
        self.proxy_port = int(port_file.read_text())
        kubeconfig = {
            "apiVersion": "v1",
            "kind": "Config",
            "clusters": [
                {"name": "chaos", "cluster": {"server": f"http://127.0.0.1:{self.proxy_port}"}}
            ],
            "users": [{"name": "chaos", "user": {}}],
            "contexts": [{"name": "chaos", "context": {"cluster": "chaos", "user": "chaos"}}],
            "current-context": "chaos",
        }
        (self.workdir / "proxy.kubeconfig").write_text(yaml.safe_dump(kubeconfig))

    async def proxy_control(self, body: dict[str, Any] | None = None) -> dict[str, Any]:
        import aiohttp

        url = f"http://127.0.0.1:{self.proxy_port}/__chaos/" + ("config" if body else "stats")
        async with aiohttp.ClientSession() as session:
            method = "POST" if body else "GET"
            async with session.request(method, url, json=body) as resp:
                out: dict[str, Any] = await resp.json()
                return out

    def event(self, what: str, **extra: Any) -> None:
        self.events.append({"t": round(time.monotonic() - self.t0, 1), "what": what, **extra})
        log(what + (f" {extra}" if extra else ""))

    # ------------------------------------------------------------------ workload
    async def create_workload(self) -> None:
        a = self.args
        for i in range(a.clusters):
            name = f"rc-{i}"
            self.work.clusters[name] = a.workers
            await create(self.kube, RAYCLUSTERS, raycluster(name, a.workers))
        for i in range(a.jobs):
            mode = MODES[i % len(MODES)]
            name = f"job-{i}"
            shutdown = mode in ("HTTPMode", "K8sJobMode") and i % 8 < 4
            job = rayjob(name, mode, shutdown, f"echo {name}; sleep {a.job_seconds}")
            self.work.jobs[name] = job
            await create(self.kube, RAYJOBS, job)
        for i in range(a.services):
            name = f"svc-{i}"
            svc = rayservice(name)
            self.work.services[name] = svc
            await create(self.kube, RAYSERVICES, svc)

    async def mutate(self) -> None:
        """Scales, deletes and upgrades during the chaos phase, at random times (bounded)."""
        a = self.args
        names = sorted(self.work.clusters)
        plan: list[tuple[float, str, str]] = []
        for name in names:
            for _ in range(a.scale_steps):
                plan.append((self.rng.uniform(0.05, 0.97), "scale", name))
        for name in self.rng.sample(names, min(len(names), a.delete_clusters)):
            plan.append((self.rng.uniform(0.2, 0.7), "delete", name))
        for name in self.work.services:
            plan.append((self.rng.uniform(0.1, 0.3), "serve-config", name))
            plan.append((self.rng.uniform(0.4, 0.6), "image", name))
        plan.sort()
        start = time.monotonic()
        for at, action, name in plan:
            wait = start + at * a.chaos_seconds - time.monotonic()
            if wait > 0:
                try:
                    await asyncio.wait_for(self.stop_chaos.wait(), wait)
                    return  # the chaos phase ended early
                except TimeoutError:
                    pass
            try:
                await self.apply(action, name)
            except (RuntimeError, ApiError) as exc:
                log(f"workload step {action} {name} failed: {exc}")

    async def apply(self, action: str, name: str) -> None:
        kube = self.kube
        if action == "scale" and name not in self.work.deleted:
            want = self.rng.randint(0, self.args.max_workers)
            patch = [{"op": "replace", "path": "/spec/workerGroupSpecs/0/replicas", "value": want}]
            await retrying(
                f"scale {name}",
                lambda: kube.patch(RAYCLUSTERS, name, patch, NS, content_type=JSON_PATCH),
            )
            self.work.clusters[name] = want
            self.work.scale_patches += 1
        elif action == "delete":
            obj = await retrying(f"get {name}", lambda: kube.get(RAYCLUSTERS, name, NS))
            self.work.deleted_uids[name] = obj["metadata"]["uid"]
            self.work.deleted.add(name)
            with contextlib.suppress(NotFound):
                await retrying(f"delete {name}", lambda: kube.delete(RAYCLUSTERS, name, NS))
            self.event("deleted RayCluster", name=name)
        elif action == "serve-config":
            self.work.services[name]["spec"]["serveConfigV2"] = UPGRADED_SERVE_CONFIG
            config_patch = {"spec": {"serveConfigV2": UPGRADED_SERVE_CONFIG}}
            await retrying(
                f"upgrade {name}", lambda: kube.patch(RAYSERVICES, name, config_patch, NS)
            )
            self.event("RayService serve config changed", name=name)
        elif action == "image":
            spec = cluster_spec(1, image=UPGRADED_IMAGE, ports=True)
            self.work.services[name]["spec"]["rayClusterConfig"] = spec
            image_patch = {"spec": {"rayClusterConfig": spec}}
            await retrying(
                f"upgrade {name}", lambda: kube.patch(RAYSERVICES, name, image_patch, NS)
            )
            self.event("RayService cluster image changed", name=name)

    # ------------------------------------------------------------------ chaos
    async def kill_loop(self) -> None:
        ops = self.operators
        assert ops is not None
        a = self.args
        if a.kills <= 0:
            return
        # Random times over the phase, all of them inside it; the last kill is the leader's, so
        # the faults stop during a failover.
        start = time.monotonic()
        times = sorted(self.rng.uniform(0.02, 0.97) * a.chaos_seconds for _ in range(a.kills))
        for i, at in enumerate(times):
            wait = start + at - time.monotonic()
            if wait > 0:
                try:
                    await asyncio.wait_for(self.stop_chaos.wait(), wait)
                    return
                except TimeoutError:
                    pass
            failover = a.failover_every > 0 and (i % a.failover_every == 0 or i == a.kills - 1)
            holder, _ = await lease_holder(self.kube)
            leader = ops.by_identity(holder) if holder else None
            standbys = [r for r in ops.replicas if r is not leader]
            # Every Nth kill is the leader's (a failover: its lease runs out first, 15 s);
            # the others hit a random standby, so that the leader gets work done in between.
            if failover and leader is not None:
                target = leader
            else:
                target = self.rng.choice(standbys or ops.replicas)
            ops.kill(target)
            ops.reap()  # restarts it at once
            if target is leader and leader is not None:
                ops.leader_kills += 1
                self.failover_tasks.append(asyncio.create_task(self.time_failover(holder)))

    async def time_failover(self, old: str) -> None:
        ops = self.operators
        assert ops is not None
        start = time.monotonic()
        while time.monotonic() - start < 120 and not self.stop_all.is_set():
            holder, _ = await lease_holder(self.kube)
            if holder and holder != old:
                ops.failover_seconds.append(time.monotonic() - start)
                return
            await asyncio.sleep(0.5)

    async def reap_loop(self) -> None:
        ops = self.operators
        assert ops is not None
        while not self.stop_all.is_set():
            ops.reap()
            await asyncio.sleep(0.5)

    async def plane_faults(self) -> None:
        a = self.args
        steps: list[tuple[float, str]] = []
        for k in range(a.apiserver_restarts):
            steps.append(((k + 1) / (a.apiserver_restarts + 1) * 0.6, "apiserver"))
        for k in range(a.etcd_pauses):
            steps.append((0.3 + (k + 1) / (a.etcd_pauses + 1) * 0.5, "etcd"))
        steps.sort()
        start = time.monotonic()
        for at, what in steps:
            wait = start + at * a.chaos_seconds - time.monotonic()
            if wait > 0:
                try:
                    await asyncio.wait_for(self.stop_chaos.wait(), wait)
                    return
                except TimeoutError:
                    pass
            if what == "apiserver":
                self.event("restarting kube-apiserver")
                began = time.monotonic()
                await asyncio.to_thread(self.plane.restart_component, "kube-apiserver")
                self.event("kube-apiserver back", seconds=round(time.monotonic() - began, 1))
            else:
                pid = self.plane.procs["etcd"].pid
                self.event("etcd paused (SIGSTOP)", seconds=a.etcd_pause_seconds)
                os.kill(pid, signal.SIGSTOP)
                try:
                    await asyncio.sleep(a.etcd_pause_seconds)
                finally:
                    os.kill(pid, signal.SIGCONT)
                self.event("etcd resumed (SIGCONT)")

    # ------------------------------------------------------------------ the cluster's side
    def fake(self, url: str) -> FakeDashboard:
        if not url.startswith("http"):
            url = "http://" + url
        return self.registry.get(url)

    async def submit_if_absent(self, url: str, sid: str, entrypoint: str) -> None:
        if sid in self.played:
            return
        self.played.add(sid)
        fake = self.fake(url)
        if sid not in fake.jobs:
            await fake.submit_job(JobSubmitRequest(entrypoint=entrypoint, submission_id=sid))

    async def on_submitter_job(self, job: dict[str, Any]) -> None:
        meta = job["metadata"]
        labels = meta.get("labels") or {}
        if labels.get("ray.io/originated-from-crd") != "RayJob":
            return
        owner = labels.get("ray.io/originated-from-cr-name") or meta["name"]
        self.submitter_uids.setdefault(owner, set()).add(meta["uid"])
        c0 = job["spec"]["template"]["spec"]["containers"][0]
        env = {e["name"]: e.get("value") for e in c0.get("env") or []}
        sid, address = env.get("RAY_JOB_SUBMISSION_ID"), env.get("RAY_DASHBOARD_ADDRESS")
        if not sid or not address:
            return
        entrypoint = self.work.jobs.get(owner, {}).get("spec", {}).get("entrypoint", "true")
        await self.submit_if_absent(str(address), str(sid), entrypoint)

    async def watch_submitter_jobs(self) -> None:
        """Plays K8sJobMode submitters as soon as their Job exists (KWOK finishes Job pods at
        once, so the Ray job must exist before the operator sees the Job complete)."""
        while not self.stop_all.is_set():
            try:
                listed = await self.kube.list(JOBS, NS)
                for job in listed["items"]:
                    await self.on_submitter_job(job)
                rv = listed["metadata"]["resourceVersion"]
                async for ev in self.kube.watch(JOBS, NS, resource_version=rv, timeout_seconds=60):
                    if self.stop_all.is_set():
                        return
                    if ev.type == "ERROR":
                        break
                    if ev.type in ("ADDED", "MODIFIED"):
                        await self.on_submitter_job(ev.object)
            except ApiError:
                await asyncio.sleep(0.5)

    async def observe_loop(self) -> None:
        """Once a second: SidecarMode submitters, InteractiveMode users, heads and clusters."""
        while not self.stop_all.is_set():
            with contextlib.suppress(ApiError, RuntimeError):
                await self.observe_once()
            await asyncio.sleep(1.0)

    async def observe_once(self) -> None:
        kube = self.kube
        heads = await kube.list(PODS, NS, label_selector="ray.io/node-type=head")
        live_heads: Counter[str] = Counter()
        for pod in heads["items"]:
            if not live(pod) or (pod.get("status") or {}).get("phase") in ("Failed", "Succeeded"):
                continue
            cluster = pod["metadata"]["labels"].get("ray.io/cluster", "")
            live_heads[cluster] += 1
            await self.play_sidecar(pod)
        for cluster, n in live_heads.items():
            self.max_heads[cluster] = max(self.max_heads[cluster], n)
        for rc in (await kube.list(RAYCLUSTERS, NS))["items"]:
            for uid in owner_uids(rc):
                self.cluster_uids_by_owner.setdefault(uid, set()).add(rc["metadata"]["uid"])
        for job in (await kube.list(RAYJOBS, NS))["items"]:
            await self.play_user(job)

    async def play_sidecar(self, pod: dict[str, Any]) -> None:
        containers = pod["spec"]["containers"]
        sidecar = next((c for c in containers if c["name"] == "ray-job-submitter"), None)
        if sidecar is None or pod["metadata"]["uid"] in self.sidecars_done:
            return
        env = {e["name"]: e.get("value") for e in sidecar.get("env") or []}
        sid = str(env.get("RAY_JOB_SUBMISSION_ID") or "")
        cluster = pod["metadata"]["labels"]["ray.io/cluster"]
        url = f"http://{cluster}-head-svc.{NS}.svc.cluster.local:8265"
        owner = cluster.rsplit("-", 1)[0]
        entrypoint = self.work.jobs.get(owner, {}).get("spec", {}).get("entrypoint", "true")
        await self.submit_if_absent(url, sid, entrypoint)
        fake = self.fake(url)
        if sid not in fake.jobs or fake.job_status(sid) not in TERMINAL_STATUSES:
            return
        statuses = copy.deepcopy((pod.get("status") or {}).get("containerStatuses") or [])
        if not any(cs["name"] == "ray-job-submitter" for cs in statuses):
            return
        now = time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())
        for cs in statuses:
            if cs["name"] == "ray-job-submitter":
                cs["state"] = {
                    "terminated": {"exitCode": 0, "reason": "Completed", "finishedAt": now}
                }
        with contextlib.suppress(NotFound):
            await self.kube.patch(
                PODS,
                pod["metadata"]["name"],
                {"status": {"containerStatuses": statuses}},
                NS,
                content_type=STRATEGIC_PATCH,
                subresource="status",
            )
            self.sidecars_done.add(pod["metadata"]["uid"])

    async def play_user(self, job: dict[str, Any]) -> None:
        """InteractiveMode: once the cluster waits, the user submits a job and names it."""
        status = job.get("status") or {}
        name = job["metadata"]["name"]
        if job["spec"].get("submissionMode") != "InteractiveMode" or job["spec"].get("jobId"):
            return
        if status.get("jobDeploymentStatus") != "Waiting" or not status.get("dashboardURL"):
            return
        sid = f"user-{name}"
        if sid not in self.user_jobs:
            fake = self.fake(str(status["dashboardURL"]))
            if sid not in fake.jobs:
                entrypoint = job["spec"].get("entrypoint") or "true"
                await fake.submit_job(JobSubmitRequest(entrypoint=entrypoint, submission_id=sid))
            self.user_jobs.add(sid)
        with contextlib.suppress(NotFound):
            await self.kube.patch(RAYJOBS, name, {"spec": {"jobId": sid}}, NS)

    # ------------------------------------------------------------------ end state
    async def snapshot(self) -> dict[str, list[dict[str, Any]]]:
        kube = self.kube
        return {
            "rayclusters": await list_items(kube, RAYCLUSTERS),
            "rayjobs": await list_items(kube, RAYJOBS),
            "rayservices": await list_items(kube, RAYSERVICES),
            "pods": await list_items(kube, PODS),
            "services": await list_items(kube, SERVICES),
            "jobs": await list_items(kube, JOBS),
        }

    def pending(self, snap: dict[str, list[dict[str, Any]]]) -> dict[str, str]:  # noqa: C901, PLR0912
        """Every object not (yet) where it must end, with why."""
        out: dict[str, str] = {}
        clusters = {c["metadata"]["name"]: c for c in snap["rayclusters"]}
        pods_by_cluster: dict[str, list[dict[str, Any]]] = {}
        for pod in snap["pods"]:
            cl = (pod["metadata"].get("labels") or {}).get("ray.io/cluster")
            if cl and live(pod):
                pods_by_cluster.setdefault(cl, []).append(pod)
        svc_by_cluster = Counter(
            (s["metadata"].get("labels") or {}).get("ray.io/cluster") for s in snap["services"]
        )
        for name, want in self.work.clusters.items():
            if name in self.work.deleted:
                if name in clusters:
                    out[f"raycluster/{name}"] = "deleted but still exists"
                elif pods_by_cluster.get(name):
                    out[f"raycluster/{name}"] = f"{len(pods_by_cluster[name])} pods left"
                elif svc_by_cluster.get(name):
                    out[f"raycluster/{name}"] = "services left"
                continue
            rc = clusters.get(name)
            why = self.cluster_not_done(rc, want, pods_by_cluster.get(name, []))
            if why:
                out[f"raycluster/{name}"] = why
        jobs = {j["metadata"]["name"]: j for j in snap["rayjobs"]}
        for name, manifest in self.work.jobs.items():
            job = jobs.get(name)
            st = (job or {}).get("status") or {}
            if job is None:
                out[f"rayjob/{name}"] = "missing"
            elif st.get("jobDeploymentStatus") != "Complete" or st.get("jobStatus") != "SUCCEEDED":
                out[f"rayjob/{name}"] = (
                    f"{st.get('jobDeploymentStatus')}/{st.get('jobStatus')} {st.get('reason', '')}"
                    f" {st.get('message', '')}"[:200]
                )
            else:
                mine = [c for c in snap["rayclusters"] if job["metadata"]["uid"] in owner_uids(c)]
                if manifest["spec"].get("shutdownAfterJobFinishes") and mine:
                    out[f"rayjob/{name}"] = "finished but its cluster is not deleted"
                for c in mine:
                    why = self.cluster_not_done(
                        c, 1, pods_by_cluster.get(c["metadata"]["name"], [])
                    )
                    if why and not manifest["spec"].get("shutdownAfterJobFinishes"):
                        out[f"rayjob/{name}"] = f"cluster {c['metadata']['name']}: {why}"
        services = {s["metadata"]["name"]: s for s in snap["rayservices"]}
        for name, manifest in self.work.services.items():
            why = self.service_not_done(services.get(name), manifest, snap, pods_by_cluster)
            if why:
                out[f"rayservice/{name}"] = why
        return out

    @staticmethod
    def cluster_not_done(rc: dict[str, Any] | None, want: int, pods: list[dict[str, Any]]) -> str:
        if rc is None:
            return "missing"
        st = rc.get("status") or {}
        heads = [p for p in pods if p["metadata"]["labels"].get("ray.io/node-type") == "head"]
        workers = [p for p in pods if p["metadata"]["labels"].get("ray.io/node-type") == "worker"]
        if st.get("state") != "ready":
            return f"state {st.get('state')!r}"
        if st.get("desiredWorkerReplicas") != want or st.get("availableWorkerReplicas") != want:
            return (
                f"workers desired/available {st.get('desiredWorkerReplicas')}/"
                f"{st.get('availableWorkerReplicas')}, want {want}"
            )
        if len(heads) != 1 or len(workers) != want:
            return f"{len(heads)} heads, {len(workers)} workers, want 1 and {want}"
        if st.get("observedGeneration") not in (None, rc["metadata"].get("generation")):
            return "status not observed for the latest generation"
        return ""

    def service_not_done(
        self,
        svc: dict[str, Any] | None,
        manifest: dict[str, Any],
        snap: dict[str, list[dict[str, Any]]],
        pods_by_cluster: dict[str, list[dict[str, Any]]],
    ) -> str:
        if svc is None:
            return "missing"
        st = svc.get("status") or {}
        active = (st.get("activeServiceStatus") or {}).get("rayClusterName") or ""
        pending = (st.get("pendingServiceStatus") or {}).get("rayClusterName") or ""
        if not condition_true(svc, "Ready"):
            return "not Ready"
        if pending:
            return f"upgrade in progress to {pending}"
        mine = [c for c in snap["rayclusters"] if svc["metadata"]["uid"] in owner_uids(c)]
        names = {c["metadata"]["name"] for c in mine}
        if names != {active}:
            return f"clusters {sorted(names)}, active {active!r}"
        rc = mine[0]
        image = rc["spec"]["headGroupSpec"]["template"]["spec"]["containers"][0]["image"]
        want_image = manifest["spec"]["rayClusterConfig"]["headGroupSpec"]["template"]["spec"][
            "containers"
        ][0]["image"]
        if image != want_image:
            return f"active cluster runs {image}, want {want_image}"
        why = self.cluster_not_done(rc, 1, pods_by_cluster.get(active, []))
        if why:
            return f"active cluster {active}: {why}"
        fake = self.fake(f"http://{active}-head-svc.{NS}.svc.cluster.local:8265")
        want_apps = yaml.safe_load(manifest["spec"]["serveConfigV2"])["applications"]
        served = (fake.serve_config or {}).get("applications")
        if served != want_apps:
            return "the active cluster does not serve the latest Serve config"
        if any(app.status != "RUNNING" for app in fake.apps.values()):
            return "Serve applications not RUNNING"
        return ""

    # ------------------------------------------------------------------ figures
    def figures(self, snap: dict[str, list[dict[str, Any]]]) -> dict[str, Any]:  # noqa: C901, PLR0912
        pods_by_cluster: dict[str, list[dict[str, Any]]] = {}
        for pod in snap["pods"]:
            cl = (pod["metadata"].get("labels") or {}).get("ray.io/cluster")
            if cl and live(pod):
                pods_by_cluster.setdefault(cl, []).append(pod)
        # Duplicate pods: beyond the desired count of a group, or a second head, at the end;
        # and two live heads of one cluster seen at the same time during the run.
        duplicates: dict[str, int] = {}
        for rc in snap["rayclusters"]:
            name = rc["metadata"]["name"]
            pods = pods_by_cluster.get(name, [])
            heads = sum(
                1 for p in pods if p["metadata"]["labels"].get("ray.io/node-type") == "head"
            )
            extra = max(0, heads - 1)
            for group in rc["spec"].get("workerGroupSpecs") or []:
                n = sum(
                    1
                    for p in pods
                    if p["metadata"]["labels"].get("ray.io/group") == group["groupName"]
                    and p["metadata"]["labels"].get("ray.io/node-type") == "worker"
                )
                extra += max(0, n - int(group.get("replicas") or 0))
            if extra:
                duplicates[name] = extra
        two_heads = {c: n - 1 for c, n in self.max_heads.items() if n > 1}
        # Double job submissions.
        doubles: dict[str, str] = {}
        ids_by_job: dict[str, set[str]] = {}
        starts: Counter[str] = Counter()
        post_calls: Counter[str] = Counter()
        for url, fake in self.registry.dashboards.items():
            cluster = url.split("//", 1)[1].split("-head-svc.", 1)[0]
            owner = cluster.rsplit("-", 1)[0]
            for sid, n in fake.jobs_started.items():
                starts[sid] += n
                if owner in self.work.jobs:
                    ids_by_job.setdefault(owner, set()).add(sid)
            for sid, n in fake.submissions.items():
                post_calls[sid] += n
        for sid, n in starts.items():
            if n > 1:
                doubles[f"id/{sid}"] = f"started {n} times"
        for job, ids in ids_by_job.items():
            if len(ids) > 1:
                doubles[f"rayjob/{job}"] = f"{len(ids)} submission ids: {sorted(ids)}"
        for job, uids in self.submitter_uids.items():
            if len(uids) > 1:
                doubles[f"submitter/{job}"] = f"{len(uids)} submitter Jobs"
        job_uids = {j["metadata"]["uid"]: j["metadata"]["name"] for j in snap["rayjobs"]}
        for uid, name in job_uids.items():
            seen = self.cluster_uids_by_owner.get(uid, set())
            if len(seen) > 1:
                doubles[f"rayjob-cluster/{name}"] = f"{len(seen)} RayClusters created"
        # Lost deletions.
        names = {c["metadata"]["name"] for c in snap["rayclusters"]}
        lost = {
            n: "still exists" if n in names else "pods left"
            for n in self.work.deleted
            if n in names or pods_by_cluster.get(n)
        }
        # Leaked objects: an owner that no longer exists, or a cluster nobody uses.
        uids = {
            o["metadata"]["uid"]
            for kind in ("rayclusters", "rayjobs", "rayservices", "jobs")
            for o in snap[kind]
        }
        leaked: dict[str, str] = {}
        for kind in ("pods", "services", "jobs", "rayclusters"):
            for obj in snap[kind]:
                owners = owner_uids(obj)
                if owners and not any(u in uids for u in owners) and live(obj):
                    leaked[f"{kind}/{obj['metadata']['name']}"] = "owner gone"
        for svc in snap["rayservices"]:
            st = svc.get("status") or {}
            keep = {
                (st.get("activeServiceStatus") or {}).get("rayClusterName"),
                (st.get("pendingServiceStatus") or {}).get("rayClusterName"),
            }
            for rc in snap["rayclusters"]:
                if svc["metadata"]["uid"] in owner_uids(rc) and rc["metadata"]["name"] not in keep:
                    leaked[f"rayclusters/{rc['metadata']['name']}"] = "RayService no longer uses it"
        service_clusters = {
            s["metadata"]["name"]: len(self.cluster_uids_by_owner.get(s["metadata"]["uid"], set()))
            for s in snap["rayservices"]
        }
        return {
            "duplicate_pods": sum(duplicates.values()) + sum(two_heads.values()),
            "duplicate_pods_detail": {
                **duplicates,
                **{f"{c} (two live heads)": n for c, n in two_heads.items()},
            },
            "double_job_submissions": len(doubles),
            "double_job_submissions_detail": doubles,
            "refused_resubmissions": sum(max(0, n - starts[sid]) for sid, n in post_calls.items()),
            "lost_deletions": len(lost),
            "lost_deletions_detail": lost,
            "leaked_objects": len(leaked),
            "leaked_objects_detail": leaked,
            "rayservice_clusters_created": service_clusters,
        }

    # ------------------------------------------------------------------ the run
    async def run(self) -> dict[str, Any]:  # noqa: PLR0915
        a = self.args
        self.t0 = time.monotonic()
        await install_crds(self.kube)
        await create_namespace(self.kube, NS)
        self.start_proxy()
        await self.dashboards.start()
        env = {
            "HTTP_PROXY": self.dashboards.proxy_url,
            "http_proxy": self.dashboards.proxy_url,
            "NO_PROXY": "127.0.0.1,localhost",
            "no_proxy": "127.0.0.1,localhost",
            "HTTPS_PROXY": "",
            "https_proxy": "",
        }
        self.operators = ops = Operators(
            self.workdir / "proxy.kubeconfig", self.workdir, a.replicas, env
        )
        ops.start_all()
        result: dict[str, Any] = {"inputs": {k: v for k, v in vars(a).items() if k != "out"}}
        background = [
            asyncio.create_task(self.reap_loop()),
            asyncio.create_task(self.watch_submitter_jobs()),
            asyncio.create_task(self.observe_loop()),
        ]
        try:
            deadline = time.monotonic() + 90
            while not (await lease_holder(self.kube))[0]:
                if time.monotonic() > deadline:
                    raise RuntimeError("no operator replica took the lease in 90 s")
                await asyncio.sleep(0.5)
            self.event("leader elected", holder=(await lease_holder(self.kube))[0])
            await self.proxy_control({"rate": a.fault_rate, "enabled": True})
            self.event("faults on", rate=a.fault_rate)
            chaos_start = time.monotonic()
            await self.create_workload()
            self.event(
                "workload created",
                clusters=a.clusters,
                jobs=a.jobs,
                services=a.services,
            )
            chaos = [
                asyncio.create_task(self.mutate()),
                asyncio.create_task(self.kill_loop()),
                asyncio.create_task(self.plane_faults()),
            ]
            remaining = a.chaos_seconds - (time.monotonic() - chaos_start)
            await asyncio.wait(chaos, timeout=max(0.0, remaining))
            self.stop_chaos.set()
            await asyncio.gather(*chaos, return_exceptions=True)
            for task in chaos:
                if task.exception() is not None:
                    raise task.exception()  # type: ignore[misc]
            await self.proxy_control({"rate": 0.0, "enabled": False})
            faults_end = time.monotonic()
            self.event("faults off; waiting for convergence")
            # Convergence: every object where it must end (bounded by --timeout).
            converged_s: float | None = None
            why: dict[str, str] = {}
            last_report = 0.0
            while time.monotonic() - faults_end < a.timeout:
                snap = await self.snapshot()
                why = self.pending(snap)
                if not why:
                    converged_s = time.monotonic() - faults_end
                    break
                if time.monotonic() - last_report > 30:
                    last_report = time.monotonic()
                    sample = dict(list(why.items())[:5])
                    log(f"{len(why)} objects not converged, e.g. {sample}")
                await asyncio.sleep(2.0)
            self.event("converged" if converged_s is not None else "did not converge")
            # Give the garbage collector a moment, then count.
            figures: dict[str, Any] = {}
            for _ in range(15):
                await asyncio.sleep(2.0)
                figures = self.figures(await self.snapshot())
                if not figures["leaked_objects"]:
                    break
            stats = (await self.proxy_control())["stats"]
            _, transitions = await lease_holder(self.kube)
            exits = Counter(e.kind for e in ops.exits)
            failovers = ops.failover_seconds
            result.update(
                {
                    "converged": converged_s is not None,
                    "convergence_s": round(converged_s, 1) if converged_s is not None else None,
                    "not_converged": why,
                    **figures,
                    "operator_kills": ops.kills,
                    "leader_kills": ops.leader_kills,
                    "operator_starts": sum(r.starts for r in ops.replicas),
                    "leadership_loss_exits": exits["leadership-lost"],
                    "unexpected_operator_exits": exits["unexpected"],
                    "unexpected_exit_detail": [
                        {"replica": e.replica, "pid": e.pid, "code": e.code}
                        for e in ops.exits
                        if e.kind == "unexpected"
                    ],
                    "lease_transitions": transitions,
                    "failover_s": {
                        "count": len(failovers),
                        "mean": round(sum(failovers) / len(failovers), 1) if failovers else None,
                        "max": round(max(failovers), 1) if failovers else None,
                    },
                    "faults_injected": {
                        k.removeprefix("fault_"): v
                        for k, v in sorted(stats.items())
                        if k.startswith("fault_")
                    },
                    "proxied_requests": stats.get("requests", 0),
                    "proxied_watches": stats.get("watches", 0),
                    "apiserver_unreachable_at_proxy": stats.get("upstream_unreachable", 0),
                    "dashboard_requests": dict(self.dashboards.requests),
                    "scale_patches": self.work.scale_patches,
                    "deleted_clusters": sorted(self.work.deleted),
                    "timeline": self.events,
                    "wall_s": round(time.monotonic() - self.t0, 1),
                }
            )
        finally:
            self.stop_chaos.set()
            self.stop_all.set()
            for task in background:
                task.cancel()
            await asyncio.gather(*background, return_exceptions=True)
            ops.stop_all()
            if self.proxy is not None:
                self.proxy.terminate()
                with contextlib.suppress(subprocess.TimeoutExpired):
                    self.proxy.wait(10)
            await self.dashboards.stop()
        return result


GOAL_ZERO = (
    "duplicate_pods",
    "double_job_submissions",
    "lost_deletions",
    "leaked_objects",
    "unexpected_operator_exits",
)


def markdown(r: dict[str, Any]) -> str:
    i = r["inputs"]
    fo = r["failover_s"]
    rows = [
        (
            "workload",
            f"{i['clusters']} RayClusters, {i['jobs']} RayJobs, {i['services']} RayServices; {r['scale_patches']} scale patches, {len(r['deleted_clusters'])} clusters deleted",
        ),
        (
            "chaos",
            f"{i['chaos_seconds']} s at fault rate {i['fault_rate']}; {r['operator_kills']} SIGKILLs ({r['leader_kills']} of the leader), {i['apiserver_restarts']} apiserver restart(s), {i['etcd_pauses']} etcd pause(s) of {i['etcd_pause_seconds']} s",
        ),
        (
            "faults injected",
            ", ".join(f"{k} {v}" for k, v in r["faults_injected"].items())
            + f" (of {r['proxied_requests']} requests)",
        ),
        (
            "convergence after faults stop",
            f"{r['convergence_s']} s"
            if r["converged"]
            else f"NOT converged in {i['timeout']} s ({len(r['not_converged'])} objects)",
        ),
        ("duplicate pods", r["duplicate_pods"]),
        ("double job submissions", r["double_job_submissions"]),
        ("lost deletions", r["lost_deletions"]),
        ("leaked objects", r["leaked_objects"]),
        ("unexpected operator exits", r["unexpected_operator_exits"]),
        ("leadership-loss exits (by design)", r["leadership_loss_exits"]),
        (
            "operator starts / lease transitions",
            f"{r['operator_starts']} / {r['lease_transitions']}",
        ),
        (
            "failover time (leader killed -> new holder)",
            f"mean {fo['mean']} s, max {fo['max']} s over {fo['count']}",
        ),
        ("resubmissions refused by the dashboard (informational)", r["refused_resubmissions"]),
    ]
    lines = ["| figure | value |", "|---|---|"]
    lines += [f"| {k} | {v} |" for k, v in rows]
    return "\n".join(lines)


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawTextHelpFormatter)
    p.add_argument("--short", action="store_true", help="the CI slice: small, < 3 minutes")
    p.add_argument("--clusters", type=int, default=50)
    p.add_argument("--workers", type=int, default=2, help="initial workers per RayCluster")
    p.add_argument("--max-workers", type=int, default=4)
    p.add_argument("--scale-steps", type=int, default=2, help="scale patches per RayCluster")
    p.add_argument("--delete-clusters", type=int, default=5)
    p.add_argument("--jobs", type=int, default=20)
    p.add_argument("--job-seconds", type=float, default=5.0)
    p.add_argument("--services", type=int, default=5)
    p.add_argument("--replicas", type=int, default=3)
    p.add_argument("--kills", type=int, default=100)
    p.add_argument("--failover-every", type=int, default=5, help="every Nth kill hits the leader")
    p.add_argument("--fault-rate", type=float, default=0.1)
    p.add_argument("--chaos-seconds", type=float, default=900.0)
    p.add_argument("--apiserver-restarts", type=int, default=1)
    p.add_argument("--etcd-pauses", type=int, default=1)
    p.add_argument("--etcd-pause-seconds", type=float, default=8.0)
    p.add_argument("--nodes", type=int, default=4)
    p.add_argument("--timeout", type=float, default=1800.0, help="bound on convergence (s)")
    p.add_argument("--seed", type=int, default=1)
    p.add_argument("--workdir", default="", help="keep plane, logs and kubeconfigs here")
    p.add_argument("--out", default=str(ROOT / "bench-results" / "chaos.json"))
    args = p.parse_args(argv)
    if args.short:
        short = {
            "clusters": 6,
            "jobs": 4,
            "services": 1,
            "kills": 5,
            "failover_every": 5,
            "delete_clusters": 1,
            "scale_steps": 1,
            "job_seconds": 2.0,
            "chaos_seconds": 45.0,
            "apiserver_restarts": 0,
            "etcd_pauses": 1,
            "etcd_pause_seconds": 3.0,
            "nodes": 2,
            "timeout": 150.0,
        }
        explicit = {a.split("=")[0].lstrip("-").replace("-", "_") for a in (argv or sys.argv[1:])}
        for key, value in short.items():
            if key not in explicit:
                setattr(args, key, value)
    if not 0.0 <= args.fault_rate <= 1.0:
        p.error("--fault-rate must be between 0 and 1")
    return args


async def amain(args: argparse.Namespace, workdir: Path) -> dict[str, Any]:
    plane = Plane(
        PlaneConfig(directory=workdir / "plane", nodes=args.nodes, unlimited=True, log=log)
    )
    await asyncio.to_thread(plane.start)
    try:
        config = load_kubeconfig(plane.kubeconfig)
        config.qps = 0
        config.max_connections = 50
        async with KubeClient(config, user_agent="bench-chaos") as kube:
            return await Chaos(args, plane, kube, workdir).run()
    finally:
        etcd = plane.procs.get("etcd")
        if etcd is not None:
            with contextlib.suppress(ProcessLookupError):
                os.kill(etcd.pid, signal.SIGCONT)
        await asyncio.to_thread(plane.stop)


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    if args.workdir:
        workdir = Path(args.workdir)
        workdir.mkdir(parents=True, exist_ok=True)
        result = asyncio.run(amain(args, workdir))
    else:
        with tempfile.TemporaryDirectory(prefix="kuberay-chaos-") as tmp:
            result = asyncio.run(amain(args, Path(tmp)))
    out = Path(args.out)
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(json.dumps(result, indent=2, sort_keys=True, default=str))
    print(markdown(result))
    failed = [k for k in GOAL_ZERO if result.get(k)]
    if not result["converged"]:
        failed.append("convergence")
    if failed:
        print(f"FAILED: {', '.join(failed)} (details in {out})")
        return 1
    print(f"all goal-0 figures are 0; results in {out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
