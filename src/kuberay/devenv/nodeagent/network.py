"""The host side of the process runtime's pod network: one Linux bridge per plane.

Each plane gets a bridge ``krb<id>`` with the first address of a private /24 taken from
``10.244.0.0/16`` (used only inside these namespaces), and each pod a veth ``krv<id><n>`` whose
peer is ``eth0`` in the pod's network namespace. There is no NAT and no forwarding: pods reach
each other over the bridge and the host (apiserver, DNS, agent) at the bridge address, nothing
else. The host reaches every pod address through the bridge's connected route.

Invariants and failure modes:
- Allocation happens under an exclusive lock (``/run/kuberay-devenv/lock``) and is recorded in
  ``/run/kuberay-devenv/nets/<id>.json`` with the owner's pid and start time, so several planes
  (several test sessions) never share a bridge or a subnet.
- A record whose owner is gone is stale: the next allocation kills processes still running from
  that plane's state directory (launchers and sandboxes; containers die with them through their
  PID namespaces), deletes its veths and bridge and removes its state directory.
- Network namespaces are never named: they belong to the pod's sandbox process and vanish with
  it, taking the pod's veth along. So a crash cannot leave a netns behind.
"""

from __future__ import annotations

import contextlib
import fcntl
import ipaddress
import json
import os
import shutil
import signal
import subprocess
import time
import uuid
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

RUN_ROOT = Path("/run/kuberay-devenv")
DATA_ROOT = Path("/var/lib/kuberay-devenv")
BRIDGE_PREFIX = "krb"
VETH_PREFIX = "krv"
POOL = ipaddress.ip_network("10.244.0.0/16")


class NetworkError(RuntimeError):
    """The host network for pods could not be set up; the message has the failing command."""


def ip(*args: str, stdin: str | None = None, netns_pid: int | None = None) -> str:
    """Runs ``ip``; with ``netns_pid`` inside that process's network namespace."""
    argv = ["ip", *args]
    if netns_pid is not None:
        argv = ["nsenter", "-t", str(netns_pid), "-n", *argv]
    proc = subprocess.run(argv, input=stdin, capture_output=True, text=True, check=False)
    if proc.returncode != 0:
        raise NetworkError(f"{' '.join(argv)} failed: {proc.stderr.strip()} (input: {stdin!r})")
    return proc.stdout


@dataclass(frozen=True)
class PodNetwork:
    """One plane's bridge, subnet and state directory."""

    id: str
    subnet: str

    @property
    def bridge(self) -> str:
        return f"{BRIDGE_PREFIX}{self.id}"

    @property
    def network(self) -> ipaddress.IPv4Network:
        return ipaddress.IPv4Network(self.subnet)

    @property
    def gateway(self) -> str:
        return str(self.network.network_address + 1)

    @property
    def prefixlen(self) -> int:
        return self.network.prefixlen

    @property
    def data_dir(self) -> Path:
        return DATA_ROOT / self.id

    @property
    def mountpoints_file(self) -> Path:
        return self.data_dir / "mountpoints"

    def veth(self, address: str) -> str:
        return f"{VETH_PREFIX}{self.id}{int(ipaddress.IPv4Address(address)) & 0xFF}"

    def pod_addresses(self) -> list[str]:
        return [str(h) for h in self.network.hosts()][1:]


def _start_time(pid: int) -> str:
    try:
        return Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[19]
    except (OSError, IndexError):
        return ""


