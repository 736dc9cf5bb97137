"""The node agent's kubelet API, driven by the kubectl the plane builds, against real Ray.

``kubectl logs``/``exec``/``attach``/``port-forward`` go kubectl -> apiserver (websockets, which
the apiserver translates to SPDY/3.1) -> node agent. One Ray head (a plain pod running ``ray start
--head``: the operator is not what is under test) and a few small pods in one namespace serve
every test of the module. kubectl is only ever pointed at this
plane; port-forwards listen on loopback.
"""

from __future__ import annotations

import asyncio
import contextlib
import fcntl
import hashlib
import json
import os
import pty
import re
import select
import shutil
import socket
import ssl
import struct
import subprocess
import sys
import termios
import time
import urllib.request
from collections.abc import AsyncIterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from kuberay.devenv import binaries
from kuberay.devenv.pki import ADMIN, SCHEDULER
from kuberay.devenv.plane import Plane
from kuberay.devenv.testing import create_namespace, delete_namespace, unique_name, wait_for
from kuberay.runtime.client import NODES, PODS, KubeClient

from .raykube import IMAGE, OBJECT_STORE

pytestmark = [pytest.mark.e2e, pytest.mark.slow]

READY_TIMEOUT = 300.0
# kubectl speaking SPDY itself (as client-go's SPDY executor and port-forward dialer do): the
# apiserver then passes the SPDY connection straight through to the agent.
SPDY_CLIENT = {
    **os.environ,
    "KUBECTL_REMOTE_COMMAND_WEBSOCKETS": "false",
    "KUBECTL_PORT_FORWARD_WEBSOCKETS": "false",
}
BIG_FILE = 3 * 1024 * 1024 + 17  # well past SPDY's 64 KiB windows and our 32 KiB frames

ECHO = """
import sys
print('echo ready', flush=True)
for line in sys.stdin:
    print('got', line.strip(), flush=True)
"""
TICKER = """
import time
i = 0
while True:
    print(f'tick {i}', flush=True)
    i += 1
    time.sleep(0.3)
"""
CRASHER = """
import time
print('crash-run', time.time_ns(), flush=True)
print('partial line without newline', end='', flush=True)
time.sleep(0.5)
raise SystemExit(3)
"""
WEB = f"""
import os, http.server
os.makedirs('/tmp/www', exist_ok=True)
data = bytes(range(256)) * ({BIG_FILE} // 256) + b'x' * ({BIG_FILE} % 256)
open('/tmp/www/big.bin', 'wb').write(data)
os.chdir('/tmp/www')
handler = http.server.SimpleHTTPRequestHandler
http.server.ThreadingHTTPServer(('0.0.0.0', 8080), handler).serve_forever()
"""


def _pod(name: str, code: str, **container: Any) -> dict[str, Any]:
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": name},
        "spec": {
            "terminationGracePeriodSeconds": 2,
            "containers": [
                {
                    "name": "main",
                    "image": IMAGE,
                    "command": ["python", "-u", "-c", code],
                    **container,
                }
            ],
        },
    }


@dataclass
class Env:
    plane: Plane
    kube: KubeClient
    ns: str
    head: str
    kubectl: str

    def argv(self, *args: str) -> list[str]:
        return [self.kubectl, "--kubeconfig", str(self.plane.kubeconfig), "-n", self.ns, *args]

    async def run(
        self, *args: str, stdin: bytes = b"", timeout: float = 60, spdy: bool = False
    ) -> subprocess.CompletedProcess[bytes]:
        return await asyncio.to_thread(
            subprocess.run,
            self.argv(*args),
            input=stdin,
            capture_output=True,
            timeout=timeout,
            env=SPDY_CLIENT if spdy else None,
        )


def _ready(pod: dict[str, Any]) -> bool:
    conds = (pod.get("status") or {}).get("conditions") or []
    return any(c["type"] == "Ready" and c["status"] == "True" for c in conds)


def _restarted(pod: dict[str, Any]) -> bool:
    statuses = (pod.get("status") or {}).get("containerStatuses") or []
    return bool(statuses) and statuses[0].get("restartCount", 0) >= 1


