"""The kubelet API of the process runtime: container logs, exec, attach and port-forward.

kube-apiserver reaches it at the Node's InternalIP (the bridge address; the plane starts the
apiserver with ``--kubelet-preferred-address-types=InternalIP``) and the port the Node
advertises in ``daemonEndpoints`` (10250 when free there, else a kernel-chosen one). It is an
HTTPS server written directly on asyncio streams, because the streaming calls switch the
connection to SPDY/3.1 after ``101 Switching Protocols`` and need the raw socket.

Routes (as kubelet serves them; ``{uid}`` segments are accepted and ignored):
- ``GET /containerLogs/{ns}/{pod}/{container}``: ``tailLines``, ``follow``, ``previous``,
  ``timestamps``, ``sinceSeconds``, ``sinceTime``, ``limitBytes`` (see ``containerlog``).
- ``/exec/{ns}/{pod}/{container}?command=..&input=&output=&error=&tty=``: the command runs with
  ``nsenter`` in the container's mount, UTS, IPC, network and PID namespaces, with the
  container's environment and working directory; a tty is a pty on the agent's side.
- ``/attach/{ns}/{pod}/{container}``: the container's stdin (a pipe the agent keeps when the
  container has ``stdin: true``) and its output from now on (followed in the log file).
- ``/portForward/{ns}/{pod}``: connections to ``127.0.0.1:{port}`` inside the pod's network
  namespace (the socket is created by a thread that entered the namespace).

Invariants and failure modes:
- TLS with a serving certificate from the plane CA; a client certificate chained to the plane CA
  is required (the handshake fails without one), and only identities in ``system:masters``
  (the apiserver's kubelet client identity) are served; others get 403.
- Errors before an upgrade are plain HTTP errors (404 unknown pod or container, 400 bad query or
  container not running); once upgraded, failures go to the error stream.
- Every connection gets ``Connection: close``; a streaming session ends when the command (or all
  forwarded connections and the client) are done, and the socket is then closed.
"""

from __future__ import annotations

import asyncio
import contextlib
import ctypes
import fcntl
import logging
import os
import pty
import shutil
import signal
import socket
import ssl
import struct
import termios
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any
from urllib.parse import parse_qs, unquote, urlsplit

from kuberay.devenv.nodeagent import containerlog, pod_log_dirs, probes, streams
from kuberay.devenv.nodeagent.spdy import Session, Stream, StreamReset

if TYPE_CHECKING:
    from kuberay.devenv.nodeagent.pod import Container, PodWorker

log = logging.getLogger("kuberay.devenv.kubelet")

DEFAULT_PORT = 10250
CLONE_NEWNET = 0x40000000
MAX_REQUEST_HEAD = 64 * 1024
FOLLOW_POLL = 0.2
EXIT_OUTPUT_GRACE = 2.0
_REASONS = {
    101: "Switching Protocols",
    200: "OK",
    400: "Bad Request",
    403: "Forbidden",
    404: "Not Found",
    405: "Method Not Allowed",
    500: "Internal Server Error",
}


class HTTPFailure(Exception):
    def __init__(self, status: int, message: str) -> None:
        super().__init__(message)
        self.status = status


@dataclass
class Request:
    method: str
    path: str
    query: dict[str, list[str]]
    headers: dict[str, list[str]] = field(default_factory=dict)

    def arg(self, name: str, default: str = "") -> str:
        values = self.query.get(name)
        return values[0] if values else default

    def header(self, name: str) -> list[str]:
        return self.headers.get(name.lower(), [])


@dataclass
class KubeletTLS:
    cert: str
    key: str
    client_ca: str


class PodLookup:
    """How the server finds pods: the agent's live workers (by namespace and name)."""

    def __init__(self, workers: Callable[[], list[PodWorker]], log_dir: Path) -> None:
        self.workers = workers
        self.log_dir = log_dir

    def worker(self, namespace: str, name: str) -> PodWorker | None:
        found = [w for w in self.workers() if w.namespace == namespace and w.name == name]
        return found[-1] if found else None


def _container(worker: PodWorker, name: str) -> Container:
    for c in worker.containers + worker.init_containers:
        if c.name == name:
            return c
    raise HTTPFailure(404, f'container "{name}" not found in pod "{worker.name}"')


