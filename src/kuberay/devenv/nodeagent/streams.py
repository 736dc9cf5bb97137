"""The kubelet's streaming protocols on top of SPDY: remote command (exec, attach) and port-forward.

Remote command (``v4.channel.k8s.io`` down to ``v2.channel.k8s.io``): the client opens one
stream per channel, each with a ``streamType`` header: ``error`` always, ``stdin``/``stdout``/
``stderr`` as requested by the query (no ``stderr`` with a tty: the terminal merges it), and
``resize`` with a tty from v3 on. The server waits until all of them exist (bounded by
``STREAM_CREATION_TIMEOUT``), runs the command, half-closes the output streams once the command's
output ended, and reports the outcome on the error stream: v4 writes a ``metav1.Status`` JSON
object (``Success``, or ``Failure`` with reason ``NonZeroExitCode`` and an ``ExitCode`` cause whose
message is the code, which client-go turns into the caller's exit status); v2/v3 write only
the message of a failure. Resize events are a sequence of ``{"Width": w, "Height": h}`` JSON
objects on the resize stream.

Port-forward (``portforward.k8s.io``): for every forwarded connection the client opens an
``error`` and a ``data`` stream carrying the same ``port`` and ``requestID`` headers. When both
are there the server dials the port inside the pod and copies bytes both ways; a dial failure is
written as text to the error stream. A FIN from the client half-closes the pod connection; the
end of the pod connection closes both streams. A pair that stays incomplete for
``STREAM_CREATION_TIMEOUT`` is reported on whichever stream exists and dropped.

Failure modes: an unknown stream type is refused (REFUSED_STREAM); a client that does not offer
a protocol we speak gets 403 with the list we accept before any upgrade happens.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import logging
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import Any

from kuberay.devenv.nodeagent.spdy import Stream, StreamReset

log = logging.getLogger("kuberay.devenv.streams")

REMOTECOMMAND_V4 = "v4.channel.k8s.io"
REMOTECOMMAND_V3 = "v3.channel.k8s.io"
REMOTECOMMAND_V2 = "v2.channel.k8s.io"
REMOTECOMMAND_PROTOCOLS = (REMOTECOMMAND_V4, REMOTECOMMAND_V3, REMOTECOMMAND_V2)
PORTFORWARD_PROTOCOL = "portforward.k8s.io"
PROTOCOL_HEADER = "X-Stream-Protocol-Version"
ACCEPTED_HEADER = "X-Accepted-Stream-Protocol-Versions"
STREAM_CREATION_TIMEOUT = 30.0

StatusDict = dict[str, Any]


def negotiate(offered: list[str], supported: tuple[str, ...]) -> str | None:
    """The first protocol of the client's list (comma-separated values allowed) that we speak."""
    for value in offered:
        for proto in value.split(","):
            proto = proto.strip()
            if proto in supported:
                return proto
    return None


def _flag(query: dict[str, str], name: str) -> bool:
    return query.get(name, "") in ("1", "true", "True")


@dataclass
class CommandOptions:
    """What the caller asked for in the query (kubelet: ``remotecommand.NewOptions``)."""

    stdin: bool
    stdout: bool
    stderr: bool
    tty: bool

    @classmethod
    def from_query(cls, query: dict[str, str]) -> CommandOptions:
        tty = _flag(query, "tty")
        opts = cls(
            stdin=_flag(query, "input") or _flag(query, "stdin"),
            stdout=_flag(query, "output") or _flag(query, "stdout"),
            stderr=_flag(query, "error") or _flag(query, "stderr"),
            tty=tty,
        )
        if tty:
            opts.stderr = False
        if not (opts.stdin or opts.stdout or opts.stderr):
            raise ValueError("you must specify at least 1 of stdin, stdout, stderr")
        return opts


def success_status() -> StatusDict:
    return {"kind": "Status", "apiVersion": "v1", "metadata": {}, "status": "Success"}


def exit_status(code: int, what: str = "command") -> StatusDict:
    """The v4 status of a command that ended with a non-zero exit code."""
    code = max(0, min(255, code))
    return {
        "kind": "Status",
        "apiVersion": "v1",
        "metadata": {},
        "status": "Failure",
        "message": f"{what} terminated with non-zero exit code: exit code {code}",
        "reason": "NonZeroExitCode",
        "details": {"causes": [{"reason": "ExitCode", "message": str(code)}]},
    }


def error_status(message: str, code: int = 500) -> StatusDict:
    return {
        "kind": "Status",
        "apiVersion": "v1",
        "metadata": {},
        "status": "Failure",
        "message": message,
        "reason": "InternalError",
        "code": code,
    }


