"""A real local Kubernetes control plane: etcd, apiserver, controller-manager, scheduler, KWOK.

Used by the demo, every integration test and the benchmarks. Each component is the upstream
binary (see ``binaries``), started as a child process with its own log file in ``<dir>/logs``.

With ``runtime="process"`` there is no KWOK: pods really run, as Linux processes, under the node
agent of ``devenv.nodeagent`` (a child process like the others, log ``logs/node-agent.log``,
container logs under ``logs/pods/``). The plane then first creates its pod bridge and binds the
apiserver on the bridge address (in the serving certificate too) so that pods can reach it; the
``kubernetes`` Service's endpoint is that address. ``stop()`` removes the bridge and everything
the pods left on the host.

Invariants and failure modes:
- No orphans. Every child is started with ``PR_SET_PDEATHSIG=SIGKILL`` so it dies with the process
  that started it, even if that process is SIGKILLed; each child gets its own session so that a
  terminal's Ctrl-C reaches only the parent, which then stops the children in reverse order
  (KWOK, scheduler, controller-manager, apiserver, etcd) with SIGTERM and, after a grace period,
  SIGKILL.
- Ports are picked by the kernel (bind to port 0) so several planes can run side by side.
- ``start()`` returns only when every component answers its health endpoint and every fake node is
  Ready; a component that exits or does not become ready fails the start with the tail of its log.
- etcd data lives in a fresh directory per start (``--unsafe-no-fsync``: this is a test plane); the
  PKI is kept so that kubeconfigs handed out stay valid.
"""

from __future__ import annotations

import contextlib
import ctypes
import json
import os
import random
import shutil
import signal
import socket
import struct
import subprocess
import sys
import time
from collections.abc import Callable, Iterator
from dataclasses import asdict, dataclass, field
from importlib import resources
from pathlib import Path
from typing import Any

from kuberay.devenv import binaries, nodeagent
from kuberay.devenv.http import HTTPError, client_context, request
from kuberay.devenv.nodeagent import container_log
from kuberay.devenv.nodeagent.agent import AgentConfig
from kuberay.devenv.nodeagent.dns import encode_name
from kuberay.devenv.nodeagent.network import PodNetwork, allocate, release
from kuberay.devenv.nodeagent.spec import ImageMap
from kuberay.devenv.pki import (
    ADMIN,
    CONTROLLER_MANAGER,
    KUBELET_CLIENT,
    KWOK,
    PKI,
    SCHEDULER,
    Identity,
)

KWOK_NODE_ANNOTATION = "kwok.x-k8s.io/node"
SERVICE_CIDR = "10.96.0.0/16"
# Pod addresses handed out by KWOK: data in pod status only, nothing is ever sent to them.
KWOK_POD_CIDR = "10.64.0.1/12"
STOP_ORDER = (
    "node-agent",
    "kwok",
    "kube-scheduler",
    "kube-controller-manager",
    "kube-apiserver",
    "etcd",
)
CONTROLLERS = (
    "garbage-collector-controller",
    "job-controller",
    "cronjob-controller",
    "ttl-after-finished-controller",
    "endpoints-controller",
    "endpointslice-controller",
    "endpointslice-mirroring-controller",
    "namespace-controller",
    "serviceaccount-controller",
    "serviceaccount-token-controller",
    "root-ca-certificate-publisher-controller",
    "deployment-controller",
    "replicaset-controller",
    "statefulset-controller",
    "daemonset-controller",
    "disruption-controller",
    "resourcequota-controller",
    "pod-garbage-collector-controller",
    "clusterrole-aggregation-controller",
    # Claims are bound to volumes (process planes provision them, see nodeagent/storage.py), and
    # a deleted claim or volume goes once nothing uses it, as on any cluster.
    "persistentvolume-binder-controller",
    "persistentvolumeclaim-protection-controller",
    "persistentvolume-protection-controller",
    # Removes the not-ready taint that admission puts on new nodes once KWOK reports them Ready.
    "node-lifecycle-controller",
)

