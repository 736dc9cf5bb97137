"""``kuberay dev``: build, start, inspect and stop the local control plane.

``dev up --runtime process`` runs pods for real, as Linux processes (``devenv.nodeagent``).
``dev up`` starts a detached supervisor (``kuberay.devenv.supervisor``) that owns the plane, then
follows its log until the plane is ready or the supervisor fails, so a cold build shows its
progress here. ``dev down`` signals the supervisor and waits for it; a supervisor that does not
stop in time is killed, and since every component dies with it, nothing is left running.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

from kuberay.devenv import binaries
from kuberay.devenv.http import HTTPError, client_context, request
from kuberay.devenv.supervisor import add_plane_arguments, plane_config_from_args, run


def plane_dir(name: str) -> Path:
    return binaries.cache_root() / "planes" / name


def _pid_alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    # A zombie child of ours still answers kill(0); reap it if it is ours.
    with contextlib.suppress(ChildProcessError):
        done, _ = os.waitpid(pid, os.WNOHANG)
        if done == pid:
            return False
    return True


def _read_state(directory: Path) -> dict[str, Any] | None:
    try:
        state: dict[str, Any] = json.loads((directory / "state.json").read_text())
    except (FileNotFoundError, ValueError):
        return None
    return state if _pid_alive(int(state.get("pid", 0))) else None


def _supervisor_pid(directory: Path) -> int | None:
    try:
        pid = int((directory / "supervisor.pid").read_text())
    except (FileNotFoundError, ValueError):
        return None
    return pid if _pid_alive(pid) else None


def _print_ready(state: dict[str, Any]) -> None:
    kubeconfig = state["kubeconfig"]
    kubectl = binaries.locate("kubectl")
    config = state["config"]
    if config.get("runtime") == "process":
        nodes = f"{config['process_nodes']} process nodes: pods run as processes"
    else:
        nodes = f"{config['nodes']} KWOK nodes"
    print(f"Local control plane is up: {state['server']} ({nodes})")
    print(f"  kubeconfig: {kubeconfig}")
    print(f"  logs:       {state['logs']}")
    print("Point kubectl at it with:")
    print(f"  export KUBECONFIG={kubeconfig}")
    if kubectl is not None:
        print(f"  alias kubectl={kubectl}   # kubectl built with the plane")
    if config.get("runtime") == "process":
        print(f"  pod logs:   {state['logs']}/pods/<namespace>_<pod>_<uid>/<container>.log")
        if config.get("egress", True):
            print("  egress:     pods reach what this host reaches (NAT; DNS forwards)")
        else:
            print("  egress:     none (--no-egress): pods reach only the host and each other")
        print("Run the operator on the host with --use-kubernetes-proxy (cluster DNS names")
        print("resolve only inside pods):")
        print(f"  kuberay operator --kubeconfig {kubeconfig} --use-kubernetes-proxy")
    if state.get("prometheus"):
        print(f"  prometheus: {state['prometheus']}   (scrapes the operator on 127.0.0.1:8080)")
    print("Stop it with: kuberay dev down")


def cmd_up(args: argparse.Namespace) -> int:
    directory = plane_dir(args.name)
    state = _read_state(directory)
    if state is not None:
        print("(already running)")
        _print_ready(state)
        return 0
    if _supervisor_pid(directory) is not None:
        print(f"a supervisor for plane {args.name!r} is still starting or stopping; try again")
        return 1
    directory.mkdir(parents=True, exist_ok=True)
    config = plane_config_from_args(args, directory)
    pid_file = directory / "supervisor.pid"
    if args.foreground:
        pid_file.write_text(str(os.getpid()))
        try:
            return run(config, with_prometheus=args.with_prometheus)
        finally:
            pid_file.unlink(missing_ok=True)
    log_path = directory / "supervisor.log"
    argv = [sys.executable, "-m", "kuberay.devenv.supervisor", f"--dir={directory}"]
    argv += [f"--nodes={args.nodes}", f"--node-cpu={args.node_cpu}"]
    argv += [f"--node-memory={args.node_memory}", f"--node-gpus={args.node_gpus}"]
    if args.unlimited:
        argv.append("--unlimited")
    if args.with_prometheus:
        argv.append("--with-prometheus")
    argv += [f"--runtime={args.runtime}", f"--process-nodes={args.process_nodes}"]
    if args.no_egress:
        argv.append("--no-egress")
    if args.image_map is not None:
        argv.append(f"--image-map={args.image_map.resolve()}")
    with open(log_path, "wb") as log:
        proc = subprocess.Popen(
            argv,
            stdin=subprocess.DEVNULL,
            stdout=log,
            stderr=subprocess.STDOUT,
            start_new_session=True,
        )
    pid_file.write_text(str(proc.pid))
    offset = 0
    while True:
        with open(log_path, "rb") as fh:
            fh.seek(offset)
            chunk = fh.read()
        offset += len(chunk)
        if chunk:
            sys.stdout.write(chunk.decode(errors="replace"))
            sys.stdout.flush()
        state = _read_state(directory)
        if state is not None and (state.get("prometheus") or not args.with_prometheus):
            _print_ready(state)
            return 0
        if proc.poll() is not None:
            print(f"the plane did not start (supervisor exit {proc.returncode}); see {log_path}")
            return 1
        time.sleep(0.3)


def _stop_operator(directory: Path) -> None:
    """Stops the operator the demo started for this plane, if it runs."""
    pid_file = directory / "operator.pid"
    try:
        pid = int(pid_file.read_text())
    except (FileNotFoundError, ValueError):
        return
    if _pid_alive(pid):
        with contextlib.suppress(ProcessLookupError):
            os.kill(pid, signal.SIGTERM)
        deadline = time.monotonic() + 10
        while _pid_alive(pid) and time.monotonic() < deadline:
            time.sleep(0.1)
        with contextlib.suppress(ProcessLookupError):
            os.kill(pid, signal.SIGKILL)
    pid_file.unlink(missing_ok=True)


def cmd_down(args: argparse.Namespace) -> int:
    directory = plane_dir(args.name)
    _stop_operator(directory)
    pid = _supervisor_pid(directory)
    if pid is None:
        print(f"plane {args.name!r} is not running")
        return 0
    os.kill(pid, signal.SIGTERM)
    deadline = time.monotonic() + args.timeout
    while _pid_alive(pid) and time.monotonic() < deadline:
        time.sleep(0.2)
    if _pid_alive(pid):
        print("the supervisor did not stop in time; killing it (its components die with it)")
        with contextlib.suppress(ProcessLookupError):
            os.kill(pid, signal.SIGKILL)
    with contextlib.suppress(FileNotFoundError):
        (directory / "supervisor.pid").unlink()
    print(f"plane {args.name!r} stopped")
    return 0


def cmd_status(args: argparse.Namespace) -> int:
    directory = plane_dir(args.name)
    state = _read_state(directory)
    if state is None:
        starting = _supervisor_pid(directory) is not None
        print(f"plane {args.name!r}: {'starting' if starting else 'not running'}")
        return 0 if starting else 3
    print(f"plane {args.name!r}: running at {state['server']}")
    print(f"  kubeconfig: {state['kubeconfig']}")
    if state.get("prometheus"):
        print(f"  prometheus: {state['prometheus']}")
    for comp in state["components"]:
        alive = "up" if _pid_alive(int(comp["pid"])) else "DOWN"
        print(f"  {comp['name']:<24} pid {comp['pid']:<8} {alive:<5} log {comp['log']}")
    pki = directory / "pki"
    ctx = client_context(str(pki / "ca.crt"), str(pki / "admin.crt"), str(pki / "admin.key"))
    try:
        nodes = request("GET", state["server"] + "/api/v1/nodes", context=ctx)["items"]
        ready = sum(
            1
            for n in nodes
            for c in n.get("status", {}).get("conditions", [])
            if c["type"] == "Ready" and c["status"] == "True"
        )
        print(f"  nodes: {ready}/{len(nodes)} Ready")
    except (OSError, HTTPError) as exc:
        print(f"  API server not answering: {exc}")
        return 1
    return 0


def cmd_build(args: argparse.Namespace) -> int:
    del args
    try:
        paths = binaries.ensure(log=lambda m: print(m, flush=True))
    except binaries.BuildError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    for name, path in paths.items():
        print(f"{name:<24} {path}")
    return 0


def cmd_kubectl(args: argparse.Namespace) -> int:
    directory = plane_dir(args.name)
    kubectl = binaries.ensure(["kubectl"])["kubectl"]
    env = dict(os.environ, KUBECONFIG=str(directory / "kubeconfig"))
    return subprocess.call([str(kubectl), *args.kubectl_args], env=env)


def register(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    dev = sub.add_parser("dev", help="local control plane for development and tests")
    dev_sub = dev.add_subparsers(dest="dev_command", required=True)

    up = dev_sub.add_parser("up", help="build (if needed) and start the local control plane")
    up.add_argument("--name", default="default", help="plane name (several may run at once)")
    up.add_argument("--foreground", action="store_true", help="run in the foreground; Ctrl-C stops")
    add_plane_arguments(up)
    up.set_defaults(func=cmd_up)

    down = dev_sub.add_parser("down", help="stop the local control plane")
    down.add_argument("--name", default="default")
    down.add_argument("--timeout", type=float, default=30.0)
    down.set_defaults(func=cmd_down)

    status = dev_sub.add_parser("status", help="show the plane's components and nodes")
    status.add_argument("--name", default="default")
    status.set_defaults(func=cmd_status)

    build = dev_sub.add_parser("build", help="build the control-plane binaries that are missing")
    build.set_defaults(func=cmd_build)

    kubectl = dev_sub.add_parser("kubectl", help="run kubectl against the plane")
    kubectl.add_argument("--name", default="default")
    kubectl.add_argument("kubectl_args", nargs=argparse.REMAINDER)
    kubectl.set_defaults(func=cmd_kubectl)