def _ray_head() -> dict[str, Any]:
    """A Ray head as a plain pod (no operator needed to serve the kubelet API's tests)."""
    body = _pod("ray-head", "")
    main = body["spec"]["containers"][0]
    main["command"] = [
        "ray",
        "start",
        "--head",
        "--block",
        "--num-cpus=0",
        "--dashboard-host=0.0.0.0",
        f"--object-store-memory={OBJECT_STORE}",
    ]
    main["env"] = [{"name": "RAY_USAGE_STATS_ENABLED", "value": "0"}]
    main["readinessProbe"] = {
        "httpGet": {"path": "/api/version", "port": 8265},
        "periodSeconds": 2,
        "failureThreshold": 300,
    }
    return body


@pytest.fixture(scope="module")
async def env(process_plane: Plane, process_kube: KubeClient) -> AsyncIterator[Env]:
    kubectl = binaries.locate("kubectl")
    if kubectl is None:
        kubectl = binaries.ensure(["kubectl"])["kubectl"]
    ns = unique_name("e2e-kubelet-api", 30)
    await create_namespace(process_kube, ns)
    try:
        await process_kube.create(PODS, _ray_head(), ns)
        for name, code, extra in (
            ("echo", ECHO, {"stdin": True}),
            ("ticker", TICKER, {}),
            ("crasher", CRASHER, {}),
            ("web", WEB, {}),
        ):
            await process_kube.create(PODS, _pod(name, code, **extra), ns)
        for name in ("echo", "ticker", "web"):
            await wait_for(process_kube, PODS, name, ns, _ready, timeout=120, what="Ready")
        await wait_for(process_kube, PODS, "ray-head", ns, _ready, timeout=READY_TIMEOUT)
        yield Env(process_plane, process_kube, ns, "ray-head", str(kubectl))
    finally:
        await delete_namespace(process_kube, ns)


# ---------------------------------------------------------------------- exec
async def test_exec_failing_command_exit_code_and_streams(env: Env) -> None:
    out = await env.run("exec", env.head, "--", "sh", "-c", "echo to-out; echo to-err >&2; exit 3")
    assert out.returncode == 3, out
    assert out.stdout == b"to-out\n"
    assert b"to-err" in out.stderr
    ok = await env.run("exec", env.head, "--", "true")
    assert ok.returncode == 0, ok


async def test_exec_runs_in_the_containers_namespaces_and_env(env: Env) -> None:
    script = (
        "echo host=$(hostname); echo pid1=$(cat /proc/1/comm); echo cwd=$(pwd); env | grep -c RAY_"
    )
    out = await env.run("exec", env.head, "--", "sh", "-c", script)
    assert out.returncode == 0, out
    text = out.stdout.decode()
    assert f"host={env.head}" in text
    assert "pid1=python" in text  # the container's own PID namespace: its init is PID 1
    assert int(text.strip().splitlines()[-1]) > 0  # the container's environment


async def test_exec_stdin_without_tty(env: Env) -> None:
    payload = b"line one\n" * 20000  # 180 KB through the stdin stream
    out = await env.run(
        "exec",
        "-i",
        env.head,
        "--",
        "python",
        "-c",
        "import sys, hashlib; print(hashlib.sha256(sys.stdin.buffer.read()).hexdigest())",
        stdin=payload,
    )
    assert out.returncode == 0, out
    assert out.stdout.decode().strip() == hashlib.sha256(payload).hexdigest()


async def test_exec_is_killed_when_the_client_goes_away(env: Env) -> None:
    async def sleepers() -> int:
        out = await env.run(
            "exec", "ticker", "--", "sh", "-c", "ps -eo args | grep -c '^sleep 7777'"
        )
        return int(out.stdout.decode().strip() or 0)

    proc = await asyncio.create_subprocess_exec(
        *env.argv("exec", "ticker", "--", "sleep", "7777"), stdout=asyncio.subprocess.DEVNULL
    )
    try:
        async with asyncio.timeout(30):
            while True:  # the command runs in the container
                if await sleepers() == 1:
                    break
                await asyncio.sleep(0.3)
    finally:
        proc.kill()
        await proc.wait()
    async with asyncio.timeout(30):
        while True:  # and is gone once kubectl (and so the connection) is
            if await sleepers() == 0:
                break
            await asyncio.sleep(0.3)


