"""Exec, HTTP and TCP probes and handlers, run the way kubelet runs them.

Exec commands run inside the container's namespaces (``nsenter`` into its init's mount, UTS,
IPC, network and PID namespaces) with the container's environment, so ``localhost`` and the
container's ``/tmp`` are the container's. HTTP and TCP probes go from the host to the pod address
(or ``host`` if the probe names one). gRPC probes are not implemented and count as success.

Invariants: every probe is bounded by its ``timeoutSeconds`` (an exec probe that overruns is
killed with its whole process group and counts as a failure); a probe never raises.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import signal
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

import aiohttp

OUTPUT_LIMIT = 1024


@dataclass
class ProbeTarget:
    pod_ip: str
    init_pid: int
    env: Mapping[str, str]
    working_dir: str
    ports: Mapping[str, int]


def nsenter_argv(init_pid: int, working_dir: str, command: list[str]) -> list[str]:
    return [
        "nsenter",
        "-t",
        str(init_pid),
        "-m",
        "-u",
        "-i",
        "-n",
        "-p",
        f"--wd={working_dir}",
        "--",
        *command,
    ]


async def run_exec(target: ProbeTarget, command: list[str], timeout: float) -> tuple[bool, str]:
    if not command:
        return False, "empty exec command"
    try:
        proc = await asyncio.create_subprocess_exec(
            *nsenter_argv(target.init_pid, target.working_dir, command),
            stdin=asyncio.subprocess.DEVNULL,
            stdout=asyncio.subprocess.PIPE,
            stderr=asyncio.subprocess.STDOUT,
            env=dict(target.env),
            start_new_session=True,
        )
    except OSError as exc:
        return False, f"exec failed: {exc}"
    try:
        async with asyncio.timeout(timeout):
            out, _ = await proc.communicate()
    except TimeoutError:
        with contextlib.suppress(ProcessLookupError):
            os.killpg(proc.pid, signal.SIGKILL)
        with contextlib.suppress(ProcessLookupError):
            await proc.wait()
        return False, f"command timed out after {timeout:g}s"
    text = out.decode(errors="replace")[:OUTPUT_LIMIT]
    if proc.returncode == 0:
        return True, text
    return False, f"command {command!r} exited with {proc.returncode}: {text}"


def _port(value: Any, target: ProbeTarget) -> int:
    if isinstance(value, int) or (isinstance(value, str) and value.isdigit()):
        return int(value)
    if value in target.ports:
        return int(target.ports[value])
    raise ValueError(f"unknown named port {value!r}")


async def run_http(
    session: aiohttp.ClientSession, target: ProbeTarget, spec: dict[str, Any], timeout: float
) -> tuple[bool, str]:
    try:
        port = _port(spec.get("port"), target)
    except ValueError as exc:
        return False, str(exc)
    scheme = str(spec.get("scheme") or "HTTP").lower()
    host = spec.get("host") or target.pod_ip
    path = spec.get("path") or "/"
    if not path.startswith("/"):
        path = "/" + path
    headers = {h["name"]: h.get("value", "") for h in spec.get("httpHeaders") or []}
    headers.setdefault("User-Agent", "kube-probe/process-runtime")
    url = f"{scheme}://{host}:{port}{path}"
    try:
        async with session.get(
            url,
            headers=headers,
            allow_redirects=False,
            ssl=False,
            timeout=aiohttp.ClientTimeout(total=timeout),
        ) as resp:
            body = (await resp.content.read(OUTPUT_LIMIT)).decode(errors="replace")
            if 200 <= resp.status < 400:
                return True, body
            return False, f"HTTP probe failed with statuscode: {resp.status}"
    except (aiohttp.ClientError, TimeoutError, OSError) as exc:
        return False, f"Get {url}: {type(exc).__name__}: {exc}"


async def run_tcp(target: ProbeTarget, spec: dict[str, Any], timeout: float) -> tuple[bool, str]:
    try:
        port = _port(spec.get("port"), target)
    except ValueError as exc:
        return False, str(exc)
    host = spec.get("host") or target.pod_ip
    try:
        async with asyncio.timeout(timeout):
            _, writer = await asyncio.open_connection(host, port)
    except (OSError, TimeoutError) as exc:
        return False, f"dial tcp {host}:{port}: {exc or type(exc).__name__}"
    writer.close()
    with contextlib.suppress(OSError):
        await writer.wait_closed()
    return True, ""


async def run_handler(
    session: aiohttp.ClientSession, target: ProbeTarget, handler: dict[str, Any], timeout: float
) -> tuple[bool, str]:
    """One probe attempt or lifecycle hook: exec, httpGet, tcpSocket (grpc/sleep: success)."""
    if "exec" in handler:
        return await run_exec(target, list(handler["exec"].get("command") or []), timeout)
    if "httpGet" in handler:
        return await run_http(session, target, handler["httpGet"], timeout)
    if "tcpSocket" in handler:
        return await run_tcp(target, handler["tcpSocket"], timeout)
    if "sleep" in handler:
        await asyncio.sleep(min(float(handler["sleep"].get("seconds", 0)), timeout))
        return True, ""
    return True, "probe type not implemented by the process runtime; counted as success"
