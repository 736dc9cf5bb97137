"""The process runtime's pure parts: DNS codec and records, env resolution, image map."""

from __future__ import annotations

import asyncio
import base64
import socket
import struct
from pathlib import Path
from typing import Any

import pytest

from kuberay.devenv.nodeagent import container_log, storage
from kuberay.devenv.nodeagent.dns import (
    RCODE_FORMERR,
    RCODE_NXDOMAIN,
    RCODE_OK,
    RCODE_SERVFAIL,
    TYPE_A,
    TYPE_AAAA,
    ClusterRecords,
    DnsServer,
    Forwarder,
    answer,
    encode_name,
    host_resolvers,
    parse_query,
    parse_upstream,
)
from kuberay.devenv.nodeagent.launcher import covers
from kuberay.devenv.nodeagent.pod import kept_paths
from kuberay.devenv.nodeagent.spec import (
    ConfigError,
    ImageMap,
    PodFacts,
    container_argv,
    container_env,
    expand,
    parse_quantity,
)
from kuberay.devenv.plane import dns_query


def query(name: str, qtype: int = TYPE_A, qid: int = 7) -> bytes:
    header = struct.pack("!HHHHHH", qid, 0x0100, 1, 0, 0, 0)
    return header + encode_name(name) + struct.pack("!HH", qtype, 1)


def decode(reply: bytes) -> tuple[int, int, list[str]]:
    qid, flags, qdcount, ancount, _ns, _ar = struct.unpack("!HHHHHH", reply[:12])
    if not qdcount:
        return qid, flags & 0xF, []
    offset = 12
    while reply[offset]:
        offset += reply[offset] + 1
    offset += 5
    addresses = []
    for _ in range(ancount):
        _ptr, rtype, _cls, _ttl, length = struct.unpack("!HHHIH", reply[offset : offset + 12])
        offset += 12
        assert rtype == TYPE_A
        addresses.append(socket.inet_ntoa(reply[offset : offset + length]))
        offset += length
    return qid, flags & 0xF, addresses


def records() -> ClusterRecords:
    services = {("team", "web"): {"metadata": {"name": "web"}}, ("team", "head"): {}}
    slices = {
        ("team", "web"): [
            {
                "addressType": "IPv4",
                "endpoints": [
                    {"addresses": ["10.244.0.5"], "conditions": {"ready": True}},
                    {"addresses": ["10.244.0.6"], "conditions": {"ready": False}},
                    {"addresses": ["10.244.0.7"], "hostname": "w-0"},
                ],
            }
        ]
    }
    return ClusterRecords(
        lambda ns, n: services.get((ns, n)), lambda ns, n: slices.get((ns, n), [])
    )


def test_service_names_resolve_to_ready_endpoints() -> None:
    lookup = records().lookup
    assert decode(answer(query("web.team.svc.cluster.local"), lookup) or b"") == (
        7,
        RCODE_OK,
        ["10.244.0.5", "10.244.0.7"],
    )
    # Trailing dot and case do not matter; a service without endpoints is NODATA.
    assert decode(answer(query("WEB.team.svc.cluster.local."), lookup) or b"")[2][0] == "10.244.0.5"
    assert decode(answer(query("head.team.svc.cluster.local"), lookup) or b"") == (7, RCODE_OK, [])
    assert lookup("w-0.web.team.svc.cluster.local") == ["10.244.0.7"]
    assert lookup("10-244-0-9.team.pod.cluster.local") == ["10.244.0.9"]
    assert lookup("localhost") == ["127.0.0.1"]


def test_unknown_and_outside_names_are_nxdomain_and_aaaa_is_nodata() -> None:
    lookup = records().lookup
    for name in ("nope.team.svc.cluster.local", "example.com", "web.team.svc.cluster.local.com"):
        assert decode(answer(query(name), lookup) or b"")[1] == RCODE_NXDOMAIN
    assert decode(answer(query("web.team.svc.cluster.local", TYPE_AAAA), lookup) or b"") == (
        7,
        RCODE_OK,
        [],
    )


def test_malformed_packets_get_formerr_or_nothing() -> None:
    lookup = records().lookup
    assert answer(b"\x01", lookup) is None
    reply = answer(b"\x00\x09" + b"\x00" * 4, lookup)
    assert reply is not None
    assert decode(reply)[:2] == (9, RCODE_FORMERR)
    looping = struct.pack("!HHHHHH", 1, 0x0100, 1, 0, 0, 0) + b"\xc0\x0c" + b"\x00\x01\x00\x01"
    assert decode(answer(looping, lookup) or b"")[1] == RCODE_FORMERR
    assert parse_query(dns_query("a.b")).question.name == "a.b"


