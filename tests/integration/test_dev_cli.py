"""`kuberay dev up/status/down`, the no-orphans guarantee (normal stop, SIGKILL, Ctrl-C), and
`kuberay demo` (the README's first command) from a plane that is not running yet."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
import urllib.error
import urllib.request
from collections.abc import Iterator
from pathlib import Path

import pytest

from kuberay.devenv.binaries import cache_root
from kuberay.devenv.testing import unique_name

KUBERAY = [sys.executable, "-m", "kuberay.cli.main"]


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    try:
        # zombies of ours are not alive
        return Path(f"/proc/{pid}/stat").read_text().split(")")[1].split()[0] != "Z"
    except FileNotFoundError:
        return False


def _wait_dead(pids: list[int], timeout: float = 20.0) -> list[int]:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        alive = [p for p in pids if _alive(p)]
        if not alive:
            return []
        time.sleep(0.1)
    return [p for p in pids if _alive(p)]


def _run(*args: str, timeout: float = 120) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [*KUBERAY, "dev", *args], capture_output=True, text=True, timeout=timeout, check=False
    )


@pytest.fixture
def plane_name() -> Iterator[str]:
    name = unique_name("cli")
    yield name
    _run("down", "--name", name, "--timeout", "5")


def _component_pids(name: str) -> list[int]:
    state = json.loads((cache_root() / "planes" / name / "state.json").read_text())
    return [int(c["pid"]) for c in state["components"]]


def test_up_status_down(plane_name: str) -> None:
    up = _run("up", "--name", plane_name, "--nodes", "2")
    assert up.returncode == 0, up.stdout + up.stderr
    assert "export KUBECONFIG=" in up.stdout
    pids = _component_pids(plane_name)
    assert len(pids) == 5

    again = _run("up", "--name", plane_name)
    assert again.returncode == 0
    assert "already running" in again.stdout

    status = _run("status", "--name", plane_name)
    assert status.returncode == 0, status.stdout
    assert "nodes: 2/2 Ready" in status.stdout
    for comp in ("etcd", "kube-apiserver", "kube-controller-manager", "kube-scheduler", "kwok"):
        assert comp in status.stdout

    kubectl = _run("kubectl", "--name", plane_name, "get", "nodes", "-o", "name")
    assert kubectl.returncode == 0, kubectl.stderr
    assert kubectl.stdout.split() == ["node/kwok-node-0", "node/kwok-node-1"]

    down = _run("down", "--name", plane_name)
    assert down.returncode == 0
    assert _wait_dead(pids) == []
    assert _run("status", "--name", plane_name).returncode == 3


def test_sigkill_of_the_supervisor_leaves_no_orphans(plane_name: str) -> None:
    up = _run("up", "--name", plane_name, "--nodes", "1")
    assert up.returncode == 0, up.stdout + up.stderr
    pids = _component_pids(plane_name)
    supervisor = int((cache_root() / "planes" / plane_name / "supervisor.pid").read_text())
    os.kill(supervisor, signal.SIGKILL)
    assert _wait_dead([supervisor, *pids]) == []


def test_ctrl_c_stops_a_foreground_plane(plane_name: str) -> None:
    proc = subprocess.Popen(
        [*KUBERAY, "dev", "up", "--foreground", "--name", plane_name, "--nodes", "1"],
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
    )
    state = cache_root() / "planes" / plane_name / "state.json"
    deadline = time.monotonic() + 120
    while not state.exists() and time.monotonic() < deadline and proc.poll() is None:
        time.sleep(0.2)
    assert state.exists(), proc.communicate(timeout=5)[0] if proc.poll() is not None else ""
    pids = _component_pids(plane_name)
    proc.send_signal(signal.SIGINT)
    out, _ = proc.communicate(timeout=60)
    assert proc.returncode == 0, out
    assert "plane stopped" in out
    assert _wait_dead(pids) == []
    assert not state.exists()


def test_demo_starts_a_plane_and_shows_a_ready_cluster(plane_name: str) -> None:
    demo = subprocess.run(
        [*KUBERAY, "demo", "--name", plane_name, "--nodes", "2"],
        capture_output=True,
        text=True,
        timeout=300,
        check=False,
    )
    assert demo.returncode == 0, demo.stdout + demo.stderr
    assert "state=ready" in demo.stdout, demo.stdout
    assert "kuberay dev down" in demo.stdout


def test_up_with_prometheus_serves_and_stops_with_the_plane(plane_name: str) -> None:
    up = _run("up", "--name", plane_name, "--nodes", "1", "--with-prometheus", timeout=300)
    assert up.returncode == 0, up.stdout + up.stderr
    state = json.loads((cache_root() / "planes" / plane_name / "state.json").read_text())
    url = state["prometheus"]
    assert f"prometheus: {url}" in up.stdout
    assert f"prometheus: {url}" in _run("status", "--name", plane_name).stdout

    def jobs() -> set[str]:
        with urllib.request.urlopen(f"{url}/api/v1/targets", timeout=10) as resp:
            return {t["labels"]["job"] for t in json.loads(resp.read())["data"]["activeTargets"]}

    deadline = time.monotonic() + 30  # the scrape manager applies the config just after ready
    while "kuberay-operator" not in jobs() and time.monotonic() < deadline:
        time.sleep(0.5)
    assert "kuberay-operator" in jobs()
    with urllib.request.urlopen(f"{url}/api/v1/rules", timeout=10) as resp:
        groups = json.loads(resp.read())["data"]["groups"]
    assert "kuberay-operator" in {g["name"] for g in groups}, "the shipped alert rules are loaded"
    supervisor = int((cache_root() / "planes" / plane_name / "supervisor.pid").read_text())
    down = _run("down", "--name", plane_name)
    assert down.returncode == 0, down.stdout + down.stderr
    assert _wait_dead([supervisor]) == []
    with pytest.raises(urllib.error.URLError, match="refused"):
        urllib.request.urlopen(f"{url}/-/ready", timeout=2)
