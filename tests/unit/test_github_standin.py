"""The upstream-e2e harness's GitHub stand-in: archives, the Serve apps in them, the loopback
resolver and the HTTPS server (all on loopback; no plane)."""

from __future__ import annotations

import asyncio
import importlib
import io
import json
import socket
import ssl
import struct
import sys
import zipfile
from collections.abc import Iterator
from pathlib import Path
from types import ModuleType
from typing import Any

import certifi
import pytest

from kuberay.devenv import github_standin, upstream_e2e
from kuberay.devenv.github_standin import GitHubStandIn, OverrideResolver, archive, archive_for
from kuberay.devenv.nodeagent.dns import RCODE_NXDOMAIN, RCODE_OK, TYPE_AAAA, encode_name
from kuberay.devenv.nodeagent.spec import ImageMap
from kuberay.devenv.plane import dns_query

SHA = "78b4a5da38796123d9f9ffff59bab2792a043e95"


def test_archive_has_one_top_level_directory_named_like_githubs() -> None:
    names = zipfile.ZipFile(io.BytesIO(archive("serve_workloads", "a9f184f4"))).namelist()
    assert {n.split("/", 1)[0] for n in names} == {"serve_workloads-a9f184f4"}
    assert "serve_workloads-a9f184f4/" in names
    assert "serve_workloads-a9f184f4/microbenchmarks/" in names
    assert "serve_workloads-a9f184f4/microbenchmarks/no_ops.py" in names
    test_dag = zipfile.ZipFile(io.BytesIO(archive("test_dag", SHA))).namelist()
    assert set(test_dag) == {
        f"test_dag-{SHA}/",
        f"test_dag-{SHA}/conditional_dag.py",
        f"test_dag-{SHA}/fruit.py",
    }
    # Ray caches a working_dir by URI: one URL always gives the same bytes.
    assert archive("test_dag", SHA) == archive("test_dag", SHA)


def test_archive_urls_of_known_repositories_only() -> None:
    cache: dict[tuple[str, str], bytes] = {}
    assert archive_for(f"/ray-project/test_dag/archive/{SHA}.zip", cache) == archive(
        "test_dag", SHA
    )
    assert archive_for("/ray-project/serve_workloads/archive/4d2c9a59.zip?x=1") is not None
    assert list(cache) == [("test_dag", SHA)]
    assert archive_for("/ray-project/kuberay/archive/master.zip") is None
    assert archive_for("/ray-project/test_dag/archive/master.zip") is None
    assert archive_for(f"/other/test_dag/archive/{SHA}.zip") is None
    assert archive_for(f"/ray-project/test_dag/archive/{SHA}.tar.gz") is None


@pytest.fixture(scope="module")
def apps(tmp_path_factory: pytest.TempPathFactory) -> Iterator[dict[str, ModuleType]]:
    """The archives' modules, unpacked as Ray unpacks a remote working_dir zip (its top-level
    directory removed) and imported from there."""
    pytest.importorskip("ray.serve")
    from ray._private.runtime_env.packaging import unzip_package

    base = tmp_path_factory.mktemp("apps")
    roots = []
    for repo in github_standin.APPS:
        package = base / f"{repo}.zip"
        package.write_bytes(archive(repo, "abc1234"))
        unzip_package(str(package), str(base / repo), True, True)
        roots.append(str(base / repo))
    sys.path[:0] = roots
    names = ("fruit", "conditional_dag", "microbenchmarks", "microbenchmarks.no_ops")
    try:
        yield {name: importlib.import_module(name) for name in names}
    finally:
        for root in roots:
            sys.path.remove(root)
        for name in names:
            sys.modules.pop(name, None)


class _Handle:
    """What a deployment handle does for these apps: ``handle.method.remote(x)`` awaits the
    method of one replica."""

    def __init__(self, replica: Any) -> None:
        self.replica = replica

    def __getattr__(self, method: str) -> Any:
        replica = self.replica

        class _Method:
            async def remote(self, *args: Any) -> Any:
                result = getattr(replica, method)(*args)
                return await result if asyncio.iscoroutine(result) else result

        return _Method()


def _replica(deployment: Any, config: dict[str, Any] | None = None, *args: Any) -> Any:
    replica = deployment.func_or_class(*args)
    if config is not None:
        replica.reconfigure(config)
    return replica


def _deployments(app: Any) -> set[str]:
    """Names of the deployments an application binds (the ingress and what it is bound to)."""
    names = set()
    todo = [app._bound_deployment]
    while todo:
        dep = todo.pop()
        names.add(dep.name)
        todo.extend(a._bound_deployment for a in dep.init_args if hasattr(a, "_bound_deployment"))
    return names