_PR_SET_PDEATHSIG = 1


def _die_with_parent() -> None:
    """Runs in the child between fork and exec: SIGKILL when the parent goes away."""
    libc = ctypes.CDLL(None, use_errno=True)
    libc.prctl(_PR_SET_PDEATHSIG, signal.SIGKILL, 0, 0, 0)


# Listening ports are picked from here up to the kernel's ephemeral range (see free_port):
# above Ray's default worker ports (10002-19999) and its client port 10001.
LISTEN_PORTS_FROM = 20_000
EPHEMERAL_RANGE = Path("/proc/sys/net/ipv4/ip_local_port_range")


def ephemeral_floor(path: Path = EPHEMERAL_RANGE) -> int:
    """The lowest port the kernel hands out for bind(0) and outgoing connections (0: unknown)."""
    try:
        return int(path.read_text().split()[0])
    except (OSError, ValueError, IndexError):
        return 0


def free_port(host: str = "127.0.0.1", floor: int | None = None) -> int:
    """A port nothing listens on, for a component that binds it a few seconds later.

    It is chosen below the kernel's ephemeral range where there is room. A port from bind(0)
    comes from that range, and so do the source ports of outgoing connections: while the plane
    starts, its components open hundreds of them, and one took KWOK's port before KWOK bound
    it ("address already in use", a failed CI run). Below the range only another listener can
    take it, and a random pick over twelve thousand ports makes that a rare race."""
    top = ephemeral_floor() if floor is None else floor
    if top - LISTEN_PORTS_FROM >= 1_000:
        for _ in range(50):
            port = random.randrange(LISTEN_PORTS_FROM, top)
            with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
                try:
                    sock.bind((host, port))
                except OSError:
                    continue
                return port
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.bind((host, 0))
        return int(sock.getsockname()[1])


def spawn_logged(argv: list[str], log_path: Path, cwd: Path) -> subprocess.Popen[bytes]:
    """Starts a child that dies with this process, its output appended to ``log_path`` after a
    start marker (so restarts stay readable in one file)."""
    with open(log_path, "ab") as log:
        log.write(f"\n==== start {time.strftime('%H:%M:%S')}: {' '.join(argv)}\n".encode())
        log.flush()
        return subprocess.Popen(
            argv,
            stdin=subprocess.DEVNULL,
            stdout=log,
            stderr=subprocess.STDOUT,
            start_new_session=True,
            preexec_fn=_die_with_parent,
            cwd=cwd,
        )


class PlaneError(RuntimeError):
    """The plane could not start; the message carries the failing component's log tail."""


@dataclass
class PlaneConfig:
    """What to run. The defaults suit tests and the demo on a 2-core machine."""

    directory: Path
    nodes: int = 4
    node_cpu: str = "64"
    node_memory: str = "512Gi"
    node_gpus: int = 0
    node_max_pods: int = 2000
    bind_address: str = "127.0.0.1"
    # Lifts the apiserver's inflight limits and the components' client rate limits (benchmarks).
    unlimited: bool = False
    # Resources whose apiserver watch cache is disabled, so that watches reach etcd directly
    # and an etcd compaction turns an old resourceVersion into 410 Gone (tests of relisting).
    uncached_resources: tuple[str, ...] = ("podtemplates",)
    kwok: bool = True
    extra_sans: tuple[str, ...] = ()
    # "kwok": fake nodes, pods never run. "process": real pods as processes (Linux, root); see
    # kuberay.devenv.nodeagent. The process_* fields apply to the latter only.
    runtime: str = "kwok"
    process_nodes: int = 1
    process_node_cpu: str = "16"
    process_node_memory: str = "64Gi"
    process_node_pods: int = 110
    # Pods reach beyond the host (NAT through it, and cluster DNS forwards other names to the
    # host's resolvers or to ``egress_dns``, "ADDRESS[:PORT]"). Off: hermetic (tests).
    egress: bool = True
    egress_dns: tuple[str, ...] = ()
    # Image -> Python environment mapping (JSON/YAML file); default: $KUBERAY_DEVENV_IMAGES, else
    # every image runs with the interpreter that starts the plane. See nodeagent.spec.
    image_map: Path | None = None
    # Restart back-off of crashed containers: base doubling up to cap (seconds).
    backoff_base: float = 1.0
    backoff_cap: float = 10.0
    # Appended to kube-apiserver's command line, after the plane's own flags (e.g. an audit
    # policy and log for a benchmark).
    apiserver_args: tuple[str, ...] = ()
    log: Callable[[str], None] = field(default=print, repr=False)


