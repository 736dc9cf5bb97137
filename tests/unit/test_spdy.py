"""SPDY/3.1 framing and session behaviour of the node agent's kubelet API (``nodeagent.spdy``)."""

from __future__ import annotations

import asyncio
import socket
import struct
import zlib
from collections.abc import AsyncIterator
from dataclasses import dataclass

import pytest

from kuberay.devenv.nodeagent import spdy
from kuberay.devenv.nodeagent.spdy import (
    DataFrame,
    FrameCodec,
    GoAwayFrame,
    HeadersFrame,
    PingFrame,
    ProtocolError,
    RstStreamFrame,
    Session,
    SettingsFrame,
    Stream,
    StreamReset,
    SynReplyFrame,
    SynStreamFrame,
    UnknownFrame,
    WindowUpdateFrame,
)


def roundtrip(frame: spdy.Frame) -> spdy.Frame:
    out = FrameCodec().feed(FrameCodec().encode(frame))
    assert len(out) == 1
    return out[0]


# ---------------------------------------------------------------------- framing
def test_dictionary_is_the_protocol_constant() -> None:
    # Length and Adler-32 (the DICTID a zlib stream with this preset dictionary carries).
    assert len(spdy.DICTIONARY) == 1423
    assert zlib.adler32(spdy.DICTIONARY) == 0xE3C6A7C2


@pytest.mark.parametrize(
    "frame",
    [
        DataFrame(1, b"hello"),
        DataFrame(3, b"", spdy.FLAG_FIN),
        DataFrame(0x7FFFFFFF, b"x" * 70000),
        SynStreamFrame(1, {"streamtype": ["error"]}, spdy.FLAG_FIN, 0, 7, 0),
        SynStreamFrame(5, {"a": ["1", "2"], "port": ["8080"]}, 0, 3, 2, 1),
        SynReplyFrame(1, {}),
        SynReplyFrame(7, {"status": ["200"]}, spdy.FLAG_FIN),
        RstStreamFrame(9, spdy.RST_FLOW_CONTROL_ERROR),
        SettingsFrame([(0, spdy.SETTINGS_INITIAL_WINDOW_SIZE, 1 << 20), (1, 4, 100)]),
        PingFrame(0xFFFFFFFF),
        GoAwayFrame(11, spdy.GOAWAY_PROTOCOL_ERROR),
        HeadersFrame(3, {"x": ["y"]}, spdy.FLAG_FIN),
        WindowUpdateFrame(0, 65536),
        WindowUpdateFrame(5, 1),
    ],
)
def test_every_frame_type_round_trips(frame: spdy.Frame) -> None:
    assert roundtrip(frame) == frame


def test_control_frame_header_layout() -> None:
    raw = FrameCodec().encode(PingFrame(7))
    assert raw == struct.pack("!HHII", 0x8003, spdy.TYPE_PING, 4, 7)
    data = FrameCodec().encode(DataFrame(5, b"ab", spdy.FLAG_FIN))
    assert data == struct.pack("!II", 5, (1 << 24) | 2) + b"ab"


def test_header_names_are_lower_cased_and_values_nul_joined() -> None:
    block = spdy.encode_header_block({"StreamType": ["a", "b"]})
    assert block == struct.pack("!II", 1, 10) + b"streamtype" + struct.pack("!I", 3) + b"a\0b"
    assert spdy.decode_header_block(block) == {"streamtype": ["a", "b"]}


@pytest.mark.parametrize(
    "raw",
    [
        b"\0\0",  # no count
        struct.pack("!I", 1) + struct.pack("!I", 5) + b"ab",  # name cut short
        struct.pack("!II", 1, 0) + struct.pack("!I", 0),  # empty name
        struct.pack("!I", 0) + b"junk",  # trailing bytes
        struct.pack("!II", 2, 1) + b"a" + struct.pack("!I", 0) + struct.pack("!I", 1) + b"a"
        b"\0\0\0\0",  # duplicate name
    ],
)
def test_malformed_header_blocks_are_protocol_errors(raw: bytes) -> None:
    with pytest.raises(ProtocolError):
        spdy.decode_header_block(raw)


def test_compression_context_spans_frames() -> None:
    sender = FrameCodec()
    headers = {"streamtype": ["stdout"], "port": ["8080"], "requestid": ["0"]}
    first = sender.encode(SynStreamFrame(1, headers))
    second = sender.encode(SynStreamFrame(3, headers))
    # The second block refers back to the first, so it is shorter...
    assert len(second) < len(first)
    # ...decodes in order with one receiving context...
    receiver = FrameCodec()
    frames = receiver.feed(first + second)
    assert [f.headers for f in frames if isinstance(f, SynStreamFrame)] == [headers, headers]
    # ...and cannot be decoded without the first one.
    with pytest.raises(ProtocolError):
        FrameCodec().feed(second)


