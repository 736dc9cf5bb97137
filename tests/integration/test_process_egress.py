"""Egress of process-runtime pods: through the host to what the host reaches, or nothing.

"Outside" here is a test host that these tests make: a network namespace with a veth to the
host and an address from 198.51.100.0/24, serving HTTP; and the host's resolver is a DNS server
on loopback that knows one name for it. Nothing leaves this machine. The test host routes back
through the host, so the only thing between a hermetic plane's pod and it is that plane's own
firewall (forwarding is on while the egress plane runs).
"""

from __future__ import annotations

import asyncio
import contextlib
import ipaddress
import json
import os
import shutil
import signal
import socket
import subprocess
import sys
import threading
import time
import urllib.request
import uuid
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

import pytest

from kuberay.devenv.nodeagent import supported
from kuberay.devenv.nodeagent.dns import answer
from kuberay.devenv.nodeagent.network import (
    IP_FORWARD,
    TABLE_PREFIX,
    allocate,
    leftovers,
    nft,
    release,
    used_networks,
)
from kuberay.devenv.plane import Plane, PlaneConfig, running_plane
from kuberay.devenv.testing import skip_unless_strict

NAME = "pkgs.egress-test.example"
PORT = 8080

# Serves GET with the client's address as seen by the test host (the NAT address, if any).
SERVER = f"""
import http.server
class H(http.server.BaseHTTPRequestHandler):
    def do_GET(self):
        body = self.client_address[0].encode()
        self.send_response(200)
        self.send_header('Content-Length', str(len(body)))
        self.end_headers()
        self.wfile.write(body)
    def log_message(self, *a): pass
http.server.ThreadingHTTPServer(('0.0.0.0', {PORT}), H).serve_forever()
"""

# Run in a pod: reach the test host by address and by name; print what happened as JSON.
CLIENT = """
import json, socket, sys, urllib.request
address, name = sys.argv[1], sys.argv[2]
seen = {}
try:
    seen['resolved'] = socket.gethostbyname(name)
except OSError as exc:
    seen['resolved'] = 'error: ' + type(exc).__name__
for key, host in (('by_ip', address), ('by_name', name)):
    try:
        with urllib.request.urlopen(f'http://{host}:8080/', timeout=5) as resp:
            seen[key] = resp.read().decode()
    except OSError as exc:
        seen[key] = 'error: ' + type(exc).__name__
print(json.dumps(seen))
"""


@pytest.fixture(autouse=True)
def _process_runtime_supported() -> None:
    why = supported()
    if why is not None:
        skip_unless_strict(why)
    if shutil.which("nft") is None:
        skip_unless_strict("pod egress needs nft (apt-get install nftables)")


def _run(*argv: str) -> None:
    subprocess.run(argv, check=True, capture_output=True, text=True, timeout=30)


@dataclass
class OutsideHost:
    address: str  # the test host's
    gateway: str  # the host's end of the veth: what a masqueraded pod looks like to it


@pytest.fixture(scope="module")
def outside_host() -> Iterator[OutsideHost]:
    """A network namespace behind a veth, routing back through the host, serving HTTP."""
    if supported() is not None:
        pytest.skip("needs the process runtime")
    used = used_networks()
    subnet = next(
        s
        for s in ipaddress.ip_network("198.51.100.0/24").subnets(new_prefix=30)
        if not any(s.overlaps(u) for u in used)
    )
    gateway, address = (str(h) for h in subnet.hosts())
    suffix = uuid.uuid4().hex[:6]
    netns, veth = f"kret{suffix}", f"kreh{suffix}"
    _run("ip", "netns", "add", netns)
    server: subprocess.Popen[bytes] | None = None
    try:
        _run("ip", "link", "add", veth, "type", "veth", "peer", "name", "eth0", "netns", netns)
        _run("ip", "addr", "add", f"{gateway}/30", "dev", veth)
        _run("ip", "link", "set", veth, "up")
        inside = ("ip", "netns", "exec", netns)
        _run(*inside, "ip", "addr", "add", f"{address}/30", "dev", "eth0")
        _run(*inside, "ip", "link", "set", "lo", "up")
        _run(*inside, "ip", "link", "set", "eth0", "up")
        _run(*inside, "ip", "route", "add", "default", "via", gateway)
        server = subprocess.Popen(
            [*inside, sys.executable, "-c", SERVER],
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
            start_new_session=True,
        )
        deadline = time.monotonic() + 20
        while True:  # the host reaches it directly (its own veth), no forwarding involved
            try:
                with urllib.request.urlopen(f"http://{address}:{PORT}/", timeout=2) as resp:
                    assert resp.read().decode() == gateway
                break
            except OSError:
                assert server.poll() is None, "the test host's server exited"
                assert time.monotonic() < deadline, "the test host's server did not answer"
                time.sleep(0.2)
        yield OutsideHost(address=address, gateway=gateway)
    finally:
        if server is not None:
            with contextlib.suppress(ProcessLookupError):
                os.killpg(server.pid, signal.SIGKILL)
            server.wait(10)
        subprocess.run(["ip", "netns", "del", netns], capture_output=True, check=False)


