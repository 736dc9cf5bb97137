"""Cluster DNS for process pods: ``<svc>.<ns>.svc.cluster.local`` from Services + EndpointSlices.

There is no kube-proxy in the process runtime, so a ClusterIP would be an address nothing answers
on. Every Service name therefore resolves to the addresses of its ready endpoints (what a headless
Service returns on a real cluster), whatever the Service's type. Also answered:
``<hostname>.<svc>.<ns>.svc.cluster.local`` for endpoints with a hostname (pods with
``hostname``/``subdomain``), ``a-b-c-d.<ns>.pod.cluster.local`` and ``localhost``.

Names outside the cluster domain are forwarded (``Forwarder``) when the plane has egress: the
query goes, unchanged, to the host's resolvers from ``/etc/resolv.conf`` (or configured ones),
sent from the agent, which lives in the host's network namespace, so a loopback resolver such as
systemd-resolved's ``127.0.0.53`` works although pods could never reach it themselves.

Invariants and failure modes:
- Without a forwarder (hermetic planes) a name outside the cluster domain is NXDOMAIN, so a pod
  cannot reach the outside world by name and a test cannot leak queries. Names inside the
  cluster domain and ``localhost`` are never forwarded, whatever the upstream would say.
- A forwarded query gets the first upstream's reply, relayed as is (same id); an upstream that
  does not answer within the timeout is skipped; SERVFAIL when none answers. Queries that came
  over TCP are forwarded over TCP (a truncated UDP answer is retried by the pod over TCP).
- A Service that exists but has no ready endpoint answers NOERROR with no records (NODATA), not
  NXDOMAIN, so resolvers keep the name and retry; AAAA and other types of an existing name are
  NODATA too, which keeps glibc's dual-stack lookups from failing on the missing IPv6 answer.
- Answers carry a 5 s TTL: endpoints change as pods come and go.
- The codec handles only what stub resolvers send (one question, optional EDNS record, which is
  ignored); a malformed packet is dropped (UDP) or ends the connection (TCP).
"""

from __future__ import annotations

import asyncio
import contextlib
import errno
import ipaddress
import logging
import socket
import struct
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from pathlib import Path
from typing import Any, cast

log = logging.getLogger("kuberay.devenv.dns")

TYPE_A = 1
TYPE_AAAA = 28
TYPE_ANY = 255
CLASS_IN = 1
RCODE_OK = 0
RCODE_FORMERR = 1
RCODE_SERVFAIL = 2
RCODE_NXDOMAIN = 3
RCODE_NOTIMP = 4
TTL = 5

# None: the name does not exist (NXDOMAIN); a list (maybe empty): its IPv4 addresses.
Lookup = Callable[[str], list[str] | None]


class DnsFormatError(ValueError):
    """The packet is not a DNS query this server can parse."""


@dataclass
class Question:
    name: str
    qtype: int
    qclass: int
    raw: bytes  # the question section as received, echoed back in the answer


@dataclass
class Query:
    id: int
    flags: int
    question: Question


def _read_name(data: bytes, offset: int) -> tuple[str, int]:
    labels: list[str] = []
    end = -1
    jumps = 0
    while True:
        if offset >= len(data):
            raise DnsFormatError("name runs past the packet")
        length = data[offset]
        if length & 0xC0 == 0xC0:
            if offset + 1 >= len(data) or jumps > 10:
                raise DnsFormatError("bad compression pointer")
            if end < 0:
                end = offset + 2
            offset = ((length & 0x3F) << 8) | data[offset + 1]
            jumps += 1
            continue
        if length & 0xC0:
            raise DnsFormatError("unsupported label type")
        offset += 1
        if length == 0:
            break
        labels.append(data[offset : offset + length].decode("ascii", errors="replace"))
        offset += length
    return ".".join(labels), (end if end >= 0 else offset)


