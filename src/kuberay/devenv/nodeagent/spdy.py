"""SPDY/3.1 framing and a server-side session on asyncio, for the kubelet API's streaming calls.

kube-apiserver talks SPDY/3.1 to the kubelet for exec, attach and port-forward (it translates
websocket clients to SPDY itself, and passes SPDY clients straight through). Go's side of that
conversation is ``github.com/moby/spdystream``; this module implements the wire format from the
SPDY/3.1 draft and only the parts of session behaviour that such a peer relies on.

Framing (``FrameCodec``): every frame has an 8-byte header. Control frames start with the
control bit, version 3 and a 16-bit type; data frames with a 31-bit stream id. Header blocks
(SYN_STREAM, SYN_REPLY, HEADERS) are zlib-compressed with the protocol's preset dictionary, and
the compression context lives for the whole connection, one per direction: blocks must be
decoded in arrival order and encoded in sending order, each ending with a sync flush.

Invariants and failure modes:
- ``FrameCodec.feed`` returns whole frames only and keeps partial input; a header block that
  does not inflate, is malformed, or inflates beyond ``MAX_HEADER_BYTES`` raises
  ``ProtocolError``, after which the connection is unusable (the shared zlib context is lost):
  the session then sends GOAWAY and closes.
- Control frames of unknown type are ignored (as the draft requires); they are returned as
  ``UnknownFrame`` so tests can see them.
- Frames are encoded and written to the transport without an ``await`` in between, so the
  compression context and the byte order on the wire always agree.
- Flow control (SPDY/3.1: per stream and per connection, 64 KiB initial windows): received
  data is counted against our windows and a WINDOW_UPDATE returns credit once the reader has
  consumed half a window. spdystream neither sends WINDOW_UPDATE nor waits for it, so our own
  sending respects the peer's windows only once the peer has shown that it does flow control
  (a WINDOW_UPDATE or an INITIAL_WINDOW_SIZE setting); until then the transport's own
  back-pressure (``drain``) is the only limit. Data beyond our receive window is accepted
  unless ``strict_flow_control`` is set, in which case the stream is reset with
  FLOW_CONTROL_ERROR.
- Input is back-pressured: the session stops reading from the socket while more than
  ``MAX_BUFFERED`` bytes wait unread in its streams.
- A stream is over when both sides sent FIN or either side sent RST_STREAM; ``read`` then
  returns ``b""`` and ``write`` on a reset stream raises ``StreamReset``. When the connection
  ends every stream reads EOF.
- Pings from the peer are echoed; a GOAWAY from the peer stops new streams and ends ``serve``.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import struct
import zlib
from collections import deque
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field

log = logging.getLogger("kuberay.devenv.spdy")

VERSION = 3

TYPE_SYN_STREAM = 1
TYPE_SYN_REPLY = 2
TYPE_RST_STREAM = 3
TYPE_SETTINGS = 4
TYPE_PING = 6
TYPE_GOAWAY = 7
TYPE_HEADERS = 8
TYPE_WINDOW_UPDATE = 9

FLAG_FIN = 0x01
FLAG_UNIDIRECTIONAL = 0x02

RST_PROTOCOL_ERROR = 1
RST_INVALID_STREAM = 2
RST_REFUSED_STREAM = 3
RST_UNSUPPORTED_VERSION = 4
RST_CANCEL = 5
RST_INTERNAL_ERROR = 6
RST_FLOW_CONTROL_ERROR = 7
RST_STREAM_IN_USE = 8
RST_STREAM_ALREADY_CLOSED = 9
RST_FRAME_TOO_LARGE = 11

GOAWAY_OK = 0
GOAWAY_PROTOCOL_ERROR = 1
GOAWAY_INTERNAL_ERROR = 2

SETTINGS_INITIAL_WINDOW_SIZE = 7

DEFAULT_WINDOW = 64 * 1024
MAX_WINDOW = 2**31 - 1
MAX_FRAME_PAYLOAD = 2**24 - 1
# Data frames we send carry at most this much, so one large write cannot starve other streams.
SEND_CHUNK = 32 * 1024
MAX_HEADER_BYTES = 256 * 1024
MAX_BUFFERED = 8 * 1024 * 1024

# The preset dictionary of SPDY/3 header compression (a constant of the protocol): 4-byte
# big-endian length-prefixed words, then a run of common header values.
_DICT_WORDS = (
    "options",
    "head",
    "post",
    "put",
    "delete",
    "trace",
    "accept",
    "accept-charset",
    "accept-encoding",
    "accept-language",
    "accept-ranges",
    "age",
    "allow",
    "authorization",
    "cache-control",
    "connection",
    "content-base",
    "content-encoding",
    "content-language",
    "content-length",
    "content-location",
    "content-md5",
    "content-range",
    "content-type",
    "date",
    "etag",
    "expect",
    "expires",
    "from",
    "host",
    "if-match",
    "if-modified-since",
    "if-none-match",
    "if-range",
    "if-unmodified-since",
    "last-modified",
    "location",
    "max-forwards",
    "pragma",
    "proxy-authenticate",
    "proxy-authorization",
    "range",
    "referer",
    "retry-after",
    "server",
    "te",
    "trailer",
    "transfer-encoding",
    "upgrade",
    "user-agent",
    "vary",
    "via",
    "warning",
    "www-authenticate",
    "method",
    "get",
    "status",
    "200 OK",
    "version",
    "HTTP/1.1",
    "url",
    "public",
    "set-cookie",
    "keep-alive",
    "origin",
)
_DICT_TAIL = (
    "100101201202205206300302303304305306307402405406407408409410411412413414415416417502504505"
    "203 Non-Authoritative Information204 No Content301 Moved Permanently400 Bad Request401 "
    "Unauthorized403 Forbidden404 Not Found500 Internal Server Error501 Not Implemented503 "
    "Service UnavailableJan Feb Mar Apr May Jun Jul Aug Sept Oct Nov Dec 00:00:00 Mon, Tue, Wed, "
    "Thu, Fri, Sat, Sun, GMTchunked,text/html,image/png,image/jpg,image/gif,application/xml,"
    "application/xhtml+xml,text/plain,text/javascript,publicprivatemax-age=gzip,deflate,sdch"
    "charset=utf-8charset=iso-8859-1,utf-,*,enq=0."
)
DICTIONARY = (
    b"".join(struct.pack("!I", len(w)) + w.encode() for w in _DICT_WORDS) + _DICT_TAIL.encode()
)

Headers = dict[str, list[str]]


class ProtocolError(Exception):
    """The byte stream is not valid SPDY/3; the connection cannot continue."""


class StreamReset(ConnectionError):
    """The stream was reset (by either side) or the connection is gone."""


# ---------------------------------------------------------------------- frames
@dataclass
class DataFrame:
    stream_id: int
    data: bytes
    flags: int = 0


@dataclass
class SynStreamFrame:
    stream_id: int
    headers: Headers
    flags: int = 0
    associated_id: int = 0
    priority: int = 0
    slot: int = 0


@dataclass
class SynReplyFrame:
    stream_id: int
    headers: Headers
    flags: int = 0


@dataclass
class RstStreamFrame:
    stream_id: int
    status: int
    flags: int = 0


@dataclass
class SettingsFrame:
    entries: list[tuple[int, int, int]] = field(default_factory=list)  # (flags, id, value)
    flags: int = 0


@dataclass
class PingFrame:
    ping_id: int
    flags: int = 0


@dataclass
class GoAwayFrame:
    last_good_stream_id: int
    status: int = GOAWAY_OK
    flags: int = 0


@dataclass
class HeadersFrame:
    stream_id: int
    headers: Headers
    flags: int = 0


@dataclass
class WindowUpdateFrame:
    stream_id: int
    delta: int
    flags: int = 0


@dataclass
class UnknownFrame:
    """A control frame of a type this module does not know (ignored by the session)."""

    version: int
    frame_type: int
    flags: int
    payload: bytes


Frame = (
    DataFrame
    | SynStreamFrame
    | SynReplyFrame
    | RstStreamFrame
    | SettingsFrame
    | PingFrame
    | GoAwayFrame
    | HeadersFrame
    | WindowUpdateFrame
    | UnknownFrame
)


def encode_header_block(headers: Headers) -> bytes:
    """The uncompressed name/value block: count, then length-prefixed names and values (several
    values of one name joined with NUL). Names are lower-cased, as the protocol requires."""
    out = [struct.pack("!I", len(headers))]
    for name, values in headers.items():
        n = name.lower().encode()
        v = b"\0".join(x.encode() for x in values)
        out.append(struct.pack("!I", len(n)) + n + struct.pack("!I", len(v)) + v)
    return b"".join(out)


def decode_header_block(raw: bytes) -> Headers:
    def take(pos: int) -> tuple[bytes, int]:
        if pos + 4 > len(raw):
            raise ProtocolError("truncated header block")
        (length,) = struct.unpack_from("!I", raw, pos)
        end = pos + 4 + length
        if end > len(raw):
            raise ProtocolError("truncated header block")
        return raw[pos + 4 : end], end

    if len(raw) < 4:
        raise ProtocolError("truncated header block")
    (count,) = struct.unpack_from("!I", raw, 0)
    pos = 4
    headers: Headers = {}
    for _ in range(count):
        name, pos = take(pos)
        value, pos = take(pos)
        if not name:
            raise ProtocolError("empty header name")
        key = name.decode(errors="replace").lower()
        if key in headers:
            raise ProtocolError(f"duplicate header {key!r}")
        headers[key] = [v.decode(errors="replace") for v in value.split(b"\0")]
    if pos != len(raw):
        raise ProtocolError("trailing bytes in header block")
    return headers


class FrameCodec:
    """Encodes frames and decodes a byte stream into frames, with one zlib context per
    direction for header blocks (so a codec is bound to one connection)."""

    def __init__(self) -> None:
        self._buf = bytearray()
        self._deflate = zlib.compressobj(zdict=DICTIONARY)
        self._inflate = zlib.decompressobj(zdict=DICTIONARY)

    # -------------------------------------------------------------- encoding
    def _compress(self, headers: Headers) -> bytes:
        block = encode_header_block(headers)
        return self._deflate.compress(block) + self._deflate.flush(zlib.Z_SYNC_FLUSH)

    @staticmethod
    def _control(frame_type: int, flags: int, payload: bytes) -> bytes:
        if len(payload) > MAX_FRAME_PAYLOAD:
            raise ProtocolError("control frame too large")
        head = struct.pack("!HHI", 0x8000 | VERSION, frame_type, (flags << 24) | len(payload))
        return head + payload

    def encode(self, frame: Frame) -> bytes:
        if isinstance(frame, DataFrame):
            if len(frame.data) > MAX_FRAME_PAYLOAD:
                raise ProtocolError("data frame too large")
            head = struct.pack(
                "!II", frame.stream_id & 0x7FFFFFFF, (frame.flags << 24) | len(frame.data)
            )
            return head + frame.data
        if isinstance(frame, SynStreamFrame):
            body = struct.pack(
                "!IIBB",
                frame.stream_id & 0x7FFFFFFF,
                frame.associated_id & 0x7FFFFFFF,
                (frame.priority & 0x7) << 5,
                frame.slot,
            )
            return self._control(TYPE_SYN_STREAM, frame.flags, body + self._compress(frame.headers))
        if isinstance(frame, SynReplyFrame | HeadersFrame):
            ftype = TYPE_SYN_REPLY if isinstance(frame, SynReplyFrame) else TYPE_HEADERS
            body = struct.pack("!I", frame.stream_id & 0x7FFFFFFF)
            return self._control(ftype, frame.flags, body + self._compress(frame.headers))
        if isinstance(frame, RstStreamFrame):
            body = struct.pack("!II", frame.stream_id & 0x7FFFFFFF, frame.status)
            return self._control(TYPE_RST_STREAM, frame.flags, body)
        if isinstance(frame, SettingsFrame):
            body = struct.pack("!I", len(frame.entries)) + b"".join(
                struct.pack("!II", (f << 24) | (i & 0xFFFFFF), v) for f, i, v in frame.entries
            )
            return self._control(TYPE_SETTINGS, frame.flags, body)
        if isinstance(frame, PingFrame):
            return self._control(TYPE_PING, frame.flags, struct.pack("!I", frame.ping_id))
        if isinstance(frame, GoAwayFrame):
            body = struct.pack("!II", frame.last_good_stream_id & 0x7FFFFFFF, frame.status)
            return self._control(TYPE_GOAWAY, frame.flags, body)
        if isinstance(frame, WindowUpdateFrame):
            body = struct.pack("!II", frame.stream_id & 0x7FFFFFFF, frame.delta & 0x7FFFFFFF)
            return self._control(TYPE_WINDOW_UPDATE, frame.flags, body)
        word1 = (frame.flags << 24) | len(frame.payload)
        return struct.pack("!HHI", 0x8000 | frame.version, frame.frame_type, word1) + frame.payload

    # -------------------------------------------------------------- decoding
    def _decompress(self, block: bytes) -> Headers:
        try:
            raw = self._inflate.decompress(block, MAX_HEADER_BYTES + 1)
        except zlib.error as exc:
            raise ProtocolError(f"header block does not inflate: {exc}") from None
        if len(raw) > MAX_HEADER_BYTES or self._inflate.unconsumed_tail:
            raise ProtocolError("header block too large")
        return decode_header_block(raw)

    def feed(self, data: bytes) -> list[Frame]:
        """Adds bytes read from the connection; returns every frame now complete."""
        self._buf += data
        frames: list[Frame] = []
        while len(self._buf) >= 8:
            word0, word1 = struct.unpack_from("!II", self._buf, 0)
            length = word1 & 0xFFFFFF
            if len(self._buf) < 8 + length:
                break
            payload = bytes(self._buf[8 : 8 + length])
            del self._buf[: 8 + length]
            flags = word1 >> 24
            if not word0 & 0x80000000:
                frames.append(DataFrame(word0 & 0x7FFFFFFF, payload, flags))
                continue
            version = (word0 >> 16) & 0x7FFF
            ftype = word0 & 0xFFFF
            frames.append(self._control_frame(version, ftype, flags, payload))
        return frames

    def _control_frame(self, version: int, ftype: int, flags: int, payload: bytes) -> Frame:
        known = (
            TYPE_SYN_STREAM,
            TYPE_SYN_REPLY,
            TYPE_RST_STREAM,
            TYPE_SETTINGS,
            TYPE_PING,
            TYPE_GOAWAY,
            TYPE_HEADERS,
            TYPE_WINDOW_UPDATE,
        )
        if ftype not in known:
            return UnknownFrame(version, ftype, flags, payload)
        if version != VERSION:
            raise ProtocolError(f"unsupported SPDY version {version}")

        def need(n: int) -> None:
            if len(payload) < n:
                raise ProtocolError(f"control frame type {ftype} too short ({len(payload)} bytes)")

        if ftype == TYPE_SYN_STREAM:
            need(10)
            sid, assoc, prio, slot = struct.unpack_from("!IIBB", payload, 0)
            return SynStreamFrame(
                sid & 0x7FFFFFFF,
                self._decompress(payload[10:]),
                flags,
                assoc & 0x7FFFFFFF,
                prio >> 5,
                slot,
            )
        if ftype in (TYPE_SYN_REPLY, TYPE_HEADERS):
            need(4)
            (sid,) = struct.unpack_from("!I", payload, 0)
            headers = self._decompress(payload[4:])
            if ftype == TYPE_SYN_REPLY:
                return SynReplyFrame(sid & 0x7FFFFFFF, headers, flags)
            return HeadersFrame(sid & 0x7FFFFFFF, headers, flags)
        if ftype == TYPE_RST_STREAM:
            need(8)
            sid, status = struct.unpack_from("!II", payload, 0)
            return RstStreamFrame(sid & 0x7FFFFFFF, status, flags)
        if ftype == TYPE_SETTINGS:
            need(4)
            (count,) = struct.unpack_from("!I", payload, 0)
            need(4 + 8 * count)
            entries = []
            for i in range(count):
                word, value = struct.unpack_from("!II", payload, 4 + 8 * i)
                entries.append((word >> 24, word & 0xFFFFFF, value))
            return SettingsFrame(entries, flags)
        if ftype == TYPE_PING:
            need(4)
            return PingFrame(struct.unpack_from("!I", payload, 0)[0], flags)
        if ftype == TYPE_GOAWAY:
            need(8)
            sid, status = struct.unpack_from("!II", payload, 0)
            return GoAwayFrame(sid & 0x7FFFFFFF, status, flags)
        need(8)
        sid, delta = struct.unpack_from("!II", payload, 0)
        return WindowUpdateFrame(sid & 0x7FFFFFFF, delta & 0x7FFFFFFF, flags)


# ---------------------------------------------------------------------- session
class Stream:
    """One SPDY stream as the application sees it: ``read``/``write``/``close``/``reset``."""

    def __init__(self, session: Session, stream_id: int, headers: Headers, send_window: int):
        self.session = session
        self.id = stream_id
        self.headers = headers
        self.reply_headers: Headers = {}
        self._inbox: deque[bytes] = deque()
        self._readable = asyncio.Event()
        self._window_open = asyncio.Event()
        self._window_open.set()
        self.replied = asyncio.Event()
        self.remote_closed = False  # peer sent FIN
        self.local_closed = False  # we sent FIN
        self.reset_status: int | None = None
        self.send_window = send_window
        self.recv_window = session.initial_recv_window
        self._unacked = 0  # consumed bytes not yet returned to the peer by WINDOW_UPDATE
        self.buffered = 0

    def header(self, name: str, default: str = "") -> str:
        values = self.headers.get(name.lower())
        return values[0] if values else default

    @property
    def done(self) -> bool:
        return self.reset_status is not None or (self.remote_closed and self.local_closed)

    # -------------------------------------------------------------- called by the session
    def _deliver(self, data: bytes, fin: bool) -> None:
        if data:
            self._inbox.append(data)
            self.buffered += len(data)
            self.session._buffered += len(data)
        if fin:
            self.remote_closed = True
        self._readable.set()

    def _on_reset(self, status: int) -> None:
        if self.reset_status is None:
            self.reset_status = status
        self.remote_closed = True
        self._readable.set()
        self._window_open.set()

    # -------------------------------------------------------------- application API
    async def read(self, limit: int = -1) -> bytes:
        """Next chunk of data (at most ``limit`` bytes if given); ``b""`` at FIN or reset."""
        while not self._inbox:
            if self.remote_closed or self.reset_status is not None:
                return b""
            self._readable.clear()
            await self._readable.wait()
        chunk = self._inbox.popleft()
        if 0 < limit < len(chunk):
            self._inbox.appendleft(chunk[limit:])
            chunk = chunk[:limit]
        self.buffered -= len(chunk)
        self.session._consumed(self, len(chunk))
        return chunk

    async def read_all(self, max_bytes: int = 1 << 20) -> bytes:
        out = bytearray()
        while chunk := await self.read():
            out += chunk
            if len(out) > max_bytes:
                raise ProtocolError(f"stream {self.id}: more than {max_bytes} bytes")
        return bytes(out)

    async def write(self, data: bytes) -> None:
        view = memoryview(data)
        while view:
            if self.reset_status is not None:
                raise StreamReset(f"stream {self.id} was reset ({self.reset_status})")
            if self.local_closed:
                raise StreamReset(f"stream {self.id} is closed for writing")
            room = self.session._send_room(self)
            if room <= 0:
                self._window_open.clear()
                await self._window_open.wait()
                continue
            n = min(room, SEND_CHUNK, len(view))
            self.session._account_send(self, n)
            await self.session.send(DataFrame(self.id, bytes(view[:n])))
            view = view[n:]

    async def close(self) -> None:
        """Half-close: FIN from our side (the peer may keep sending)."""
        if self.local_closed or self.reset_status is not None:
            return
        self.local_closed = True
        with contextlib.suppress(ConnectionError):
            await self.session.send(DataFrame(self.id, b"", FLAG_FIN))
        self.session._maybe_forget(self)

    async def reset(self, status: int = RST_CANCEL) -> None:
        if self.reset_status is not None:
            return
        self._on_reset(status)
        with contextlib.suppress(ConnectionError):
            await self.session.send(RstStreamFrame(self.id, status))
        self.session._maybe_forget(self)


StreamHandler = Callable[[Stream], Awaitable[None] | None]


class Session:
    """One SPDY/3.1 connection over an asyncio stream pair.

    ``server=True``: the peer opens odd-numbered streams; each new stream is offered to
    ``accept`` (return False to refuse it with REFUSED_STREAM), answered with SYN_REPLY and then
    given to ``on_stream``. ``open_stream`` (the client side, used by tests) opens our own.
    """

    def __init__(
        self,
        reader: asyncio.StreamReader,
        writer: asyncio.StreamWriter,
        *,
        server: bool = True,
        on_stream: StreamHandler | None = None,
        accept: Callable[[Stream], bool] | None = None,
        strict_flow_control: bool = False,
        initial_recv_window: int = DEFAULT_WINDOW,
    ) -> None:
        self.reader = reader
        self.writer = writer
        self.server = server
        self.on_stream = on_stream
        self.accept = accept
        self.strict_flow_control = strict_flow_control
        self.initial_recv_window = initial_recv_window
        self.codec = FrameCodec()
        self.streams: dict[int, Stream] = {}
        self.last_peer_stream = 0
        self.next_stream_id = 2 if server else 1
        self.next_ping_id = 2 if server else 1
        self.peer_flow_control = False
        self.initial_send_window = DEFAULT_WINDOW
        self.send_window = DEFAULT_WINDOW  # connection level (SPDY/3.1)
        self.recv_window = initial_recv_window
        self._conn_unacked = 0
        self._buffered = 0
        self._room = asyncio.Event()
        self._room.set()
        self._conn_window_open = asyncio.Event()
        self._conn_window_open.set()
        self._pings: dict[int, asyncio.Future[None]] = {}
        self._tasks: set[asyncio.Task[None]] = set()
        self.goaway_received = False
        self.closed = asyncio.Event()

    # -------------------------------------------------------------- writing
    async def send(self, frame: Frame) -> None:
        if self.writer.is_closing():
            raise ConnectionResetError("SPDY connection is closed")
        self.writer.write(self.codec.encode(frame))
        await self.writer.drain()

    def _send_room(self, stream: Stream) -> int:
        if not self.peer_flow_control:
            return SEND_CHUNK
        if self.send_window <= 0:
            return 0
        return min(stream.send_window, self.send_window)

    def _account_send(self, stream: Stream, n: int) -> None:
        stream.send_window -= n
        self.send_window -= n

    def _consumed(self, stream: Stream, n: int) -> None:
        """The application read ``n`` bytes: return window credit and let reading resume."""
        self._buffered -= n
        if self._buffered < MAX_BUFFERED:
            self._room.set()
        stream._unacked += n
        self._conn_unacked += n
        updates = []
        if stream._unacked >= self.initial_recv_window // 2 and not stream.remote_closed:
            updates.append(WindowUpdateFrame(stream.id, stream._unacked))
            stream.recv_window += stream._unacked
            stream._unacked = 0
        if self._conn_unacked >= self.initial_recv_window // 2:
            updates.append(WindowUpdateFrame(0, self._conn_unacked))
            self.recv_window += self._conn_unacked
            self._conn_unacked = 0
        for frame in updates:
            # Written synchronously (no drain): a window update is tiny and must not wait.
            if not self.writer.is_closing():
                self.writer.write(self.codec.encode(frame))

    def _maybe_forget(self, stream: Stream) -> None:
        if stream.done:
            self.streams.pop(stream.id, None)

    async def open_stream(self, headers: Headers, *, fin: bool = False) -> Stream:
        """Opens a stream from our side and waits for the peer's SYN_REPLY."""
        sid = self.next_stream_id
        self.next_stream_id += 2
        stream = Stream(self, sid, headers, self.initial_send_window)
        stream.local_closed = fin
        self.streams[sid] = stream
        await self.send(SynStreamFrame(sid, headers, FLAG_FIN if fin else 0))
        waiter = asyncio.ensure_future(stream.replied.wait())
        closed = asyncio.ensure_future(stream._readable.wait())
        try:
            await asyncio.wait({waiter, closed}, return_when=asyncio.FIRST_COMPLETED)
        finally:
            waiter.cancel()
            closed.cancel()
        if stream.reset_status is not None:
            raise StreamReset(f"stream {sid} refused ({stream.reset_status})")
        return stream

    async def ping(self) -> None:
        pid = self.next_ping_id
        self.next_ping_id += 2
        fut: asyncio.Future[None] = asyncio.get_running_loop().create_future()
        self._pings[pid] = fut
        await self.send(PingFrame(pid))
        await fut

    async def goaway(self, status: int = GOAWAY_OK) -> None:
        with contextlib.suppress(ConnectionError):
            await self.send(GoAwayFrame(self.last_peer_stream, status))

    async def close(self) -> None:
        for stream in list(self.streams.values()):
            stream._on_reset(RST_CANCEL)
        self.streams.clear()
        if not self.writer.is_closing():
            self.writer.close()
        with contextlib.suppress(Exception):
            await self.writer.wait_closed()
        self.closed.set()

    # -------------------------------------------------------------- reading
    async def serve(self) -> None:
        """Reads frames until the connection ends (EOF, error or GOAWAY from the peer)."""
        try:
            while not self.goaway_received:
                if self._buffered >= MAX_BUFFERED:
                    self._room.clear()
                    await self._room.wait()
                data = await self.reader.read(65536)
                if not data:
                    break
                try:
                    frames = self.codec.feed(data)
                except ProtocolError as exc:
                    log.warning("SPDY protocol error: %s", exc)
                    await self.goaway(GOAWAY_PROTOCOL_ERROR)
                    break
                for frame in frames:
                    await self._handle(frame)
        except (ConnectionError, OSError) as exc:
            log.debug("SPDY connection ended: %s", exc)
        finally:
            # Unread data stays readable; then every stream reads EOF and refuses writes.
            for stream in list(self.streams.values()):
                stream._on_reset(RST_CANCEL)
            for fut in self._pings.values():
                if not fut.done():
                    fut.set_exception(ConnectionResetError("connection closed"))
            self.closed.set()

    def _peer_initiated(self, stream_id: int) -> bool:
        return (stream_id % 2 == 1) == self.server

    async def _handle(self, frame: Frame) -> None:
        if isinstance(frame, DataFrame):
            await self._on_data(frame)
        elif isinstance(frame, SynStreamFrame):
            await self._on_syn_stream(frame)
        elif isinstance(frame, SynReplyFrame | HeadersFrame):
            await self._on_reply(frame)
        elif isinstance(frame, RstStreamFrame):
            stream = self.streams.pop(frame.stream_id, None)
            if stream is not None:
                stream._on_reset(frame.status)
        elif isinstance(frame, SettingsFrame):
            self._on_settings(frame)
        elif isinstance(frame, PingFrame):
            await self._on_ping(frame)
        elif isinstance(frame, GoAwayFrame):
            self.goaway_received = True
        elif isinstance(frame, WindowUpdateFrame):
            self._on_window_update(frame)
        # UnknownFrame: ignored, as the protocol requires.

    async def _on_reply(self, frame: SynReplyFrame | HeadersFrame) -> None:
        stream = self.streams.get(frame.stream_id)
        if isinstance(frame, HeadersFrame):
            if stream is not None and frame.flags & FLAG_FIN:
                stream._deliver(b"", True)
                self._maybe_forget(stream)
            return
        if stream is None:
            await self.send(RstStreamFrame(frame.stream_id, RST_INVALID_STREAM))
            return
        stream.reply_headers = frame.headers
        stream.replied.set()
        if frame.flags & FLAG_FIN:
            stream._deliver(b"", True)
            self._maybe_forget(stream)

    def _on_settings(self, frame: SettingsFrame) -> None:
        for _flags, sid, value in frame.entries:
            if sid == SETTINGS_INITIAL_WINDOW_SIZE:
                delta = value - self.initial_send_window
                self.initial_send_window = value
                self.peer_flow_control = True
                for stream in self.streams.values():
                    stream.send_window += delta
                    stream._window_open.set()

    async def _on_ping(self, frame: PingFrame) -> None:
        if self._peer_initiated(frame.ping_id):
            await self.send(PingFrame(frame.ping_id))
            return
        fut = self._pings.pop(frame.ping_id, None)
        if fut is not None and not fut.done():
            fut.set_result(None)

    def _on_window_update(self, frame: WindowUpdateFrame) -> None:
        self.peer_flow_control = True
        if frame.stream_id == 0:
            self.send_window = min(MAX_WINDOW, self.send_window + frame.delta)
            for stream in self.streams.values():
                stream._window_open.set()
            return
        target = self.streams.get(frame.stream_id)
        if target is not None:
            target.send_window = min(MAX_WINDOW, target.send_window + frame.delta)
            target._window_open.set()

    async def _on_syn_stream(self, frame: SynStreamFrame) -> None:
        sid = frame.stream_id
        if not self._peer_initiated(sid) or sid <= self.last_peer_stream:
            await self.send(RstStreamFrame(sid, RST_PROTOCOL_ERROR))
            return
        self.last_peer_stream = sid
        stream = Stream(self, sid, frame.headers, self.initial_send_window)
        if frame.flags & FLAG_FIN:
            stream.remote_closed = True
        if frame.flags & FLAG_UNIDIRECTIONAL:
            stream.local_closed = True
        if self.accept is not None and not self.accept(stream):
            await self.send(RstStreamFrame(sid, RST_REFUSED_STREAM))
            return
        self.streams[sid] = stream
        await self.send(SynReplyFrame(sid, {}))
        stream.replied.set()
        if self.on_stream is not None:
            result = self.on_stream(stream)
            if result is not None:
                task = asyncio.ensure_future(result)
                self._tasks.add(task)
                task.add_done_callback(self._tasks.discard)

    async def _on_data(self, frame: DataFrame) -> None:
        stream = self.streams.get(frame.stream_id)
        if stream is None:
            await self.send(RstStreamFrame(frame.stream_id, RST_INVALID_STREAM))
            return
        if stream.remote_closed:
            self.streams.pop(stream.id, None)
            stream._on_reset(RST_STREAM_ALREADY_CLOSED)
            await self.send(RstStreamFrame(stream.id, RST_STREAM_ALREADY_CLOSED))
            return
        n = len(frame.data)
        stream.recv_window -= n
        self.recv_window -= n
        if self.strict_flow_control and (stream.recv_window < 0 or self.recv_window < 0):
            self.streams.pop(stream.id, None)
            stream._on_reset(RST_FLOW_CONTROL_ERROR)
            await self.send(RstStreamFrame(stream.id, RST_FLOW_CONTROL_ERROR))
            return
        stream._deliver(frame.data, bool(frame.flags & FLAG_FIN))
        if stream.remote_closed:
            self._maybe_forget(stream)
