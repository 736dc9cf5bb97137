"""HTTP/2 transport for the apiserver client: many requests and watches over few connections.

Why: over HTTP/1.1 every open watch holds a TCP+TLS connection of its own, so an operator that
watches N namespaces holds about twelve connections per namespace (6,008 at 500 namespaces,
1.9 GB RSS). client-go multiplexes everything over HTTP/2; this module does the same on asyncio
with the ``h2`` state machine (tests/bench/namespaces.py: 61 connections, 155 MiB there).

Options weighed:
- httpx/httpcore with ``h2``: maintained and multiplexes, but has no PING health check (a
  half-open connection is only noticed by each stream's own read timeout, 5 minutes for a
  watch), gives no control over how streams are packed into connections, and adds httpx,
  httpcore, certifi, idna and h11 plus a second request/response layer to the hot path.
- aiohttp: HTTP/1.1 only. aioh2 (last release 2023) and other asyncio HTTP/2 clients on PyPI
  are unmaintained.
- Our own ``h2``-driven ``asyncio.Protocol`` (chosen): ``h2``/``hpack``/``hyperframe`` are the
  same maintained framing code httpx uses; around them we keep only a stream table,
  flow-control accounting, a pool that respects the server's stream limit and a PING health
  check, all testable on loopback (tests/unit/runtime/test_http2.py).
Client CPU on the local plane (tests/bench/transport.py, a loaded 2-core machine, noisy): per
watch event 21 us over HTTP/2 vs 25 us over HTTP/1.1 (a burst of frames is handed over as one
piece); per small GET ~750 us vs ~480-650 us: pure-Python HPACK and framing cost more than
aiohttp's C parser, a price paid per request, not per watched namespace.

Invariants and failure modes:
- A connection is used only after ALPN chose ``h2`` and the server's first SETTINGS arrived, so
  its ``MAX_CONCURRENT_STREAMS`` is known (kube-apiserver announces 100 unless
  ``--http2-max-streams-per-connection`` says otherwise; aggregated apiservers 1000). A
  connection with no free stream slot is skipped; the pool opens another one, so N streams
  take ceil(N / limit) connections. ALPN yielding anything else raises
  ``NotNegotiated`` and the caller falls back to HTTP/1.1 for good.
- Health: when nothing was received for ``read_idle`` seconds (client-go: ReadIdleTimeout 30 s)
  a PING is sent; no ACK within ``ping_timeout`` (PingTimeout 15 s) fails the connection and
  every stream on it with ``TransportError`` (status 0 upstream), so watches restart elsewhere.
- Flow control: data is acknowledged to the server when the consumer takes it, so a slow
  consumer back-pressures its own stream and never buffers without bound.
- GOAWAY: streams above the server's last stream id fail with ``Refused`` (never
  processed, so the client sends them again) and no new stream goes there. ``h2`` accepts no
  frame after a GOAWAY, so streams still answering on that connection then fail with
  ``TransportError``, as on a dropped HTTP/1.1 connection: reads are retried, watches resume
  from their last version. Go finishes them; an apiserver run with ``--goaway-chance`` thus
  costs us a watch restart per GOAWAY.
- ``close()`` cancels and awaits every task it started and closes every socket: nothing leaks.
- A connection with no stream for ``idle_close`` seconds closes itself and is never handed out
  again (60 s: below the apiserver's own 90 s idle close, so a request never races the
  server's GOAWAY), so one dialled for a burst above the stream limit does not stay.
- A request whose frames could not all be written (the connection failed before END_STREAM
  went out) raises ``Refused``: the server cannot have acted on a request it never saw end.
"""

from __future__ import annotations

import asyncio
import contextlib
import ssl
import time
from collections import deque
from collections.abc import AsyncIterator, Sequence

import h2.config
import h2.connection
import h2.errors
import h2.events
import h2.exceptions
import h2.settings