def _run_in_pty(
    argv: list[str], script: bytes, rows: int, cols: int, timeout: float
) -> tuple[int, str]:
    """Runs kubectl with a pty as its terminal (kubectl -t needs one), types ``script``."""
    master, slave = pty.openpty()
    fcntl.ioctl(slave, termios.TIOCSWINSZ, struct.pack("HHHH", rows, cols, 0, 0))
    proc = subprocess.Popen(argv, stdin=slave, stdout=slave, stderr=slave, start_new_session=True)
    os.close(slave)
    out = bytearray()
    started = time.monotonic()
    sent = False
    try:
        while time.monotonic() < started + timeout:
            readable, _, _ = select.select([master], [], [], 0.2)
            if readable:
                try:
                    chunk = os.read(master, 65536)
                except OSError:
                    break  # EIO: kubectl exited and closed the terminal
                if not chunk:
                    break
                out += chunk
            # Type once the remote shell prompts (or after a while, whatever it printed).
            prompted = out.rstrip().endswith((b"#", b"$")) or time.monotonic() > started + 10
            if not sent and prompted:
                os.write(master, script)
                sent = True
            if proc.poll() is not None and not readable:
                break
        else:
            proc.kill()
        return proc.wait(10), out.decode(errors="replace")
    finally:
        os.close(master)


async def test_exec_tty_with_stdin_runs_ray_status(env: Env) -> None:
    argv = env.argv("exec", "-i", "-t", env.head, "--", "sh")
    # `ray status` needs the autoscaler's first report, which can lag the dashboard a little.
    script = (
        b"stty size; tty; for i in $(seq 60); do ray status 2>&1 | grep -q Node && break; sleep 1;"
        b" done; ray status; exit 7\n"
    )
    code, text = await asyncio.to_thread(_run_in_pty, argv, script, 33, 111, 150)
    assert "33 111" in text, text  # the terminal size reached the pty (resize stream)
    assert "/dev/pts/" in text, text
    assert "Node status" in text, text
    assert "Resources" in text, text
    assert code == 7, text


# ---------------------------------------------------------------------- logs
async def test_logs_tail_and_timestamps(env: Env) -> None:
    await wait_for(env.kube, PODS, "ticker", env.ns, _ready)
    deadline = time.monotonic() + 30
    while True:
        out = await env.run("logs", "ticker")
        if out.stdout.count(b"\n") >= 5 or time.monotonic() > deadline:
            break
        await asyncio.sleep(0.5)
    assert out.returncode == 0, out
    assert out.stdout.startswith(b"tick 0\n"), out
    tail = await env.run("logs", "ticker", "--tail=2")
    lines = tail.stdout.decode().splitlines()
    assert len(lines) == 2, tail
    assert all(re.fullmatch(r"tick \d+", line) for line in lines), tail
    stamped = await env.run("logs", "ticker", "--timestamps", "--tail=3")
    stamps = []
    for line in stamped.stdout.decode().splitlines():
        stamp, _, rest = line.partition(" ")
        assert re.fullmatch(r"\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{9}Z", stamp), line
        assert rest.startswith("tick ")
        stamps.append(stamp)
    assert stamps == sorted(stamps)
    assert len(stamps) == 3
    recent = await env.run("logs", "ticker", "--since=2s")
    all_lines = (await env.run("logs", "ticker")).stdout.count(b"\n")
    assert 0 < recent.stdout.count(b"\n") < all_lines, recent
    limited = await env.run("logs", "ticker", "--limit-bytes=4")
    assert limited.stdout == b"tick"


async def test_logs_follow_receives_new_lines(env: Env) -> None:
    proc = await asyncio.create_subprocess_exec(
        *env.argv("logs", "-f", "--tail=1", "ticker"), stdout=asyncio.subprocess.PIPE
    )
    assert proc.stdout is not None
    try:
        async with asyncio.timeout(30):
            first = int((await proc.stdout.readline()).split()[1])
            while True:
                line = await proc.stdout.readline()
                assert line, "kubectl logs -f ended"
                if int(line.split()[1]) >= first + 3:
                    break
    finally:
        proc.terminate()
        await proc.wait()