@dataclass
class ComponentState:
    name: str
    pid: int
    port: int
    log: str


class Plane:
    """One running control plane. Use as a context manager or call ``start()``/``stop()``."""

    def __init__(self, config: PlaneConfig) -> None:
        self.config = config
        self.dir = config.directory
        self.pki = PKI(self.dir / "pki", extra_sans=config.extra_sans)
        self.bind_address = config.bind_address
        self.network: PodNetwork | None = None
        self.procs: dict[str, subprocess.Popen[bytes]] = {}
        self.ports: dict[str, int] = {}
        self.started_at = 0.0
        self.ready_seconds = 0.0
        # Added to state.json by whoever runs extra processes beside the plane (Prometheus).
        self.extra_state: dict[str, Any] = {}

    # ------------------------------------------------------------------ paths and addresses
    @property
    def logs(self) -> Path:
        return self.dir / "logs"

    @property
    def kubeconfig(self) -> Path:
        return self.dir / "kubeconfig"

    @property
    def server(self) -> str:
        host = self.bind_address
        if host in ("0.0.0.0", ""):
            host = "127.0.0.1"
        return f"https://{host}:{self.ports['kube-apiserver']}"

    @property
    def etcd_url(self) -> str:
        return f"http://127.0.0.1:{self.ports['etcd']}"

    @property
    def process_runtime(self) -> bool:
        return self.config.runtime == "process"

    @property
    def pod_gateway(self) -> str:
        """The host's address as pods see it (bridge; apiserver, DNS): for host services that
        pods must reach, e.g. a Redis a test starts. Process runtime only."""
        if self.network is None:
            raise PlaneError("pod_gateway exists only with runtime='process'")
        return self.network.gateway

    @property
    def pod_logs(self) -> Path:
        """Process-runtime container logs: ``<ns>_<pod>_<uid>/<container>.log``."""
        return self.logs / "pods"

    def container_log(
        self, namespace: str, pod: str, container: str, previous: int | None = None
    ) -> str:
        """A process-runtime container's output (stdout+stderr) of its current instance."""
        return container_log(self.pod_logs, namespace, pod, container, previous=previous)

    def admin_context(self) -> Any:
        return client_context(
            str(self.pki.ca_cert), str(self.pki.client_cert(ADMIN)), str(self.pki.client_key(ADMIN))
        )

    # ------------------------------------------------------------------ lifecycle
    def __enter__(self) -> Plane:
        self.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.stop()

    def start(self) -> None:
        cfg = self.config
        self.started_at = time.monotonic()
        paths = binaries.ensure(self._needed_binaries(), log=cfg.log)
        self.dir.mkdir(parents=True, exist_ok=True)
        self.logs.mkdir(exist_ok=True)
        if cfg.runtime not in ("kwok", "process"):
            raise PlaneError(f"unknown runtime {cfg.runtime!r} (kwok or process)")
        if self.process_runtime:
            self._setup_network()
        self.pki.ensure()
        for name in ("etcd", "etcd-peer", "kube-apiserver", "kube-controller-manager"):
            self.ports[name] = free_port()
        self.ports["kube-scheduler"] = free_port()
        self.ports["kwok"] = free_port()
        self._write_kubeconfigs()
        try:
            self._start_etcd(paths["etcd"])
            self._start_apiserver(paths["kube-apiserver"])
            self._start_controller_manager(paths["kube-controller-manager"])
            self._start_scheduler(paths["kube-scheduler"])
            if self._kwok:
                self._start_kwok(paths["kwok"])
            self._wait_healthy(
                "kube-controller-manager",
                f"https://127.0.0.1:{self.ports['kube-controller-manager']}/healthz",
                client_context(None),
            )
            self._wait_healthy(
                "kube-scheduler",
                f"https://127.0.0.1:{self.ports['kube-scheduler']}/healthz",
                client_context(None),
            )
            if self._kwok:
                self._wait_healthy("kwok", f"http://127.0.0.1:{self.ports['kwok']}/healthz")
                self.create_nodes(cfg.nodes)
                self.wait_nodes_ready(cfg.nodes)
            if self.process_runtime:
                self._start_node_agent()
                self.wait_nodes_ready(cfg.process_nodes, component="node-agent")
                self._wait_dns()
        except BaseException:
            self.stop()
            raise
        self.ready_seconds = time.monotonic() - self.started_at
        self._write_state()

    def stop(self, timeout: float = 10.0) -> None:
        """Stops every child, most dependent first; SIGKILL after ``timeout`` seconds."""
        for name in STOP_ORDER:
            proc = self.procs.pop(name, None)
            if proc is None:
                continue
            _terminate(proc, timeout)
        self.procs.clear()
        if self.network is not None:
            release(self.network)
            self.network = None
        shutil.rmtree(self.dir / "etcd-data", ignore_errors=True)
        with contextlib.suppress(FileNotFoundError):
            (self.dir / "state.json").unlink()

    @property
    def _kwok(self) -> bool:
        return self.config.kwok and not self.process_runtime

    def _needed_binaries(self) -> list[str]:
        names = ["etcd", "kube-apiserver", "kube-controller-manager", "kube-scheduler"]
        if self._kwok:
            names.append("kwok")
        return names

    # ------------------------------------------------------------------ process runtime
    def _setup_network(self) -> None:
        why = nodeagent.supported()
        if why is not None:
            raise PlaneError(why)
        self.network = allocate(os.getpid(), egress=self.config.egress)
        self.bind_address = self.network.gateway
        sans = (*self.config.extra_sans, self.network.gateway)
        self.pki = PKI(self.dir / "pki", extra_sans=sans)
        self.config.log(
            f"process runtime: bridge {self.network.bridge} on {self.network.subnet}, "
            f"apiserver and DNS at {self.network.gateway}, "
            + ("egress through the host" if self.config.egress else "no egress (hermetic)")
        )

    def _start_node_agent(self) -> None:
        cfg = self.config
        assert self.network is not None
        images = ImageMap.load(cfg.image_map).to_json()
        config = AgentConfig(
            kubeconfig=str(self.kubeconfig),
            nodes=[f"process-node-{i}" for i in range(cfg.process_nodes)],
            network={"id": self.network.id, "subnet": self.network.subnet},
            api_host=self.network.gateway,
            api_port=self.ports["kube-apiserver"],
            log_dir=str(self.pod_logs),
            capacity={
                "cpu": cfg.process_node_cpu,
                "memory": cfg.process_node_memory,
                "pods": str(cfg.process_node_pods),
            },
            images=images,
            backoff_base=cfg.backoff_base,
            backoff_cap=cfg.backoff_cap,
            python=sys.executable,
            dns_forward=cfg.egress,
            dns_upstreams=list(cfg.egress_dns),
            kubelet={
                "cert": str(self.pki.kubelet_cert),
                "key": str(self.pki.kubelet_key),
                "client_ca": str(self.pki.ca_cert),
            },
        )
        self.pod_logs.mkdir(parents=True, exist_ok=True)
        path = self.network.data_dir / "agent.json"
        config.dump(path)
        self._spawn("node-agent", [sys.executable, "-m", "kuberay.devenv.nodeagent", str(path)])

    def _wait_dns(self, timeout: float = 30.0) -> None:
        """Until cluster DNS answers for the apiserver's Service (its endpoint is published)."""
        assert self.network is not None
        query = dns_query("kubernetes.default.svc.cluster.local")
        deadline = time.monotonic() + timeout
        last = "no answer"
        while time.monotonic() < deadline:
            proc = self.procs.get("node-agent")
            if proc is not None and proc.poll() is not None:
                raise PlaneError(
                    f"node-agent exited with code {proc.returncode}; log:\n"
                    + self.log_tail("node-agent")
                )
            with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as sock:
                sock.settimeout(0.5)
                try:
                    sock.sendto(query, (self.network.gateway, 53))
                    reply = sock.recv(512)
                    if len(reply) > 12 and reply[7] > 0:  # ANCOUNT
                        return
                    last = f"rcode {reply[3] & 0xF}, {reply[7]} answers"
                except OSError as exc:
                    last = str(exc)
            time.sleep(0.2)
        raise PlaneError(
            f"cluster DNS did not resolve the kubernetes Service in {timeout:.0f}s ({last}); "
            "node-agent log:\n" + self.log_tail("node-agent")
        )

    # ------------------------------------------------------------------ components
    def _spawn(self, name: str, argv: list[str]) -> subprocess.Popen[bytes]:
        proc = spawn_logged(argv, self.logs / f"{name}.log", self.dir)
        self.procs[name] = proc
        return proc

    def _start_etcd(self, binary: Path) -> None:
        data = self.dir / "etcd-data"
        shutil.rmtree(data, ignore_errors=True)
        client = self.etcd_url
        peer = f"http://127.0.0.1:{self.ports['etcd-peer']}"
        self._spawn(
            "etcd",
            [
                str(binary),
                "--name=plane",
                f"--data-dir={data}",
                f"--listen-client-urls={client}",
                f"--advertise-client-urls={client}",
                f"--listen-peer-urls={peer}",
                f"--initial-advertise-peer-urls={peer}",
                f"--initial-cluster=plane={peer}",
                "--unsafe-no-fsync=true",
                "--quota-backend-bytes=8589934592",
                "--log-level=warn",
            ],
        )
        self._wait_healthy("etcd", f"{client}/health")

    def _start_apiserver(self, binary: Path) -> None:
        cfg = self.config
        pki = self.pki
        bind = self.bind_address
        advertise = "127.0.0.1" if bind in ("0.0.0.0", "") else bind
        issuer = "https://kubernetes.default.svc.cluster.local"
        argv = [
            str(binary),
            f"--etcd-servers={self.etcd_url}",
            f"--bind-address={bind}",
            f"--secure-port={self.ports['kube-apiserver']}",
            f"--advertise-address={advertise}",
            f"--tls-cert-file={pki.serving_cert}",
            f"--tls-private-key-file={pki.serving_key}",
            f"--client-ca-file={pki.ca_cert}",
            f"--service-account-key-file={pki.sa_pub}",
            f"--service-account-signing-key-file={pki.sa_key}",
            f"--service-account-issuer={issuer}",
            f"--api-audiences={issuer}",
            "--authorization-mode=RBAC",
            f"--service-cluster-ip-range={SERVICE_CIDR}",
            "--allow-privileged=true",
            "--profiling=false",
            "--event-ttl=1h",
        ]
        if self.process_runtime:
            # The node agent serves the kubelet API on the Node's InternalIP (the bridge) with a
            # certificate from the plane CA; the apiserver authenticates with its own client cert.
            assert self.network is not None
            names = (self.network.gateway, *(f"process-node-{i}" for i in range(cfg.process_nodes)))
            pki.ensure_kubelet_serving(names)
            argv += [
                f"--kubelet-client-certificate={pki.client_cert(KUBELET_CLIENT)}",
                f"--kubelet-client-key={pki.client_key(KUBELET_CLIENT)}",
                f"--kubelet-certificate-authority={pki.ca_cert}",
                "--kubelet-preferred-address-types=InternalIP",
            ]
        if advertise.startswith("127."):
            # The `kubernetes` Service cannot have a loopback endpoint; nothing in a KWOK plane
            # dials it, so do not keep retrying an invalid write.
            argv.append("--endpoint-reconciler-type=none")
        if cfg.uncached_resources:
            argv.append("--watch-cache-sizes=" + ",".join(f"{r}#0" for r in cfg.uncached_resources))
        if cfg.unlimited:
            argv += [
                "--max-requests-inflight=0",
                "--max-mutating-requests-inflight=0",
                "--enable-priority-and-fairness=false",
            ]
        argv += cfg.apiserver_args
        self._spawn("kube-apiserver", argv)
        self._wait_healthy("kube-apiserver", f"{self.server}/readyz", self.admin_context(), 90)

    def _qps_flags(self) -> list[str]:
        qps, burst = (5000, 10000) if self.config.unlimited else (200, 400)
        return [f"--kube-api-qps={qps}", f"--kube-api-burst={burst}"]

    def _start_controller_manager(self, binary: Path) -> None:
        kubeconfig = self._component_kubeconfig(CONTROLLER_MANAGER)
        self._spawn(
            "kube-controller-manager",
            [
                str(binary),
                f"--kubeconfig={kubeconfig}",
                "--bind-address=127.0.0.1",
                f"--secure-port={self.ports['kube-controller-manager']}",
                "--leader-elect=false",
                "--controllers=" + ",".join(CONTROLLERS),
                f"--service-account-private-key-file={self.pki.sa_key}",
                f"--root-ca-file={self.pki.ca_cert}",
                "--use-service-account-credentials=false",
                "--cluster-name=kuberay-local",
                *self._qps_flags(),
            ],
        )

    def _start_scheduler(self, binary: Path) -> None:
        kubeconfig = self._component_kubeconfig(SCHEDULER)
        self._spawn(
            "kube-scheduler",
            [
                str(binary),
                f"--kubeconfig={kubeconfig}",
                "--bind-address=127.0.0.1",
                f"--secure-port={self.ports['kube-scheduler']}",
                "--leader-elect=false",
                *self._qps_flags(),
            ],
        )

    def _start_kwok(self, binary: Path) -> None:
        kubeconfig = self._component_kubeconfig(KWOK)
        config = self.dir / "kwok.yaml"
        config.write_text(resources.files("kuberay.devenv").joinpath("data/kwok.yaml").read_text())
        self._spawn(
            "kwok",
            [
                str(binary),
                f"--kubeconfig={kubeconfig}",
                f"--config={config}",
                "--manage-all-nodes=false",
                f"--manage-nodes-with-annotation-selector={KWOK_NODE_ANNOTATION}=fake",
                f"--cidr={KWOK_POD_CIDR}",
                "--node-ip=10.63.0.1",
                "--node-lease-duration-seconds=40",
                f"--server-address=127.0.0.1:{self.ports['kwok']}",
            ],
        )

    # ------------------------------------------------------------------ readiness
    def _wait_healthy(
        self, name: str, url: str, context: Any = None, timeout: float = 60.0
    ) -> None:
        deadline = time.monotonic() + timeout
        last = ""
        while time.monotonic() < deadline:
            proc = self.procs.get(name)
            if proc is not None and proc.poll() is not None:
                raise PlaneError(
                    f"{name} exited with code {proc.returncode} while starting; "
                    f"log {self.logs / (name + '.log')}:\n{self.log_tail(name)}"
                )
            try:
                body = request("GET", url, context=context, timeout=3)
                if name != "etcd" or (isinstance(body, dict) and body.get("health") == "true"):
                    return
                last = str(body)
            except (OSError, HTTPError) as exc:
                last = str(exc)
            time.sleep(0.1)
        raise PlaneError(
            f"{name} did not become healthy at {url} within {timeout:.0f}s (last: {last}); "
            f"log tail:\n{self.log_tail(name)}"
        )

    def log_tail(self, name: str, lines: int = 25) -> str:
        path = self.logs / f"{name}.log"
        if not path.exists():
            return "(no log)"
        return "\n".join(path.read_text(errors="replace").splitlines()[-lines:])

    # ------------------------------------------------------------------ API helpers
    def api(self, method: str, path: str, body: Any = None, **kw: Any) -> Any:
        return request(method, self.server + path, body, context=self.admin_context(), **kw)

    def create_nodes(self, count: int, prefix: str = "kwok-node-") -> list[str]:
        cfg = self.config
        capacity = {"cpu": cfg.node_cpu, "memory": cfg.node_memory, "pods": str(cfg.node_max_pods)}
        if cfg.node_gpus:
            capacity["nvidia.com/gpu"] = str(cfg.node_gpus)
        names = []
        for i in range(count):
            name = f"{prefix}{i}"
            node = {
                "apiVersion": "v1",
                "kind": "Node",
                "metadata": {
                    "name": name,
                    "annotations": {KWOK_NODE_ANNOTATION: "fake"},
                    "labels": {
                        "kubernetes.io/hostname": name,
                        "kubernetes.io/os": "linux",
                        "kubernetes.io/arch": "amd64",
                        "type": "kwok",
                    },
                },
                "status": {"capacity": capacity, "allocatable": capacity},
            }
            try:
                self.api("POST", "/api/v1/nodes", node)
            except HTTPError as exc:
                if exc.status != 409:
                    raise
            names.append(name)
        return names

    def wait_nodes_ready(self, count: int, timeout: float = 60.0, component: str = "kwok") -> None:
        deadline = time.monotonic() + timeout
        ready = 0
        while time.monotonic() < deadline:
            proc = self.procs.get(component)
            if proc is not None and proc.poll() is not None:
                break
            nodes = self.api("GET", "/api/v1/nodes")["items"]
            ready = sum(1 for n in nodes if node_schedulable(n))
            if ready >= count:
                return
            time.sleep(0.2)
        raise PlaneError(
            f"only {ready}/{count} nodes became Ready in {timeout:.0f}s; {component} log:\n"
            + self.log_tail(component)
        )

    def etcd_revision(self) -> int:
        body = request("POST", f"{self.etcd_url}/v3/kv/range", {"key": "AA=="})
        return int(body["header"]["revision"])

    def compact_etcd(self, revision: int | None = None) -> int:
        """Compacts etcd history up to ``revision`` (default: now); older watches get 410 Gone."""
        rev = revision if revision is not None else self.etcd_revision()
        request(
            "POST", f"{self.etcd_url}/v3/kv/compaction", {"revision": str(rev), "physical": True}
        )
        return rev

    def restart_component(self, name: str) -> None:
        """Stops and starts one component on the same port (tests of watch resumption)."""
        proc = self.procs.pop(name)
        _terminate(proc, 10.0)
        argv = [str(a) for a in proc.args]  # type: ignore[union-attr]
        self._spawn(name, argv)
        if name == "kube-apiserver":
            self._wait_healthy(name, f"{self.server}/readyz", self.admin_context(), 90)
        elif name == "etcd":
            self._wait_healthy(name, f"{self.etcd_url}/health")
        self._write_state()

    def rss_kib(self) -> dict[str, int]:
        """Resident memory of each component, from /proc."""
        out: dict[str, int] = {}
        for name, proc in self.procs.items():
            with contextlib.suppress(OSError):
                for line in Path(f"/proc/{proc.pid}/status").read_text().splitlines():
                    if line.startswith("VmRSS:"):
                        out[name] = int(line.split()[1])
        return out

    def cpu_seconds(self) -> dict[str, float]:
        """User+system CPU time each component has used so far, from /proc."""
        tick = os.sysconf("SC_CLK_TCK")
        out: dict[str, float] = {}
        for name, proc in self.procs.items():
            with contextlib.suppress(OSError):
                fields = Path(f"/proc/{proc.pid}/stat").read_text().rsplit(")", 1)[1].split()
                out[name] = (int(fields[11]) + int(fields[12])) / tick
        return out

    # ------------------------------------------------------------------ kubeconfigs and state
    def _kubeconfig_text(self, ident: Identity) -> str:
        doc = {
            "apiVersion": "v1",
            "kind": "Config",
            "clusters": [
                {
                    "name": "kuberay-local",
                    "cluster": {
                        "server": self.server,
                        "certificate-authority": str(self.pki.ca_cert),
                    },
                }
            ],
            "users": [
                {
                    "name": ident.common_name,
                    "user": {
                        "client-certificate": str(self.pki.client_cert(ident)),
                        "client-key": str(self.pki.client_key(ident)),
                    },
                }
            ],
            "contexts": [
                {
                    "name": "kuberay-local",
                    "context": {"cluster": "kuberay-local", "user": ident.common_name},
                }
            ],
            "current-context": "kuberay-local",
        }
        return json.dumps(doc, indent=2)

    def _component_kubeconfig(self, ident: Identity) -> Path:
        path = self.dir / f"{ident.stem}.kubeconfig"
        path.write_text(self._kubeconfig_text(ident))
        return path

    def _write_kubeconfigs(self) -> None:
        self.kubeconfig.write_text(self._kubeconfig_text(ADMIN))
        self.kubeconfig.chmod(0o600)

    def state(self) -> dict[str, Any]:
        return {
            "pid": os.getpid(),
            "server": self.server,
            "kubeconfig": str(self.kubeconfig),
            "logs": str(self.logs),
            "ready_seconds": round(self.ready_seconds, 2),
            **self.extra_state,
            "config": {
                k: (str(v) if isinstance(v, Path) else v)
                for k, v in asdict(self.config).items()
                if k != "log"
            },
            "components": [
                asdict(
                    ComponentState(
                        name=n,
                        pid=p.pid,
                        port=self.ports.get(n, 0),
                        log=str(self.logs / f"{n}.log"),
                    )
                )
                for n, p in self.procs.items()
            ],
        }

    def write_state(self) -> None:
        """Rewrites ``state.json`` (e.g. after ``extra_state`` changed)."""
        self._write_state()

    def _write_state(self) -> None:
        tmp = self.dir / "state.json.tmp"
        tmp.write_text(json.dumps(self.state(), indent=2))
        os.replace(tmp, self.dir / "state.json")