def test_blocks_from_an_independent_zlib_encoder_decode() -> None:
    # What Go's framer does: one deflate stream with the dictionary, a sync flush per block.
    deflate = zlib.compressobj(9, zdict=spdy.DICTIONARY)
    codec = FrameCodec()
    for sid, kind in ((1, "error"), (3, "stdin"), (5, "stdout")):
        block = spdy.encode_header_block({"streamtype": [kind]})
        packed = deflate.compress(block) + deflate.flush(zlib.Z_SYNC_FLUSH)
        payload = struct.pack("!IIBB", sid, 0, 0, 0) + packed
        raw = struct.pack("!HHI", 0x8003, spdy.TYPE_SYN_STREAM, len(payload)) + payload
        (frame,) = codec.feed(raw)
        assert isinstance(frame, SynStreamFrame)
        assert frame.stream_id == sid
        assert frame.headers == {"streamtype": [kind]}


def test_feeding_byte_by_byte_yields_whole_frames_only() -> None:
    sender = FrameCodec()
    wire = sender.encode(SynStreamFrame(1, {"a": ["b"]})) + sender.encode(DataFrame(1, b"xyz"))
    receiver = FrameCodec()
    got: list[spdy.Frame] = []
    for i in range(len(wire)):
        got += receiver.feed(wire[i : i + 1])
        if i < len(wire) - 1 and len(got) == 2:
            pytest.fail("a frame was returned before its last byte arrived")
    assert got == [SynStreamFrame(1, {"a": ["b"]}), DataFrame(1, b"xyz")]


def test_unknown_control_frames_are_returned_not_fatal() -> None:
    raw = struct.pack("!HHI", 0x8003, 0x42, 3) + b"abc"
    (frame,) = FrameCodec().feed(raw + FrameCodec().encode(PingFrame(1))[:0])
    assert frame == UnknownFrame(3, 0x42, 0, b"abc")
    assert FrameCodec().encode(frame) == raw


def test_wrong_version_and_short_frames_are_protocol_errors() -> None:
    with pytest.raises(ProtocolError):
        FrameCodec().feed(struct.pack("!HHII", 0x8002, spdy.TYPE_PING, 4, 1))
    with pytest.raises(ProtocolError):
        FrameCodec().feed(struct.pack("!HHI", 0x8003, spdy.TYPE_RST_STREAM, 4) + b"\0\0\0\1")


def test_header_bomb_is_refused() -> None:
    deflate = zlib.compressobj(zdict=spdy.DICTIONARY)
    big = spdy.encode_header_block({"x": ["a" * (spdy.MAX_HEADER_BYTES + 10)]})
    packed = deflate.compress(big) + deflate.flush(zlib.Z_SYNC_FLUSH)
    payload = struct.pack("!I", 1) + packed
    raw = struct.pack("!HHI", 0x8003, spdy.TYPE_HEADERS, len(payload)) + payload
    with pytest.raises(ProtocolError, match="too large"):
        FrameCodec().feed(raw)


# ---------------------------------------------------------------------- sessions
@dataclass
class RawPeer:
    """The client end of a connection, speaking frames by hand."""

    reader: asyncio.StreamReader
    writer: asyncio.StreamWriter
    codec: FrameCodec

    async def send(self, *frames: spdy.Frame) -> None:
        for frame in frames:
            self.writer.write(self.codec.encode(frame))
        await self.writer.drain()

    async def recv(self, timeout: float = 5.0) -> spdy.Frame:
        async with asyncio.timeout(timeout):
            while True:
                if self._pending:
                    return self._pending.pop(0)
                data = await self.reader.read(65536)
                if not data:
                    raise ConnectionResetError("closed")
                self._pending += self.codec.feed(data)

    async def recv_until(self, want: type, timeout: float = 5.0) -> spdy.Frame:
        while True:
            frame = await self.recv(timeout)
            if isinstance(frame, want):
                return frame

    def __post_init__(self) -> None:
        self._pending: list[spdy.Frame] = []


async def _pipe() -> tuple[
    tuple[asyncio.StreamReader, asyncio.StreamWriter],
    tuple[asyncio.StreamReader, asyncio.StreamWriter],
]:
    a, b = socket.socketpair()
    return await asyncio.open_connection(sock=a), await asyncio.open_connection(sock=b)


@dataclass
class Pair:
    server: Session
    peer: RawPeer
    streams: asyncio.Queue[Stream]