async def test_logs_previous_after_a_restart(env: Env) -> None:
    await wait_for(env.kube, PODS, "crasher", env.ns, _restarted, timeout=60, what="a restart")
    deadline = time.monotonic() + 30
    while True:  # the restarted instance may still be on its way (backoff, then start)
        prev = await env.run("logs", "crasher", "--previous")
        if prev.returncode == 0 or time.monotonic() > deadline:
            break
        await asyncio.sleep(0.5)
    assert prev.returncode == 0, prev
    assert prev.stdout.startswith(b"crash-run "), prev
    assert prev.stdout.endswith(b"partial line without newline"), prev
    none = await env.run("logs", "ticker", "--previous")
    assert none.returncode != 0, none
    assert b"previous terminated container" in none.stderr, none


# ---------------------------------------------------------------------- attach
async def test_attach_with_stdin(env: Env) -> None:
    proc = await asyncio.create_subprocess_exec(
        *env.argv("attach", "-i", "echo"),
        stdin=asyncio.subprocess.PIPE,
        stdout=asyncio.subprocess.PIPE,
        stderr=asyncio.subprocess.DEVNULL,
    )
    assert proc.stdin is not None
    assert proc.stdout is not None
    try:
        async with asyncio.timeout(30):
            marker = f"hello-{time.time_ns()}"
            # Until the attach is established, lines may go nowhere: resend until echoed.
            while True:
                proc.stdin.write(f"{marker}\n".encode())
                await proc.stdin.drain()
                try:
                    async with asyncio.timeout(2):
                        while True:
                            line = await proc.stdout.readline()
                            assert line, "kubectl attach ended"
                            if line.strip() == f"got {marker}".encode():
                                break
                    break
                except TimeoutError:
                    continue
    finally:
        proc.terminate()
        await proc.wait()
    logs = await env.run("logs", "echo")
    assert f"got {marker}".encode() in logs.stdout


# ---------------------------------------------------------------------- port-forward
@dataclass
class Forward:
    port: int
    proc: asyncio.subprocess.Process


@contextlib.asynccontextmanager
async def port_forward(
    env: Env, target: str, port: int, spdy: bool = False
) -> AsyncIterator[Forward]:
    proc = await asyncio.create_subprocess_exec(
        *env.argv("port-forward", "--address=127.0.0.1", target, f":{port}"),
        stdout=asyncio.subprocess.PIPE,
        stderr=asyncio.subprocess.PIPE,
        env=SPDY_CLIENT if spdy else None,
    )
    assert proc.stdout is not None
    try:
        async with asyncio.timeout(30):
            line = await proc.stdout.readline()
        match = re.search(rb"127\.0\.0\.1:(\d+) -> ", line)
        assert match, line
        yield Forward(int(match.group(1)), proc)
    finally:
        if proc.returncode is None:
            proc.terminate()
        await proc.wait()


def _get(url: str, timeout: float = 30) -> bytes:
    with urllib.request.urlopen(url, timeout=timeout) as resp:
        return bytes(resp.read())


async def test_port_forward_to_the_ray_dashboard_and_job_submit(env: Env) -> None:
    async with port_forward(env, f"pod/{env.head}", 8265) as fwd:
        version = json.loads(
            await asyncio.to_thread(_get, f"http://127.0.0.1:{fwd.port}/api/version")
        )
        assert version["ray_version"]
        ray = shutil.which("ray", path=str(Path(sys.executable).parent)) or "ray"
        job = await asyncio.to_thread(
            subprocess.run,
            [
                ray,
                "job",
                "submit",
                "--address",
                f"http://127.0.0.1:{fwd.port}",
                "--",
                "python",
                "-c",
                "print('job-through-port-forward')",
            ],
            capture_output=True,
            timeout=180,
        )
        assert job.returncode == 0, job
        assert b"job-through-port-forward" in job.stdout, job


SERVE_APP = """
from ray import serve

@serve.deployment(ray_actor_options={"num_cpus": 0})
class Hello:
    def __call__(self, request):
        return "hello from serve " + request.query_params.get("who", "")

serve.run(Hello.bind(), route_prefix="/hello")
"""


async def test_python_client_reaches_a_serve_app_through_port_forward(env: Env) -> None:
    # Deployed with exec (the app outlives the driver); then plain urllib through the tunnel.
    deploy = await env.run("exec", env.head, "--", "python", "-c", SERVE_APP, timeout=240)
    assert deploy.returncode == 0, deploy
    async with port_forward(env, f"pod/{env.head}", 8000) as fwd:
        body = await asyncio.to_thread(_get, f"http://127.0.0.1:{fwd.port}/hello?who=urllib")
    assert body == b"hello from serve urllib"


