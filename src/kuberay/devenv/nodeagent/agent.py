"""The node agent: registers process-runtime Nodes, runs their pods, serves cluster DNS.

One agent process serves every process node of a plane (they share the host, the bridge and the
DNS server; the nodes only differ for the scheduler). It is started by the plane as a child with
PDEATHSIG and its own session (``python -m kuberay.devenv.nodeagent CONFIG``).

Invariants and failure modes:
- Nodes stay Ready while the agent lives: the Lease in ``kube-node-lease`` is renewed every 10 s
  and the Ready condition's heartbeat every 30 s, so node-lifecycle never taints them. When the
  agent dies the node goes NotReady after the lease expires (40 s), as with a dead kubelet.
- Pods are watched per node (``spec.nodeName``), one worker per pod uid; a pod force-deleted
  from the API is stopped without further writes.
- SIGTERM/SIGINT stop every pod at once (1 s grace, then SIGKILL) and exit; pods stay in the API
  (the plane is going away). SIGKILL of the agent kills all pod processes through PDEATHSIG and
  PID namespaces; the namespaces and veths vanish with them.
- API errors during registration are retried for up to a minute, then the agent exits non-zero
  (the plane reports its log).
- PersistentVolumeClaims of the default StorageClass ``standard`` are bound to host directories
  (``storage.py``), as KinD's local-path provisioner does.
"""

from __future__ import annotations

import asyncio
import contextlib
import datetime as dt
import json
import logging
import os
import platform
import signal
import sys
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import aiohttp

from kuberay.devenv.nodeagent.dns import (
    ClusterRecords,
    DnsServer,
    Forwarder,
    host_resolvers,
    parse_upstream,
)
from kuberay.devenv.nodeagent.kubelet import DEFAULT_PORT, KubeletServer, KubeletTLS, PodLookup
from kuberay.devenv.nodeagent.network import NetworkError, PodNetwork, ip
from kuberay.devenv.nodeagent.pod import PodWorker
from kuberay.devenv.nodeagent.spec import ImageMap, PodFacts
from kuberay.devenv.nodeagent.storage import Provisioner
from kuberay.runtime.client import (
    ENDPOINTSLICES,
    LEASES,
    NODES,
    PODS,
    SERVICES,
    KubeClient,
    load_kubeconfig,
)
from kuberay.runtime.errors import AlreadyExists, ApiError, Conflict, NotFound
from kuberay.runtime.events import EventRecorder
from kuberay.runtime.informer import Handler, Informer
from kuberay.runtime.store import index_by_label

log = logging.getLogger("kuberay.devenv.nodeagent")

LEASE_SECONDS = 40
SERVICE_NAME_LABEL = "kubernetes.io/service-name"
NODE_RUNTIME_LABEL = "kuberay.io/node-runtime"


@dataclass
class AgentConfig:
    kubeconfig: str
    nodes: list[str]
    network: dict[str, str]
    api_host: str
    api_port: int
    log_dir: str
    capacity: dict[str, str] = field(
        default_factory=lambda: {"cpu": "16", "memory": "64Gi", "pods": "110"}
    )
    images: dict[str, Any] = field(default_factory=dict)
    dns_port: int = 53
    cluster_domain: str = "cluster.local"
    # Forward names outside the cluster domain (planes with egress); to ``dns_upstreams``
    # ("ADDRESS[:PORT]"), or to the host's resolv.conf nameservers when that is empty.
    dns_forward: bool = False
    dns_upstreams: list[str] = field(default_factory=list)
    backoff_base: float = 1.0
    backoff_cap: float = 10.0
    python: str = sys.executable
    # Kubelet API (logs, exec, attach, port-forward): serving cert/key, the CA that signs the
    # apiserver's client certificate, and the port to try first.
    kubelet: dict[str, Any] = field(default_factory=dict)

    def dump(self, path: Path) -> None:
        path.write_text(json.dumps(self.__dict__, indent=2))

    @classmethod
    def load(cls, path: Path) -> AgentConfig:
        return cls(**json.loads(path.read_text()))


def micro_now() -> str:
    return dt.datetime.now(dt.UTC).strftime("%Y-%m-%dT%H:%M:%S.%fZ")


class Ipam:
    """Pod addresses of the plane's subnet, handed out round-robin so that a freed address is
    reused as late as possible (a late packet to an old pod never reaches its successor)."""

    def __init__(self, addresses: list[str]) -> None:
        self.addresses = addresses
        self.owner: dict[str, str] = {}
        self.next = 0

    def allocate(self, uid: str) -> str:
        for address, owner in self.owner.items():
            if owner == uid:
                return address
        for _ in range(len(self.addresses)):
            address = self.addresses[self.next % len(self.addresses)]
            self.next += 1
            if address not in self.owner:
                self.owner[address] = uid
                return address
        raise NetworkError("no free pod address left on this plane's bridge")

    def release(self, uid: str) -> None:
        for address in [a for a, o in self.owner.items() if o == uid]:
            del self.owner[address]