@pytest.fixture
async def pair(request: pytest.FixtureRequest) -> AsyncIterator[Pair]:
    opts = getattr(request, "param", {})
    (sr, sw), (cr, cw) = await _pipe()
    queue: asyncio.Queue[Stream] = asyncio.Queue()
    server = Session(sr, sw, on_stream=queue.put_nowait, **opts)
    task = asyncio.create_task(server.serve())
    yield Pair(server, RawPeer(cr, cw, FrameCodec()), queue)
    task.cancel()
    await server.close()
    cw.close()


async def _open(p: Pair, sid: int, headers: spdy.Headers | None = None) -> Stream:
    await p.peer.send(SynStreamFrame(sid, headers or {"streamtype": ["data"]}))
    reply = await p.peer.recv_until(SynReplyFrame)
    assert isinstance(reply, SynReplyFrame)
    assert reply.stream_id == sid
    return await asyncio.wait_for(p.streams.get(), 5)


async def test_syn_stream_is_answered_and_data_flows_both_ways(pair: Pair) -> None:
    stream = await _open(pair, 1, {"streamType": ["stdin"], "port": ["80"]})
    assert stream.header("streamtype") == "stdin"
    assert stream.header("port") == "80"
    await pair.peer.send(DataFrame(1, b"ping"))
    assert await stream.read() == b"ping"
    await stream.write(b"pong")
    frame = await pair.peer.recv_until(DataFrame)
    assert frame == DataFrame(1, b"pong")


async def test_fin_half_closes_each_direction(pair: Pair) -> None:
    stream = await _open(pair, 1)
    await pair.peer.send(DataFrame(1, b"last", spdy.FLAG_FIN))
    assert await stream.read() == b"last"
    assert await stream.read() == b""  # EOF after the peer's FIN
    await stream.write(b"still writable")  # our direction is still open
    assert await pair.peer.recv_until(DataFrame) == DataFrame(1, b"still writable")
    await stream.close()
    assert await pair.peer.recv_until(DataFrame) == DataFrame(1, b"", spdy.FLAG_FIN)
    assert stream.done
    assert 1 not in pair.server.streams
    with pytest.raises(StreamReset):
        await stream.write(b"after close")


async def test_data_after_fin_resets_the_stream(pair: Pair) -> None:
    stream = await _open(pair, 1)
    await pair.peer.send(DataFrame(1, b"", spdy.FLAG_FIN), DataFrame(1, b"late"))
    rst = await pair.peer.recv_until(RstStreamFrame)
    assert rst == RstStreamFrame(1, spdy.RST_STREAM_ALREADY_CLOSED)
    assert await stream.read() == b""


async def test_rst_from_peer_ends_reads_and_fails_writes(pair: Pair) -> None:
    stream = await _open(pair, 1)
    await pair.peer.send(DataFrame(1, b"buffered"), RstStreamFrame(1, spdy.RST_CANCEL))
    assert await stream.read() == b"buffered"  # data that arrived before the reset is kept
    assert await stream.read() == b""
    assert stream.reset_status == spdy.RST_CANCEL
    with pytest.raises(StreamReset):
        await stream.write(b"x")


async def test_unknown_stream_and_bad_stream_ids_are_reset(pair: Pair) -> None:
    await pair.peer.send(DataFrame(9, b"nobody"))
    assert await pair.peer.recv_until(RstStreamFrame) == RstStreamFrame(9, spdy.RST_INVALID_STREAM)
    await pair.peer.send(SynStreamFrame(2, {}))  # even: the server's numbering
    assert await pair.peer.recv_until(RstStreamFrame) == RstStreamFrame(2, spdy.RST_PROTOCOL_ERROR)
    await _open(pair, 5)
    await pair.peer.send(SynStreamFrame(3, {}))  # ids must increase
    assert await pair.peer.recv_until(RstStreamFrame) == RstStreamFrame(3, spdy.RST_PROTOCOL_ERROR)


async def test_refused_streams_get_refused_stream() -> None:
    (sr, sw), (cr, cw) = await _pipe()
    server = Session(sr, sw, accept=lambda s: s.header("streamtype") == "ok")
    client = Session(cr, cw, server=False)
    tasks = [asyncio.create_task(server.serve()), asyncio.create_task(client.serve())]
    try:
        ok = await client.open_stream({"streamtype": ["ok"]})
        assert ok.id == 1
        with pytest.raises(StreamReset, match="refused"):
            await client.open_stream({"streamtype": ["nope"]})
    finally:
        for t in tasks:
            t.cancel()
        await server.close()
        await client.close()


async def test_pings_are_echoed_and_own_pings_complete() -> None:
    (sr, sw), (cr, cw) = await _pipe()
    server = Session(sr, sw)
    client = Session(cr, cw, server=False)
    tasks = [asyncio.create_task(server.serve()), asyncio.create_task(client.serve())]
    try:
        await asyncio.wait_for(client.ping(), 5)
        await asyncio.wait_for(server.ping(), 5)
    finally:
        for t in tasks:
            t.cancel()
        await server.close()
        await client.close()