async def test_server_answers_over_udp_and_tcp() -> None:
    server = DnsServer("127.0.0.1", 0, records().lookup)
    await server.start()
    try:
        loop = asyncio.get_running_loop()
        with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as sock:
            sock.setblocking(False)
            await loop.sock_connect(sock, ("127.0.0.1", server.port))
            await loop.sock_sendall(sock, query("web.team.svc.cluster.local"))
            async with asyncio.timeout(5):
                reply = await loop.sock_recv(sock, 512)
        assert decode(reply)[2] == ["10.244.0.5", "10.244.0.7"]
        reader, writer = await asyncio.open_connection("127.0.0.1", server.port)
        packet = query("example.org", qid=3)
        writer.write(struct.pack("!H", len(packet)) + packet)
        async with asyncio.timeout(5):
            size = struct.unpack("!H", await reader.readexactly(2))[0]
            reply = await reader.readexactly(size)
        writer.close()
        assert decode(reply)[:2] == (3, RCODE_NXDOMAIN)
    finally:
        await server.stop()


async def _ask(port: int, packet: bytes, *, tcp: bool = False) -> bytes:
    loop = asyncio.get_running_loop()
    async with asyncio.timeout(10):
        if tcp:
            reader, writer = await asyncio.open_connection("127.0.0.1", port)
            writer.write(struct.pack("!H", len(packet)) + packet)
            size = struct.unpack("!H", await reader.readexactly(2))[0]
            reply = await reader.readexactly(size)
            writer.close()
            return reply
        with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as sock:
            sock.setblocking(False)
            await loop.sock_connect(sock, ("127.0.0.1", port))
            await loop.sock_sendall(sock, packet)
            return await loop.sock_recv(sock, 512)


def _unused_udp_port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


async def test_outside_names_are_forwarded_and_cluster_names_never() -> None:
    asked: list[str] = []

    def upstream_lookup(name: str) -> list[str] | None:
        asked.append(name)
        return {"pypi.example": ["192.0.2.80"], "web.team.svc.cluster.local": ["192.0.2.99"]}.get(
            name
        )

    upstream = DnsServer("127.0.0.1", 0, upstream_lookup)
    await upstream.start()
    # Nothing listens on the first upstream: it is skipped.
    forwarder = Forwarder([("127.0.0.1", _unused_udp_port()), ("127.0.0.1", upstream.port)])
    server = DnsServer("127.0.0.1", 0, records().lookup, forwarder)
    await server.start()
    try:
        for tcp in (False, True):
            reply = await _ask(server.port, query("pypi.example", qid=21), tcp=tcp)
            assert decode(reply) == (21, RCODE_OK, ["192.0.2.80"])
            reply = await _ask(server.port, query("missing.example", qid=22), tcp=tcp)
            assert decode(reply)[:2] == (22, RCODE_NXDOMAIN)
        # The cluster's own names and localhost are answered here, whatever upstream says.
        reply = await _ask(server.port, query("web.team.svc.cluster.local"))
        assert decode(reply)[2] == ["10.244.0.5", "10.244.0.7"]
        reply = await _ask(server.port, query("nope.team.svc.cluster.local", qid=23))
        assert decode(reply)[:2] == (23, RCODE_NXDOMAIN)
        assert decode(await _ask(server.port, query("localhost")))[2] == ["127.0.0.1"]
        assert asked == ["pypi.example", "missing.example"] * 2
    finally:
        await server.stop()
        await upstream.stop()


async def test_no_upstream_answering_is_servfail() -> None:
    with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as silent:
        silent.bind(("127.0.0.1", 0))  # receives and never answers: the timeout path
        silent.settimeout(5)
        upstreams = [silent.getsockname(), ("127.0.0.1", _unused_udp_port())]
        server = DnsServer("127.0.0.1", 0, records().lookup, Forwarder(upstreams, timeout=0.3))
        await server.start()
        try:
            reply = await _ask(server.port, query("pypi.example", qid=31))
            assert decode(reply)[:2] == (31, RCODE_SERVFAIL)
            assert silent.recv(512)[:2] == reply[:2]  # it was asked
        finally:
            await server.stop()