def dns_query(name: str, qid: int = 0x4B52) -> bytes:
    """A minimal A query (for readiness checks of the process runtime's DNS)."""
    return struct.pack("!HHHHHH", qid, 0x0100, 1, 0, 0, 0) + encode_name(name) + b"\0\x01\0\x01"


def node_schedulable(node: dict[str, Any]) -> bool:
    """Ready, and the not-ready taint that admission adds to new nodes has been lifted."""
    ready = any(
        c["type"] == "Ready" and c["status"] == "True"
        for c in node.get("status", {}).get("conditions", [])
    )
    taints = node.get("spec", {}).get("taints") or []
    return ready and not any(t["key"].startswith("node.kubernetes.io/") for t in taints)


def _terminate(proc: subprocess.Popen[bytes], timeout: float) -> None:
    if proc.poll() is not None:
        return
    with contextlib.suppress(ProcessLookupError):
        proc.send_signal(signal.SIGTERM)
    try:
        proc.wait(timeout)
    except subprocess.TimeoutExpired:
        with contextlib.suppress(ProcessLookupError):
            proc.kill()
        proc.wait()


@contextlib.contextmanager
def running_plane(config: PlaneConfig) -> Iterator[Plane]:
    plane = Plane(config)
    plane.start()
    try:
        yield plane
    finally:
        plane.stop()
