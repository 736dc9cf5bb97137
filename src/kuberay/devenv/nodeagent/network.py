"""The host side of the process runtime's pod network: one Linux bridge per plane.

Each plane gets a bridge ``krb<id>`` with the first address of a private /24 taken from
``10.244.0.0/16`` (used only inside these namespaces), and each pod a veth ``krv<id><n>`` whose
peer is ``eth0`` in the pod's network namespace. Pods reach each other over the bridge and the
host (apiserver, DNS, agent) at the bridge address. The host reaches every pod address through
the bridge's connected route.

Egress (the default, as pods on a real cluster reach package indexes): the host routes pod
traffic out and masquerades it behind its own address (nftables table ``ip kuberay_<id>``,
``net.ipv4.ip_forward=1``). Without egress (hermetic planes for tests) the same table rejects
everything forwarded from the bridge, so the pods reach nothing beyond the host even when
another plane or program has turned forwarding on. Either way the table also keeps other
planes' pods and forwarded traffic from outside away from this plane's pods.

Invariants and failure modes:
- Allocation happens under an exclusive lock (``/run/kuberay-devenv/lock``) and is recorded in
  ``/run/kuberay-devenv/nets/<id>.json`` with the owner's pid and start time, so several planes
  (several test sessions) never share a bridge or a subnet.
- A record whose owner is gone is stale: the next allocation kills processes still running from
  that plane's state directory (launchers and sandboxes; containers die with them through their
  PID namespaces), deletes its veths and bridge and removes its state directory.
- Network namespaces are never named: they belong to the pod's sandbox process and vanish with
  it, taking the pod's veth along. So a crash cannot leave a netns behind.
- Mount points that pods created on the host (``created PATH`` from the launcher) are recorded
  per plane and removed by the last plane to go: a plane that stops while another lives hands
  its list over (``release_mountpoints``), since the other's containers may use the same paths.
- The nftables table goes with the plane (``release``) or with a dead plane's leftovers
  (``cleanup_stale``, which also drops tables of planes without a record). ``ip_forward`` is
  global: the first egress plane that finds it off records that in ``/run/kuberay-devenv`` and
  the last egress plane to go turns it off again; a plane never turns off forwarding that it did
  not turn on.
- Egress needs ``nft``; a hermetic plane on a host without it has no table and relies on
  forwarding being off. Another firewall whose forward chain drops by default (Docker sets
  iptables' FORWARD policy to DROP) still drops pod traffic: nftables cannot override a drop
  of another table, so such a host needs its own accept rule for the pod subnets.
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
TABLE_PREFIX = "kuberay_"
IP_FORWARD = Path("/proc/sys/net/ipv4/ip_forward")


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


def nft(*args: str, stdin: str | None = None) -> str:
    """Runs ``nft``; raises NetworkError (with its message) when it fails or is missing."""
    if shutil.which("nft") is None:
        raise NetworkError("nft (nftables) is not installed")
    proc = subprocess.run(["nft", *args], input=stdin, capture_output=True, text=True, check=False)
    if proc.returncode != 0:
        raise NetworkError(f"nft {' '.join(args)} failed: {proc.stderr.strip()} ({stdin!r})")
    return proc.stdout


def _tables() -> list[str]:
    """Ids of the planes that have an nftables table on this host."""
    if shutil.which("nft") is None:
        return []
    try:
        out = nft("list", "tables", "ip")
    except NetworkError:
        return []
    prefix = f"table ip {TABLE_PREFIX}"
    return [line[len(prefix) :].strip() for line in out.splitlines() if line.startswith(prefix)]


def firewall_rules(net: PodNetwork, egress: bool) -> str:
    """The plane's nftables table (an ``nft -f`` script).

    Forwarded traffic only (the host's own traffic to and from pods is not forwarded): within
    the bridge always passes (with ``br_netfilter`` bridged packets show up here too); towards
    the pods only replies pass; from the pods, with egress, anything but other planes' bridges,
    masqueraded behind the outgoing interface's address, else nothing (rejected, so that a
    client fails at once instead of timing out).
    """
    bridge = net.bridge
    out = (
        f'        iifname "{bridge}" oifname "{BRIDGE_PREFIX}*" drop\n'
        if egress
        else f'        iifname "{bridge}" reject with icmp type admin-prohibited\n'
    )
    rules = (
        f"table ip {TABLE_PREFIX}{net.id} {{\n"
        "    chain pods_forward {\n"
        "        type filter hook forward priority filter; policy accept;\n"
        f'        iifname "{bridge}" oifname "{bridge}" accept\n'
        f'        oifname "{bridge}" ct state established,related accept\n'
        f'        oifname "{bridge}" drop\n'
        f"{out}"
        "    }\n"
    )
    if egress:
        rules += (
            "    chain pods_nat {\n"
            "        type nat hook postrouting priority srcnat; policy accept;\n"
            f"        ip saddr {net.subnet} ip daddr != {net.subnet} masquerade\n"
            "    }\n"
        )
    return rules + "}\n"


def _setup_firewall(net: PodNetwork, egress: bool) -> None:
    if shutil.which("nft") is None:
        if not egress:
            return
        raise NetworkError(
            "pod egress needs nft (apt-get install nftables); or start the plane without "
            "egress: `kuberay dev up --no-egress`, PlaneConfig(egress=False)"
        )
    nft("-f", "-", stdin=firewall_rules(net, egress))
    if egress:
        _enable_forwarding()


def _enable_forwarding() -> None:
    """Turns on IPv4 forwarding, remembering that it was off (called under the lock)."""
    if IP_FORWARD.read_text().strip() != "1":
        (RUN_ROOT / "ip_forward.off").write_text("0\n")
        IP_FORWARD.write_text("1\n")


def _restore_forwarding() -> None:
    """Turns forwarding off again if a plane turned it on and no live egress plane is left."""
    marker = RUN_ROOT / "ip_forward.off"
    if not marker.exists():
        return
    if any(_alive(r) and r.get("egress") == "1" for _, r in _records()):
        return
    with contextlib.suppress(OSError):
        IP_FORWARD.write_text("0\n")
    marker.unlink(missing_ok=True)


def _destroy(net_id: str) -> None:
    data_dir = DATA_ROOT / net_id
    kill_strays(str(data_dir) + "/")
    if net_id in _tables():
        with contextlib.suppress(NetworkError):
            nft("delete", "table", "ip", f"{TABLE_PREFIX}{net_id}")
    for name in _links():
        if name.startswith(f"{VETH_PREFIX}{net_id}") or name == f"{BRIDGE_PREFIX}{net_id}":
            with contextlib.suppress(NetworkError):
                ip("link", "del", name)
    _unmount_under(data_dir)
    release_mountpoints(net_id)
    shutil.rmtree(data_dir, ignore_errors=True)


def release_mountpoints(net_id: str) -> None:
    """Removes the mount points that the pods of plane ``net_id`` created on the host, deepest
    first, if still empty; while another plane lives, hands them over to it instead.

    The plane's own processes are gone by now, but another plane's containers may have bind
    mounts on the same paths in their mount namespaces (every pod's service-account token is at
    ``/var/run/secrets/kubernetes.io/serviceaccount``). Removing such a directory on the host
    succeeds all the same (Linux detaches the mounts of other namespaces on rmdir) and would
    take the token away from that plane's running containers. So the list is appended to a live
    plane's, and the last plane to go removes the paths. A path that something else filled in
    the meantime is left alone. Called under the lock.
    """
    record = DATA_ROOT / net_id / "mountpoints"
    try:
        text = record.read_text()
    except OSError:
        return
    heirs = [r["id"] for _, r in _records() if r.get("id", net_id) != net_id and _alive(r)]
    if heirs:
        heir = DATA_ROOT / heirs[0]
        heir.mkdir(parents=True, exist_ok=True)
        with open(heir / "mountpoints", "a") as fh:
            fh.write(text if text.endswith("\n") else text + "\n")
        return
    paths = set(text.split("\n")) - {""}
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
    for net_id in _tables():
        if net_id not in known and net_id not in gone:
            _destroy(net_id)
            gone.append(net_id)
    _restore_forwarding()
    return gone


def used_networks() -> list[ipaddress.IPv4Network]:
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


def allocate(owner_pid: int | None = None, *, egress: bool = True) -> PodNetwork:
    """Creates this plane's bridge on a free /24 and its firewall table (with or without egress,
    see the module docstring); cleans up dead planes' leftovers first."""
    owner = owner_pid or os.getpid()
    with _locked():
        cleanup_stale()
        taken = {r.get("subnet") for _, r in _records()}
        used = used_networks()
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
            "egress": "1" if egress else "0",
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
            _setup_firewall(net, egress)
        except (NetworkError, OSError):
            _destroy(net.id)
            (RUN_ROOT / "nets" / f"{net.id}.json").unlink(missing_ok=True)
            _restore_forwarding()
            raise
        net.data_dir.mkdir(parents=True, exist_ok=True)
        return net


def release(net: PodNetwork) -> None:
    """Removes the bridge, every veth and process of this plane, and its state directory."""
    with _locked():
        _destroy(net.id)
        (RUN_ROOT / "nets" / f"{net.id}.json").unlink(missing_ok=True)
        _restore_forwarding()


def leftovers(net: PodNetwork) -> list[str]:
    """What of this plane is still on the host (for tests of teardown); empty when clean."""
    found = [
        f"link {n}" for n in _links() if n.startswith(f"{VETH_PREFIX}{net.id}") or n == net.bridge
    ]
    if net.id in _tables():
        found.append(f"nftables table ip {TABLE_PREFIX}{net.id}")
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
