"""A real Ray head for end-to-end tests: ``ray start --head --block`` on loopback, one per run
of the tests/e2e package.

Invariants: the dashboard listens on 127.0.0.1 only and every port is picked free (tests may
run beside other Ray users on the machine); the head runs in its own session and process group
in a short temporary directory, and teardown ends exactly those processes (SIGTERM, then
SIGKILL after a bounded wait, then any stragglers still in that session or naming that
directory), never other Ray processes on the machine (so no ``ray stop``, which kills by name).
Ray's internal components bind the machine's own interface address; nothing leaves the host.

Failure modes: without the ``ray`` package the fixture skips with the reason; a head whose
dashboard is not up within ``START_TIMEOUT`` fails the fixture with the tail of its log.
"""

from __future__ import annotations

import contextlib
import importlib.metadata
import importlib.util
import json
import os
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time
import urllib.error
import urllib.request
from collections.abc import AsyncIterator, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from kuberay.devenv.testing import skip_unless_strict

START_TIMEOUT = 120.0
STOP_GRACE = 5.0

SERVE_APP_MODULE = "kuberay_contract_serve_app"
SERVE_APP_SOURCE = '''"""A one-replica Serve app for the dashboard contract tests (no CPU)."""

from ray import serve


@serve.deployment(ray_actor_options={"num_cpus": 0})
class Hello:
    def __call__(self, request: object) -> str:
        return "hello"


app = Hello.bind()
'''


@dataclass
class RayHead:
    dashboard_url: str
    temp_dir: Path
    pid: int
    serve_port: int
    ray_version: str
    serve_available: bool


def free_port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def _http(method: str, url: str, body: dict[str, object] | None = None) -> tuple[int, bytes]:
    data = json.dumps(body).encode() if body is not None else None
    req = urllib.request.Request(url, data=data, method=method)
    if data is not None:
        req.add_header("Content-Type", "application/json")
    try:
        with urllib.request.urlopen(req, timeout=5) as resp:
            return int(resp.status), resp.read()
    except urllib.error.HTTPError as exc:
        return exc.code, exc.read()
    except (urllib.error.URLError, OSError):
        return 0, b""


def _log_tail(path: Path, lines: int = 40) -> str:
    try:
        return "\n".join(path.read_text(errors="replace").splitlines()[-lines:])
    except OSError:
        return "(no log)"


def _wait_ready(url: str, proc: subprocess.Popen[bytes], log: Path) -> None:
    """Waits for the dashboard, then runs one warm-up job so the job agent and runtime-env
    agent are up before the tests time anything."""
    deadline = time.monotonic() + START_TIMEOUT
    while True:
        if proc.poll() is not None:
            raise RuntimeError(f"ray start exited with {proc.returncode}:\n{_log_tail(log)}")
        status, body = _http("GET", url + "/api/gcs_healthz")
        if status == 200 and b"success" in body and _http("GET", url + "/api/jobs/")[0] == 200:
            break
        if time.monotonic() > deadline:
            raise RuntimeError(f"Ray dashboard not ready at {url}:\n{_log_tail(log)}")
        time.sleep(0.5)
    submitted = False
    while time.monotonic() < deadline:
        if not submitted:
            status, _ = _http(
                "POST", url + "/api/jobs/", {"entrypoint": "echo warmup", "submission_id": "warmup"}
            )
            submitted = status == 200 or _http("GET", url + "/api/jobs/warmup")[0] == 200
        if submitted:
            status, body = _http("GET", url + "/api/jobs/warmup")
            if status == 200 and json.loads(body).get("status") in ("SUCCEEDED", "FAILED"):
                return
        time.sleep(0.5)
    raise RuntimeError(f"warm-up job did not finish on {url}:\n{_log_tail(log)}")


def _session_members(sid: int) -> list[int]:
    """Pids whose session id is ``sid`` (read from /proc; Linux only)."""
    pids: list[int] = []
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            stat = (entry / "stat").read_text()
        except OSError:
            continue
        fields = stat[stat.rfind(")") + 2 :].split()
        # fields: state ppid pgrp session ...
        if len(fields) > 3 and int(fields[3]) == sid and fields[0] != "Z":
            pids.append(int(entry.name))
    return pids


def _naming(directory: Path) -> list[int]:
    pids: list[int] = []
    needle = str(directory).encode()
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit() or int(entry.name) == os.getpid():
            continue
        try:
            if needle in (entry / "cmdline").read_bytes():
                pids.append(int(entry.name))
        except OSError:
            continue
    return pids


