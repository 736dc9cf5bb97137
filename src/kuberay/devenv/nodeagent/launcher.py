"""The process that turns a pod (sandbox) or a container into Linux namespaces, then execs.

Run by the node agent as ``python -I -S launcher.py {sandbox|container} SPEC_JSON``; it imports
only the standard library so that it starts in a few tens of milliseconds and behaves the same in
any interpreter. It speaks to the agent through one pipe (``status_fd`` in the spec), one line per
message: ``ready`` (sandbox), ``created PATH`` (a mount point made on the host file system),
``pid N`` (the container's init, as a host pid), ``started`` or ``execerror MESSAGE``.

Sandbox (one per pod, the "pause" process): unshares network, mount, UTS and IPC namespaces,
makes every mount private, sets the hostname, mounts ``/dev/shm`` and memory-backed emptyDirs as
tmpfs and bind-mounts the pod's ``/etc/hosts``, ``/etc/resolv.conf`` and ``/etc/profile``, then
waits for its stdin to close. Because the namespaces live only as long as some process is in
them, a dead sandbox (and dead containers) leave no netns, veth or tmpfs behind: the kernel frees
them, which is what makes cleanup after a crash of the agent automatic.

Container: joins the sandbox's namespaces, unshares its own mount and PID namespaces (so the
container's ``/tmp`` is its own and ``/proc`` shows only its processes), bind-mounts the
container's volumes, then forks an init (PID 1 in the new PID namespace) that mounts ``/proc``,
forks the command in its own session, forwards SIGTERM and friends to it, reaps zombies and exits
with the command's status (128+signal when killed). When PID 1 exits the kernel kills every
remaining process of the container, so daemonised grandchildren cannot outlive it.

Every process here sets ``PR_SET_PDEATHSIG=SIGKILL`` towards its parent: agent -> launcher ->
init -> (PID namespace teardown). A SIGKILLed agent therefore leaves nothing running.
"""

from __future__ import annotations

import contextlib
import ctypes
import json
import os
import select
import signal
import socket
import sys
from typing import Any

CLONE_NEWNS = 0x00020000
CLONE_NEWUTS = 0x04000000
CLONE_NEWIPC = 0x08000000
CLONE_NEWPID = 0x20000000
CLONE_NEWNET = 0x40000000
MS_RDONLY = 1
MS_NOSUID = 2
MS_NODEV = 4
MS_NOEXEC = 8
MS_REMOUNT = 32
MS_BIND = 4096
MS_REC = 16384
MS_PRIVATE = 1 << 18
PR_SET_PDEATHSIG = 1
FORWARDED = (
    signal.SIGTERM,
    signal.SIGINT,
    signal.SIGHUP,
    signal.SIGQUIT,
    signal.SIGUSR1,
    signal.SIGUSR2,
)

_libc = ctypes.CDLL(None, use_errno=True)


def _check(rc: int, what: str) -> None:
    if rc != 0:
        err = ctypes.get_errno()
        raise OSError(err, f"{what}: {os.strerror(err)}")


def mount(source: str | None, target: str, fstype: str | None, flags: int, data: str = "") -> None:
    _check(
        _libc.mount(
            source.encode() if source else None,
            target.encode(),
            fstype.encode() if fstype else None,
            ctypes.c_ulong(flags),
            data.encode() if data else None,
        ),
        f"mount {source} on {target}",
    )


def die_with_parent(expected_parent: int, alive_fd: int | None = None) -> None:
    """SIGKILL when the parent goes; exits now if it already went (the race before prctl).

    Inside a new PID namespace ``getppid()`` is 0, so there the parent's liveness is read from
    ``alive_fd``: the read end of a pipe whose only writer is the parent (EOF = parent gone).
    """
    _check(_libc.prctl(PR_SET_PDEATHSIG, signal.SIGKILL, 0, 0, 0), "prctl")
    if alive_fd is not None:
        readable, _, _ = select.select([alive_fd], [], [], 0)
        if readable:
            os._exit(137)
        os.close(alive_fd)
    elif os.getppid() != expected_parent:
        os._exit(137)