async def test_unknown_frames_are_ignored_by_the_session(pair: Pair) -> None:
    unknown = struct.pack("!HHI", 0x8003, 0x77, 2) + b"zz"
    pair.peer.writer.write(unknown)
    await pair.peer.send(PingFrame(1))
    assert await pair.peer.recv_until(PingFrame) == PingFrame(1)


async def test_window_update_returns_credit_after_half_a_window(pair: Pair) -> None:
    stream = await _open(pair, 1)
    half = spdy.DEFAULT_WINDOW // 2
    await pair.peer.send(DataFrame(1, b"a" * half))
    got = b""
    while len(got) < half:
        got += await stream.read()
    updates = [await pair.peer.recv_until(WindowUpdateFrame) for _ in range(2)]
    assert sorted(updates, key=lambda f: getattr(f, "stream_id", -1)) == [
        WindowUpdateFrame(0, half),
        WindowUpdateFrame(1, half),
    ]
    assert stream.recv_window == spdy.DEFAULT_WINDOW


async def test_sending_waits_for_window_once_the_peer_does_flow_control(pair: Pair) -> None:
    stream = await _open(pair, 1)
    await pair.peer.send(SettingsFrame([(0, spdy.SETTINGS_INITIAL_WINDOW_SIZE, 10)]))
    await pair.peer.send(PingFrame(3))
    await pair.peer.recv_until(PingFrame)  # the settings were processed
    writing = asyncio.create_task(stream.write(b"0123456789abcdef"))
    assert await pair.peer.recv_until(DataFrame) == DataFrame(1, b"0123456789")
    await asyncio.sleep(0.1)
    assert not writing.done()  # blocked: the stream window is used up
    await pair.peer.send(WindowUpdateFrame(1, 100))
    assert await pair.peer.recv_until(DataFrame) == DataFrame(1, b"abcdef")
    await asyncio.wait_for(writing, 5)
    assert stream.send_window == 94


async def test_without_peer_flow_control_large_writes_are_not_limited(pair: Pair) -> None:
    # spdystream never sends WINDOW_UPDATE; our writes must not stall after 64 KiB.
    stream = await _open(pair, 1)
    payload = b"z" * (3 * spdy.DEFAULT_WINDOW)
    writing = asyncio.create_task(stream.write(payload))
    got = b""
    while len(got) < len(payload):
        frame = await pair.peer.recv_until(DataFrame)
        assert isinstance(frame, DataFrame)
        assert len(frame.data) <= spdy.SEND_CHUNK
        got += frame.data
    await asyncio.wait_for(writing, 5)
    assert got == payload


@pytest.mark.parametrize("pair", [{"strict_flow_control": True}], indirect=True)
async def test_strict_mode_resets_a_stream_that_overruns_its_window(pair: Pair) -> None:
    await _open(pair, 1)
    await pair.peer.send(DataFrame(1, b"x" * (spdy.DEFAULT_WINDOW + 1)))
    rst = await pair.peer.recv_until(RstStreamFrame)
    assert rst == RstStreamFrame(1, spdy.RST_FLOW_CONTROL_ERROR)


async def test_lenient_mode_accepts_an_overrun(pair: Pair) -> None:
    stream = await _open(pair, 1)
    await pair.peer.send(DataFrame(1, b"x" * (spdy.DEFAULT_WINDOW + 1), spdy.FLAG_FIN))
    assert len(await stream.read_all()) == spdy.DEFAULT_WINDOW + 1


async def test_goaway_ends_the_session_and_streams_read_eof(pair: Pair) -> None:
    stream = await _open(pair, 1)
    await pair.peer.send(GoAwayFrame(1))
    await asyncio.wait_for(pair.server.closed.wait(), 5)
    assert await stream.read() == b""


async def test_corrupt_header_block_sends_goaway_protocol_error(pair: Pair) -> None:
    payload = struct.pack("!IIBB", 1, 0, 0, 0) + b"definitely not zlib"
    pair.peer.writer.write(
        struct.pack("!HHI", 0x8003, spdy.TYPE_SYN_STREAM, len(payload)) + payload
    )
    goaway = await pair.peer.recv_until(GoAwayFrame)
    assert goaway == GoAwayFrame(0, spdy.GOAWAY_PROTOCOL_ERROR)
    await asyncio.wait_for(pair.server.closed.wait(), 5)


async def test_connection_end_wakes_readers(pair: Pair) -> None:
    stream = await _open(pair, 1)
    reading = asyncio.create_task(stream.read())
    await asyncio.sleep(0.05)
    pair.peer.writer.close()
    assert await asyncio.wait_for(reading, 5) == b""