class CommandStreams:
    """The channels of one exec/attach call, gathered as the client opens them."""

    STREAM_TYPES = ("error", "stdin", "stdout", "stderr", "resize")

    def __init__(self, protocol: str, opts: CommandOptions) -> None:
        self.protocol = protocol
        self.opts = opts
        self.by_type: dict[str, Stream] = {}
        self.expected = 1 + opts.stdin + opts.stdout + opts.stderr
        if opts.tty and protocol in (REMOTECOMMAND_V4, REMOTECOMMAND_V3):
            self.expected += 1
        self._complete = asyncio.Event()

    def accept(self, stream: Stream) -> bool:
        kind = stream.header("streamType")
        return kind in self.STREAM_TYPES and kind not in self.by_type

    def on_stream(self, stream: Stream) -> None:
        self.by_type[stream.header("streamType")] = stream
        if len(self.by_type) >= self.expected:
            self._complete.set()

    async def wait(self, timeout: float = STREAM_CREATION_TIMEOUT) -> None:
        async with asyncio.timeout(timeout):
            await self._complete.wait()

    def get(self, kind: str) -> Stream | None:
        return self.by_type.get(kind)

    async def write_status(self, status: StatusDict) -> None:
        stream = self.get("error")
        if stream is None:
            return
        with contextlib.suppress(ConnectionError):
            if self.protocol == REMOTECOMMAND_V4:
                await stream.write(json.dumps(status).encode())
            elif status.get("status") != "Success":
                await stream.write(str(status.get("message", "")).encode())
            await stream.close()

    async def finish_output(self) -> None:
        for kind in ("stdout", "stderr"):
            stream = self.get(kind)
            if stream is not None:
                await stream.close()


async def resize_events(stream: Stream, apply: Callable[[int, int], None]) -> None:
    """Applies every ``{"Width", "Height"}`` object the client sends until the stream ends."""
    decoder = json.JSONDecoder()
    buf = ""
    while chunk := await stream.read():
        buf += chunk.decode(errors="replace")
        while True:
            buf = buf.lstrip()
            if not buf:
                break
            try:
                obj, end = decoder.raw_decode(buf)
            except json.JSONDecodeError:
                break  # incomplete object: wait for more bytes
            buf = buf[end:]
            if isinstance(obj, dict):
                with contextlib.suppress(TypeError, ValueError, OSError):
                    apply(int(obj.get("Width", 0)), int(obj.get("Height", 0)))


async def copy_stream_to(stream: Stream, write: Callable[[bytes], Awaitable[None]]) -> None:
    while chunk := await stream.read():
        await write(chunk)


async def copy_reader_to_stream(reader: asyncio.StreamReader, stream: Stream) -> None:
    with contextlib.suppress(StreamReset, ConnectionError):
        while chunk := await reader.read(32 * 1024):
            await stream.write(chunk)


# ---------------------------------------------------------------------- port-forward
Dialer = Callable[[int], Awaitable[tuple[asyncio.StreamReader, asyncio.StreamWriter]]]


class PortForwardHandler:
    """Pairs error and data streams by request id and forwards each pair to ``dial(port)``."""

    def __init__(self, dial: Dialer, pod: str) -> None:
        self.dial = dial
        self.pod = pod
        self.pairs: dict[str, dict[str, Stream]] = {}
        self.tasks: set[asyncio.Task[None]] = set()

    @staticmethod
    def accept(stream: Stream) -> bool:
        port = stream.header("port")
        return (
            stream.header("streamType") in ("error", "data")
            and port.isdigit()
            and 0 < int(port) < 65536
        )

    def _request_id(self, stream: Stream) -> str:
        rid = stream.header("requestID")
        if rid:
            return rid
        # Clients without request ids open the error stream, then the data stream.
        return str(stream.id if stream.header("streamType") == "error" else stream.id - 2)

    def on_stream(self, stream: Stream) -> None:
        rid = self._request_id(stream)
        pair = self.pairs.setdefault(rid, {})
        if not pair:
            self._spawn(self._expire(rid))
        pair[stream.header("streamType")] = stream
        if len(pair) == 2:
            self._spawn(self._forward(pair["error"], pair["data"]))

    def _spawn(self, coro: Awaitable[None]) -> None:
        task = asyncio.ensure_future(coro)
        self.tasks.add(task)
        task.add_done_callback(self.tasks.discard)

    async def _expire(self, rid: str) -> None:
        await asyncio.sleep(STREAM_CREATION_TIMEOUT)
        pair = self.pairs.pop(rid, None)
        if pair is not None and len(pair) < 2:
            for stream in pair.values():
                with contextlib.suppress(ConnectionError):
                    await stream.write(f"timed out waiting for the streams of {rid}".encode())
                await stream.reset()

    async def _forward(self, error: Stream, data: Stream) -> None:
        port = int(data.header("port"))
        self.pairs.pop(self._request_id(data), None)
        try:
            reader, writer = await self.dial(port)
        except OSError as exc:
            message = f"error forwarding port {port} to pod {self.pod}: {exc}"
            log.info("%s", message)
            with contextlib.suppress(ConnectionError):
                await error.write(message.encode())
            await error.close()
            await data.close()
            return

        async def upstream() -> None:
            with contextlib.suppress(ConnectionError):
                while chunk := await data.read():
                    writer.write(chunk)
                    await writer.drain()
                if writer.can_write_eof():
                    writer.write_eof()

        up = asyncio.ensure_future(upstream())
        try:
            await copy_reader_to_stream(reader, data)
        finally:
            await data.close()
            await error.close()
            with contextlib.suppress(asyncio.TimeoutError, ConnectionError):
                await asyncio.wait_for(up, 5)
            up.cancel()
            writer.close()
            with contextlib.suppress(Exception):
                await writer.wait_closed()

    async def close(self) -> None:
        for task in list(self.tasks):
            task.cancel()