def test_import_paths_resolve_as_serve_resolves_them(apps: dict[str, ModuleType]) -> None:
    from ray._common.utils import import_attr
    from ray.serve._private.api import call_user_app_builder_with_args_if_necessary as build
    from ray.serve.deployment import Application

    assert isinstance(build(import_attr("fruit.deployment_graph"), {}), Application)
    assert isinstance(build(import_attr("conditional_dag.serve_dag"), {}), Application)
    builder = import_attr("microbenchmarks.no_ops:app_builder")
    assert _deployments(build(builder, {"num_forwards": 0})) == {"NoOp"}


async def test_fruit_market_answers_price_times_quantity(apps: dict[str, ModuleType]) -> None:
    fruit = apps["fruit"]
    assert _deployments(fruit.deployment_graph) == {
        "FruitMarket",
        "MangoStand",
        "OrangeStand",
        "PearStand",
    }
    mango = _Handle(_replica(fruit.MangoStand, {"price": 3}))
    orange = _Handle(_replica(fruit.OrangeStand, {"price": 2}))
    pear = _Handle(_replica(fruit.PearStand))  # no user_config: price 0
    market = fruit.FruitMarket.func_or_class(mango, orange, pear)
    assert await market.quote("MANGO", 2) == "6"
    assert await market.quote("ORANGE", 5) == "10"
    assert await market.quote("PEAR", 5) == "0"
    mango.replica.reconfigure({"price": 456})
    assert await market.quote("MANGO", 2) == "912"


async def test_conditional_dag_adds_or_multiplies(apps: dict[str, ModuleType]) -> None:
    dag = apps["conditional_dag"]
    assert _deployments(dag.serve_dag) == {"Router", "Adder", "Multiplier"}
    router = dag.Router.func_or_class(
        _Handle(_replica(dag.Adder, {"increment": 3})),
        _Handle(_replica(dag.Multiplier, {"factor": 5})),
    )
    assert await router.route("MUL", 3) == "15 pizzas please!"
    assert await router.route("ADD", 3) == "6 pizzas please!"


async def test_no_ops_app_builder(apps: dict[str, ModuleType]) -> None:
    no_ops = apps["microbenchmarks.no_ops"]
    assert _deployments(no_ops.app_builder({"num_forwards": 0})) == {"NoOp"}
    chain = no_ops.app_builder({"num_forwards": 2})
    assert _deployments(chain) == {"Forward1", "Forward0", "NoOp"}
    assert chain._bound_deployment.name == "Forward1"  # the ingress: requests pass both hops
    hop = no_ops.Forward.func_or_class(_Handle(no_ops.NoOp.func_or_class()))
    assert await hop.noop() == ""


# ---------------------------------------------------------------------- resolver
def _ask(port: int, query: bytes) -> bytes:
    with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as sock:
        sock.settimeout(5)
        sock.sendto(query, ("127.0.0.1", port))
        return sock.recv(512)


def _addresses(reply: bytes) -> tuple[int, list[str]]:
    """(rcode, A records) of a reply whose answers point at the question's name."""
    rcode, count = reply[3] & 0xF, struct.unpack("!H", reply[6:8])[0]
    qend = 12 + reply[12:].index(b"\0") + 1 + 4
    out, offset = [], qend
    for _ in range(count):
        rdlength = struct.unpack("!H", reply[offset + 10 : offset + 12])[0]
        out.append(socket.inet_ntoa(reply[offset + 12 : offset + 12 + rdlength]))
        offset += 12 + rdlength
    return rcode, out


@pytest.fixture
def upstream() -> Iterator[int]:
    """A loopback resolver standing for the host's: knows ``pypi.org`` only (an override
    resolver with nothing to forward to answers its own names and NXDOMAIN)."""
    resolver = OverrideResolver({"pypi.org": "192.0.2.7"}, [])
    resolver.start()
    yield resolver.port
    resolver.stop()