def stop_head(proc: subprocess.Popen[bytes], temp_dir: Path) -> None:
    """Ends the head's processes, bounded in time, by process group then by pid."""
    with contextlib.suppress(ProcessLookupError):
        os.killpg(proc.pid, signal.SIGTERM)
    with contextlib.suppress(subprocess.TimeoutExpired):
        proc.wait(timeout=STOP_GRACE)
    with contextlib.suppress(ProcessLookupError):
        os.killpg(proc.pid, signal.SIGKILL)
    with contextlib.suppress(subprocess.TimeoutExpired):
        proc.wait(timeout=5)
    for pid in set(_session_members(proc.pid)) | set(_naming(temp_dir)):
        with contextlib.suppress(ProcessLookupError, PermissionError):
            os.kill(pid, signal.SIGKILL)


@pytest.fixture(scope="package")
def ray_head() -> Iterator[RayHead]:
    """A running Ray head (``ray[default]``), or a skip saying why there is none.

    Package-scoped: it is stopped after the last e2e test, so it does not idle through the
    integration and unit tests that run after tests/e2e in the same session."""
    # Located, not imported: importing ray into the test process is slow and noisy.
    spec = importlib.util.find_spec("ray")
    if spec is None or spec.origin is None:
        skip_unless_strict("ray is not installed (pip install -e '.[e2e]')")
    ray_bin = Path(sys.executable).parent / "ray"
    if not ray_bin.exists():
        skip_unless_strict(f"no ray command next to {sys.executable}")
    package = Path(spec.origin).parent
    if importlib.util.find_spec("aiohttp_cors") is None or not (package / "dashboard").is_dir():
        skip_unless_strict("ray is installed without its dashboard (needs ray[default])")
    serve_available = (package / "serve").is_dir() and (
        importlib.util.find_spec("fastapi") is not None
    )
    # Unix socket paths are limited to ~107 bytes, so a short directory, not pytest's tmp_path.
    temp_dir = Path(tempfile.mkdtemp(prefix="kr-ray-", dir="/tmp"))
    app_dir = temp_dir / "app"
    app_dir.mkdir()
    (app_dir / f"{SERVE_APP_MODULE}.py").write_text(SERVE_APP_SOURCE)
    dashboard_port, serve_port = free_port(), free_port()
    env = dict(os.environ)
    env.update(
        RAY_USAGE_STATS_ENABLED="0",
        PYTHONPATH=os.pathsep.join(filter(None, [str(app_dir), env.get("PYTHONPATH")])),
    )
    log = temp_dir / "ray-start.log"
    command = [
        str(ray_bin),
        "start",
        "--head",
        "--block",
        f"--port={free_port()}",
        "--dashboard-host=127.0.0.1",
        f"--dashboard-port={dashboard_port}",
        f"--dashboard-agent-listen-port={free_port()}",
        f"--ray-client-server-port={free_port()}",
        f"--metrics-export-port={free_port()}",
        "--node-ip-address=127.0.0.1",
        "--num-cpus=1",
        "--include-dashboard=true",
        "--disable-usage-stats",
        f"--temp-dir={temp_dir}",
    ]
    with log.open("wb") as out:
        proc = subprocess.Popen(
            command,
            stdout=out,
            stderr=subprocess.STDOUT,
            stdin=subprocess.DEVNULL,
            env=env,
            cwd=temp_dir,
            start_new_session=True,
        )
    url = f"http://127.0.0.1:{dashboard_port}"
    try:
        _wait_ready(url, proc, log)
        yield RayHead(
            dashboard_url=url,
            temp_dir=temp_dir,
            pid=proc.pid,
            serve_port=serve_port,
            ray_version=importlib.metadata.version("ray"),
            serve_available=serve_available,
        )
    finally:
        stop_head(proc, temp_dir)
        shutil.rmtree(temp_dir, ignore_errors=True)


@pytest.fixture(scope="package")
async def ray_operator(process_plane: Any, process_kube: Any) -> AsyncIterator[Any]:
    """This project's operator against the process plane, with the CRDs installed.

    ``--use-kubernetes-proxy``: the operator runs on the host, where cluster DNS names do not
    resolve, so it reaches dashboards through the apiserver's service proxy."""
    from kuberay.devenv.manifests import install_crds
    from kuberay.devenv.operatorproc import OperatorProcess
    from kuberay.devenv.plane import free_port

    await install_crds(process_kube)
    port = free_port()
    op = OperatorProcess(
        process_plane,
        process_plane.logs,
        "--use-kubernetes-proxy",
        f"--metrics-addr=127.0.0.1:{port}",
        "--enable-metrics",
    )
    op.metrics_port = port  # type: ignore[attr-defined]  # for the monitoring test's Prometheus
    op.start()
    yield op
    op.stop()


@pytest.fixture
async def ns(
    process_kube: Any, ray_operator: Any, request: pytest.FixtureRequest
) -> AsyncIterator[str]:
    """A fresh namespace on the process plane, with the operator running."""
    from kuberay.devenv.testing import create_namespace, delete_namespace, unique_name

    name = unique_name(f"e2e-{request.node.name}", 30)
    await create_namespace(process_kube, name)
    yield name
    await delete_namespace(process_kube, name)