def _running(worker: PodWorker, name: str) -> Container:
    c = _container(worker, name)
    if c.proc is None or c.proc.returncode is not None or not c.init_pid:
        raise HTTPFailure(400, f'container "{name}" in pod "{worker.name}" is not running')
    return c


def _setns_socket(netns_path: str) -> socket.socket:
    """A TCP socket created inside another network namespace (by a short-lived thread, since
    ``setns`` switches only the calling thread)."""
    libc = ctypes.CDLL(None, use_errno=True)
    result: dict[str, Any] = {}

    def work() -> None:
        try:
            fd = os.open(netns_path, os.O_RDONLY | os.O_CLOEXEC)
            try:
                if libc.setns(fd, CLONE_NEWNET) != 0:
                    err = ctypes.get_errno()
                    raise OSError(err, f"setns {netns_path}: {os.strerror(err)}")
            finally:
                os.close(fd)
            result["sock"] = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
        except OSError as exc:
            result["error"] = exc

    thread = threading.Thread(target=work, name="netns-dial", daemon=True)
    thread.start()
    thread.join()
    if "error" in result:
        raise result["error"]
    sock: socket.socket = result["sock"]
    return sock


async def dial_in_netns(
    netns_path: str, port: int, timeout: float = 10.0
) -> tuple[asyncio.StreamReader, asyncio.StreamWriter]:
    sock = await asyncio.to_thread(_setns_socket, netns_path)
    sock.setblocking(False)
    loop = asyncio.get_running_loop()
    try:
        async with asyncio.timeout(timeout):
            await loop.sock_connect(sock, ("127.0.0.1", port))
    except BaseException:
        sock.close()
        raise
    return await asyncio.open_connection(sock=sock)