def test_resolver_answers_overrides_and_forwards_the_rest(upstream: int) -> None:
    resolver = OverrideResolver({"github.com": None}, [("127.0.0.1", upstream)])
    resolver.start()
    try:
        assert resolver.address == f"127.0.0.1:{resolver.port}"
        # No address yet: NXDOMAIN, and the name is not forwarded.
        assert _addresses(_ask(resolver.port, dns_query("github.com"))) == (RCODE_NXDOMAIN, [])
        resolver.overrides["github.com"] = "10.1.2.1"
        assert _addresses(_ask(resolver.port, dns_query("GitHub.com."))) == (
            RCODE_OK,
            ["10.1.2.1"],
        )
        aaaa = dns_query("github.com")[:-4] + struct.pack("!HH", TYPE_AAAA, 1)
        assert _addresses(_ask(resolver.port, aaaa)) == (RCODE_OK, [])  # NODATA
        assert _addresses(_ask(resolver.port, dns_query("pypi.org"))) == (RCODE_OK, ["192.0.2.7"])
        assert _addresses(_ask(resolver.port, dns_query("example.org")))[0] == RCODE_NXDOMAIN
    finally:
        resolver.stop()
    assert encode_name("github.com") in dns_query("github.com")


# ---------------------------------------------------------------------- HTTPS and CA bundle
def _https_get(port: int, bundle: Path, path: str) -> tuple[int, bytes]:
    """GET over TLS to 127.0.0.1 as ``github.com``, verified against ``bundle``."""
    context = ssl.create_default_context(cafile=str(bundle))
    with (
        socket.create_connection(("127.0.0.1", port), timeout=10) as raw,
        context.wrap_socket(raw, server_hostname="github.com") as tls,
    ):
        tls.sendall(f"GET {path} HTTP/1.0\r\nHost: github.com\r\n\r\n".encode())
        data = b""
        while chunk := tls.recv(65536):
            data += chunk
    head, _, body = data.partition(b"\r\n\r\n")
    return int(head.split()[1]), body


def test_stand_in_serves_archives_over_tls_trusted_by_its_bundle(tmp_path: Path) -> None:
    bundle = tmp_path / "env" / "bundle.pem"
    with GitHubStandIn(tmp_path / "pki", bundle) as github:
        assert github.pod_env == {"REQUESTS_CA_BUNDLE": str(bundle), "SSL_CERT_FILE": str(bundle)}
        # The bundle keeps what the host trusts (package registries) and adds the stand-in's CA.
        text = bundle.read_text()
        assert github.pki.ca_cert.read_text().strip() in text
        first_certifi = Path(certifi.where()).read_text().split("-----END CERTIFICATE-----")[0]
        assert first_certifi.strip() in text
        github.serve("127.0.0.1", port=0)
        # A client that connects and says nothing holds up no one else.
        stalled = socket.create_connection(("127.0.0.1", github.port))
        status, body = _https_get(github.port, bundle, f"/ray-project/test_dag/archive/{SHA}.zip")
        assert status == 200
        assert body == archive("test_dag", SHA)
        status, _ = _https_get(github.port, bundle, "/ray-project/kuberay/archive/master.zip")
        assert status == 404
        stalled.close()
        assert github.resolver.overrides == {"github.com": "127.0.0.1"}
        assert github.requests[0].startswith(f"GET /ray-project/test_dag/archive/{SHA}.zip 200")
    with GitHubStandIn(tmp_path / "pki", tmp_path / "b2.pem") as again:
        again.serve("127.0.0.1", port=0)
        with pytest.raises(ssl.SSLCertVerificationError):  # certifi alone does not trust it
            _https_get(again.port, Path(certifi.where()), "/")


def test_ray_image_entry_carries_the_stand_ins_env(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(upstream_e2e, "IMAGE_DIRS", (str(tmp_path / "home"),))
    env = {"REQUESTS_CA_BUNDLE": "/x/ca.pem", "SSL_CERT_FILE": "/x/ca.pem"}
    path = upstream_e2e.image_map(tmp_path / "images.json", tmp_path / "py", env)
    entry = ImageMap.load(path).resolve("rayproject/ray:2.52.0")
    # Newer Ray drains a node on SIGTERM for less than the pod's grace period.
    want = {"RAY_GRACEFUL_SHUTDOWN_DRAIN_TIMEOUT_S": upstream_e2e.DRAIN_SECONDS, **env}
    assert dict(entry.env) == want
    assert json.loads(path.read_text())["rayproject/ray"]["env"] == want
    assert dict(ImageMap.load(path).resolve("redis:7.4.0").env) == {}


def test_github_archives_are_no_longer_a_reason_to_skip() -> None:
    for key, reason in upstream_e2e.NOT_RUNNABLE.items():
        assert "github" not in reason.lower(), key
    assert "e2erayservice/TestStaticRayService" not in upstream_e2e.NOT_RUNNABLE
    assert "sampleyaml/TestRayService" not in upstream_e2e.NOT_RUNNABLE
