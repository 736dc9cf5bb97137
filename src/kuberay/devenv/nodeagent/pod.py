"""One pod on the process runtime, from sandbox to deletion: what kubelet's pod worker does.

Lifecycle: sandbox (network, UTS, IPC and mount namespaces, address on the bridge) -> volumes ->
init containers in order (a failed one is retried unless restartPolicy is Never; sidecars, init
containers with ``restartPolicy: Always``, keep running and only need to have started) -> all
containers, each with its probes and restart loop -> (terminal phase: sandbox torn down, status
kept) -> deletion.

Invariants and failure modes:
- Status is written only by this worker, as a merge patch of ``status`` computed from its own
  state, coalesced and skipped when unchanged; a write that fails is retried, a 404 ends the
  worker.
- A deletionTimestamp stops everything else: preStop hooks, SIGTERM to every container, SIGKILL
  when the grace period (``deletionGracePeriodSeconds``) is over (then a wait until every process
  of the container is gone, so its connections end while it has a network), sandbox teardown,
  then DELETE with grace 0 and a uid precondition (never the pod's same-named successor).
- A configuration problem (missing Secret/ConfigMap, no command for an image, unsupported
  volume) leaves the container Waiting with CreateContainerConfigError and is retried every few
  seconds, as kubelet does; an executable that does not exist ends the container with exit code
  128 and reason StartError.
- Restarts back off exponentially from ``backoff_base`` to ``backoff_cap`` seconds (kubelet: 10 s
  to 5 min; kept small here for tests); the waiting reason meanwhile is CrashLoopBackOff.
"""

from __future__ import annotations

import asyncio
import base64
import contextlib
import datetime as dt
import json
import logging
import os
import shutil
import signal
import subprocess
import sys
import time
from collections.abc import Awaitable, Callable, Iterable
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from kuberay.devenv.nodeagent import containerlog, probes, spec, storage
from kuberay.devenv.nodeagent.network import NetworkError
from kuberay.runtime.client import CONFIGMAPS, PODS, SECRETS
from kuberay.runtime.errors import ApiError, NotFound

if TYPE_CHECKING:
    from kuberay.devenv.nodeagent.agent import Agent

log = logging.getLogger("kuberay.devenv.pod")

LAUNCHER = str(Path(__file__).with_name("launcher.py"))
SERVICEACCOUNTS_TOKEN = "/api/v1/namespaces/{ns}/serviceaccounts/{sa}/token"
# How often Secret and ConfigMap volumes are re-read (kubelet: its sync period, about 1 min).
VOLUME_SYNC_SECONDS = 5.0
# How long a SIGKILLed container's processes get to finish dying (freeing memory, closing
# sockets) before its launcher is killed regardless.
KILL_WAIT_SECONDS = 10.0


def kept_paths(image_env: str, agent_env: str, agent_sys_path: Iterable[str]) -> list[str]:
    """Host directories a container must still see through its private ``/tmp``: the image's
    Python environment, the agent's own (a mapped image may be a venv layered over it through
    a ``.pth``) and what the agent imports from (an editable install's source tree, which the
    operator image runs). Only those under ``/tmp`` need it (a checkout there, as in CI); one
    inside another is carried along with it."""
    wanted = sorted(
        {
            os.path.normpath(p)
            for p in (image_env, agent_env, *agent_sys_path)
            if p and os.path.normpath(p).startswith("/tmp/")
        }
    )
    out: list[str] = []
    for path in wanted:
        if not any(path.startswith(k + "/") for k in out):
            out.append(path)
    return out


