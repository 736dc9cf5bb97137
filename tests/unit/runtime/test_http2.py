"""The HTTP/2 transport against a small h2 server on 127.0.0.1 (TLS, ALPN): multiplexing within
the server's stream limit, watches, error mapping, PING-based dead-connection detection,
HTTP/1.1 fallback, and no task or socket left after ``close``."""

from __future__ import annotations

import asyncio
import json
import ssl
import tempfile
from collections.abc import AsyncGenerator, AsyncIterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, cast

import h2.config
import h2.connection
import h2.events
import h2.settings
import hyperframe.frame
import pytest
from aiohttp import web

from kuberay.runtime.client import PODS, ClientConfig, KubeClient
from kuberay.runtime.errors import ApiError, Gone, NotFound
from kuberay.runtime.webhook import ServingCert, self_signed


@dataclass
class Server:
    """Answers ``/echo`` (the request as JSON), ``/watch?n=K`` (K watch lines, one per frame, then
    holds the stream open until ``release`` is set), ``/missing`` (404). ``frozen`` makes it stop
    reading and answering entirely, like a peer that vanished without closing. ``/late`` answers
    only after the client reset the stream (a response crossing the RST on the wire) and
    ``late_go`` is set; ``/drop-first`` aborts the connection at its first request's headers,
    before the body."""

    max_streams: int = 100
    connections: int = 0
    open_connections: int = 0
    peak_streams: int = 0
    frozen: bool = False
    release: asyncio.Event = field(default_factory=asyncio.Event)
    port: int = 0
    ca: str = ""
    writers: set[asyncio.StreamWriter] = field(default_factory=set)
    all_closed: asyncio.Event = field(default_factory=asyncio.Event)
    live: list[tuple[h2.connection.H2Connection, asyncio.StreamWriter]] = field(
        default_factory=list
    )
    resets: dict[tuple[int, int], asyncio.Event] = field(default_factory=dict)
    dropped: int = 0
    late_sent: asyncio.Event = field(default_factory=asyncio.Event)
    late_go: asyncio.Event = field(default_factory=asyncio.Event)

    def goaway(self) -> None:
        """A graceful GOAWAY on every connection (as an apiserver shutting down sends)."""
        for conn, writer in self.live:
            conn.close_connection(last_stream_id=conn.highest_inbound_stream_id)
            writer.write(conn.data_to_send())

    async def handle(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        self.connections += 1
        self.open_connections += 1
        self.all_closed.clear()
        self.writers.add(writer)
        conn = h2.connection.H2Connection(h2.config.H2Configuration(client_side=False))
        conn.local_settings = h2.settings.Settings(
            client=False,
            initial_values={h2.settings.SettingCodes.MAX_CONCURRENT_STREAMS: self.max_streams},
        )
        conn.initiate_connection()
        writer.write(conn.data_to_send())
        self.live.append((conn, writer))
        requests: dict[int, list[tuple[str, str]]] = {}
        bodies: dict[int, bytes] = {}
        tasks: set[asyncio.Task[None]] = set()
        try:
            while data := await reader.read(65536):
                if self.frozen:
                    continue
                for event in conn.receive_data(data):
                    if isinstance(event, h2.events.RequestReceived):
                        headers = [(k.decode(), v.decode()) for k, v in event.headers]
                        if dict(headers)[":path"] == "/drop-first" and not self.dropped:
                            self.dropped += 1
                            writer.transport.abort()
                            return
                        requests[event.stream_id] = headers
                        bodies[event.stream_id] = b""
                        self.peak_streams = max(self.peak_streams, len(requests))
                    elif isinstance(event, h2.events.DataReceived):
                        bodies[event.stream_id] += event.data
                        conn.acknowledge_received_data(
                            event.flow_controlled_length, event.stream_id
                        )
                    elif isinstance(event, h2.events.StreamEnded):
                        sid: int = event.stream_id
                        task = asyncio.create_task(
                            self.answer(conn, writer, sid, requests[sid], bodies[sid], requests)
                        )
                        tasks.add(task)
                        task.add_done_callback(tasks.discard)
                    elif isinstance(event, h2.events.StreamReset):
                        requests.pop(event.stream_id, None)
                        self.reset_event(conn, event.stream_id).set()
                writer.write(conn.data_to_send())
        except (ConnectionError, ssl.SSLError):
            pass
        finally:
            for task in tasks:
                task.cancel()
            self.open_connections -= 1
            if not self.open_connections:
                self.all_closed.set()
            self.writers.discard(writer)
            writer.close()

    def reset_event(self, conn: h2.connection.H2Connection, sid: int) -> asyncio.Event:
        return self.resets.setdefault((id(conn), sid), asyncio.Event())

    async def answer_late(
        self, conn: h2.connection.H2Connection, writer: asyncio.StreamWriter, sid: int
    ) -> None:
        """The response HEADERS, written raw once the client's RST_STREAM came in (the server's
        own h2 would refuse to send on a reset stream)."""
        await self.reset_event(conn, sid).wait()
        await self.late_go.wait()
        frame = hyperframe.frame.HeadersFrame(sid)
        frame.data = conn.encoder.encode([(":status", "200"), ("content-type", "text/plain")])
        frame.flags.add("END_HEADERS")
        frame.flags.add("END_STREAM")
        writer.write(frame.serialize())
        self.late_sent.set()

    async def answer(
        self,
        conn: h2.connection.H2Connection,
        writer: asyncio.StreamWriter,
        sid: int,
        headers: list[tuple[str, str]],
        body: bytes,
        requests: dict[int, Any],
    ) -> None:
        pseudo = dict(headers)
        path = pseudo[":path"]

        def send(data: bytes, end: bool) -> None:
            if sid in requests and not self.frozen:
                conn.send_data(sid, data, end_stream=end)
                writer.write(conn.data_to_send())

        def respond(status: int, end: bool = False) -> None:
            conn.send_headers(sid, [(":status", str(status)), ("content-type", "application/json")])
            writer.write(conn.data_to_send())

        if path.startswith("/late"):
            await self.answer_late(conn, writer, sid)
        elif path.startswith("/missing"):
            respond(404)
            send(
                json.dumps({"kind": "Status", "reason": "NotFound", "message": "no"}).encode(), True
            )
        elif path.startswith("/gone") or "resourceVersion=expired" in path:
            respond(410)
            send(
                json.dumps({"kind": "Status", "reason": "Expired", "message": "old"}).encode(), True
            )
        elif "watch=true" in path:
            count = int(path.split("n=")[1].split("&")[0]) if "n=" in path else 3
            respond(200)
            for i in range(count):
                line = json.dumps({"type": "ADDED", "object": {"metadata": {"name": f"p{i}"}}})
                # Split each line across two frames so the client must reassemble it.
                raw = (line + "\n").encode()
                send(raw[:7], False)
                await asyncio.sleep(0)
                send(raw[7:], False)
            await self.release.wait()
            send(b"", True)
        else:
            respond(200)
            answer = {"headers": headers, "body": body.decode()}
            send(json.dumps(answer).encode(), True)
        requests.pop(sid, None)


def serving_context(made: ServingCert) -> ssl.SSLContext:
    with tempfile.TemporaryDirectory() as tmp:
        cert, key = Path(tmp) / "tls.crt", Path(tmp) / "tls.key"
        cert.write_bytes(made.cert_pem)
        key.write_bytes(made.key_pem)
        ctx = ssl.create_default_context(ssl.Purpose.CLIENT_AUTH)
        ctx.load_cert_chain(cert, key)
    return ctx


@pytest.fixture
async def h2_server() -> AsyncIterator[Server]:
    made = self_signed(["127.0.0.1"])
    server = Server(ca=made.ca_pem.decode())
    ctx = serving_context(made)
    ctx.set_alpn_protocols(["h2"])
    srv = await asyncio.start_server(server.handle, "127.0.0.1", 0, ssl=ctx)
    server.port = srv.sockets[0].getsockname()[1]
    try:
        yield server
    finally:
        server.release.set()
        srv.close()
        for writer in list(server.writers):
            writer.transport.abort()
        await srv.wait_closed()


def client_for(server: Server, **kw: Any) -> KubeClient:
    config = ClientConfig(
        server=f"https://127.0.0.1:{server.port}", ca_data=server.ca, token="t0k", qps=0, **kw
    )
    return KubeClient(config)


async def test_requests_share_one_connection_and_carry_auth(h2_server: Server) -> None:
    client = client_for(h2_server)
    try:
        answers = await asyncio.gather(
            *(
                client.request("POST", f"/echo/{i}", {"i": i}, params={"a": "x y"})
                for i in range(20)
            )
        )
    finally:
        await client.close()
    assert client.http_version == "HTTP/1.1"  # after close nothing is pooled
    assert h2_server.connections == 1
    first = dict(answers[0]["headers"])
    assert first[":path"] == "/echo/0?a=x+y"
    assert first["authorization"] == "Bearer t0k"
    assert first["content-type"] == "application/json"
    assert [json.loads(a["body"])["i"] for a in answers] == list(range(20))
    assert client.request_counts[("POST", 200)] == 20


async def test_watches_beyond_the_stream_limit_open_more_connections(h2_server: Server) -> None:
    h2_server.max_streams = 4
    client = client_for(h2_server)
    seen: dict[int, list[str]] = {}

    async def watch(i: int, ready: asyncio.Event) -> None:
        async for event in client.watch(PODS, f"ns{i}", timeout_seconds=60):
            seen.setdefault(i, []).append(event.object["metadata"]["name"])
            if len(seen[i]) == 3:
                ready.set()

    readies = [asyncio.Event() for _ in range(10)]
    tasks = [asyncio.create_task(watch(i, readies[i])) for i in range(10)]
    try:
        async with asyncio.timeout(10):
            await asyncio.gather(*(r.wait() for r in readies))
        assert h2_server.connections == 3  # ceil(10 / 4)
        assert h2_server.peak_streams <= 4
        # Ordinary requests still get through while every slot holds a watch.
        assert (await client.request("GET", "/echo"))["body"] == ""
        h2_server.release.set()
        async with asyncio.timeout(10):
            await asyncio.gather(*tasks)
    finally:
        for t in tasks:
            t.cancel()
        await client.close()
    assert all(names == ["p0", "p1", "p2"] for names in seen.values())
    assert len(seen) == 10


async def test_error_answers_map_to_typed_errors(h2_server: Server) -> None:
    client = client_for(h2_server)
    try:
        with pytest.raises(NotFound):
            await client.request("GET", "/missing")
        with pytest.raises(Gone):
            async for _ in client.watch(PODS, "x", resource_version="expired"):
                pass
    finally:
        await client.close()


async def test_gone_watch_path(h2_server: Server) -> None:
    # The watch helper builds /api/v1/namespaces/x/pods; route a 410 through a raw request too.
    client = client_for(h2_server)
    try:
        with pytest.raises(Gone):
            await client.request("GET", "/gone")
    finally:
        await client.close()


async def test_an_unanswered_ping_fails_the_watch(h2_server: Server) -> None:
    client = client_for(h2_server, read_idle=0.2, ping_timeout=0.3)
    got = asyncio.Event()

    async def watch() -> None:
        async for _ in client.watch(PODS, "a", timeout_seconds=600):
            got.set()

    task = asyncio.create_task(watch())
    try:
        async with asyncio.timeout(5):
            await got.wait()
        h2_server.frozen = True  # the peer vanished: no data, no PING ACK, no FIN
        loop = asyncio.get_running_loop()
        started = loop.time()
        with pytest.raises(ApiError) as info:
            async with asyncio.timeout(5):
                await task
        assert info.value.status == 0
        assert "PING" in str(info.value)
        assert loop.time() - started < 2.0  # far below the watch's own 630 s silence bound
    finally:
        task.cancel()
        await client.close()


async def test_pings_keep_a_quiet_healthy_connection(h2_server: Server) -> None:
    client = client_for(h2_server, read_idle=0.1, ping_timeout=0.5)
    try:
        await client.request("GET", "/echo")
        await asyncio.sleep(0.6)  # several PING rounds with nothing else going on
        await client.request("GET", "/echo")
    finally:
        await client.close()
    assert h2_server.connections == 1


async def test_close_leaves_no_task_and_no_connection(h2_server: Server) -> None:
    before = asyncio.all_tasks()
    client = client_for(h2_server)
    watch = cast(AsyncGenerator[Any, None], client.watch(PODS, "a", timeout_seconds=60))
    await anext(watch)
    await asyncio.gather(*(client.request("GET", "/echo") for _ in range(5)))
    await watch.aclose()
    await client.close()
    async with asyncio.timeout(5):
        await h2_server.all_closed.wait()
    assert asyncio.all_tasks() - before == set()


@pytest.fixture
async def http1_tls_server() -> AsyncIterator[tuple[int, str]]:
    """An HTTPS server that offers no h2 in ALPN, like an HTTP/1.1-only proxy."""

    async def echo(request: web.Request) -> web.Response:
        return web.json_response({"version": f"{request.version.major}.{request.version.minor}"})

    made = self_signed(["127.0.0.1"])
    app = web.Application()
    app.router.add_get("/echo", echo)
    runner = web.AppRunner(app)
    await runner.setup()
    site = web.TCPSite(runner, "127.0.0.1", 0, ssl_context=serving_context(made))
    await site.start()
    port = site._server.sockets[0].getsockname()[1]  # type: ignore[union-attr]
    try:
        yield port, made.ca_pem.decode()
    finally:
        await runner.cleanup()


async def test_falls_back_to_http1_when_alpn_gives_no_h2(
    http1_tls_server: tuple[int, str],
) -> None:
    port, ca = http1_tls_server
    client = KubeClient(ClientConfig(server=f"https://127.0.0.1:{port}", ca_data=ca, qps=0))
    assert client.http_version == "HTTP/2"
    try:
        answers = await asyncio.gather(*(client.request("GET", "/echo") for _ in range(3)))
        assert client.http_version == "HTTP/1.1"
        assert answers == [{"version": "1.1"}] * 3
    finally:
        await client.close()


async def test_http2_can_be_switched_off(h2_server: Server) -> None:
    client = client_for(h2_server, http2=False)
    assert client.http_version == "HTTP/1.1"
    await client.close()


async def test_abandoned_watches_free_their_stream_slots(h2_server: Server) -> None:
    # Two slots per connection; twenty watches given up half-way one after another must all
    # fit on the first connection (each is reset on release).
    h2_server.max_streams = 2
    client = client_for(h2_server)
    try:
        for i in range(20):
            watch = cast(AsyncGenerator[Any, None], client.watch(PODS, f"n{i}"))
            assert (await anext(watch)).object["metadata"]["name"] == "p0"
            await watch.aclose()
        await client.request("GET", "/echo")
    finally:
        await client.close()
    assert h2_server.connections == 1


async def test_an_unused_connection_closes_itself_and_is_dialled_again(h2_server: Server) -> None:
    client = client_for(h2_server)
    assert client._h2 is not None
    client._h2.idle_close = 0.3
    try:
        await client.request("GET", "/echo")
        async with asyncio.timeout(5):
            await h2_server.all_closed.wait()
        assert (await client.request("GET", "/echo"))["body"] == ""
    finally:
        await client.close()
    assert h2_server.connections == 2


async def test_many_callers_at_once_fill_connections_in_order(h2_server: Server) -> None:
    # 600 streams opened together with 50 slots per connection: exactly 12 connections, each
    # dial waking only as many callers as it has room for.
    h2_server.max_streams = 50
    client = client_for(h2_server)
    assert client._h2 is not None
    pool = client._h2
    try:
        async with asyncio.timeout(30):
            streams = await asyncio.gather(
                *(
                    pool.open([(b":method", b"GET"), (b":path", b"/x")], None, 5, 5)
                    for _ in range(600)
                )
            )
        assert h2_server.connections == 12
        assert sorted(len(c.streams) for c in pool.connections) == [50] * 12
        for stream in streams:
            stream.release()
    finally:
        await client.close()


async def test_after_goaway_new_requests_go_to_a_new_connection(h2_server: Server) -> None:
    client = client_for(h2_server)
    got = asyncio.Event()

    async def watch() -> None:
        async for _ in client.watch(PODS, "a", timeout_seconds=600):
            got.set()

    task = asyncio.create_task(watch())
    try:
        async with asyncio.timeout(5):
            await got.wait()
        h2_server.goaway()
        pool = client._h2
        assert pool is not None
        old = pool.connections[0]
        for _ in range(500):  # until the client has read the GOAWAY
            if old.draining:
                break
            await asyncio.sleep(0.01)
        assert old.draining
        assert not old.closed
        # New requests go to a new connection; the watch stays on the old one.
        assert (await client.request("GET", "/echo"))["body"] == ""
        assert h2_server.connections == 2
        assert not task.done()
    finally:
        task.cancel()
        await client.close()
    assert h2_server.connections == 2


async def test_a_response_crossing_our_reset_leaves_the_connection_up(h2_server: Server) -> None:
    # A request given up (timeout) is reset; the server's answer, already on its way, arrives
    # for a stream we closed. The watch sharing the connection must not notice.
    client = client_for(h2_server)
    got = asyncio.Event()
    events: list[str] = []

    async def watch() -> None:
        async for event in client.watch(PODS, "a", timeout_seconds=600):
            events.append(event.object["metadata"]["name"])
            got.set()

    task = asyncio.create_task(watch())
    try:
        async with asyncio.timeout(5):
            await got.wait()
        with pytest.raises(ApiError):
            await client.request("GET", "/late", timeout=0.2)
        # A new stream in between makes h2 forget the closed one, as on a busy connection.
        assert (await client.request("GET", "/echo"))["body"] == ""
        h2_server.late_go.set()
        async with asyncio.timeout(5):
            await h2_server.late_sent.wait()
        assert (await client.request("GET", "/echo"))["body"] == ""
        assert not task.done()
        pool = client._h2
        assert pool is not None
        assert [c.closed for c in pool.connections] == [False]
    finally:
        task.cancel()
        await client.close()
    assert h2_server.connections == 1


async def test_a_write_cut_off_before_its_body_ended_is_sent_again(h2_server: Server) -> None:
    # The connection dies while a 512 KiB POST body is still going out (flow control makes the
    # client wait for the server's window): the server never saw the request end, so the
    # client sends it again on a new connection, although POST is not a read.
    client = client_for(h2_server)
    body = {"blob": "x" * (512 << 10)}
    try:
        answer = await client.request("POST", "/drop-first", body)
    finally:
        await client.close()
    assert json.loads(answer["body"]) == body
    assert h2_server.dropped == 1
    assert h2_server.connections == 2
    assert client.request_counts[("POST", 0)] == 1
    assert client.request_counts[("POST", 200)] == 1


async def test_a_connection_at_its_idle_limit_is_not_handed_out(h2_server: Server) -> None:
    # Even when its own timer has not closed it yet (a busy loop), a connection idle for
    # idle_close seconds gets no new stream: the server may be closing it at that moment.
    client = client_for(h2_server)
    pool = client._h2
    assert pool is not None
    pool.idle_close = 0.3
    try:
        await client.request("GET", "/echo")
        (first,) = pool.connections
        assert first._health is not None
        first._health.cancel()  # only the pick may close it now
        await asyncio.sleep(0.4)
        assert not first.closed
        await client.request("GET", "/echo")
        assert first.closed
    finally:
        await client.close()
    assert h2_server.connections == 2