class Agent:
    def __init__(self, config: AgentConfig) -> None:
        self.config = config
        self.network = PodNetwork(id=config.network["id"], subnet=config.network["subnet"])
        self.ipam = Ipam(self.network.pod_addresses())
        self.images = ImageMap.from_data(config.images) if config.images else ImageMap.load()
        self.python = config.python
        self.cluster_domain = config.cluster_domain
        self.backoff_base = config.backoff_base
        self.backoff_cap = config.backoff_cap
        self.workers: dict[str, PodWorker] = {}
        self.worker_tasks: dict[str, asyncio.Task[None]] = {}
        self.finished: dict[str, None] = {}  # uids whose worker ended, oldest first
        self.informers: list[Informer] = []
        self.stopping = asyncio.Event()
        self.client: KubeClient
        self.http: aiohttp.ClientSession
        self.recorders: dict[str, EventRecorder] = {}
        self.kubelet_version = "v0.0.0"
        self.kubelet_port = 0

    # ------------------------------------------------------------------ helpers for workers
    def pod_log_dir(self, namespace: str, name: str, uid: str) -> Path:
        return Path(self.config.log_dir) / f"{namespace}_{name}_{uid}"

    def facts(self, pod_ip: str) -> PodFacts:
        return PodFacts(
            pod_ip=pod_ip,
            host_ip=self.network.gateway,
            node_allocatable=self.config.capacity,
            api_host=self.config.api_host,
            api_port=self.config.api_port,
        )

    def event(self, pod: dict[str, Any], etype: str, reason: str, note: str) -> None:
        node = pod.get("spec", {}).get("nodeName") or self.config.nodes[0]
        recorder = self.recorders.get(node)
        if recorder is not None:
            recorder.event(dict(pod, apiVersion="v1", kind="Pod"), etype, reason, note)

    def record_mountpoint(self, path: str) -> None:
        """Remembers a mount point created on the host, for ``network.release`` to remove."""
        with open(self.network.mountpoints_file, "a") as fh:
            fh.write(path + "\n")

    async def _ip(self, *args: str, stdin: str) -> None:
        proc = await asyncio.create_subprocess_exec(
            *args,
            stdin=asyncio.subprocess.PIPE,
            stdout=asyncio.subprocess.PIPE,
            stderr=asyncio.subprocess.STDOUT,
        )
        out, _ = await proc.communicate(stdin.encode())
        if proc.returncode != 0:
            raise NetworkError(f"{' '.join(args)} failed: {out.decode().strip()} ({stdin!r})")

    async def attach_network(self, sandbox_pid: int, address: str) -> None:
        net = self.network
        veth = net.veth(address)
        with contextlib.suppress(NetworkError):
            await self._ip("ip", "link", "del", veth, stdin="")
        await self._ip(
            "ip",
            "-batch",
            "-",
            stdin=(
                f"link add {veth} type veth peer name eth0 netns {sandbox_pid}\n"
                f"link set {veth} master {net.bridge}\n"
                f"link set {veth} up\n"
            ),
        )
        await self._ip(
            "nsenter",
            "-t",
            str(sandbox_pid),
            "-n",
            "ip",
            "-batch",
            "-",
            stdin=(
                "link set lo up\n"
                f"addr add {address}/{net.prefixlen} dev eth0\n"
                "link set eth0 up\n"
                f"route add default via {net.gateway}\n"
            ),
        )

    async def detach_network(self, address: str) -> None:
        with contextlib.suppress(NetworkError):
            await self._ip("ip", "link", "del", self.network.veth(address), stdin="")

    # ------------------------------------------------------------------ nodes
    def _node(self, name: str) -> dict[str, Any]:
        return {
            "apiVersion": "v1",
            "kind": "Node",
            "metadata": {
                "name": name,
                "labels": {
                    "kubernetes.io/hostname": name,
                    "kubernetes.io/os": "linux",
                    "kubernetes.io/arch": "amd64",
                    "node.kubernetes.io/instance-type": "process",
                    NODE_RUNTIME_LABEL: "process",
                },
            },
            "spec": {},
        }

    def _node_status(self, name: str) -> dict[str, Any]:
        now = micro_now()[:19] + "Z"
        capacity = dict(self.config.capacity)
        capacity.setdefault("ephemeral-storage", "100Gi")

        def cond(ctype: str, status: str, reason: str, message: str) -> dict[str, str]:
            return {
                "type": ctype,
                "status": status,
                "reason": reason,
                "message": message,
                "lastHeartbeatTime": now,
                "lastTransitionTime": self._started_at,
            }

        uname = platform.uname()
        return {
            "capacity": capacity,
            "allocatable": capacity,
            "conditions": [
                cond("MemoryPressure", "False", "KubeletHasSufficientMemory", "ok"),
                cond("DiskPressure", "False", "KubeletHasNoDiskPressure", "ok"),
                cond("PIDPressure", "False", "KubeletHasSufficientPID", "ok"),
                cond("Ready", "True", "KubeletReady", "process runtime agent is posting status"),
            ],
            "addresses": [
                {"type": "InternalIP", "address": self.network.gateway},
                {"type": "Hostname", "address": name},
            ],
            "daemonEndpoints": {"kubeletEndpoint": {"Port": self.kubelet_port or 10250}},
            "nodeInfo": {
                "machineID": self.network.id,
                "systemUUID": self.network.id,
                "bootID": self.network.id,
                "kernelVersion": uname.release,
                "osImage": "process runtime (kuberay devenv)",
                "containerRuntimeVersion": "process://1",
                "kubeletVersion": self.kubelet_version,
                "kubeProxyVersion": "",
                "operatingSystem": "linux",
                "architecture": "amd64",
            },
        }

    async def register(self) -> None:
        with contextlib.suppress(ApiError):
            version = await self.client.request("GET", "/version")
            self.kubelet_version = str(version.get("gitVersion", self.kubelet_version))
        for name in self.config.nodes:
            try:
                await self.client.create(NODES, self._node(name))
            except AlreadyExists:
                await self.client.patch(NODES, name, {"metadata": self._node(name)["metadata"]})
            await self._post_status(name)
            await self._renew_lease(name)

    async def _post_status(self, name: str) -> None:
        await self.client.patch(
            NODES, name, {"status": self._node_status(name)}, subresource="status"
        )

    async def _renew_lease(self, name: str) -> None:
        try:
            lease = await self.client.get(LEASES, name, "kube-node-lease")
        except NotFound:
            node = await self.client.get(NODES, name)
            lease = {
                "apiVersion": "coordination.k8s.io/v1",
                "kind": "Lease",
                "metadata": {
                    "name": name,
                    "namespace": "kube-node-lease",
                    "ownerReferences": [
                        {
                            "apiVersion": "v1",
                            "kind": "Node",
                            "name": name,
                            "uid": node["metadata"]["uid"],
                        }
                    ],
                },
                "spec": {
                    "holderIdentity": name,
                    "leaseDurationSeconds": LEASE_SECONDS,
                    "renewTime": micro_now(),
                },
            }
            with contextlib.suppress(AlreadyExists):
                await self.client.create(LEASES, lease)
            return
        lease["spec"]["renewTime"] = micro_now()
        lease["spec"]["holderIdentity"] = name
        lease["spec"]["leaseDurationSeconds"] = LEASE_SECONDS
        with contextlib.suppress(Conflict):
            await self.client.update(LEASES, lease)

    async def _heartbeat(self) -> None:
        ticks = 0
        while True:
            await asyncio.sleep(10)
            ticks += 1
            for name in self.config.nodes:
                try:
                    await self._renew_lease(name)
                    if ticks % 3 == 0:
                        await self._post_status(name)
                except ApiError as exc:
                    log.warning("node %s: heartbeat failed: %s", name, exc)

    # ------------------------------------------------------------------ pods
    def _on_pod(self, pod: dict[str, Any]) -> None:
        if self.stopping.is_set():
            return
        uid = pod["metadata"]["uid"]
        worker = self.workers.get(uid)
        if worker is not None:
            worker.update(pod)
            return
        if uid in self.finished:
            # Deleted by us, still held by a finalizer (e.g. Job tracking): nothing to run.
            return
        worker = PodWorker(self, pod)
        self.workers[uid] = worker
        task = asyncio.create_task(self._run_worker(worker), name=f"pod-{worker.key}")
        self.worker_tasks[uid] = task

    async def _run_worker(self, worker: PodWorker) -> None:
        try:
            await worker.run()
        finally:
            self.finished[worker.uid] = None
            while len(self.finished) > 10000:
                del self.finished[next(iter(self.finished))]
            self.workers.pop(worker.uid, None)
            self.worker_tasks.pop(worker.uid, None)

    def _on_pod_deleted(self, pod: dict[str, Any]) -> None:
        worker = self.workers.get(pod["metadata"]["uid"])
        if worker is not None:
            worker.gone()

    # ------------------------------------------------------------------ main
    async def run(self) -> int:
        self._started_at = micro_now()[:19] + "Z"
        kube_config = load_kubeconfig(self.config.kubeconfig)
        kube_config.qps = 0
        self.client = KubeClient(kube_config, user_agent="kuberay-process-agent")
        self.http = aiohttp.ClientSession(connector=aiohttp.TCPConnector(force_close=True))
        services = Informer(self.client, SERVICES)
        slices = Informer(
            self.client, ENDPOINTSLICES, indexers={"service": index_by_label(SERVICE_NAME_LABEL)}
        )
        records = ClusterRecords(
            lambda ns, name: services.store.get_by_name(ns, name),
            lambda ns, name: slices.store.by_index("service", f"{ns}/{name}"),
            self.cluster_domain,
        )
        forwarder = None
        if self.config.dns_forward:
            upstreams = [parse_upstream(u) for u in self.config.dns_upstreams] or host_resolvers()
            forwarder = Forwarder(upstreams, self.cluster_domain)
        dns = DnsServer(self.network.gateway, self.config.dns_port, records.lookup, forwarder)
        tasks: list[asyncio.Task[Any]] = []
        kubelet: KubeletServer | None = None
        provisioner = Provisioner(self.client, self.network.data_dir)
        try:
            if self.config.kubelet:
                kubelet = KubeletServer(
                    PodLookup(lambda: list(self.workers.values()), Path(self.config.log_dir)),
                    KubeletTLS(
                        self.config.kubelet["cert"],
                        self.config.kubelet["key"],
                        self.config.kubelet["client_ca"],
                    ),
                    self.network.gateway,
                    int(self.config.kubelet.get("port", DEFAULT_PORT)),
                )
                self.kubelet_port = await kubelet.start()
            for attempt in range(60):
                try:
                    await self.register()
                    break
                except ApiError as exc:
                    if attempt == 59:
                        raise
                    log.warning("registering nodes failed (%s); retrying", exc)
                    await asyncio.sleep(1)
            for name in self.config.nodes:
                recorder = EventRecorder(self.client, "kubelet", name)
                recorder.start()
                self.recorders[name] = recorder
            self.informers = [services, slices]
            for informer in self.informers:
                informer.start()
            await dns.start()
            await provisioner.start()
            for name in self.config.nodes:
                pods = Informer(self.client, PODS, field_selector=f"spec.nodeName={name}")
                pods.add_handler(
                    Handler(
                        on_add=self._on_pod,
                        on_update=lambda _old, new: self._on_pod(new),
                        on_delete=self._on_pod_deleted,
                    )
                )
                pods.start()
                self.informers.append(pods)
            tasks.append(asyncio.create_task(self._heartbeat(), name="heartbeat"))
            log.info(
                "agent ready: nodes %s, bridge %s (%s), dns %s:%d, forwarding to %s",
                ",".join(self.config.nodes),
                self.network.bridge,
                self.network.subnet,
                self.network.gateway,
                dns.port,
                forwarder.upstreams if forwarder else "nothing (hermetic)",
            )
            await self.stopping.wait()
        finally:
            self.stopping.set()
            await asyncio.gather(
                *(w.stop_now() for w in list(self.workers.values())), return_exceptions=True
            )
            for task in list(self.worker_tasks.values()):
                with contextlib.suppress(TimeoutError, asyncio.CancelledError, Exception):
                    async with asyncio.timeout(5):
                        await task
            for task in tasks:
                task.cancel()
            for informer in self.informers:
                await informer.stop()
            await provisioner.stop()
            await dns.stop()
            if kubelet is not None:
                await kubelet.stop()
            for recorder in self.recorders.values():
                await recorder.stop(0.5)
            await self.http.close()
            await self.client.close()
        return 0


def main(argv: list[str] | None = None) -> int:
    args = sys.argv[1:] if argv is None else argv
    if len(args) != 1:
        print("usage: python -m kuberay.devenv.nodeagent CONFIG_JSON", file=sys.stderr)
        return 2
    logging.basicConfig(
        level=os.environ.get("KUBERAY_AGENT_LOG_LEVEL", "INFO"),
        format="%(asctime)s %(levelname)s %(name)s: %(message)s",
    )
    config = AgentConfig.load(Path(args[0]))
    agent = Agent(config)

    async def serve() -> int:
        loop = asyncio.get_running_loop()
        for sig in (signal.SIGTERM, signal.SIGINT, signal.SIGHUP):
            loop.add_signal_handler(sig, agent.stopping.set)
        return await agent.run()

    try:
        return asyncio.run(serve())
    except (ApiError, NetworkError, OSError) as exc:
        log.error("agent failed: %s", exc)
        return 1


__all__ = ["Agent", "AgentConfig", "ip", "main"]