def test_upstreams_come_from_resolv_conf_or_configuration(tmp_path: Path) -> None:
    conf = tmp_path / "resolv.conf"
    conf.write_text(
        "# systemd-resolved\nnameserver 127.0.0.53\nnameserver fe80::1%eth0\n"
        "nameserver 2001:db8::53\nsearch example\noptions edns0\n"
    )
    assert host_resolvers(conf) == [("127.0.0.53", 53), ("2001:db8::53", 53)]
    conf.write_text("search example\n")
    assert host_resolvers(conf) == [("127.0.0.1", 53)]
    assert parse_upstream("127.0.0.1:5353") == ("127.0.0.1", 5353)
    assert parse_upstream("[::1]:5353") == ("::1", 5353)
    assert parse_upstream("10.0.0.2") == ("10.0.0.2", 53)
    with pytest.raises(ValueError, match="does not appear to be an IPv4 or IPv6 address"):
        parse_upstream("dns.example:53")
    assert not Forwarder([]).wants("pypi.example")
    assert not Forwarder([("127.0.0.1", 53)]).wants("CLUSTER.local.")


def test_quantities_and_expansion() -> None:
    assert parse_quantity("250m") * 1000 == 250
    assert parse_quantity("1Gi") == 2**30
    assert parse_quantity("1e3") == 1000
    with pytest.raises(ValueError, match="quantity"):
        parse_quantity("12 apples")
    env = {"A": "x"}
    assert expand("$(A)-$(B)-$$(A)", env) == "x-$(B)-$(A)"


def pod() -> dict[str, Any]:
    return {
        "metadata": {"name": "p", "namespace": "ns", "uid": "u1", "labels": {"k": "v"}},
        "spec": {"nodeName": "n0", "serviceAccountName": "sa", "containers": []},
    }


def test_env_order_and_references() -> None:
    facts = PodFacts(
        "10.244.0.2", "10.244.0.1", {"cpu": "16", "memory": "64Gi"}, "10.244.0.1", 6443
    )
    secret = {"data": {"pw": base64.b64encode(b"hunter2").decode()}}
    cm = {"data": {"a": "1", "b": "2"}}
    container = {
        "name": "c",
        "envFrom": [{"configMapRef": {"name": "cm"}, "prefix": "X_"}],
        "env": [
            {"name": "X_a", "value": "overridden"},
            {"name": "L", "valueFrom": {"fieldRef": {"fieldPath": "metadata.labels['k']"}}},
            {"name": "PW", "valueFrom": {"secretKeyRef": {"name": "s", "key": "pw"}}},
            {"name": "CPU", "valueFrom": {"resourceFieldRef": {"resource": "limits.cpu"}}},
            {"name": "BOTH", "value": "$(L)/$(PW)"},
        ],
    }
    image = ImageMap.from_data({"": {"python_env": "/opt/env", "env": {"IMG": "1"}}}).resolve("r")
    env = container_env(
        pod(), container, image, facts, lambda _n, _k: secret, lambda _n, _k: cm, "p"
    )
    assert env["PATH"].startswith("/opt/env/bin:")
    assert (env["X_a"], env["X_b"], env["IMG"]) == ("overridden", "2", "1")
    assert (env["L"], env["PW"], env["CPU"], env["BOTH"]) == ("v", "hunter2", "16", "v/hunter2")
    assert env["KUBERNETES_SERVICE_HOST"] == "10.244.0.1"
    assert env["KUBERNETES_PORT"] == "tcp://10.244.0.1:6443"
    missing = {
        "name": "c",
        "env": [{"name": "X", "valueFrom": {"secretKeyRef": {"name": "s", "key": "no"}}}],
    }
    with pytest.raises(ConfigError, match="not found"):
        container_env(pod(), missing, image, facts, lambda _n, _k: secret, lambda _n, _k: cm, "p")


def test_images_need_a_command_unless_the_map_has_an_entrypoint(tmp_path: Path) -> None:
    path = tmp_path / "images.yaml"
    path.write_text(
        "busybox:\n  entrypoint: [sleep, infinity]\nrayproject/ray:\n  home: /home/ray\n"
    )
    images = ImageMap.load(path)
    assert images.resolve("rayproject/ray:2.59.0").home == "/home/ray"
    assert container_argv({"name": "c", "args": ["5"]}, images.resolve("busybox"), {}) == [
        "sleep",
        "infinity",
        "5",
    ]
    with pytest.raises(ConfigError, match="no command"):
        container_argv({"name": "c", "image": "other"}, images.resolve("other"), {})
    assert container_argv(
        {"name": "c", "command": ["echo", "$(X)"]}, images.resolve("other"), {"X": "1"}
    ) == ["echo", "1"]