def parse_query(data: bytes) -> Query:
    if len(data) < 12:
        raise DnsFormatError("short header")
    qid, flags, qdcount = struct.unpack("!HHH", data[:6])
    if flags & 0x8000:
        raise DnsFormatError("not a query")
    if qdcount != 1:
        raise DnsFormatError(f"{qdcount} questions")
    name, offset = _read_name(data, 12)
    if offset + 4 > len(data):
        raise DnsFormatError("question runs past the packet")
    qtype, qclass = struct.unpack("!HH", data[offset : offset + 4])
    return Query(qid, flags, Question(name, qtype, qclass, data[12 : offset + 4]))


def encode_name(name: str) -> bytes:
    out = b""
    for label in name.rstrip(".").split("."):
        if label:
            raw = label.encode("ascii")
            out += bytes([len(raw)]) + raw
    return out + b"\0"


def build_response(
    query: Query, rcode: int, addresses: Iterable[str] = (), *, authoritative: bool = True
) -> bytes:
    flags = 0x8000 | (query.flags & 0x7800) | (query.flags & 0x0100) | 0x0080 | rcode
    if authoritative:
        flags |= 0x0400
    answers = b""
    count = 0
    for address in addresses:
        # 0xC00C: a pointer to the question's name, right after the 12-byte header.
        answers += struct.pack("!HHHIH", 0xC00C, TYPE_A, CLASS_IN, TTL, 4)
        answers += ipaddress.IPv4Address(address).packed
        count += 1
    header = struct.pack("!HHHHHH", query.id, flags, 1, count, 0, 0)
    return header + query.question.raw + answers


def build_error(data: bytes, rcode: int) -> bytes | None:
    """A header-only error reply to an unparsable packet, if it has at least an id."""
    if len(data) < 2:
        return None
    return struct.pack("!HHHHHH", struct.unpack("!H", data[:2])[0], 0x8000 | rcode, 0, 0, 0, 0)


def answer(data: bytes, lookup: Lookup) -> bytes | None:
    """The reply to one query packet (None: drop it)."""
    try:
        query = parse_query(data)
    except DnsFormatError:
        return build_error(data, RCODE_FORMERR)
    q = query.question
    if q.qclass != CLASS_IN:
        return build_response(query, RCODE_NOTIMP)
    try:
        addresses = lookup(q.name.lower().rstrip("."))
    except Exception:  # a lookup bug must not kill the server; answer as unknown
        log.exception("dns lookup of %s failed", q.name)
        addresses = None
    if addresses is None:
        return build_response(query, RCODE_NXDOMAIN)
    if q.qtype not in (TYPE_A, TYPE_ANY):
        return build_response(query, RCODE_OK)
    return build_response(query, RCODE_OK, addresses)


# ---------------------------------------------------------------------- cluster records
ServiceGetter = Callable[[str, str], dict[str, Any] | None]
SlicesGetter = Callable[[str, str], list[dict[str, Any]]]


def _ready(endpoint: dict[str, Any]) -> bool:
    # An absent ``ready`` means ready (discovery.k8s.io/v1).
    return (endpoint.get("conditions") or {}).get("ready") is not False


class ClusterRecords:
    """Resolves cluster names from a view of Services and EndpointSlices (informer stores)."""

    def __init__(
        self, service: ServiceGetter, slices: SlicesGetter, domain: str = "cluster.local"
    ) -> None:
        self.service = service
        self.slices = slices
        self.domain = domain.strip(".").lower()

    def _endpoints(self, namespace: str, svc: str) -> list[dict[str, Any]]:
        return [
            ep
            for sl in self.slices(namespace, svc)
            if sl.get("addressType", "IPv4") == "IPv4"
            for ep in sl.get("endpoints") or []
        ]

    def lookup(self, name: str) -> list[str] | None:
        if name == "localhost":
            return ["127.0.0.1"]
        suffix = "." + self.domain
        if not name.endswith(suffix):
            return None
        parts = name[: -len(suffix)].split(".")
        if len(parts) == 3 and parts[2] == "svc":
            svc, namespace = parts[0], parts[1]
            if self.service(namespace, svc) is None:
                return None
            seen: list[str] = []
            for ep in self._endpoints(namespace, svc):
                if _ready(ep):
                    seen.extend(a for a in ep.get("addresses") or [] if a not in seen)
            return seen
        if len(parts) == 4 and parts[3] == "svc":
            host, svc, namespace = parts[0], parts[1], parts[2]
            if self.service(namespace, svc) is None:
                return None
            found = [
                a
                for ep in self._endpoints(namespace, svc)
                if (ep.get("hostname") or "").lower() == host
                for a in ep.get("addresses") or []
            ]
            return found or None
        if len(parts) == 3 and parts[2] == "pod":
            with contextlib.suppress(ValueError):
                return [str(ipaddress.IPv4Address(parts[0].replace("-", ".")))]
        return None