# Receive windows: 4 MiB per stream and 32 MiB per connection let a large list stream in without
# waiting for window updates; 1 MiB frames mean fewer frames (and fewer Python calls) per byte.
STREAM_WINDOW = 4 << 20
CONNECTION_WINDOW = 32 << 20
MAX_FRAME = 1 << 20
# A connection without streams for this long is closed by us. kube-apiserver's HTTP/2 server
# closes one idle for 90 s (its IdleTimeout) with a GOAWAY; a request written into that close
# is lost with the socket, so we close well before it does.
IDLE_CLOSE = 60.0
# Before the first SETTINGS, assume the RFC's floor for concurrent streams.
DEFAULT_MAX_STREAMS = 100


class TransportError(Exception):
    """The connection or stream failed (reset, closed, PING unanswered): no HTTP answer."""


class Refused(TransportError):
    """The server did not process the request (REFUSED_STREAM, or above a GOAWAY's last stream
    id): safe to send again, even a write."""


class NotNegotiated(TransportError):
    """The server did not choose h2 in ALPN; the caller should use HTTP/1.1."""


class H2Stream:
    """One request/response exchange. Read the answer with ``response``/``read``/``chunks``;
    always ``release()`` it (a stream still open is reset)."""

    def __init__(self, conn: H2Connection, stream_id: int) -> None:
        self.conn = conn
        self.id = stream_id
        self.status = 0
        self.headers: list[tuple[bytes, bytes]] = []
        self._data: deque[tuple[bytes, int]] = deque()
        self._ended = False
        self._headers_seen = False
        self._error: BaseException | None = None
        self._wake = asyncio.Event()
        self._released = False

    def header(self, name: str) -> str | None:
        key = name.lower().encode()
        for k, v in self.headers:
            if k == key:
                return v.decode("latin-1")
        return None

    async def _wait(self, timeout: float | None) -> None:
        self._wake.clear()
        async with asyncio.timeout(timeout):
            await self._wake.wait()

    async def response(self, timeout: float | None) -> int:
        """Waits for the response headers; returns the status. ``timeout`` bounds the wait."""
        while not self._headers_seen:
            if self._error is not None:
                raise self._error
            await self._wait(timeout)
        return self.status

    async def chunk(self, timeout: float | None) -> bytes | None:
        """The next piece of the body, or None at its end. ``timeout`` bounds the silence."""
        while not self._data:
            if self._error is not None:
                raise self._error
            if self._ended:
                return None
            await self._wait(timeout)
        if len(self._data) == 1:
            data, flow = self._data.popleft()
        else:  # a burst (a watch replaying events): hand it over, and acknowledge it, at once
            parts = []
            flow = 0
            for piece, size in self._data:
                parts.append(piece)
                flow += size
            self._data.clear()
            data = b"".join(parts)
        self.conn._consumed(self.id, flow)
        return data

    async def read(self, timeout: float | None) -> bytes:
        parts = []
        while (piece := await self.chunk(timeout)) is not None:
            parts.append(piece)
        return b"".join(parts)

    async def chunks(self, timeout: float | None) -> AsyncIterator[bytes]:
        while (piece := await self.chunk(timeout)) is not None:
            yield piece

    def release(self) -> None:
        if not self._released:
            self._released = True
            self.conn._release(self)