@pytest.fixture(scope="module")
def host_resolver(outside_host: OutsideHost) -> Iterator[str]:
    """A DNS server on loopback that knows ``NAME`` (what the host's resolver would be)."""
    sock = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
    sock.bind(("127.0.0.1", 0))
    sock.settimeout(0.2)
    stop = threading.Event()

    def lookup(name: str) -> list[str] | None:
        return [outside_host.address] if name == NAME else None

    def serve() -> None:
        while not stop.is_set():
            try:
                data, peer = sock.recvfrom(512)
            except TimeoutError:
                continue
            reply = answer(data, lookup)
            if reply is not None:
                sock.sendto(reply, peer)

    thread = threading.Thread(target=serve, name="test-resolver", daemon=True)
    thread.start()
    try:
        yield f"127.0.0.1:{sock.getsockname()[1]}"
    finally:
        stop.set()
        thread.join(5)
        sock.close()


@pytest.fixture(scope="module")
def egress_plane(tmp_path_factory: pytest.TempPathFactory, host_resolver: str) -> Iterator[Plane]:
    """A process plane with egress, whose cluster DNS forwards to the loopback resolver."""
    config = PlaneConfig(
        directory=tmp_path_factory.mktemp("egress-plane"),
        runtime="process",
        egress=True,
        egress_dns=(host_resolver,),
        log=lambda _m: None,
    )
    with running_plane(config) as plane:
        yield plane


async def _client_pod(plane: Plane, ns: str, name: str, host: OutsideHost) -> Any:
    """Runs ``CLIENT`` in a pod of ``plane`` and returns what it saw."""
    body = {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": name, "namespace": ns},
        "spec": {
            "restartPolicy": "Never",
            "terminationGracePeriodSeconds": 1,
            "containers": [
                {
                    "name": "main",
                    "image": "python:3.11",
                    "command": ["python", "-c", CLIENT, host.address, NAME],
                }
            ],
        },
    }
    await asyncio.to_thread(plane.api, "POST", f"/api/v1/namespaces/{ns}/pods", body)
    deadline = time.monotonic() + 90
    while True:
        pod = await asyncio.to_thread(plane.api, "GET", f"/api/v1/namespaces/{ns}/pods/{name}")
        phase = pod.get("status", {}).get("phase")
        if phase in ("Succeeded", "Failed"):
            break
        assert time.monotonic() < deadline, f"{name}: {phase}\n{plane.log_tail('node-agent')}"
        await asyncio.sleep(0.5)
    out = plane.container_log(ns, name, "main")
    assert phase == "Succeeded", out
    return json.loads(out.strip().splitlines()[-1])


@pytest.mark.slow
async def test_pods_reach_a_host_beyond_the_bridge_by_address_and_by_name(
    egress_plane: Plane, outside_host: OutsideHost
) -> None:
    seen = await _client_pod(egress_plane, "default", "egress-client", outside_host)
    # The test host sees the host's address on its link: the pod was masqueraded.
    assert seen == {
        "resolved": outside_host.address,
        "by_ip": outside_host.gateway,
        "by_name": outside_host.gateway,
    }
    assert IP_FORWARD.read_text().strip() == "1"


@pytest.mark.slow
async def test_a_hermetic_plane_reaches_neither_the_host_beyond_nor_outside_names(
    egress_plane: Plane, outside_host: OutsideHost, process_plane: Plane, process_namespace: str
) -> None:
    assert not process_plane.config.egress
    # Forwarding is on (the egress plane runs) and the test host routes back: only the
    # hermetic plane's own firewall and DNS stand between its pod and the test host.
    assert IP_FORWARD.read_text().strip() == "1"
    seen = await _client_pod(process_plane, process_namespace, "hermetic-client", outside_host)
    assert seen["resolved"] == "error: gaierror"
    assert seen["by_ip"].startswith("error: ")
    assert seen["by_name"].startswith("error: ")


def test_a_dead_planes_firewall_goes_with_the_next_plane_start() -> None:
    owner = subprocess.Popen(["sleep", "60"])
    try:
        dead = allocate(owner.pid, egress=True)
    finally:
        owner.kill()
        owner.wait(10)
    assert f"table ip {TABLE_PREFIX}{dead.id}" in nft("list", "tables", "ip")
    assert IP_FORWARD.read_text().strip() == "1"
    successor = allocate(egress=False)  # cleans up after dead planes first
    try:
        assert leftovers(dead) == []
        assert f"table ip {TABLE_PREFIX}{dead.id}" not in nft("list", "tables", "ip")
        assert f"table ip {TABLE_PREFIX}{successor.id}" in nft("list", "tables", "ip")
    finally:
        release(successor)
    assert leftovers(successor) == []