# ---------------------------------------------------------------------- forwarding
Upstream = tuple[str, int]


def parse_upstream(text: str) -> Upstream:
    """``ADDRESS``, ``ADDRESS:PORT`` or ``[IPV6]:PORT`` -> (address, port); port 53 by default."""
    text = text.strip()
    if text.startswith("["):
        address, _, rest = text[1:].partition("]")
        port = int(rest[1:]) if rest.startswith(":") else 53
    elif text.count(":") == 1:
        address, port_text = text.split(":")
        port = int(port_text)
    else:
        address, port = text, 53
    ipaddress.ip_address(address)  # ValueError for a name: the forwarder must not need DNS
    return address, port


def host_resolvers(path: Path = Path("/etc/resolv.conf")) -> list[Upstream]:
    """The ``nameserver`` entries of the host's resolv.conf (glibc's default, the local host,
    when there are none). Link-local IPv6 entries with a zone are skipped."""
    found: list[Upstream] = []
    with contextlib.suppress(OSError):
        for line in path.read_text().splitlines():
            fields = line.split()
            if len(fields) >= 2 and fields[0] == "nameserver" and "%" not in fields[1]:
                with contextlib.suppress(ValueError):
                    found.append(parse_upstream(fields[1]))
    return found or [("127.0.0.1", 53)]


class Forwarder:
    """Relays queries for names outside the cluster domain to upstream resolvers."""

    def __init__(
        self, upstreams: list[Upstream], domain: str = "cluster.local", timeout: float = 2.0
    ) -> None:
        self.upstreams = upstreams
        self.domain = domain.strip(".").lower()
        self.timeout = timeout

    def wants(self, name: str) -> bool:
        name = name.lower().rstrip(".")
        local = name in ("localhost", self.domain) or name.endswith("." + self.domain)
        return not local and bool(self.upstreams)

    async def forward(self, query: Query, data: bytes, *, tcp: bool) -> bytes:
        for upstream in self.upstreams:
            try:
                async with asyncio.timeout(self.timeout):
                    if tcp:
                        return await _ask_tcp(upstream, data)
                    return await _ask_udp(upstream, data, query.id)
            except (OSError, TimeoutError, asyncio.IncompleteReadError) as exc:
                log.debug("upstream %s:%d failed for %s: %s", *upstream, query.question.name, exc)
        return build_response(query, RCODE_SERVFAIL, authoritative=False)


async def _ask_udp(upstream: Upstream, data: bytes, qid: int) -> bytes:
    loop = asyncio.get_running_loop()
    family = socket.AF_INET6 if ":" in upstream[0] else socket.AF_INET
    with socket.socket(family, socket.SOCK_DGRAM) as sock:
        sock.setblocking(False)
        sock.connect(upstream)  # a connected socket only receives the upstream's datagrams
        await loop.sock_sendall(sock, data)
        while True:
            reply = await loop.sock_recv(sock, 65535)
            if len(reply) >= 12 and struct.unpack("!H", reply[:2])[0] == qid:
                return reply