def now_rfc3339() -> str:
    return dt.datetime.now(dt.UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


class StartError(RuntimeError):
    """The launcher could not start the container's process (bad executable, mount failure)."""


def _open_log(path: Path) -> int:
    return os.open(path, os.O_WRONLY | os.O_APPEND | os.O_CREAT | os.O_CLOEXEC, 0o644)


async def _status_lines(fd: int, timeout: float) -> list[str]:
    """Reads the launcher's status pipe until EOF (all writers closed) or ``timeout``."""
    loop = asyncio.get_running_loop()
    reader = asyncio.StreamReader()
    transport, _ = await loop.connect_read_pipe(
        lambda: asyncio.StreamReaderProtocol(reader), os.fdopen(fd, "rb", buffering=0)
    )
    lines: list[str] = []
    try:
        async with asyncio.timeout(timeout):
            while line := await reader.readline():
                lines.append(line.decode(errors="replace").strip())
    finally:
        transport.close()
    return lines


async def _spawn_launcher(
    python: str,
    mode: str,
    spec_path: Path,
    payload: dict[str, Any],
    stdout: int,
    timeout: float = 30.0,
    stdin: int = asyncio.subprocess.DEVNULL,
    until: str = "",
) -> tuple[asyncio.subprocess.Process, list[str]]:
    read_fd, write_fd = os.pipe()
    payload = dict(payload, status_fd=write_fd, parent_pid=os.getpid())
    spec_path.write_text(json.dumps(payload))
    spec_path.chmod(0o600)
    try:
        proc = await asyncio.create_subprocess_exec(
            python,
            "-I",
            "-S",
            LAUNCHER,
            mode,
            str(spec_path),
            stdin=stdin,
            stdout=stdout,
            stderr=stdout,
            pass_fds=(write_fd,),
            start_new_session=True,
        )
    finally:
        os.close(write_fd)
    try:
        lines = await _status_lines(read_fd, timeout)
    except TimeoutError:
        with contextlib.suppress(ProcessLookupError):
            proc.kill()
        await proc.wait()
        raise StartError(f"{mode} launcher did not report within {timeout:g}s") from None
    if until and until not in lines:
        rc = await proc.wait()
        detail = "; ".join(lines) or f"exit {rc}"
        raise StartError(f"{mode} launcher failed: {detail}")
    return proc, lines


@dataclass
class Container:
    """One container's runtime state; ``status()`` renders it the way the API wants it."""

    spec: dict[str, Any]
    init: bool
    sidecar: bool = False
    restart_count: int = 0
    state: dict[str, Any] = field(
        default_factory=lambda: {"waiting": {"reason": "PodInitializing"}}
    )
    last_state: dict[str, Any] = field(default_factory=dict)
    ready: bool = False
    started: bool = False
    proc: asyncio.subprocess.Process | None = None
    init_pid: int = 0
    env: dict[str, str] = field(default_factory=dict)
    working_dir: str = "/"
    finished: bool = False  # terminated and will not be restarted
    started_event: asyncio.Event = field(default_factory=asyncio.Event)
    exit_code: int | None = None
    kill_reason: str = ""
    container_id: str = ""
    image_id: str = ""
    output: asyncio.Task[None] | None = None  # files the current instance's log

    @property
    def name(self) -> str:
        return str(self.spec["name"])

    @property
    def running(self) -> bool:
        return "running" in self.state

    def status(self) -> dict[str, Any]:
        out: dict[str, Any] = {
            "name": self.name,
            "image": self.spec.get("image", ""),
            "imageID": self.image_id,
            "ready": self.ready,
            "restartCount": self.restart_count,
            "started": self.started,
            "state": self.state,
        }
        if self.last_state:
            out["lastState"] = self.last_state
        if self.container_id:
            out["containerID"] = self.container_id
        return out


class PodWorker:
    """Runs one pod (by uid) until it is deleted; fed with the latest object by the agent."""

    def __init__(self, agent: Agent, pod: dict[str, Any]) -> None:
        self.agent = agent
        self.pod = pod
        meta = pod["metadata"]
        self.uid: str = meta["uid"]
        self.namespace: str = meta["namespace"]
        self.name: str = meta["name"]
        self.key = f"{self.namespace}/{self.name}"
        self.dir = agent.network.data_dir / "pods" / self.uid
        self.log_dir = agent.pod_log_dir(self.namespace, self.name, self.uid)
        pod_spec = pod["spec"]
        self.restart_policy: str = pod_spec.get("restartPolicy") or "Always"
        self.init_containers = [
            Container(
                c,
                init=True,
                sidecar=c.get("restartPolicy") == "Always",
                state={"waiting": {"reason": "PodInitializing"}},
            )
            for c in pod_spec.get("initContainers") or []
        ]
        self.containers = [
            Container(c, init=False, state={"waiting": {"reason": "ContainerCreating"}})
            for c in pod_spec.get("containers") or []
        ]
        self.pod_ip = ""
        self.sandbox: asyncio.subprocess.Process | None = None
        self.sandbox_ready = False
        self.start_time = ""
        self.initialized = False
        self.phase = "Pending"
        self.reason = ""
        self.message = ""
        self.volume_sources: dict[str, str] = {}
        self.tmpfs: list[list[Any]] = []
        self.changed = asyncio.Event()
        self.dirty = asyncio.Event()
        self.deleted = False
        self._last_status: dict[str, Any] | None = None
        self._tasks: set[asyncio.Task[Any]] = set()
        self._main: asyncio.Task[None] | None = None

    # ------------------------------------------------------------------ feeding
    def update(self, pod: dict[str, Any]) -> None:
        self.pod = pod
        self.changed.set()

    def gone(self) -> None:
        """The pod disappeared from the API (force-deleted): stop without writing anything."""
        self.deleted = True
        self.changed.set()

    @property
    def deleting(self) -> bool:
        return self.deleted or bool(self.pod["metadata"].get("deletionTimestamp"))

    def _spawn(self, coro: Awaitable[Any], name: str) -> asyncio.Task[Any]:
        task = asyncio.ensure_future(coro)
        task.set_name(f"{self.key}:{name}")
        self._tasks.add(task)
        task.add_done_callback(self._tasks.discard)
        return task

    def mark(self) -> None:
        self.dirty.set()

    # ------------------------------------------------------------------ main
    async def run(self) -> None:
        writer = asyncio.create_task(self._status_writer(), name=f"{self.key}:status")
        try:
            if self.deleting:
                pass  # deleted before it ever ran here: only the API object is left to remove
            elif self.pod.get("status", {}).get("phase") in ("Succeeded", "Failed"):
                self.phase = self.pod["status"]["phase"]
                self._last_status = self.pod.get("status")
            else:
                self._main = asyncio.create_task(self._lifecycle(), name=f"{self.key}:life")
            while not self.deleting:
                self.changed.clear()
                await self.changed.wait()
            await self._terminate()
        except Exception:
            log.exception("pod %s: worker failed", self.key)
            await self._kill_all(0)
        finally:
            if self._main is not None:
                self._main.cancel()
                with contextlib.suppress(asyncio.CancelledError, Exception):
                    await self._main
            for task in list(self._tasks):
                task.cancel()
            await self._teardown()
            writer.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await writer
        if not self.deleted:
            await self._delete_from_api()

    async def _sandbox_with_retries(self) -> None:
        delay = 1.0
        while True:
            try:
                await self._setup_sandbox()
                return
            except (StartError, NetworkError, OSError, ValueError) as exc:
                log.warning("pod %s: sandbox failed: %s", self.key, exc)
                self.agent.event(self.pod, "Warning", "FailedCreatePodSandBox", str(exc))
                self.message = str(exc)
                self.mark()
                await self._teardown()
                self.tmpfs.clear()
                await asyncio.sleep(delay)
                delay = min(delay * 2, self.agent.backoff_cap)

    async def _lifecycle(self) -> None:
        try:
            await self._sandbox_with_retries()
            await self._prepare_volumes()
            self._spawn(self._refresh_volumes(), "volume-refresh")
            ok = await self._run_init_containers()
            if not ok:
                self._finish_pod("Failed")
                return
            self.initialized = True
            self.mark()
            runners = [
                self._spawn(self._run_container(c), f"container-{c.name}") for c in self.containers
            ]
            await asyncio.gather(*runners)
            if self.restart_policy != "Always":
                failed = any(c.exit_code not in (0, None) for c in self.containers)
                self._finish_pod("Failed" if failed else "Succeeded")
        except asyncio.CancelledError:
            raise
        except Exception as exc:
            log.exception("pod %s: lifecycle failed", self.key)
            self.agent.event(self.pod, "Warning", "FailedCreatePodSandBox", str(exc))
            self.message = str(exc)
            self.mark()

    def _finish_pod(self, phase: str) -> None:
        self.phase = phase
        self.mark()
        for c in self.init_containers:
            if c.sidecar and c.proc is not None:
                self._spawn(self._stop_container(c, 2, "sidecar of a finished pod"), "sidecar")
        self._spawn(self._teardown_when_sidecars_stop(), "teardown")

    async def _teardown_when_sidecars_stop(self) -> None:
        for c in self.init_containers:
            if c.proc is not None:
                await c.proc.wait()
        await self._teardown()

    # ------------------------------------------------------------------ sandbox
    def _hostname(self) -> str:
        return str(self.pod["spec"].get("hostname") or self.name)[:63]

    def _write_etc(self, etc: Path) -> list[list[Any]]:
        pod_spec = self.pod["spec"]
        domain = self.agent.cluster_domain
        host = self._hostname()
        names = host
        if pod_spec.get("subdomain"):
            names = f"{host}.{pod_spec['subdomain']}.{self.namespace}.svc.{domain} {host}"
        etc.mkdir(parents=True, exist_ok=True)
        (etc / "hosts").write_text(
            "# Kubernetes-managed hosts file (process runtime).\n"
            "127.0.0.1\tlocalhost\n::1\tlocalhost ip6-localhost ip6-loopback\n"
            f"{self.pod_ip}\t{names}\n"
        )
        (etc / "hostname").write_text(host + "\n")
        search = f"{self.namespace}.svc.{domain} svc.{domain} {domain}"
        (etc / "resolv.conf").write_text(
            f"search {search}\nnameserver {self.agent.network.gateway}\noptions ndots:5\n"
        )
        # Debian's /etc/profile resets PATH for login shells (`bash -l`), which would lose the
        # image's Python environment; images based on Ubuntu keep it. Restore it afterwards.
        original = ""
        with contextlib.suppress(OSError):
            original = Path("/etc/profile").read_text()
        (etc / "profile").write_text(
            '__kuberay_path="$PATH"\n'
            + original
            + '\nPATH="$__kuberay_path"; export PATH; unset __kuberay_path\n'
        )
        binds = [[str(etc / n), f"/etc/{n}", False] for n in ("hosts", "hostname", "resolv.conf")]
        binds.append([str(etc / "profile"), "/etc/profile", True])
        return binds

    async def _setup_sandbox(self) -> None:
        self.dir.mkdir(parents=True, exist_ok=True)
        self.dir.chmod(0o700)
        self.log_dir.mkdir(parents=True, exist_ok=True)
        self.pod_ip = self.agent.ipam.allocate(self.uid)
        self.start_time = now_rfc3339()
        self.mark()
        self._plan_volumes()
        binds = self._write_etc(self.dir / "etc")
        shm = self.dir / "shm"
        tmpfs = [[str(shm), None], *self.tmpfs]
        binds.append([str(shm), "/dev/shm", False])
        log_fd = _open_log(self.log_dir / "sandbox.log")
        try:
            self.sandbox, _ = await _spawn_launcher(
                self.agent.python,
                "sandbox",
                self.dir / "sandbox.json",
                {"hostname": self._hostname(), "tmpfs": tmpfs, "binds": binds},
                log_fd,
                stdin=asyncio.subprocess.PIPE,
                until="ready",
            )
        finally:
            os.close(log_fd)
        await self.agent.attach_network(self.sandbox.pid, self.pod_ip)
        self.sandbox_ready = True
        self.mark()

    async def _teardown(self) -> None:
        """Kills the sandbox (namespaces vanish with it) and releases the address."""
        await self._kill_all(0)
        sandbox, self.sandbox = self.sandbox, None
        if sandbox is not None:
            if sandbox.stdin is not None:
                sandbox.stdin.close()
            with contextlib.suppress(ProcessLookupError):
                sandbox.kill()
            await sandbox.wait()
        self.sandbox_ready = False
        if self.pod_ip:
            await self.agent.detach_network(self.pod_ip)
            self.agent.ipam.release(self.uid)
        if self.dir.exists():
            await asyncio.to_thread(shutil.rmtree, self.dir, True)

    # ------------------------------------------------------------------ volumes
    def _plan_volumes(self) -> None:
        for vol in self.pod["spec"].get("volumes") or []:
            name = vol["name"]
            if "hostPath" in vol:
                self.volume_sources[name] = vol["hostPath"]["path"]
                continue
            if "persistentVolumeClaim" in vol:
                claim = vol["persistentVolumeClaim"]["claimName"]
                path = storage.claim_dir(self.agent.network.data_dir, self.namespace, claim)
                self.volume_sources[name] = str(path)
                continue
            path = self.dir / "volumes" / name
            self.volume_sources[name] = str(path)
            empty = vol.get("emptyDir")
            if empty is not None and empty.get("medium") == "Memory":
                limit = empty.get("sizeLimit")
                size = str(int(spec.parse_quantity(limit))) if limit else None
                self.tmpfs.append([str(path), size])

    async def _prepare_volumes(self) -> None:
        while True:
            try:
                for vol in self.pod["spec"].get("volumes") or []:
                    await self._fill_volume(vol)
                return
            except (spec.ConfigError, ApiError) as exc:
                self.message = str(exc)
                self.agent.event(self.pod, "Warning", "FailedMount", str(exc))
                for c in self.init_containers + self.containers:
                    reason = "PodInitializing" if c.init else "ContainerCreating"
                    c.state = {"waiting": {"reason": reason, "message": str(exc)}}
                self.mark()
                await asyncio.sleep(2)

    async def _refresh_volumes(self) -> None:
        """Rewrites Secret and ConfigMap volumes whose source changed, as kubelet's periodic
        volume sync does (there within about a minute, here every ``VOLUME_SYNC_SECONDS``):
        a re-issued certificate reaches running pods. A source that is gone or unreadable
        keeps the files as they are; subPath mounts see no update (as in kubelet)."""
        while True:
            await asyncio.sleep(VOLUME_SYNC_SECONDS)
            for vol in self.pod["spec"].get("volumes") or []:
                if "secret" in vol or "configMap" in vol:
                    with contextlib.suppress(spec.ConfigError, ApiError):
                        await self._fill_volume(vol)

    async def _fill_volume(self, vol: dict[str, Any]) -> None:
        name = vol["name"]
        path = Path(self.volume_sources[name])
        if "hostPath" in vol:
            if vol["hostPath"].get("type") in ("DirectoryOrCreate", None, ""):
                path.mkdir(parents=True, exist_ok=True)
            return
        path.mkdir(parents=True, exist_ok=True)
        files: dict[str, tuple[bytes, int]] = {}
        if "secret" in vol:
            src = vol["secret"]
            await self._keyed(files, SECRETS, src.get("secretName", ""), src, True)
        elif "configMap" in vol:
            src = vol["configMap"]
            await self._keyed(files, CONFIGMAPS, src.get("name", ""), src, False)
        elif "downwardAPI" in vol:
            self._downward(files, vol["downwardAPI"].get("items") or [], vol["downwardAPI"])
        elif "projected" in vol:
            proj = vol["projected"]
            for source in proj.get("sources") or []:
                if "serviceAccountToken" in source:
                    token = await self._token(source["serviceAccountToken"])
                    mode = int(proj.get("defaultMode", 0o644))
                    files[source["serviceAccountToken"]["path"]] = (token.encode(), mode)
                elif "secret" in source:
                    src = dict(source["secret"], defaultMode=proj.get("defaultMode"))
                    await self._keyed(files, SECRETS, src.get("name", ""), src, True)
                elif "configMap" in source:
                    src = dict(source["configMap"], defaultMode=proj.get("defaultMode"))
                    await self._keyed(files, CONFIGMAPS, src.get("name", ""), src, False)
                elif "downwardAPI" in source:
                    self._downward(files, source["downwardAPI"].get("items") or [], proj)
        elif "emptyDir" in vol or "persistentVolumeClaim" in vol:
            return
        else:
            kinds = sorted(k for k in vol if k != "name")
            raise spec.ConfigError(f"volume {name!r}: type {kinds} not supported by the runtime")
        for rel, (data, mode) in files.items():
            target = path / rel
            with contextlib.suppress(OSError):
                if target.read_bytes() == data and (target.stat().st_mode & 0o7777) == mode:
                    continue  # unchanged: no rewrite on a periodic refresh
            target.parent.mkdir(parents=True, exist_ok=True)
            tmp = target.with_name(target.name + ".tmp")
            tmp.write_bytes(data)
            tmp.chmod(mode)
            os.replace(tmp, target)

    async def _keyed(
        self,
        files: dict[str, tuple[bytes, int]],
        res: Any,
        obj_name: str,
        src: dict[str, Any],
        secret: bool,
    ) -> None:
        try:
            obj = await self.agent.client.get(res, obj_name, self.namespace)
        except NotFound:
            if src.get("optional"):
                return
            kind = "secret" if secret else "configmap"
            raise spec.ConfigError(f'{kind} "{obj_name}" not found') from None
        data: dict[str, bytes] = {}
        for key, value in (obj.get("data") or {}).items():
            data[key] = base64.b64decode(value) if secret else str(value).encode()
        for key, value in (obj.get("binaryData") or {}).items():
            data[key] = base64.b64decode(value)
        mode = src.get("defaultMode")
        default_mode = int(mode) if mode is not None else 0o644
        items = src.get("items")
        if not items:
            for key, value in data.items():
                files[key] = (value, default_mode)
            return
        for item in items:
            if item["key"] not in data:
                if src.get("optional"):
                    continue
                raise spec.ConfigError(f"key {item['key']!r} not found in {obj_name!r}")
            files[item["path"]] = (data[item["key"]], int(item.get("mode", default_mode)))

    def _downward(
        self, files: dict[str, tuple[bytes, int]], items: list[dict[str, Any]], src: dict[str, Any]
    ) -> None:
        mode = int(src.get("defaultMode") or 0o644)
        facts = self.agent.facts(self.pod_ip)
        for item in items:
            if "fieldRef" in item:
                value = spec.field_ref(self.pod, item["fieldRef"]["fieldPath"], facts)
            else:
                ref = item["resourceFieldRef"]
                container = next(
                    (
                        c
                        for c in self.pod["spec"]["containers"]
                        if c["name"] == ref.get("containerName")
                    ),
                    self.pod["spec"]["containers"][0],
                )
                value = spec.resource_ref(self.pod, container, ref, facts)
            files[item["path"]] = (value.encode(), int(item.get("mode", mode)))

    async def _token(self, src: dict[str, Any]) -> str:
        sa = self.pod["spec"].get("serviceAccountName") or "default"
        body: dict[str, Any] = {
            "apiVersion": "authentication.k8s.io/v1",
            "kind": "TokenRequest",
            "spec": {
                "audiences": [src["audience"]] if src.get("audience") else [],
                "expirationSeconds": int(src.get("expirationSeconds") or 3607),
                "boundObjectRef": {
                    "apiVersion": "v1",
                    "kind": "Pod",
                    "name": self.name,
                    "uid": self.uid,
                },
            },
        }
        path = SERVICEACCOUNTS_TOKEN.format(ns=self.namespace, sa=sa)
        out = await self.agent.client.request("POST", path, body)
        return str(out["status"]["token"])

    # ------------------------------------------------------------------ containers
    async def _run_init_containers(self) -> bool:
        for c in self.init_containers:
            if self.deleting:
                return False
            if c.sidecar:
                self._spawn(self._run_container(c), f"sidecar-{c.name}")
                await c.started_event.wait()
                continue
            await self._run_container(c)
            if c.exit_code != 0:
                return False
        return True

    async def _configure(self, c: Container) -> list[str]:
        image = self.agent.images.resolve(str(c.spec.get("image", "")))
        names = _referenced(c.spec)
        secrets = await self._fetch_all(SECRETS, names["secrets"])
        configmaps = await self._fetch_all(CONFIGMAPS, names["configmaps"])
        c.env = spec.container_env(
            self.pod,
            c.spec,
            image,
            self.agent.facts(self.pod_ip),
            lambda _ns, n: secrets.get(n),
            lambda _ns, n: configmaps.get(n),
            self._hostname(),
        )
        c.working_dir = c.spec.get("workingDir") or image.working_dir
        c.image_id = f"process://{image.python_env}"
        return spec.container_argv(c.spec, image, c.env)

    async def _fetch_all(self, res: Any, names: set[str]) -> dict[str, dict[str, Any]]:
        out = {}
        for name in names:
            with contextlib.suppress(NotFound):
                out[name] = await self.agent.client.get(res, name, self.namespace)
        return out

    def _mounts(self, c: Container) -> list[list[Any]]:
        binds = []
        for m in c.spec.get("volumeMounts") or []:
            source = self.volume_sources.get(m["name"])
            if source is None:
                raise spec.ConfigError(f"volumeMount {m['name']!r}: no such volume")
            sub = m.get("subPath") or ""
            if m.get("subPathExpr"):
                sub = spec.expand(m["subPathExpr"], c.env)
            if sub:
                source = os.path.join(source, sub)
                if not os.path.exists(source):
                    os.makedirs(source, exist_ok=True)
            binds.append([source, m["mountPath"], bool(m.get("readOnly"))])
        return binds

    async def _start(self, c: Container, argv: list[str]) -> None:
        assert self.sandbox is not None
        cdir = self.dir / "containers"
        cdir.mkdir(parents=True, exist_ok=True)
        log_path = self.log_dir / f"{c.name}.log"
        if c.restart_count and log_path.exists():
            containerlog.rotate(log_path, self.log_dir / f"{c.name}.{c.restart_count - 1}.log")
        old_tmp = cdir / f"{c.name}-tmp-{c.restart_count - 1}"
        if old_tmp.exists():
            await asyncio.to_thread(shutil.rmtree, old_tmp, True)
        # Ray keeps per-user state in ~/.ray (auth_token above all). HOME is a host directory
        # shared by every pod, so each container start gets its own empty ~/.ray, as a fresh
        # container file system would: one pod's token must not reach another pod's GCS client.
        ray_state = cdir / f"{c.name}-ray-{c.restart_count}"
        old_state = cdir / f"{c.name}-ray-{c.restart_count - 1}"
        if old_state.exists():
            await asyncio.to_thread(shutil.rmtree, old_state, True)
        ray_state.mkdir(parents=True, exist_ok=True)
        home = c.env.get("HOME") or "/root"
        payload = {
            "sandbox_pid": self.sandbox.pid,
            "tmp": str(cdir / f"{c.name}-tmp-{c.restart_count}"),
            "binds": [[str(ray_state), os.path.join(home, ".ray"), False], *self._mounts(c)],
            # The container's environment stays visible through its private /tmp (a checkout
            # and its .venv under /tmp, as in CI, would otherwise vanish from PATH), and so does
            # the agent's own environment: a mapped image may be a venv layered over it (a .pth
            # naming its site-packages), as the upstream e2e harness's Ray image is.
            "keep": kept_paths(
                c.image_id.removeprefix("process://"),
                str(Path(self.agent.python).parent.parent),
                sys.path,
            ),
            "argv": argv,
            "env": c.env,
            "cwd": c.working_dir,
        }
        output = containerlog.LogPipe(log_path)
        try:
            proc, lines = await _spawn_launcher(
                self.agent.python,
                "container",
                cdir / f"{c.name}.json",
                payload,
                output.write_fd,
                # Kept open for `kubectl attach -i` (spec.containers[].stdin).
                stdin=subprocess.PIPE if c.spec.get("stdin") else subprocess.DEVNULL,
            )
        except BaseException:
            output.abort()
            raise
        output.close_write_end()
        c.output = self._spawn(output.run(), f"log-{c.name}")
        c.proc = proc
        for line in lines:
            if line.startswith("created "):
                self.agent.record_mountpoint(line[len("created ") :])
            elif line.startswith("pid "):
                c.init_pid = int(line.split()[1])
            elif line.startswith("execerror "):
                await proc.wait()
                raise StartError(line[len("execerror ") :])
        if "started" not in lines:
            rc = await proc.wait()
            raise StartError(f"container did not start (launcher exit {rc}); see {log_path}")
        c.container_id = f"process://{self.uid[:8]}-{c.name}-{c.restart_count}"

    async def _run_container(self, c: Container) -> None:
        backoff = self.agent.backoff_base
        while not self.deleting:
            try:
                argv = await self._configure(c)
                c.state = {"waiting": {"reason": "ContainerCreating"}}
                started_at = now_rfc3339()
                began = time.monotonic()
                await self._start(c, argv)
            except spec.ConfigError as exc:
                c.state = {"waiting": {"reason": "CreateContainerConfigError", "message": str(exc)}}
                self.agent.event(self.pod, "Warning", "Failed", f"Error: {exc}")
                self.mark()
                await asyncio.sleep(3)
                continue
            except StartError as exc:
                c.state = {
                    "terminated": {
                        "exitCode": 128,
                        "reason": "StartError",
                        "message": str(exc),
                        "startedAt": now_rfc3339(),
                        "finishedAt": now_rfc3339(),
                    }
                }
                c.exit_code = 128
                self.agent.event(self.pod, "Warning", "Failed", f"Error: {exc}")
                code = 128
                began = time.monotonic()
            else:
                c.state = {"running": {"startedAt": started_at}}
                c.kill_reason = ""
                self.agent.event(self.pod, "Normal", "Started", f"Started container {c.name}")
                self.mark()
                code = await self._supervise(c)
                c.exit_code = code
                reason = "Completed" if code == 0 else "Error"
                term: dict[str, Any] = {
                    "exitCode": code,
                    "reason": reason,
                    "startedAt": started_at,
                    "finishedAt": now_rfc3339(),
                    "containerID": c.container_id,
                }
                if c.kill_reason:
                    term["message"] = c.kill_reason
                c.state = {"terminated": term}
            c.ready = False
            c.started = False
            c.proc = None
            c.init_pid = 0
            if not self._restarts(c, code):
                c.finished = True
                self.mark()
                return
            if time.monotonic() - began > 2 * self.agent.backoff_cap:
                backoff = self.agent.backoff_base
            c.last_state = c.state
            message = f"back-off {backoff:g}s restarting failed container={c.name} pod={self.name}"
            c.state = {"waiting": {"reason": "CrashLoopBackOff", "message": message}}
            self.agent.event(self.pod, "Warning", "BackOff", message)
            self.mark()
            await asyncio.sleep(backoff)
            backoff = min(backoff * 2, self.agent.backoff_cap)
            c.restart_count += 1
            self.mark()

    def _restarts(self, c: Container, code: int) -> bool:
        if self.deleting:
            return False
        if c.sidecar:
            return True
        policy = self.restart_policy
        if c.init:
            return code != 0 and policy != "Never"
        if c.spec.get("restartPolicy") == "Always":
            return True
        return policy == "Always" or (policy == "OnFailure" and code != 0)

    def _target(self, c: Container) -> probes.ProbeTarget:
        ports = {
            p["name"]: int(p["containerPort"]) for p in c.spec.get("ports") or [] if p.get("name")
        }
        return probes.ProbeTarget(self.pod_ip, c.init_pid, c.env, c.working_dir, ports)

    async def _supervise(self, c: Container) -> int:
        """Runs probes while the process lives; returns its exit code (128+signal if killed)."""
        assert c.proc is not None
        proc = c.proc
        prober = self._spawn(self._probe_loop(c), f"probes-{c.name}")
        try:
            rc = await proc.wait()
        finally:
            prober.cancel()
        if c.output is not None:
            # The whole output is on disk before the status says the container ended.
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(asyncio.shield(c.output), 2)
        return rc if rc >= 0 else 128 - rc

    async def _probe_loop(self, c: Container) -> None:
        startup = c.spec.get("startupProbe")
        if startup and not await self._probe_until(c, "Startup", startup, want_success=True):
            await self._stop_container(c, self._grace(startup), "failed startup probe")
            return
        c.started = True
        c.started_event.set()
        readiness = c.spec.get("readinessProbe")
        if not readiness:
            c.ready = True
        self.mark()
        tasks = []
        if readiness:
            tasks.append(self._spawn(self._readiness(c, readiness), f"readiness-{c.name}"))
        liveness = c.spec.get("livenessProbe")
        if liveness:
            tasks.append(self._spawn(self._liveness(c, liveness), f"liveness-{c.name}"))
        try:
            await asyncio.gather(*tasks)
        finally:
            for task in tasks:
                task.cancel()

    def _grace(self, probe: dict[str, Any] | None = None) -> float:
        if probe and probe.get("terminationGracePeriodSeconds") is not None:
            return float(probe["terminationGracePeriodSeconds"])
        return float(self.pod["spec"].get("terminationGracePeriodSeconds", 30))

    async def _probe_once(self, c: Container, kind: str, probe: dict[str, Any]) -> bool:
        timeout = float(probe.get("timeoutSeconds") or 1)
        ok, output = await probes.run_handler(self.agent.http, self._target(c), probe, timeout)
        if not ok:
            self.agent.event(
                self.pod, "Warning", "Unhealthy", f"{kind} probe failed: {output.strip()}"
            )
        return ok

    async def _probe_until(
        self, c: Container, kind: str, probe: dict[str, Any], *, want_success: bool
    ) -> bool:
        """Startup semantics: True on the first success, False after failureThreshold misses."""
        await asyncio.sleep(float(probe.get("initialDelaySeconds") or 0))
        failures = 0
        threshold = int(probe.get("failureThreshold") or 3)
        while True:
            if await self._probe_once(c, kind, probe):
                return True
            failures += 1
            if failures >= threshold:
                return not want_success
            await asyncio.sleep(float(probe.get("periodSeconds") or 10))

    async def _readiness(self, c: Container, probe: dict[str, Any]) -> None:
        await asyncio.sleep(float(probe.get("initialDelaySeconds") or 0))
        successes = failures = 0
        need_ok = int(probe.get("successThreshold") or 1)
        need_fail = int(probe.get("failureThreshold") or 3)
        while True:
            if await self._probe_once(c, "Readiness", probe):
                successes, failures = successes + 1, 0
                if successes >= need_ok and not c.ready:
                    c.ready = True
                    self.mark()
            else:
                successes, failures = 0, failures + 1
                if failures >= need_fail and c.ready:
                    c.ready = False
                    self.mark()
            await asyncio.sleep(float(probe.get("periodSeconds") or 10))

    async def _liveness(self, c: Container, probe: dict[str, Any]) -> None:
        await asyncio.sleep(float(probe.get("initialDelaySeconds") or 0))
        failures = 0
        need_fail = int(probe.get("failureThreshold") or 3)
        while True:
            if await self._probe_once(c, "Liveness", probe):
                failures = 0
            else:
                failures += 1
                if failures >= need_fail:
                    message = f"Container {c.name} failed liveness probe, will be restarted"
                    self.agent.event(self.pod, "Normal", "Killing", message)
                    await self._stop_container(c, self._grace(probe), "failed liveness probe")
                    return
            await asyncio.sleep(float(probe.get("periodSeconds") or 10))

    async def _stop_container(self, c: Container, grace: float, reason: str) -> None:
        """preStop, SIGTERM, then SIGKILL after ``grace`` seconds (all bounded by ``grace``)."""
        proc = c.proc
        if proc is None or proc.returncode is not None:
            return
        c.kill_reason = reason
        init_pid = c.init_pid
        deadline = time.monotonic() + grace
        pre_stop = (c.spec.get("lifecycle") or {}).get("preStop")
        if pre_stop and c.init_pid and grace > 0:
            with contextlib.suppress(Exception):
                await probes.run_handler(self.agent.http, self._target(c), pre_stop, grace)
        with contextlib.suppress(ProcessLookupError):
            proc.send_signal(signal.SIGTERM)
        try:
            async with asyncio.timeout(max(0.0, deadline - time.monotonic())):
                await proc.wait()
        except TimeoutError:
            # The container's init first, then wait for the launcher: init's exit waits for
            # every process of its PID namespace, so the launcher (its parent) ends only once
            # they are all gone and their sockets closed while the pod still has its network.
            # Killing the launcher first let the teardown remove the network under processes
            # still dying, and their peers never saw the connections end.
            if init_pid:
                with contextlib.suppress(ProcessLookupError):
                    os.kill(init_pid, signal.SIGKILL)
                with contextlib.suppress(TimeoutError):
                    async with asyncio.timeout(KILL_WAIT_SECONDS):
                        await proc.wait()
            with contextlib.suppress(ProcessLookupError):
                proc.kill()
            await proc.wait()
        rc = proc.returncode
        if rc is not None:
            c.exit_code = rc if rc >= 0 else 128 - rc

    async def _kill_all(self, grace: float) -> None:
        everything = [c for c in self.containers + self.init_containers if c.proc is not None]
        await asyncio.gather(
            *(self._stop_container(c, grace, "pod is being deleted") for c in everything),
            return_exceptions=True,
        )

    # ------------------------------------------------------------------ deletion
    async def _terminate(self) -> None:
        meta = self.pod["metadata"]
        grace = meta.get("deletionGracePeriodSeconds")
        if grace is None:
            grace = self.pod["spec"].get("terminationGracePeriodSeconds", 30)
        if self._main is not None:
            self._main.cancel()
            with contextlib.suppress(asyncio.CancelledError, Exception):
                await self._main
        running = [c for c in self.containers + self.init_containers if c.proc is not None]
        if running and not self.deleted:
            names = ", ".join(c.name for c in running)
            self.agent.event(self.pod, "Normal", "Killing", f"Stopping container {names}")
        await self._kill_all(0 if self.deleted else float(grace))
        if self.phase not in ("Succeeded", "Failed"):
            for c in self.init_containers + self.containers:
                if "running" in c.state:
                    c.state = {
                        "terminated": {
                            "exitCode": c.exit_code if c.exit_code is not None else 137,
                            "reason": "Error" if c.exit_code else "Completed",
                            "startedAt": c.state["running"].get("startedAt"),
                            "finishedAt": now_rfc3339(),
                        }
                    }
                c.ready = False
            self.mark()

    async def _delete_from_api(self) -> None:
        for _ in range(20):
            try:
                await self.agent.client.delete(
                    PODS, self.name, self.namespace, uid=self.uid, grace_period=0
                )
                return
            except NotFound:
                return
            except ApiError as exc:
                if exc.status == 409:
                    return
                log.warning("pod %s: delete failed: %s", self.key, exc)
                await asyncio.sleep(1)

    # ------------------------------------------------------------------ status
    def status(self) -> dict[str, Any]:
        all_init_done = self.initialized or not self.init_containers
        containers_ready = bool(self.containers) and all(c.ready for c in self.containers)
        phase = self.phase
        if (
            phase == "Pending"
            and self.initialized
            and any(c.running or c.restart_count or c.finished for c in self.containers)
        ):
            phase = "Running"
        now = now_rfc3339()

        def cond(ctype: str, ok: bool, reason: str = "") -> dict[str, Any]:
            out: dict[str, Any] = {"type": ctype, "status": "True" if ok else "False"}
            if not ok and reason:
                out["reason"] = reason
            return out

        terminal = phase in ("Succeeded", "Failed")
        not_ready = "PodCompleted" if terminal else "ContainersNotReady"
        conditions = [
            cond("PodReadyToStartContainers", self.sandbox_ready or terminal),
            cond("Initialized", all_init_done and self.initialized, "ContainersNotInitialized"),
            cond("Ready", containers_ready and not terminal, not_ready),
            cond("ContainersReady", containers_ready and not terminal, not_ready),
            cond("PodScheduled", True),
        ]
        previous = {c["type"]: c for c in (self._last_status or {}).get("conditions") or []}
        for c in conditions:
            before = previous.get(c["type"])
            if before is not None and before.get("status") == c["status"]:
                c["lastTransitionTime"] = before.get("lastTransitionTime", now)
            else:
                c["lastTransitionTime"] = now
            c["lastProbeTime"] = None
        status: dict[str, Any] = {
            "phase": phase,
            "conditions": conditions,
            "hostIP": self.agent.network.gateway,
            "hostIPs": [{"ip": self.agent.network.gateway}],
            "initContainerStatuses": [c.status() for c in self.init_containers] or None,
            "containerStatuses": [c.status() for c in self.containers],
        }
        if self.pod_ip:
            status["podIP"] = self.pod_ip
            status["podIPs"] = [{"ip": self.pod_ip}]
        if self.start_time:
            status["startTime"] = self.start_time
        if self.message and phase == "Pending":
            status["message"] = self.message
        return status

    async def _status_writer(self) -> None:
        while True:
            await self.dirty.wait()
            await asyncio.sleep(0.05)
            self.dirty.clear()
            status = self.status()
            if self._last_status is not None and _same(status, self._last_status):
                continue
            try:
                await self.agent.client.patch(
                    PODS, self.name, {"status": status}, self.namespace, subresource="status"
                )
                self._last_status = status
            except NotFound:
                self.gone()
                return
            except ApiError as exc:
                log.warning("pod %s: status write failed: %s", self.key, exc)
                await asyncio.sleep(1)
                self.dirty.set()

    async def stop_now(self) -> None:
        """Agent shutdown: kill everything quickly, write nothing."""
        self.deleted = True
        self.changed.set()
        with contextlib.suppress(Exception):
            await self._kill_all(1.0)


def _same(a: dict[str, Any], b: dict[str, Any]) -> bool:
    def strip(s: dict[str, Any]) -> str:
        conds = [
            {k: v for k, v in c.items() if k != "lastTransitionTime"}
            for c in s.get("conditions") or []
        ]
        return json.dumps(dict(s, conditions=conds), sort_keys=True)

    return strip(a) == strip(b)


def _referenced(container: dict[str, Any]) -> dict[str, set[str]]:
    out: dict[str, set[str]] = {"secrets": set(), "configmaps": set()}
    for source in container.get("envFrom") or []:
        if "secretRef" in source:
            out["secrets"].add(source["secretRef"].get("name", ""))
        if "configMapRef" in source:
            out["configmaps"].add(source["configMapRef"].get("name", ""))
    for var in container.get("env") or []:
        vf = var.get("valueFrom") or {}
        if "secretKeyRef" in vf:
            out["secrets"].add(vf["secretKeyRef"].get("name", ""))
        if "configMapKeyRef" in vf:
            out["configmaps"].add(vf["configMapKeyRef"].get("name", ""))
    return out


EventFn = Callable[[dict[str, Any], str, str, str], None]
__all__ = ["NetworkError", "PodWorker"]