CREATED: list[str] = []


def _makedirs(path: str) -> None:
    """Creates ``path`` and its missing parents, recording only what this process created.

    Containers of every pod start concurrently and share the host file system, so two of them
    often create the same mount point (``/var/run/secrets/...`` for the service-account token)
    at the same moment: between the existence check and ``mkdir`` the other one may have made
    it. That directory is then simply there (EEXIST is success); it is recorded by its creator.
    """
    missing = []
    while path and path != "/" and not os.path.exists(path):
        missing.append(path)
        path = os.path.dirname(path)
    for p in reversed(missing):
        try:
            os.mkdir(p)
        except FileExistsError:
            if not os.path.isdir(p):
                raise
            continue
        CREATED.append(p)


def make_target(target: str, is_dir: bool) -> None:
    """Creates a missing mount point. Outside the container's ``/tmp`` that is on the host file
    system (an empty dir or file); it is reported (``created PATH``) so that the plane removes it
    when it stops. Safe against other launchers creating the same path at the same time."""
    target = os.path.normpath(target)
    if is_dir:
        _makedirs(target)
    elif not os.path.exists(target):
        _makedirs(os.path.dirname(target))
        try:
            os.close(os.open(target, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o644))
        except FileExistsError:
            return
        CREATED.append(target)


def bind(source: str, target: str, read_only: bool) -> None:
    make_target(target, os.path.isdir(source))
    mount(source, target, None, MS_BIND | MS_REC)
    if read_only:
        mount(None, target, None, MS_BIND | MS_REMOUNT | MS_RDONLY)


def covers(target: str, path: str) -> bool:
    """Whether a mount on ``target`` hides ``path`` (the same directory or one above it)."""
    target = os.path.normpath(target)
    return path == target or path.startswith(target.rstrip("/") + "/")


def report(fd: int, message: str) -> None:
    os.write(fd, (message.replace("\n", " ") + "\n").encode())


def exit_code(status: int) -> int:
    if os.WIFSIGNALED(status):
        return 128 + os.WTERMSIG(status)
    return os.WEXITSTATUS(status)


def run_sandbox(spec: dict[str, Any]) -> int:
    die_with_parent(int(spec["parent_pid"]))
    status_fd = int(spec["status_fd"])
    _check(
        _libc.unshare(CLONE_NEWNET | CLONE_NEWNS | CLONE_NEWUTS | CLONE_NEWIPC), "unshare sandbox"
    )
    mount(None, "/", None, MS_REC | MS_PRIVATE)
    socket.sethostname(spec["hostname"])
    for path, size in spec.get("tmpfs", []):
        os.makedirs(path, exist_ok=True)
        mount("tmpfs", path, "tmpfs", MS_NOSUID | MS_NODEV, f"size={size}" if size else "")
    for source, target, read_only in spec.get("binds", []):
        bind(source, target, bool(read_only))
    report(status_fd, "ready")
    os.close(status_fd)
    signal.signal(signal.SIGTERM, lambda *_: os._exit(0))
    while sys.stdin.buffer.read(4096):
        pass
    return 0


def _join(sandbox_pid: int) -> None:
    fds = [
        os.open(f"/proc/{sandbox_pid}/ns/{kind}", os.O_RDONLY)
        for kind in ("ipc", "uts", "net", "mnt")
    ]
    for fd in fds:
        _check(_libc.setns(fd, 0), "setns")
        os.close(fd)