def test_the_operator_image_runs_this_checkout(tmp_path: Path) -> None:
    """The chart's default image is this source tree, with or without a map file; a file that
    names the image wins."""
    import kuberay

    src = str(Path(kuberay.__file__).resolve().parents[1])
    assert ImageMap.load().resolve("kuberay-py:0.1.0").env["PYTHONPATH"] == src
    path = tmp_path / "images.yaml"
    path.write_text("'': {home: /nowhere}\n")
    images = ImageMap.load(path)
    assert images.resolve("kuberay-py:0.1.0").env["PYTHONPATH"] == src
    assert images.resolve("rayproject/ray:2.59.0").home == "/nowhere"
    path.write_text("kuberay-py: {env: {A: b}}\n")
    assert dict(ImageMap.load(path).resolve("kuberay-py:0.1.0").env) == {"A": "b"}


def test_container_log_reads_the_newest_instance(tmp_path: Path) -> None:
    (tmp_path / "ns_p_uid1").mkdir()
    (tmp_path / "ns_p_uid1" / "c.log").write_text("old")
    newer = tmp_path / "ns_p_uid2"
    newer.mkdir()
    (newer / "c.log").write_text("new")
    (newer / "c.0.log").write_text("before restart")
    import os

    os.utime(tmp_path / "ns_p_uid1", (1, 1))
    assert container_log(tmp_path, "ns", "p", "c") == "new"
    assert container_log(tmp_path, "ns", "p", "c", previous=0) == "before restart"
    assert container_log(tmp_path, "ns", "q", "c") == ""


def test_kept_paths_are_the_envs_and_sources_under_tmp_without_nesting() -> None:
    # A checkout under /tmp with an editable install: the venv and the source tree are kept,
    # the venv's own site-packages rides along with the venv, nothing outside /tmp is listed.
    kept = kept_paths(
        "/tmp/ci/.venv",
        "/tmp/ci/.venv",
        ["/usr/lib/python311.zip", "/tmp/ci/.venv/lib/python3.11/site-packages", "/tmp/ci/src"],
    )
    assert kept == ["/tmp/ci/.venv", "/tmp/ci/src"]
    assert kept_paths("/work/.venv", "/work/.venv", ["/work/src", ""]) == []
    assert kept_paths("/tmp/h/pod-python", "/tmp/ci/.venv", []) == [
        "/tmp/ci/.venv",
        "/tmp/h/pod-python",
    ]


def test_a_mount_on_tmp_or_above_a_kept_path_covers_it() -> None:
    assert covers("/tmp", "/tmp/ci/.venv")
    assert covers("/tmp/", "/tmp/ci/.venv")
    assert covers("/tmp/ci", "/tmp/ci/.venv")
    assert covers("/tmp/ci/.venv", "/tmp/ci/.venv")
    assert not covers("/tmp/c", "/tmp/ci/.venv")
    assert not covers("/var/run/secrets", "/tmp/ci/.venv")


# ---------------------------------------------------------------------- storage provisioning
def _claim(**spec: object) -> dict[str, object]:
    return {
        "metadata": {"name": "data", "namespace": "ns", "uid": "u-1"},
        "spec": {"storageClassName": "standard", **spec},
        "status": {"phase": "Pending"},
    }


def test_only_pending_claims_of_our_class_without_a_volume_want_one() -> None:
    assert storage.wants_volume(_claim())
    assert not storage.wants_volume(_claim(storageClassName="fast"))
    assert not storage.wants_volume(_claim(volumeName="pvc-u-1"))
    bound = _claim()
    bound["status"] = {"phase": "Bound"}
    assert not storage.wants_volume(bound)


def test_a_claims_volume_is_named_by_its_uid_and_pre_bound_to_it(tmp_path: Path) -> None:
    claim = _claim(accessModes=["ReadWriteMany"], resources={"requests": {"storage": "8Gi"}})
    pv = storage.volume_for(claim, tmp_path)
    assert pv["metadata"]["name"] == "pvc-u-1"
    assert pv["spec"]["claimRef"] == {
        "apiVersion": "v1",
        "kind": "PersistentVolumeClaim",
        "namespace": "ns",
        "name": "data",
        "uid": "u-1",
    }
    assert pv["spec"]["capacity"] == {"storage": "8Gi"}
    assert pv["spec"]["accessModes"] == ["ReadWriteMany"]
    assert pv["spec"]["hostPath"]["path"] == str(tmp_path / "claims" / "ns" / "data")
    assert pv["spec"]["persistentVolumeReclaimPolicy"] == "Delete"


def test_only_our_released_volumes_are_reclaimed(tmp_path: Path) -> None:
    pv = storage.volume_for(_claim(), tmp_path)
    pv["status"] = {"phase": "Released"}
    assert storage.ours_released(pv)
    pv["status"] = {"phase": "Bound"}
    assert not storage.ours_released(pv)
    pv["status"] = {"phase": "Released"}
    pv["metadata"]["annotations"] = {}
    assert not storage.ours_released(pv)