class H2Connection(asyncio.Protocol):
    """One TLS connection speaking HTTP/2; owned by an ``H2Pool``."""

    def __init__(
        self, authority: str, read_idle: float, ping_timeout: float, idle_close: float = 0.0
    ) -> None:
        config = h2.config.H2Configuration(
            client_side=True,
            header_encoding=None,
            validate_outbound_headers=False,
            normalize_outbound_headers=False,
            validate_inbound_headers=False,
            normalize_inbound_headers=False,
        )
        self.h2 = h2.connection.H2Connection(config=config)
        # No MAX_CONCURRENT_STREAMS of ours: ENABLE_PUSH 0 already forbids server streams, and
        # with a limit of 0 h2 rejects, as a connection error, the HEADERS of a response that
        # crossed our RST_STREAM on the wire (it checks the limit before it sees the stream
        # was ours): one cancelled request then failed every stream on the connection.
        self.h2.local_settings = h2.settings.Settings(
            client=True,
            initial_values={
                h2.settings.SettingCodes.ENABLE_PUSH: 0,
                h2.settings.SettingCodes.INITIAL_WINDOW_SIZE: STREAM_WINDOW,
                h2.settings.SettingCodes.MAX_FRAME_SIZE: MAX_FRAME,
            },
        )
        # Settings given as initial values count as already in force, so h2 never raises its
        # frame size limit on the server's ACK: raise it here (the server sends larger frames
        # only after it has read these settings).
        self.h2.max_inbound_frame_size = MAX_FRAME
        self.authority = authority
        self.read_idle = read_idle
        self.ping_timeout = ping_timeout
        self.idle_close = idle_close
        self.max_streams = DEFAULT_MAX_STREAMS  # the server's limit, once its SETTINGS came
        self.transport: asyncio.Transport | None = None
        self.streams: dict[int, H2Stream] = {}
        self.settled = asyncio.Event()  # the server's first SETTINGS arrived
        self.closed = False
        self.draining = False  # GOAWAY received: no new streams
        self.error: TransportError | None = None
        self.last_received = time.monotonic()
        self.idle_since = time.monotonic()
        self._window = asyncio.Event()
        self._pong: asyncio.Event | None = None
        self._health: asyncio.Task[None] | None = None
        self.lost = asyncio.Event()

    # ------------------------------------------------------------- asyncio.Protocol
    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        assert isinstance(transport, asyncio.Transport)
        self.transport = transport
        self.h2.initiate_connection()
        self.h2.increment_flow_control_window(CONNECTION_WINDOW - 65535)
        self._flush()

    def data_received(self, data: bytes) -> None:
        self.last_received = time.monotonic()
        try:
            events = self.h2.receive_data(data)
        except h2.exceptions.ProtocolError as exc:
            self._fail(TransportError(f"HTTP/2 protocol error: {exc!r}"))
            return
        for event in events:
            self._dispatch(event)
        self._flush()

    def connection_lost(self, exc: Exception | None) -> None:
        self._fail(TransportError(f"connection closed: {exc!r}" if exc else "connection closed"))
        self.lost.set()

    # ------------------------------------------------------------- events
    def _dispatch(self, event: h2.events.Event) -> None:  # noqa: C901
        if isinstance(event, h2.events.DataReceived):
            stream = self.streams.get(event.stream_id)
            if stream is None or stream._released:
                self._consumed(event.stream_id, event.flow_controlled_length)
                return
            stream._data.append((event.data, event.flow_controlled_length))
            stream._wake.set()
        elif isinstance(event, h2.events.ResponseReceived):
            stream = self.streams.get(event.stream_id)
            if stream is not None:
                headers = [(bytes(k), bytes(v)) for k, v in event.headers]
                for k, v in headers:
                    if k == b":status":
                        stream.status = int(v)
                stream.headers = headers
                stream._headers_seen = True
                stream._wake.set()
        elif isinstance(event, h2.events.StreamEnded):
            stream = self.streams.get(event.stream_id)
            if stream is not None:
                stream._ended = True
                stream._wake.set()
        elif isinstance(event, h2.events.StreamReset):
            stream = self.streams.get(event.stream_id)
            if stream is not None:
                code = event.error_code
                kind = Refused if code == h2.errors.ErrorCodes.REFUSED_STREAM else TransportError
                stream._error = kind(f"stream reset by the server: {code!r}")
                stream._wake.set()
        elif isinstance(event, h2.events.WindowUpdated | h2.events.RemoteSettingsChanged):
            self._window.set()
            self._window = asyncio.Event()
            if isinstance(event, h2.events.RemoteSettingsChanged):
                limit = self.h2.remote_settings.max_concurrent_streams
                self.max_streams = DEFAULT_MAX_STREAMS if limit is None else int(limit)
                self.settled.set()
        elif isinstance(event, h2.events.PingAckReceived):
            if self._pong is not None:
                self._pong.set()
        elif isinstance(event, h2.events.ConnectionTerminated):
            self._goaway(event)

    def _goaway(self, event: h2.events.ConnectionTerminated) -> None:
        self.draining = True
        last = event.last_stream_id or 0
        reason = f"GOAWAY from the server ({event.error_code!r})"
        for sid, stream in self.streams.items():
            if sid > last:
                stream._error = Refused(reason)
                stream._wake.set()
            elif event.error_code:
                stream._error = TransportError(reason)
                stream._wake.set()
        if event.error_code:
            self._fail(TransportError(reason))

    # ------------------------------------------------------------- internals
    def _flush(self) -> bool:
        """Hands pending frames to the socket; False when they could not be (closing)."""
        data = self.h2.data_to_send()
        if not data:
            return True
        if self.transport is None or self.transport.is_closing():
            return False
        self.transport.write(data)
        # A failed write (EPIPE: the server already closed) marks the transport closing at once
        # and reports connection_lost later: what was written in that call is lost.
        return not self.transport.is_closing()

    def _consumed(self, stream_id: int, flow: int) -> None:
        if self.closed or not flow:
            return
        try:
            self.h2.acknowledge_received_data(flow, stream_id)
        except h2.exceptions.ProtocolError:
            return
        self._flush()

    def _release(self, stream: H2Stream) -> None:
        self.streams.pop(stream.id, None)
        if not self.streams:
            self.idle_since = time.monotonic()
        if self.closed:
            return
        # Unread data still counts against the connection window: give it back.
        unread = sum(flow for _, flow in stream._data)
        stream._data.clear()
        if unread:
            with contextlib.suppress(h2.exceptions.ProtocolError):
                self.h2.acknowledge_received_data(unread, stream.id)
        # Still open on either side (a watch given up, a body cut short by an early answer):
        # reset it, or h2 would count it against the server's stream limit for ever.
        state = self.h2.streams.get(stream.id)
        if state is not None and not state.closed:
            with contextlib.suppress(h2.exceptions.ProtocolError, KeyError):
                self.h2.reset_stream(stream.id, h2.errors.ErrorCodes.CANCEL)
        self._flush()
        if self.draining and not self.streams:
            self.close()

    def _fail(self, error: TransportError) -> None:
        if self.closed:
            return
        self.closed = True
        self.error = error
        for stream in self.streams.values():
            if stream._error is None:
                stream._error = error
            stream._wake.set()
        self._window.set()
        if self._pong is not None:
            self._pong.set()
        if self.transport is not None:
            self.transport.close()

    # ------------------------------------------------------------- API
    def has_room(self) -> bool:
        if self.idle_close and self.idle_for() >= self.idle_close:
            self.close()  # about to close itself: never start a stream on it
        return not (self.closed or self.draining) and len(self.streams) < self.max_streams

    async def start(self, timeout: float) -> None:
        """Waits for the server's SETTINGS, then starts the health check."""
        try:
            async with asyncio.timeout(timeout):
                await self.settled.wait()
        except TimeoutError:
            self._fail(TransportError("no SETTINGS from the server"))
            raise
        if self.error is not None:
            raise self.error
        self._health = asyncio.get_running_loop().create_task(self._check_health())

    async def open(
        self, headers: Sequence[tuple[bytes, bytes]], body: bytes | None, timeout: float | None
    ) -> H2Stream:
        """Sends a request; returns its stream once the body is sent (headers may follow)."""
        if self.error is not None:
            raise Refused(str(self.error))  # nothing of this request was sent
        sid = self.h2.get_next_available_stream_id()
        stream = H2Stream(self, sid)
        self.streams[sid] = stream
        try:
            self.h2.send_headers(sid, headers, end_stream=not body)
            if not self._flush():
                raise TransportError("the connection closed while sending the request")
            if body:
                await self._send_body(stream, body, timeout)
        except TransportError as exc:
            stream.release()
            if isinstance(exc, Refused) or stream._headers_seen:
                raise
            # The request never ended (no END_STREAM went out), so the server cannot have acted
            # on it: safe to send again on another connection, even a write.
            raise Refused(f"sending the request failed: {exc}") from exc
        except BaseException:
            stream.release()
            raise
        return stream

    async def _send_body(self, stream: H2Stream, body: bytes, timeout: float | None) -> None:
        view = memoryview(body)
        while view:
            if stream._error is not None:
                raise stream._error
            if stream._ended:  # the server answered before reading it all (an error)
                return
            size = min(
                self.h2.local_flow_control_window(stream.id), self.h2.max_outbound_frame_size
            )
            if size <= 0:
                window = self._window
                async with asyncio.timeout(timeout):
                    await window.wait()
                continue
            self.h2.send_data(stream.id, view[:size].tobytes())
            view = view[size:]
            if not self._flush():
                raise TransportError("the connection closed while sending the request body")
        self.h2.end_stream(stream.id)
        if not self._flush():
            raise TransportError("the connection closed while ending the request")

    async def _check_health(self) -> None:
        """client-go's ReadIdleTimeout/PingTimeout, plus closing a connection long unused."""
        while not self.closed:
            idle = self.idle_for()
            if self.idle_close and idle >= self.idle_close:
                self.close()  # the pool drops it; a later request dials again
                return
            quiet = time.monotonic() - self.last_received
            if quiet < self.read_idle:
                wait = self.read_idle - quiet
                if self.idle_close and not self.streams:
                    wait = min(wait, self.idle_close - idle)
                await asyncio.sleep(wait)
                continue
            self._pong = asyncio.Event()
            self.h2.ping(b"kuberay!")
            self._flush()
            try:
                async with asyncio.timeout(self.ping_timeout):
                    await self._pong.wait()
            except TimeoutError:
                self._fail(TransportError(f"no PING answer within {self.ping_timeout}s"))
                return
            finally:
                self._pong = None
            self.last_received = max(self.last_received, time.monotonic())

    def idle_for(self) -> float:
        return 0.0 if self.streams else time.monotonic() - self.idle_since

    def close(self) -> None:
        if not self.closed:
            with contextlib.suppress(h2.exceptions.ProtocolError):
                self.h2.close_connection()
                self._flush()
        self._fail(TransportError("connection closed by the client"))

    async def aclose(self) -> None:
        self.close()
        if self._health is not None:
            self._health.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._health
        if self.transport is not None:
            # An SSL transport may wait for the peer's close_notify; do not hang on it.
            with contextlib.suppress(TimeoutError):
                async with asyncio.timeout(2):
                    await self.lost.wait()
            if not self.lost.is_set():
                self.transport.abort()