async def _ask_tcp(upstream: Upstream, data: bytes) -> bytes:
    reader, writer = await asyncio.open_connection(*upstream)
    try:
        writer.write(struct.pack("!H", len(data)) + data)
        await writer.drain()
        size = struct.unpack("!H", await reader.readexactly(2))[0]
        return await reader.readexactly(size)
    finally:
        writer.close()


# ---------------------------------------------------------------------- server
class _Udp(asyncio.DatagramProtocol):
    def __init__(self, server: DnsServer) -> None:
        self.server = server
        self.transport: asyncio.DatagramTransport | None = None
        self.relays: set[asyncio.Task[None]] = set()

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        self.transport = cast(asyncio.DatagramTransport, transport)

    def datagram_received(self, data: bytes, addr: tuple[str | Any, int]) -> None:
        query = self.server.to_forward(data)
        if query is not None:
            task = asyncio.ensure_future(self._relay(query, data, addr))
            self.relays.add(task)
            task.add_done_callback(self.relays.discard)
            return
        reply = answer(data, self.server.lookup)
        if reply is not None and self.transport is not None:
            self.transport.sendto(reply, addr)

    async def _relay(self, query: Query, data: bytes, addr: tuple[str | Any, int]) -> None:
        assert self.server.forwarder is not None
        reply = await self.server.forwarder.forward(query, data, tcp=False)
        if self.transport is not None and not self.transport.is_closing():
            self.transport.sendto(reply, addr)


class DnsServer:
    """UDP and TCP on ``host:port``; ``start()`` binds both (port 0 picks one for UDP and reuses
    it for TCP). With a ``forwarder``, names it wants go upstream instead of to ``lookup``."""

    def __init__(
        self, host: str, port: int, lookup: Lookup, forwarder: Forwarder | None = None
    ) -> None:
        self.host = host
        self.port = port
        self.lookup = lookup
        self.forwarder = forwarder
        self._udp: asyncio.DatagramTransport | None = None
        self._udp_protocol: _Udp | None = None
        self._tcp: asyncio.Server | None = None

    def to_forward(self, data: bytes) -> Query | None:
        """The parsed query when it goes upstream, else None (answered here)."""
        if self.forwarder is None:
            return None
        try:
            query = parse_query(data)
        except DnsFormatError:
            return None
        return query if self.forwarder.wants(query.question.name) else None

    async def start(self) -> None:
        loop = asyncio.get_running_loop()
        wanted = self.port
        for attempt in range(20):
            transport, protocol = await loop.create_datagram_endpoint(
                lambda: _Udp(self), local_addr=(self.host, wanted)
            )
            port = transport.get_extra_info("sockname")[1]
            try:
                self._tcp = await asyncio.start_server(self._handle_tcp, self.host, port)
            except OSError as exc:
                transport.close()
                # With port 0 the TCP side of the chosen UDP port may be taken: pick again.
                if wanted != 0 or exc.errno != errno.EADDRINUSE or attempt == 19:
                    raise
                continue
            self._udp_protocol = protocol
            self._udp = transport
            self.port = port
            return

    async def stop(self) -> None:
        if self._udp_protocol is not None:
            for task in list(self._udp_protocol.relays):
                task.cancel()
        if self._udp is not None:
            self._udp.close()
            await asyncio.sleep(0)  # the transport closes its socket on the next loop turn
        if self._tcp is not None:
            self._tcp.close()
            await self._tcp.wait_closed()

    async def _handle_tcp(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        try:
            while True:
                async with asyncio.timeout(10):
                    size = struct.unpack("!H", await reader.readexactly(2))[0]
                    data = await reader.readexactly(size)
                query = self.to_forward(data)
                if query is not None:
                    assert self.forwarder is not None
                    reply: bytes | None = await self.forwarder.forward(query, data, tcp=True)
                else:
                    reply = answer(data, self.lookup)
                if reply is None:
                    break
                writer.write(struct.pack("!H", len(reply)) + reply)
                await writer.drain()
        except (asyncio.IncompleteReadError, TimeoutError, OSError):
            pass
        finally:
            writer.close()