@contextlib.contextmanager
def _locked() -> Iterator[None]:
    (RUN_ROOT / "nets").mkdir(parents=True, exist_ok=True)
    with open(RUN_ROOT / "lock", "w") as fh:
        fcntl.flock(fh, fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(fh, fcntl.LOCK_UN)


def _records() -> list[tuple[Path, dict[str, str]]]:
    out = []
    for path in sorted((RUN_ROOT / "nets").glob("*.json")):
        with contextlib.suppress(OSError, ValueError):
            out.append((path, json.loads(path.read_text())))
    return out


def _alive(record: dict[str, str]) -> bool:
    pid = int(record.get("owner_pid", 0))
    return pid > 0 and _start_time(pid) == record.get("owner_start")


def _links() -> list[str]:
    out = ip("-o", "link", "show")
    names = []
    for line in out.splitlines():
        parts = line.split(":", 2)
        if len(parts) >= 2:
            names.append(parts[1].strip().split("@", 1)[0])
    return names


def kill_strays(marker: str) -> int:
    """SIGKILLs every process whose command line mentions ``marker`` (a state directory)."""
    killed = 0
    me = os.getpid()
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit() or int(entry.name) == me:
            continue
        with contextlib.suppress(OSError):
            cmdline = (entry / "cmdline").read_bytes().replace(b"\0", b" ").decode(errors="replace")
            if marker in cmdline:
                os.kill(int(entry.name), signal.SIGKILL)
                killed += 1
    return killed


def _destroy(net_id: str) -> None:
    data_dir = DATA_ROOT / net_id
    kill_strays(str(data_dir) + "/")
    for name in _links():
        if name.startswith(f"{VETH_PREFIX}{net_id}") or name == f"{BRIDGE_PREFIX}{net_id}":
            with contextlib.suppress(NetworkError):
                ip("link", "del", name)
    _unmount_under(data_dir)
    _remove_mountpoints(data_dir / "mountpoints")
    shutil.rmtree(data_dir, ignore_errors=True)


def _remove_mountpoints(record: Path) -> None:
    """Removes the mount points pods created on the host, deepest first, if still empty.

    Runs only when every process of the plane is gone, so no bind mount can still use them; a
    path that something else filled in the meantime is left alone.
    """
    try:
        paths = set(record.read_text().split("\n")) - {""}
    except OSError:
        return
    for path in sorted(paths, key=lambda p: p.count("/"), reverse=True):
        with contextlib.suppress(OSError):
            target = Path(path)
            if target.is_dir() and not target.is_symlink():
                target.rmdir()
            elif target.is_file() and target.stat().st_size == 0:
                target.unlink()


def _unmount_under(directory: Path) -> None:
    """Detaches host mounts below ``directory`` (none are made on purpose; this is a guard)."""
    prefix = str(directory) + "/"
    with contextlib.suppress(OSError):
        mounts = [line.split()[1] for line in Path("/proc/self/mounts").read_text().splitlines()]
        for target in sorted((m for m in mounts if m.startswith(prefix)), reverse=True):
            subprocess.run(["umount", "-l", target], capture_output=True, check=False)


def cleanup_stale() -> list[str]:
    """Tears down the networks of planes whose owner died; returns their ids."""
    gone = []
    known = set()
    for path, record in _records():
        known.add(record.get("id", ""))
        if not _alive(record):
            _destroy(record["id"])
            path.unlink(missing_ok=True)
            gone.append(record["id"])
    for name in _links():
        if name.startswith(BRIDGE_PREFIX) and name[len(BRIDGE_PREFIX) :] not in known:
            _destroy(name[len(BRIDGE_PREFIX) :])
            gone.append(name[len(BRIDGE_PREFIX) :])
    return gone


def _used_networks() -> list[ipaddress.IPv4Network]:
    used = []
    for line in ip("-4", "-o", "addr", "show").splitlines():
        fields = line.split()
        if "inet" in fields:
            used.append(ipaddress.IPv4Interface(fields[fields.index("inet") + 1]).network)
    for line in ip("-4", "route", "show", "table", "all").splitlines():
        dest = line.split()[0] if line.split() else ""
        with contextlib.suppress(ValueError):
            if dest not in ("default", "local", "broadcast", "unreachable"):
                used.append(ipaddress.IPv4Network(dest, strict=False))
    return used


def allocate(owner_pid: int | None = None) -> PodNetwork:
    """Creates this plane's bridge on a free /24; cleans up dead planes' leftovers first."""
    owner = owner_pid or os.getpid()
    with _locked():
        cleanup_stale()
        taken = {r.get("subnet") for _, r in _records()}
        used = _used_networks()
        for candidate in POOL.subnets(new_prefix=24):
            if str(candidate) in taken or any(candidate.overlaps(u) for u in used):
                continue
            net = PodNetwork(id=uuid.uuid4().hex[:6], subnet=str(candidate))
            break
        else:
            raise NetworkError(f"no free /24 left in {POOL}")
        record = {
            "id": net.id,
            "subnet": net.subnet,
            "owner_pid": str(owner),
            "owner_start": _start_time(owner),
            "created": str(time.time()),
        }
        (RUN_ROOT / "nets" / f"{net.id}.json").write_text(json.dumps(record))
        try:
            ip(
                "-batch",
                "-",
                stdin=(
                    f"link add {net.bridge} type bridge\n"
                    f"addr add {net.gateway}/{net.prefixlen} dev {net.bridge}\n"
                    f"link set {net.bridge} up\n"
                ),
            )
        except NetworkError:
            _destroy(net.id)
            (RUN_ROOT / "nets" / f"{net.id}.json").unlink(missing_ok=True)
            raise
        net.data_dir.mkdir(parents=True, exist_ok=True)
        return net


def release(net: PodNetwork) -> None:
    """Removes the bridge, every veth and process of this plane, and its state directory."""
    with _locked():
        _destroy(net.id)
        (RUN_ROOT / "nets" / f"{net.id}.json").unlink(missing_ok=True)


def leftovers(net: PodNetwork) -> list[str]:
    """What of this plane is still on the host (for tests of teardown); empty when clean."""
    found = [
        f"link {n}" for n in _links() if n.startswith(f"{VETH_PREFIX}{net.id}") or n == net.bridge
    ]
    marker = str(net.data_dir) + "/"
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit() and int(entry.name) != os.getpid():
            with contextlib.suppress(OSError):
                cmd = (entry / "cmdline").read_bytes().replace(b"\0", b" ").decode(errors="replace")
                if marker in cmd:
                    found.append(f"process {entry.name}: {cmd[:200]}")
    if net.data_dir.exists():
        found.append(f"directory {net.data_dir}")
    return found