def run_container(spec: dict[str, Any]) -> int:
    state: dict[str, Any] = {"child": 0, "pending": []}

    def forward(signum: int, _frame: object) -> None:
        if state["child"]:
            with contextlib.suppress(ProcessLookupError):
                os.kill(state["child"], signum)
        else:
            state["pending"].append(signum)

    for sig in FORWARDED:
        signal.signal(sig, forward)
    me = os.getpid()
    die_with_parent(int(spec["parent_pid"]))
    status_fd = int(spec["status_fd"])
    _join(int(spec["sandbox_pid"]))
    os.chdir("/")
    _check(_libc.unshare(CLONE_NEWNS | CLONE_NEWPID), "unshare container")
    mount(None, "/", None, MS_REC | MS_PRIVATE)
    os.makedirs(spec["tmp"], exist_ok=True)
    os.chmod(spec["tmp"], 0o1777)
    kept: list[tuple[str, int]] = []
    for path in spec.get("keep", []):
        # Bound into the private /tmp first, so the recursive bind below carries it along.
        if path.startswith("/tmp/") and os.path.isdir(path):
            bind(path, spec["tmp"] + path[len("/tmp") :], False)
            kept.append((path, os.open(path, os.O_PATH | os.O_DIRECTORY | os.O_CLOEXEC)))
    bind(spec["tmp"], "/tmp", False)
    binds = sorted(spec.get("binds", []), key=lambda b: b[1].rstrip("/").count("/"))
    for source, target, read_only in binds:
        bind(source, target, bool(read_only))
    for path, fd in kept:
        # A volume mounted on /tmp (the chart's emptyDir for a read-only root) hides what was
        # kept; the host path is hidden too by now, so bind it again through the handle opened
        # before. Its mount point is made inside that volume.
        if any(covers(target, path) for _, target, _ in binds):
            bind(f"/proc/self/fd/{fd}", path, False)
        os.close(fd)
    for path in CREATED:
        if not path.startswith("/tmp/"):
            report(status_fd, f"created {path}")
    alive_r, alive_w = os.pipe()
    child = os.fork()
    if child == 0:
        os.close(alive_w)
        os._exit(_init(spec, me, status_fd, alive_r))
    os.close(alive_r)
    state["child"] = child
    report(status_fd, f"pid {child}")
    os.close(status_fd)
    for signum in state["pending"]:
        forward(signum, None)
    _, status = os.waitpid(child, 0)
    return exit_code(status)


def _init(spec: dict[str, Any], parent: int, status_fd: int, alive_fd: int) -> int:
    """PID 1 of the container: start the command, forward signals, reap, exit with its code."""
    die_with_parent(parent, alive_fd)
    mount("proc", "/proc", "proc", MS_NOSUID | MS_NODEV | MS_NOEXEC)
    read_end, write_end = os.pipe2(os.O_CLOEXEC)
    main = os.fork()
    if main == 0:
        os.close(read_end)
        try:
            os.setsid()
            for sig in (*FORWARDED, signal.SIGPIPE, signal.SIGCHLD):
                signal.signal(sig, signal.SIG_DFL)
            signal.pthread_sigmask(signal.SIG_SETMASK, set())
            os.close(status_fd)
            os.chdir(spec["cwd"])
            argv = spec["argv"]
            os.execvpe(argv[0], argv, spec["env"])
        except OSError as exc:
            os.write(write_end, f"{type(exc).__name__}: {exc}".encode())
        os._exit(128)
    os.close(write_end)
    chunks = []
    while chunk := os.read(read_end, 4096):
        chunks.append(chunk)
    os.close(read_end)
    failure = b"".join(chunks).decode(errors="replace")
    report(status_fd, f"execerror {failure}" if failure else "started")
    os.close(status_fd)

    def forward(signum: int, _frame: object) -> None:
        with contextlib.suppress(ProcessLookupError):
            os.kill(main, signum)

    for sig in FORWARDED:
        signal.signal(sig, forward)
    while True:
        try:
            pid, status = os.waitpid(-1, 0)
        except ChildProcessError:
            return 128
        if pid == main:
            return exit_code(status)


def main(argv: list[str]) -> int:
    mode, spec_path = argv[1], argv[2]
    with open(spec_path) as fh:
        spec = json.load(fh)
    try:
        if mode == "sandbox":
            return run_sandbox(spec)
        return run_container(spec)
    except OSError as exc:
        fd = int(spec["status_fd"])
        with contextlib.suppress(OSError):
            report(fd, f"execerror launcher: {exc}")
        print(f"launcher ({mode}): {exc}", file=sys.stderr, flush=True)
        return 128


if __name__ == "__main__":
    sys.exit(main(sys.argv))