class H2Pool:
    """Connections to one apiserver. A request goes on a connection with a free stream slot;
    when every one is full the caller queues and one dialler opens connections until the queue
    is served, waking as many callers as each new connection has slots (waking them all would
    cost O(callers x connections) per dial: thousands of watches starting at once spun the CPU).
    """

    def __init__(
        self,
        host: str,
        port: int,
        ssl_context: ssl.SSLContext,
        *,
        server_hostname: str | None = None,
        read_idle: float = 30.0,
        ping_timeout: float = 15.0,
        idle_close: float = IDLE_CLOSE,
    ) -> None:
        ssl_context.set_alpn_protocols(["h2"])
        self.host = host
        self.port = port
        self.ssl = ssl_context
        self.server_hostname = server_hostname
        self.authority = (host if ":" not in host else f"[{host}]") + f":{port}"
        self.read_idle = read_idle
        self.ping_timeout = ping_timeout
        self.idle_close = idle_close
        self.connections: list[H2Connection] = []
        self._last: H2Connection | None = None  # where the last stream went
        self._waiters: deque[asyncio.Future[None]] = deque()
        self._dialling: asyncio.Task[None] | None = None
        self._closed = False

    async def _dial(self, timeout: float) -> H2Connection:
        loop = asyncio.get_running_loop()
        conn = H2Connection(self.authority, self.read_idle, self.ping_timeout, self.idle_close)
        try:
            async with asyncio.timeout(timeout):
                transport, _ = await loop.create_connection(
                    lambda: conn,
                    self.host,
                    self.port,
                    ssl=self.ssl,
                    server_hostname=self.server_hostname or self.host,
                )
        except (OSError, ssl.SSLError) as exc:
            raise TransportError(f"{type(exc).__name__}: {exc}") from exc
        ssl_object = transport.get_extra_info("ssl_object")
        chosen = ssl_object.selected_alpn_protocol() if ssl_object is not None else None
        if chosen != "h2":
            transport.abort()
            raise NotNegotiated(f"the server chose {chosen!r} in ALPN, not h2")
        try:
            await conn.start(timeout)
        except BaseException:
            transport.abort()
            raise
        return conn

    def _pick(self) -> H2Connection | None:
        last = self._last
        if last is not None and last.has_room():
            return last
        self.connections = [c for c in self.connections if not c.closed]
        for conn in self.connections:
            if conn.has_room():
                self._last = conn
                return conn
        return None

    def _live_waiters(self) -> bool:
        while self._waiters and self._waiters[0].done():
            self._waiters.popleft()
        return bool(self._waiters)

    def _wake(self, count: int) -> None:
        while count > 0 and self._live_waiters():
            self._waiters.popleft().set_result(None)
            count -= 1

    async def _dial_for_waiters(self, timeout: float) -> None:
        """Dials until no caller waits; a failed dial fails every caller waiting then."""
        try:
            while self._live_waiters() and not self._closed:
                conn = await self._dial(timeout)
                if self._closed:
                    await conn.aclose()
                    return
                self.connections.append(conn)
                self._last = conn
                self._wake(conn.max_streams - len(conn.streams))
        except BaseException as exc:
            waiters, self._waiters = self._waiters, deque()
            for waiter in waiters:
                if not waiter.done():
                    waiter.set_exception(_copy(exc))
            if not isinstance(exc, Exception):
                raise
        finally:
            self._dialling = None

    async def open(
        self,
        headers: Sequence[tuple[bytes, bytes]],
        body: bytes | None,
        timeout: float,
        pool_wait: float,
    ) -> H2Stream:
        """A stream on a connection with room. ``timeout`` bounds dialling and sending, and
        ``pool_wait + timeout`` the wait for a slot."""
        loop = asyncio.get_running_loop()
        deadline = loop.time() + pool_wait + timeout
        while True:
            if self._closed:
                raise TransportError("client closed")
            conn = self._pick()
            if conn is not None:
                try:
                    return await conn.open(headers, body, timeout)
                except h2.exceptions.TooManyStreamsError:
                    conn.draining = True  # our count and h2's disagree: stop using it
                    continue
            waiter: asyncio.Future[None] = loop.create_future()
            self._waiters.append(waiter)
            if self._dialling is None:
                self._dialling = loop.create_task(self._dial_for_waiters(timeout))
            async with asyncio.timeout_at(deadline):
                await waiter

    async def close(self) -> None:
        self._closed = True
        if self._dialling is not None:
            self._dialling.cancel()
            with contextlib.suppress(BaseException):
                await self._dialling
        for waiter in self._waiters:
            if not waiter.done():
                waiter.set_exception(TransportError("client closed"))
        self._waiters.clear()
        conns, self.connections = self.connections, []
        self._last = None
        await asyncio.gather(*(c.aclose() for c in conns))


def _copy(exc: BaseException) -> BaseException:
    """A fresh exception of the same kind for each waiter (one instance raised in many tasks
    would collect all their tracebacks)."""
    if isinstance(exc, TimeoutError):
        return TimeoutError("connecting to the apiserver timed out")
    if isinstance(exc, TransportError):
        return type(exc)(str(exc))
    if isinstance(exc, Exception):
        return TransportError(f"{type(exc).__name__}: {exc}")
    return TransportError("client closed")