async def test_port_forward_carries_large_bodies_and_parallel_connections(env: Env) -> None:
    async with port_forward(env, "pod/web", 8080) as fwd:
        url = f"http://127.0.0.1:{fwd.port}/big.bin"
        bodies = await asyncio.gather(*(asyncio.to_thread(_get, url) for _ in range(3)))
    expected = bytes(range(256)) * (BIG_FILE // 256) + b"x" * (BIG_FILE % 256)
    assert all(body == expected for body in bodies)


async def test_spdy_clients_pass_straight_through(env: Env) -> None:
    out = await env.run(
        "exec", "-i", "ticker", "--", "sh", "-c", "cat; exit 4", stdin=b"x", spdy=True
    )
    assert out.returncode == 4, out
    assert out.stdout == b"x"
    async with port_forward(env, "pod/web", 8080, spdy=True) as fwd:
        body = await asyncio.to_thread(_get, f"http://127.0.0.1:{fwd.port}/big.bin")
    assert len(body) == BIG_FILE


async def test_port_forward_to_a_closed_port_reports_an_error(env: Env) -> None:
    async with port_forward(env, "pod/web", 9) as fwd:

        def attempt() -> bytes:
            with socket.create_connection(("127.0.0.1", fwd.port), timeout=10) as sock:
                sock.settimeout(10)
                return sock.recv(100)

        assert await asyncio.to_thread(attempt) == b""
        assert fwd.proc.stderr is not None
        async with asyncio.timeout(30):
            err = await fwd.proc.stderr.read()  # kubectl reports the error and gives up
    assert b"error forwarding port 9 to pod" in err, err
    assert b"Connect call failed" in err or b"refused" in err, err


# ---------------------------------------------------------------------- authentication
def _kubelet_address(node: dict[str, Any]) -> tuple[str, int]:
    address = next(a["address"] for a in node["status"]["addresses"] if a["type"] == "InternalIP")
    return address, int(node["status"]["daemonEndpoints"]["kubeletEndpoint"]["Port"])


def _https_get(host: str, port: int, path: str, ctx: ssl.SSLContext) -> bytes:
    with (
        socket.create_connection((host, port), timeout=10) as raw,
        ctx.wrap_socket(raw, server_hostname=host) as tls,
    ):
        tls.sendall(f"GET {path} HTTP/1.1\r\nHost: {host}\r\n\r\n".encode())
        out = b""
        while chunk := tls.recv(65536):
            out += chunk
        return out


async def test_kubelet_api_requires_the_apiservers_client_certificate(env: Env) -> None:
    nodes = await env.kube.list(NODES, label_selector="kuberay.io/node-runtime=process")
    host, port = _kubelet_address(nodes["items"][0])
    path = f"/containerLogs/{env.ns}/ticker/main"
    pki = env.plane.pki

    def context(identity: Any = None) -> ssl.SSLContext:
        ctx = ssl.create_default_context(cafile=str(pki.ca_cert))
        if identity is not None:
            ctx.load_cert_chain(str(pki.client_cert(identity)), str(pki.client_key(identity)))
        return ctx

    # No client certificate: the handshake is refused (with TLS 1.3 the client learns it on its
    # first read), so no HTTP response ever comes back.
    try:
        refused = await asyncio.to_thread(_https_get, host, port, path, context())
    except (ssl.SSLError, ConnectionError):
        refused = b""
    assert refused == b""
    # A plane certificate outside system:masters: authenticated but not authorised.
    denied = await asyncio.to_thread(_https_get, host, port, path, context(SCHEDULER))
    assert denied.startswith(b"HTTP/1.1 403"), denied[:200]
    # The serving certificate verifies against the plane CA for the node address, and a
    # system:masters identity is served (the apiserver's own identity is one).
    allowed = await asyncio.to_thread(_https_get, host, port, path, context(ADMIN))
    assert allowed.startswith(b"HTTP/1.1 200"), allowed[:200]
    assert b"tick 0" in allowed, allowed[:200]