class KubeletServer:
    def __init__(
        self, lookup: PodLookup, tls: KubeletTLS, host: str, port: int = DEFAULT_PORT
    ) -> None:
        self.lookup = lookup
        self.tls = tls
        self.host = host
        self.port = port
        self.server: asyncio.Server | None = None
        self._conns: set[asyncio.Task[Any]] = set()

    def ssl_context(self) -> ssl.SSLContext:
        ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
        ctx.minimum_version = ssl.TLSVersion.TLSv1_2
        ctx.load_cert_chain(self.tls.cert, self.tls.key)
        ctx.load_verify_locations(self.tls.client_ca)
        ctx.verify_mode = ssl.CERT_REQUIRED
        ctx.set_alpn_protocols(["http/1.1"])
        return ctx

    async def start(self) -> int:
        """Binds ``host:port``, or a free port on ``host`` if that one is taken; returns it."""
        ctx = self.ssl_context()
        try:
            self.server = await asyncio.start_server(
                self._serve_conn, self.host, self.port, ssl=ctx, reuse_address=True
            )
        except OSError as exc:
            log.warning("kubelet port %s:%d: %s; using a free one", self.host, self.port, exc)
            self.server = await asyncio.start_server(self._serve_conn, self.host, 0, ssl=ctx)
        self.port = int(self.server.sockets[0].getsockname()[1])
        log.info("kubelet API on https://%s:%d", self.host, self.port)
        return self.port

    async def stop(self) -> None:
        if self.server is not None:
            self.server.close()
        for task in list(self._conns):
            task.cancel()
        if self.server is not None:
            with contextlib.suppress(Exception):
                async with asyncio.timeout(2):
                    await self.server.wait_closed()

    # -------------------------------------------------------------- HTTP
    async def _serve_conn(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        task = asyncio.current_task()
        if task is not None:
            self._conns.add(task)
        try:
            await self._serve_request(reader, writer)
        except (ConnectionError, asyncio.IncompleteReadError, ssl.SSLError, TimeoutError) as exc:
            log.debug("kubelet connection ended: %s", exc)
        except Exception:
            log.exception("kubelet request failed")
        finally:
            if task is not None:
                self._conns.discard(task)
            with contextlib.suppress(Exception):
                writer.close()
                await writer.wait_closed()

    @staticmethod
    def _authorized(writer: asyncio.StreamWriter) -> bool:
        cert = writer.get_extra_info("peercert") or {}
        groups = [v for rdn in cert.get("subject", ()) for k, v in rdn if k == "organizationName"]
        return "system:masters" in groups

    async def _serve_request(
        self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter
    ) -> None:
        async with asyncio.timeout(30):
            head = await reader.readuntil(b"\r\n\r\n")
        if len(head) > MAX_REQUEST_HEAD:
            await respond(writer, 400, "request head too large")
            return
        req = parse_request(head)
        length = int((req.header("content-length") or ["0"])[0] or 0)
        if length:
            await reader.readexactly(min(length, 1 << 20))
        if not self._authorized(writer):
            await respond(writer, 403, "Forbidden: only the apiserver may use this kubelet API")
            return
        parts = [unquote(p) for p in req.path.split("/") if p]
        try:
            if not parts:
                raise HTTPFailure(404, "not found")
            if parts[0] == "healthz":
                await respond(writer, 200, "ok")
            elif parts[0] == "containerLogs" and len(parts) == 4:
                await self.container_logs(req, reader, writer, *parts[1:])
            elif parts[0] in ("exec", "attach") and len(parts) in (4, 5):
                verb, ns, pod, container = parts[0], parts[1], parts[2], parts[-1]
                await self.remote_command(req, reader, writer, verb, ns, pod, container)
            elif parts[0] == "portForward" and len(parts) in (3, 4):
                await self.port_forward(req, reader, writer, parts[1], parts[2])
            else:
                raise HTTPFailure(404, f"no kubelet route for {req.path}")
        except HTTPFailure as exc:
            await respond(writer, exc.status, str(exc))

    def _worker(self, namespace: str, pod: str) -> PodWorker:
        worker = self.lookup.worker(namespace, pod)
        if worker is None:
            raise HTTPFailure(404, f'pod "{pod}" not found in namespace "{namespace}" on this node')
        return worker

    # -------------------------------------------------------------- logs
    def _log_file(
        self, req: Request, namespace: str, pod: str, name: str
    ) -> tuple[Path, Container | None]:
        """The file to read (current or previous instance) and the live container, if any."""
        worker = self.lookup.worker(namespace, pod)
        c: Container | None = None
        if worker is not None:
            c = _container(worker, name)
            log_dir = worker.log_dir
        else:
            dirs = pod_log_dirs(self.lookup.log_dir, namespace, pod)
            if not dirs:
                raise HTTPFailure(404, f'pod "{pod}" not found in namespace "{namespace}"')
            log_dir = dirs[-1]
        if req.arg("previous") in ("true", "1"):
            path = _previous_log(log_dir, name, c)
            if path is None:
                raise HTTPFailure(
                    400, f'previous terminated container "{name}" in pod "{pod}" not found'
                )
            return path, None
        path = log_dir / f"{name}.log"
        if not path.exists() and (c is None or c.proc is None):
            raise HTTPFailure(400, f'container "{name}" in pod "{pod}" is waiting to start')
        return path, c

    async def container_logs(
        self,
        req: Request,
        reader: asyncio.StreamReader,
        writer: asyncio.StreamWriter,
        namespace: str,
        pod: str,
        name: str,
    ) -> None:
        path, c = self._log_file(req, namespace, pod, name)
        query = _log_query(req)
        follow = req.arg("follow") in ("true", "1") and c is not None
        chunk = containerlog.LogChunk([], 0, None)
        if req.arg("stream") != "Stderr":  # stdout and stderr share one file: all is stdout
            chunk = await asyncio.to_thread(containerlog.read_lines, path)
        await send_head(writer, 200, "text/plain")
        out = _LogOutput(writer, query)
        if not await out.emit_all(query.select(chunk.lines)):
            return
        if follow:
            assert c is not None
            instance = c.container_id
            # The caller going away (EOF; nothing else is sent on this connection) ends a follow
            # even while the container stays quiet.
            gone = asyncio.ensure_future(reader.read(1))
            try:
                while not gone.done():
                    running = (
                        c.proc is not None
                        and c.proc.returncode is None
                        and c.container_id == instance
                    )
                    # After the instance ended, one more read: the log task files its last output.
                    await asyncio.wait({gone}, timeout=FOLLOW_POLL)
                    chunk = await asyncio.to_thread(containerlog.read_lines, path, chunk.end)
                    if not await out.emit_all(chunk.lines) or not running:
                        break
            finally:
                gone.cancel()
        if chunk.partial is not None and (
            query.since_ns is None or chunk.partial.time_ns >= query.since_ns
        ):
            await out.emit_all([chunk.partial])

    # -------------------------------------------------------------- exec / attach
    async def _upgrade(
        self,
        req: Request,
        writer: asyncio.StreamWriter,
        supported: tuple[str, ...],
    ) -> str | None:
        """Answers 101 and returns the negotiated protocol; None when no protocol is shared (the
        403 is then already sent)."""
        upgrade = " ".join(req.header("upgrade")).lower()
        connection = " ".join(req.header("connection")).lower()
        if "spdy/3.1" not in upgrade or "upgrade" not in connection:
            if "websocket" in upgrade:
                raise HTTPFailure(400, "this kubelet speaks SPDY/3.1 only (no websockets)")
            raise HTTPFailure(400, "unable to upgrade: missing upgrade headers in request")
        offered = req.header(streams.PROTOCOL_HEADER)
        protocol = streams.negotiate(offered, supported)
        if protocol is None:
            extra = [(streams.ACCEPTED_HEADER, p) for p in supported]
            await respond(
                writer,
                403,
                f"unable to upgrade: unable to negotiate protocol: client supports {offered}, "
                f"server accepts {list(supported)}",
                extra,
            )
            return None
        await send_head(
            writer,
            101,
            None,
            [
                ("Connection", "Upgrade"),
                ("Upgrade", "SPDY/3.1"),
                (streams.PROTOCOL_HEADER, protocol),
            ],
            close=False,
        )
        return protocol

    async def remote_command(
        self,
        req: Request,
        reader: asyncio.StreamReader,
        writer: asyncio.StreamWriter,
        verb: str,
        namespace: str,
        pod: str,
        name: str,
    ) -> None:
        worker = self._worker(namespace, pod)
        c = _running(worker, name)
        try:
            opts = streams.CommandOptions.from_query({k: v[0] for k, v in req.query.items()})
        except ValueError as exc:
            raise HTTPFailure(400, str(exc)) from None
        command = req.query.get("command", [])
        if verb == "exec" and not command:
            raise HTTPFailure(400, "you must specify a command to exec")
        if verb == "attach" and opts.stdin and (c.proc is None or c.proc.stdin is None):
            opts.stdin = False  # kubelet: stdin is ignored for a container without stdin: true
        protocol = await self._upgrade(req, writer, streams.REMOTECOMMAND_PROTOCOLS)
        if protocol is None:
            return
        chans = streams.CommandStreams(protocol, opts)
        session = Session(reader, writer, accept=chans.accept, on_stream=chans.on_stream)
        serving = asyncio.create_task(session.serve())
        try:
            try:
                await chans.wait()
            except TimeoutError:
                log.warning("%s %s/%s: client did not open its streams", verb, namespace, pod)
                return
            if verb == "exec":
                status = await self._run_exec(chans, session, c, command)
            else:
                status = await self._run_attach(chans, session, worker, c)
            await chans.finish_output()
            await chans.write_status(status)
            # Let the client read everything and close first; do not cut it off.
            with contextlib.suppress(TimeoutError):
                async with asyncio.timeout(5):
                    await asyncio.shield(serving)
        finally:
            serving.cancel()
            with contextlib.suppress(asyncio.CancelledError, Exception):
                await serving
            await session.close()

    async def _run_exec(
        self, chans: streams.CommandStreams, session: Session, c: Container, command: list[str]
    ) -> streams.StatusDict:
        argv = probes.nsenter_argv(c.init_pid, c.working_dir or "/", command)
        argv[0] = shutil.which("nsenter") or "nsenter"
        env = dict(c.env)
        opts = chans.opts
        if opts.tty:
            env.setdefault("TERM", "xterm")
            return await self._exec_tty(chans, session, argv, env, command)
        try:
            proc = await asyncio.create_subprocess_exec(
                *argv,
                stdin=asyncio.subprocess.PIPE if opts.stdin else asyncio.subprocess.DEVNULL,
                stdout=asyncio.subprocess.PIPE if opts.stdout else asyncio.subprocess.DEVNULL,
                stderr=asyncio.subprocess.PIPE if opts.stderr else asyncio.subprocess.DEVNULL,
                env=env,
                start_new_session=True,
            )
        except OSError as exc:
            return streams.error_status(f"failed to exec in container: {exc}")
        pumps: list[asyncio.Task[None]] = []
        stdin = chans.get("stdin")
        feeder: asyncio.Task[None] | None = None
        if stdin is not None and proc.stdin is not None:
            feeder = asyncio.create_task(_feed_writer(stdin, proc.stdin))
        for kind, source in (("stdout", proc.stdout), ("stderr", proc.stderr)):
            target = chans.get(kind)
            if target is not None and source is not None:
                pumps.append(asyncio.create_task(streams.copy_reader_to_stream(source, target)))
        code = await _wait_or_hang_up(proc, session, lambda: None)
        await _settle(pumps)
        if feeder is not None:
            feeder.cancel()
        return _command_status(code, command)

    async def _exec_tty(
        self,
        chans: streams.CommandStreams,
        session: Session,
        argv: list[str],
        env: dict[str, str],
        command: list[str],
    ) -> streams.StatusDict:
        master, slave = pty.openpty()
        # The terminal must be the controlling terminal of a session that starts *inside* the
        # container's PID namespace (else the shell's job control cannot see its own process
        # group): nsenter runs without one, and `setsid -c` takes the pty once inside.
        setsid = shutil.which("setsid") or "setsid"
        split = argv.index("--") + 1
        argv = [*argv[:split], setsid, "-c", *argv[split:]]
        try:
            proc = await asyncio.create_subprocess_exec(
                *argv,
                stdin=slave,
                stdout=slave,
                stderr=slave,
                env=env,
                start_new_session=True,
            )
        except OSError as exc:
            os.close(master)
            return streams.error_status(f"failed to exec in container: {exc}")
        finally:
            os.close(slave)
        os.set_blocking(master, False)
        term = _Terminal(master)
        tasks: list[asyncio.Task[None]] = []
        resize = chans.get("resize")
        if resize is not None:
            tasks.append(asyncio.create_task(streams.resize_events(resize, term.resize)))
        stdin = chans.get("stdin")
        if stdin is not None:
            tasks.append(asyncio.create_task(streams.copy_stream_to(stdin, term.write)))
        stdout = chans.get("stdout")
        reader = asyncio.create_task(term.copy_to(stdout))
        code = await _wait_or_hang_up(proc, session, term.close)
        await _settle([reader])
        for task in tasks:
            task.cancel()
        term.close()
        return _command_status(code, command)

    async def _run_attach(
        self, chans: streams.CommandStreams, session: Session, worker: PodWorker, c: Container
    ) -> streams.StatusDict:
        """Container stdin from the client, container output from now on to the client, until
        the container exits (its exit code is the status) or the client goes away."""
        proc = c.proc
        if proc is None:
            return streams.error_status("container is not running")
        path = worker.log_dir / f"{c.name}.log"
        feeder: asyncio.Task[None] | None = None
        stdin = chans.get("stdin")
        if stdin is not None and proc.stdin is not None:
            once = bool(c.spec.get("stdinOnce"))
            feeder = asyncio.create_task(_feed_writer(stdin, proc.stdin, keep_open=not once))
        out = chans.get("stdout") or chans.get("stderr")
        outputs = [out] if out is not None else []
        pos = path.stat().st_size if path.exists() else 0
        exited = asyncio.create_task(proc.wait())
        gone = asyncio.create_task(session.closed.wait())
        try:
            while True:
                pos = await _send_new(path, pos, outputs)
                if exited.done() or gone.done():
                    break
                await asyncio.wait({exited, gone}, timeout=FOLLOW_POLL)
            if exited.done():
                await asyncio.sleep(FOLLOW_POLL)  # the log task files the last output
                await _send_new(path, pos, outputs)
        finally:
            for task in (exited, gone, feeder):
                if task is not None:
                    task.cancel()
        if proc.returncode is None:
            return streams.success_status()
        code = proc.returncode if proc.returncode >= 0 else 128 - proc.returncode
        return _command_status(code, ["attach"])

    # -------------------------------------------------------------- port-forward
    async def port_forward(
        self,
        req: Request,
        reader: asyncio.StreamReader,
        writer: asyncio.StreamWriter,
        namespace: str,
        pod: str,
    ) -> None:
        worker = self._worker(namespace, pod)
        sandbox = worker.sandbox
        if sandbox is None or sandbox.returncode is not None:
            raise HTTPFailure(400, f'pod "{pod}" has no running sandbox')
        netns = f"/proc/{sandbox.pid}/ns/net"
        if await self._upgrade(req, writer, (streams.PORTFORWARD_PROTOCOL,)) is None:
            return

        async def dial(port: int) -> tuple[asyncio.StreamReader, asyncio.StreamWriter]:
            return await dial_in_netns(netns, port)

        handler = streams.PortForwardHandler(dial, f"{namespace}/{pod}")
        session = Session(reader, writer, accept=handler.accept, on_stream=handler.on_stream)
        try:
            await session.serve()
        finally:
            await handler.close()
            await session.close()


class _LogOutput:
    """Writes log lines to the HTTP response, honouring ``limitBytes``."""

    def __init__(self, writer: asyncio.StreamWriter, query: containerlog.LogQuery) -> None:
        self.writer = writer
        self.query = query
        self.budget = query.limit_bytes if query.limit_bytes is not None else -1

    async def emit_all(self, lines: list[containerlog.LogLine]) -> bool:
        """False once the byte limit is reached (the response is then complete)."""
        for line in lines:
            data = self.query.render(line)
            if self.budget >= 0:
                data = data[: self.budget]
                self.budget -= len(data)
            self.writer.write(data)
            await self.writer.drain()
            if self.budget == 0:
                return False
        return True


class _Terminal:
    """The agent's end of an exec's pty: non-blocking reads and writes through the loop."""

    def __init__(self, fd: int) -> None:
        self.fd = fd
        self.loop = asyncio.get_running_loop()
        self._waiters: set[Callable[[], None]] = set()

    def resize(self, width: int, height: int) -> None:
        if width > 0 and height > 0:
            fcntl.ioctl(self.fd, termios.TIOCSWINSZ, struct.pack("HHHH", height, width, 0, 0))

    async def _wait(self, add: Callable[..., None], remove: Callable[[int], object]) -> None:
        fut: asyncio.Future[None] = self.loop.create_future()

        def ready() -> None:
            if not fut.done():
                fut.set_result(None)

        fd = self.fd
        add(fd, ready)
        self._waiters.add(ready)
        try:
            await fut
        finally:
            self._waiters.discard(ready)
            if self.fd == fd:
                remove(fd)

    async def write(self, data: bytes) -> None:
        view = memoryview(data)
        while view and self.fd >= 0:
            try:
                n = os.write(self.fd, view)
                view = view[n:]
            except BlockingIOError:
                await self._wait(self.loop.add_writer, self.loop.remove_writer)

    async def copy_to(self, stream: Stream | None) -> None:
        while self.fd >= 0:
            try:
                data = os.read(self.fd, 32 * 1024)
            except BlockingIOError:
                await self._wait(self.loop.add_reader, self.loop.remove_reader)
                continue
            except OSError:
                return  # EIO: every process holding the terminal is gone
            if not data:
                return
            if stream is not None:
                with contextlib.suppress(StreamReset, ConnectionError):
                    await stream.write(data)

    def close(self) -> None:
        """Idempotent: the fd number must not be closed twice (it may be reused meanwhile)."""
        if self.fd < 0:
            return
        fd, self.fd = self.fd, -1
        self.loop.remove_reader(fd)
        self.loop.remove_writer(fd)
        for wake in list(self._waiters):
            wake()
        with contextlib.suppress(OSError):
            os.close(fd)


async def _wait_or_hang_up(
    proc: asyncio.subprocess.Process, session: Session, hang_up: Callable[[], None]
) -> int:
    """The command's exit code; if the client goes away first, the command is hung up on (its
    terminal closed) and killed with its process group, as nobody can talk to it any more."""
    exited = asyncio.ensure_future(proc.wait())
    closed = asyncio.ensure_future(session.closed.wait())
    await asyncio.wait({exited, closed}, return_when=asyncio.FIRST_COMPLETED)
    closed.cancel()
    if not exited.done():
        hang_up()
        with contextlib.suppress(ProcessLookupError, PermissionError):
            os.killpg(proc.pid, signal.SIGKILL)
    return await exited


async def _feed_writer(
    stream: Stream, target: asyncio.StreamWriter, keep_open: bool = False
) -> None:
    with contextlib.suppress(ConnectionError):
        while chunk := await stream.read():
            target.write(chunk)
            await target.drain()
        if not keep_open:
            target.close()


async def _settle(tasks: list[asyncio.Task[None]]) -> None:
    """Output pumps get a moment after the command exits (background processes may keep the
    pipes open; kubelet does not wait for them forever either)."""
    if not tasks:
        return
    _, pending = await asyncio.wait(tasks, timeout=EXIT_OUTPUT_GRACE)
    for task in pending:
        task.cancel()


def _read_from(path: Path, pos: int) -> bytes:
    try:
        with open(path, "rb") as fh:
            fh.seek(pos)
            return fh.read()
    except FileNotFoundError:
        return b""


async def _send_new(path: Path, pos: int, outputs: list[Stream]) -> int:
    data = await asyncio.to_thread(_read_from, path, pos)
    if data:
        for stream in outputs:
            with contextlib.suppress(StreamReset, ConnectionError):
                await stream.write(data)
    return pos + len(data)


def _command_status(code: int, command: list[str]) -> streams.StatusDict:
    if code == 0:
        return streams.success_status()
    if code < 0:
        code = 128 - code
    return streams.exit_status(code, f"command {command!r}")


def _previous_log(log_dir: Path, name: str, c: Container | None) -> Path | None:
    if c is not None and c.restart_count > 0:
        path = log_dir / f"{name}.{c.restart_count - 1}.log"
        if path.exists():
            return path
    rotated = []
    for p in log_dir.glob(f"{name}.*.log"):
        middle = p.name[len(name) + 1 : -len(".log")]
        if middle.isdigit():
            rotated.append((int(middle), p))
    if c is not None and c.finished and not rotated:
        return None
    return max(rotated)[1] if rotated else None


def _log_query(req: Request) -> containerlog.LogQuery:
    try:
        query = containerlog.LogQuery(timestamps=req.arg("timestamps") in ("true", "1"))
        if req.arg("tailLines"):
            query.tail_lines = int(req.arg("tailLines"))
        if req.arg("limitBytes"):
            query.limit_bytes = int(req.arg("limitBytes"))
        if req.arg("sinceSeconds"):
            query.since_ns = time.time_ns() - int(req.arg("sinceSeconds")) * 1_000_000_000
        elif req.arg("sinceTime"):
            query.since_ns = containerlog.parse_time(req.arg("sinceTime"))
    except ValueError as exc:
        raise HTTPFailure(400, f"bad log query: {exc}") from None
    return query


def parse_request(head: bytes) -> Request:
    lines = head.decode("latin-1").split("\r\n")
    try:
        method, target, _version = lines[0].split(" ", 2)
    except ValueError:
        raise HTTPFailure(400, "malformed request line") from None
    url = urlsplit(target)
    headers: dict[str, list[str]] = {}
    for line in lines[1:]:
        if not line:
            continue
        name, _, value = line.partition(":")
        headers.setdefault(name.strip().lower(), []).append(value.strip())
    return Request(method, url.path, parse_qs(url.query, keep_blank_values=True), headers)


async def send_head(
    writer: asyncio.StreamWriter,
    status: int,
    content_type: str | None,
    extra: list[tuple[str, str]] | None = None,
    *,
    close: bool = True,
    length: int | None = None,
) -> None:
    lines = [f"HTTP/1.1 {status} {_REASONS.get(status, 'Status')}"]
    if content_type:
        lines.append(f"Content-Type: {content_type}")
    if length is not None:
        lines.append(f"Content-Length: {length}")
    if close:
        lines.append("Connection: close")
    lines += [f"{k}: {v}" for k, v in extra or []]
    writer.write(("\r\n".join(lines) + "\r\n\r\n").encode("latin-1"))
    await writer.drain()


async def respond(
    writer: asyncio.StreamWriter,
    status: int,
    message: str,
    extra: list[tuple[str, str]] | None = None,
) -> None:
    body = message.encode()
    if status >= 400 and not message.endswith("\n"):
        body += b"\n"
    await send_head(writer, status, "text/plain; charset=utf-8", extra, length=len(body))
    writer.write(body)
    await writer.drain()
