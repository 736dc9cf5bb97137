"""Async Kubernetes REST client: plain dicts in and out (orjson), typed errors, rate limiting.

Invariants and failure modes:
- Objects stay plain dicts: decoding into typed models costs ~12x more CPU per pod and the hot
  path (watch events) cannot afford it on two cores.
- Every request has a timeout; a transport failure raises ``ApiError`` with status 0, so callers
  see one exception family. The timeout bounds the exchange with the server (connecting, then
  each wait for data), not the wait for a free pooled connection: under a burst, a request
  queued behind 24 slow ones must not fail for their slowness. That wait has its own, longer
  bound (``pool_wait``) so nothing can hang forever.
- A client-side token bucket (qps/burst, KubeRay's defaults 100/200) paces requests; a 429
  answer is retried after the server's Retry-After (bounded number of times).
- A read (GET) is retried up to ``READ_RETRIES`` times, after a short jittered back-off, when
  its connection dropped or was refused (client-go retries GETs on connection resets too) or
  the answer was a 5xx: a failed read changed nothing, and without this one transient fault
  failed a start-up check (``GET /apis``) and ended the process. Timeouts and writes are never
  retried here (a write whose answer was lost may have happened; callers decide).
- HTTP/2 (``runtime/http2.py``) is used for ``https`` servers unless ``http2`` is off or a
  proxy is configured: every request and watch is a stream on a few shared connections
  (ceil(streams / the server's MAX_CONCURRENT_STREAMS)), health-checked by PING. When ALPN does
  not yield h2 the client falls back to HTTP/1.1 for the rest of its life. A stream the server
  refused unprocessed (REFUSED_STREAM, or cut by GOAWAY) is sent again, writes included.
- Over HTTP/1.1, watches use their own connection pool, so long-lived streams never starve
  ordinary requests. Either way watches use their own line splitter, so objects larger than
  aiohttp's line limit are read whole.
- Ordinary requests share at most ``max_connections`` keep-alive connections (more requests
  wait for one). Each TLS connection holds a fixed read buffer of about 128 KiB in asyncio, so
  an unbounded pool after a burst of parallel creates cost more memory than the whole pod cache
  (21 MiB for 164 connections at 2,200 pods); idle ones close after ``idle_seconds``.
"""

from __future__ import annotations

import asyncio
import atexit
import base64
import json
import logging
import os
import random
import shutil
import ssl
import subprocess
import tempfile
import time
from collections.abc import AsyncIterator, Callable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any
from urllib.parse import quote, urlencode, urlsplit

import aiohttp
import orjson
import yaml
from multidict import CIMultiDict

from kuberay.runtime import rfc3339
from kuberay.runtime.errors import ApiError, TooManyRequests, WatchStalled, error_for
from kuberay.runtime.http2 import H2Pool, H2Stream, NotNegotiated, Refused, TransportError
from kuberay.runtime.resource import Resource as Resource

JSON = "application/json"
MERGE_PATCH = "application/merge-patch+json"
JSON_PATCH = "application/json-patch+json"
STRATEGIC_PATCH = "application/strategic-merge-patch+json"
APPLY_PATCH = "application/apply-patch+yaml"
# Metadata-only lists and watches: the server sends PartialObjectMetadata, not whole objects.
METADATA_LIST = "application/json;as=PartialObjectMetadataList;g=meta.k8s.io;v=v1"
METADATA_ONLY = "application/json;as=PartialObjectMetadata;g=meta.k8s.io;v=v1"

log = logging.getLogger(__name__)

SA_DIR = Path("/var/run/secrets/kubernetes.io/serviceaccount")


# The core resources the operator and the tests touch.
PODS = Resource("", "v1", "pods", kind="Pod")
SERVICES = Resource("", "v1", "services", kind="Service")
NAMESPACES = Resource("", "v1", "namespaces", namespaced=False, kind="Namespace")
NODES = Resource("", "v1", "nodes", namespaced=False, kind="Node")
EVENTS = Resource("", "v1", "events", kind="Event")
CONFIGMAPS = Resource("", "v1", "configmaps", kind="ConfigMap")
SECRETS = Resource("", "v1", "secrets", kind="Secret")
SERVICEACCOUNTS = Resource("", "v1", "serviceaccounts", kind="ServiceAccount")
PODTEMPLATES = Resource("", "v1", "podtemplates", kind="PodTemplate")
PVCS = Resource("", "v1", "persistentvolumeclaims", kind="PersistentVolumeClaim")
PVS = Resource("", "v1", "persistentvolumes", namespaced=False, kind="PersistentVolume")
STORAGECLASSES = Resource(
    "storage.k8s.io", "v1", "storageclasses", namespaced=False, kind="StorageClass"
)
DEPLOYMENTS = Resource("apps", "v1", "deployments", kind="Deployment")
JOBS = Resource("batch", "v1", "jobs", kind="Job")
ENDPOINTSLICES = Resource("discovery.k8s.io", "v1", "endpointslices", kind="EndpointSlice")
LEASES = Resource("coordination.k8s.io", "v1", "leases", kind="Lease")
CRDS = Resource(
    "apiextensions.k8s.io",
    "v1",
    "customresourcedefinitions",
    namespaced=False,
    kind="CustomResourceDefinition",
)


def resource_of_path(path: str) -> str:
    """``/api/v1/namespaces/a/pods/p/status`` -> ``pods/status`` (for request metrics)."""
    parts = [p for p in path.split("?")[0].split("/") if p]
    if parts[:1] == ["api"]:
        parts = parts[2:]
    elif parts[:1] == ["apis"]:
        parts = parts[3:]
    if len(parts) >= 2 and parts[0] == "namespaces":
        parts = parts[2:] if len(parts) > 2 else ["namespaces"]
    if not parts:
        return ""
    return f"{parts[0]}/{parts[2]}" if len(parts) >= 3 else parts[0]


@dataclass
class ClientConfig:
    """Connection settings resolved from a kubeconfig or the in-cluster environment."""

    server: str
    ca_file: str | None = None
    cert_file: str | None = None
    key_file: str | None = None
    token: str | None = None
    token_file: str | None = None
    insecure: bool = False
    exec_config: dict[str, Any] | None = None
    ca_data: str | None = None  # PEM, kept in memory
    tls_server_name: str | None = None
    proxy_url: str | None = None
    impersonate: dict[str, Any] = field(default_factory=dict)
    qps: float = 100.0
    burst: int = 200
    timeout: float = 30.0
    max_connections: int = 24
    idle_seconds: float = 5.0
    pool_wait: float = 300.0
    # HTTP/2 for https servers (HTTP/1.1 when off, when a proxy is set, or when ALPN says no);
    # PING after read_idle seconds without a frame, connection failed without an answer within
    # ping_timeout (client-go's ReadIdleTimeout and PingTimeout).
    http2: bool = True
    read_idle: float = 30.0
    ping_timeout: float = 15.0
    _temp: list[str] = field(default_factory=list, repr=False)
    _expires: float | None = field(default=None, repr=False)

    def _run_exec(self) -> None:
        """Runs a client-go credential plugin (``users[].user.exec``) and keeps its answer until
        its ``expirationTimestamp``. A failing plugin raises with its stderr."""
        spec = self.exec_config or {}
        env = dict(os.environ)
        for item in spec.get("env") or []:
            env[item["name"]] = item["value"]
        api_version = spec.get("apiVersion", "client.authentication.k8s.io/v1")
        env["KUBERNETES_EXEC_INFO"] = json.dumps(
            {"apiVersion": api_version, "kind": "ExecCredential", "spec": {"interactive": False}}
        )
        proc = subprocess.run(
            [spec["command"], *(spec.get("args") or [])],
            env=env,
            capture_output=True,
            text=True,
            timeout=60,
            check=False,
        )
        if proc.returncode != 0:
            raise ValueError(
                f"credential plugin {spec['command']!r} failed ({proc.returncode}): "
                f"{proc.stderr.strip()[:500]}"
            )
        status = json.loads(proc.stdout).get("status") or {}
        self.token = status.get("token")
        if status.get("clientCertificateData") and status.get("clientKeyData"):
            self.cert_file = _materialise_text(status["clientCertificateData"], self._temp)
            self.key_file = _materialise_text(status["clientKeyData"], self._temp)
        expiry = status.get("expirationTimestamp")
        self._expires = rfc3339.parse(expiry).timestamp() - 10 if expiry else None

    def ssl_context(self) -> ssl.SSLContext:
        if self.exec_config is not None and not self.token:
            self._run_exec()  # client certificates from a plugin are needed for the handshake
        ctx = ssl.create_default_context(cafile=self.ca_file, cadata=self.ca_data)
        if self.insecure:
            ctx.check_hostname = False
            ctx.verify_mode = ssl.CERT_NONE
        if self.cert_file and self.key_file:
            ctx.load_cert_chain(self.cert_file, self.key_file)
        return ctx

    def bearer(self) -> str | None:
        if self.exec_config is not None:
            if self.token is None or (self._expires is not None and time.time() >= self._expires):
                self._run_exec()
            return self.token
        if self.token_file:
            # Projected tokens rotate: re-read the file each time (it is small and cached by
            # the page cache).
            return Path(self.token_file).read_text().strip()
        return self.token


class KubeconfigError(ValueError):
    """A kubeconfig that cannot be used; the message says which file and what is wrong."""


_PRIVATE: dict[str, str] = {}
_MEMORY_FILES: list[int] = []  # memfds holding key material, open for the process's life


def _private_dir() -> str | None:
    """One directory per process (0700, removed at exit) for the key material Python's ssl
    module can only load from files: client certificates and keys. CA certificates stay in
    memory. None when no temporary directory can be made (a read-only root file system without
    a writable /tmp): the key material then stays in memory (``_memory_file``)."""
    if "dir" not in _PRIVATE:
        try:
            path = tempfile.mkdtemp(prefix="kuberay-credentials-")
        except OSError:
            if not hasattr(os, "memfd_create"):
                raise
            _PRIVATE["dir"] = ""
            return None
        os.chmod(path, 0o700)
        _PRIVATE["dir"] = path
        atexit.register(shutil.rmtree, path, True)
    return _PRIVATE["dir"] or None


def _memory_file(data: bytes) -> str:
    """An anonymous in-memory file (Linux memfd) that only this process can open, by its
    ``/proc/self/fd`` path; it stays open until the process exits."""
    fd = os.memfd_create("kuberay-credential", os.MFD_CLOEXEC)
    view = memoryview(data)
    while view:
        view = view[os.write(fd, view) :]
    _MEMORY_FILES.append(fd)
    return f"/proc/self/fd/{fd}"


def _materialise(data_b64: str, temp: list[str]) -> str:
    try:
        data = base64.b64decode(data_b64, validate=True)
    except (ValueError, TypeError) as exc:
        raise KubeconfigError(f"inline credential data is not base64: {exc}") from exc
    directory = _private_dir()
    if directory is None:
        path = _memory_file(data)
        temp.append(path)
        return path
    fd, path = tempfile.mkstemp(prefix="key-", dir=directory)
    os.fchmod(fd, 0o600)
    with os.fdopen(fd, "wb") as fh:
        fh.write(data)
    temp.append(path)
    return path


def _materialise_text(text: str, temp: list[str]) -> str:
    return _materialise(base64.b64encode(text.encode()).decode(), temp)


def _kubeconfig_paths(path: str | os.PathLike[str] | None) -> list[Path]:
    """client-go's precedence: an explicit path alone; else every path in ``KUBECONFIG``
    (missing ones skipped); else ``~/.kube/config``."""
    if path is not None:
        explicit = Path(path)
        if not explicit.is_file():
            raise KubeconfigError(f"{explicit}: no such kubeconfig file")
        return [explicit]
    env = os.environ.get("KUBECONFIG", "")
    if env:
        listed = [Path(p) for p in env.split(os.pathsep) if p]
        found = [p for p in listed if p.is_file()]
        if not found:
            raise KubeconfigError(f"none of the KUBECONFIG files exist: {env}")
        return found
    default = Path.home() / ".kube" / "config"
    if not default.is_file():
        raise KubeconfigError(f"no kubeconfig: {default} does not exist and KUBECONFIG is unset")
    return [default]


def _merged_kubeconfig(paths: list[Path]) -> dict[str, Any]:
    """client-go's merge: for clusters, users and contexts the first file that names an entry
    wins; ``current-context`` comes from the first file that sets it. Relative file references
    are resolved against the file they appear in."""
    merged: dict[str, Any] = {"clusters": {}, "users": {}, "contexts": {}, "current-context": ""}
    for path in paths:
        try:
            doc = yaml.safe_load(path.read_text())
        except (OSError, yaml.YAMLError) as exc:
            detail = " ".join(str(exc).split())  # YAML errors span lines; one line here
            raise KubeconfigError(f"{path}: not a readable YAML kubeconfig: {detail}") from exc
        if doc is None:
            continue
        if not isinstance(doc, dict):
            raise KubeconfigError(f"{path}: not a kubeconfig (expected a mapping)")
        base = path.resolve().parent
        for section, key in (("clusters", "cluster"), ("users", "user"), ("contexts", "context")):
            for entry in doc.get(section) or []:
                if not isinstance(entry, dict) or not entry.get("name"):
                    raise KubeconfigError(f"{path}: an entry of {section} has no name")
                body = dict(entry.get(key) or {})
                body["_base"] = base
                merged[section].setdefault(entry["name"], body)
        if not merged["current-context"] and doc.get("current-context"):
            merged["current-context"] = doc["current-context"]
    return merged


def _reference(section: Mapping[str, Any], key: str) -> str | None:
    value = section.get(key)
    if not value:
        return None
    return str(value) if os.path.isabs(str(value)) else str(section["_base"] / str(value))


def load_kubeconfig(
    path: str | os.PathLike[str] | None = None, context: str | None = None
) -> ClientConfig:
    """Reads a kubeconfig the way client-go does: every ``KUBECONFIG`` path merged, inline
    ``-data`` fields (the CA kept in memory, client keys in a private directory removed at
    exit), tokens, exec credential plugins, ``tls-server-name``, ``proxy-url`` and
    impersonation (``as``, ``as-uid``, ``as-groups``, ``as-user-extra``). Anything unusable
    raises ``KubeconfigError`` with one line that names the problem."""
    paths = _kubeconfig_paths(path)
    where = os.pathsep.join(str(p) for p in paths)
    doc = _merged_kubeconfig(paths)
    ctx_name = context or doc["current-context"]
    if not doc["contexts"]:
        raise KubeconfigError(f"{where}: no contexts")
    if not ctx_name:
        raise KubeconfigError(f"{where}: current-context is not set (and no context was given)")
    ctx = doc["contexts"].get(ctx_name)
    if ctx is None:
        raise KubeconfigError(f"{where}: context {ctx_name!r} does not exist")
    cluster = doc["clusters"].get(ctx.get("cluster") or "")
    if cluster is None or not cluster.get("server"):
        raise KubeconfigError(
            f"{where}: context {ctx_name!r} names cluster {ctx.get('cluster')!r}, which does not "
            "exist or has no server"
        )
    user: dict[str, Any] = doc["users"].get(ctx.get("user") or "") or {"_base": Path(".")}
    if "auth-provider" in user:
        raise KubeconfigError(
            f"kubeconfig user {ctx.get('user')!r} uses a legacy auth-provider plugin, which "
            "this client does not run; use an exec credential plugin, a certificate or a token"
        )
    temp: list[str] = []

    def file_or_data(file_key: str, data_key: str, section: Mapping[str, Any]) -> str | None:
        if section.get(data_key):
            return _materialise(section[data_key], temp)
        return _reference(section, file_key)

    ca_data = None
    if cluster.get("certificate-authority-data"):
        try:
            ca_data = base64.b64decode(cluster["certificate-authority-data"]).decode()
        except (ValueError, UnicodeDecodeError) as exc:
            raise KubeconfigError(f"{where}: certificate-authority-data: {exc}") from exc
    impersonate: dict[str, Any] = {}
    if user.get("as"):
        impersonate["user"] = str(user["as"])
    if user.get("as-uid"):
        impersonate["uid"] = str(user["as-uid"])
    if user.get("as-groups"):
        impersonate["groups"] = [str(g) for g in user["as-groups"]]
    if user.get("as-user-extra"):
        impersonate["extra"] = {
            str(k): [str(x) for x in v] for k, v in user["as-user-extra"].items()
        }
    token = user.get("token")
    token_file = _reference(user, "tokenFile")
    proxy = cluster.get("proxy-url")
    if proxy and not str(proxy).startswith(("http://", "https://")):
        raise KubeconfigError(f"{where}: proxy-url {proxy!r}: only http(s) proxies are supported")
    cfg = ClientConfig(
        server=str(cluster["server"]).rstrip("/"),
        ca_file=None if ca_data else _reference(cluster, "certificate-authority"),
        ca_data=ca_data,
        cert_file=file_or_data("client-certificate", "client-certificate-data", user),
        key_file=file_or_data("client-key", "client-key-data", user),
        token=str(token) if token else None,
        token_file=token_file,
        insecure=bool(cluster.get("insecure-skip-tls-verify")),
        exec_config=user.get("exec"),
        tls_server_name=cluster.get("tls-server-name"),
        proxy_url=str(proxy) if proxy else None,
        impersonate=impersonate,
    )
    cfg._temp = temp
    return cfg


def auto_config(kubeconfig: str | None = None) -> ClientConfig:
    """A kubeconfig when one is named or present, else the in-cluster service account."""
    if kubeconfig or os.environ.get("KUBECONFIG"):
        return load_kubeconfig(kubeconfig)
    if os.environ.get("KUBERNETES_SERVICE_HOST") and (SA_DIR / "token").exists():
        return in_cluster_config()
    return load_kubeconfig()


def in_cluster_config() -> ClientConfig:
    host = os.environ["KUBERNETES_SERVICE_HOST"]
    port = os.environ.get("KUBERNETES_SERVICE_PORT", "443")
    if ":" in host:
        host = f"[{host}]"
    return ClientConfig(
        server=f"https://{host}:{port}",
        ca_file=str(SA_DIR / "ca.crt"),
        token_file=str(SA_DIR / "token"),
    )


def impersonation_headers(impersonate: Mapping[str, Any]) -> list[tuple[str, str]]:
    """The ``Impersonate-*`` headers for a kubeconfig's ``as`` settings; a header is repeated
    for each group and each extra value, as the apiserver expects."""
    headers: list[tuple[str, str]] = []
    if impersonate.get("user"):
        headers.append(("Impersonate-User", str(impersonate["user"])))
    if impersonate.get("uid"):
        headers.append(("Impersonate-Uid", str(impersonate["uid"])))
    for group in impersonate.get("groups") or []:
        headers.append(("Impersonate-Group", str(group)))
    for key, values in (impersonate.get("extra") or {}).items():
        for value in values:
            headers.append((f"Impersonate-Extra-{quote(key, safe='')}", str(value)))
    return headers


def _read_backoff(retry: int) -> float:
    """Seconds before read retry ``retry`` (1-based): 0.1-0.2, 0.2-0.4, 0.4-0.8, ..."""
    return float(0.2 * 2 ** (retry - 1) * (0.5 + random.random() / 2))


class TokenBucket:
    """Client-side rate limiter: ``qps`` tokens per second, at most ``burst`` saved up."""

    def __init__(self, qps: float, burst: int) -> None:
        self.qps = qps
        self.capacity = float(max(1, burst))
        self.tokens = self.capacity
        self.stamp = time.monotonic()
        self._lock = asyncio.Lock()

    async def acquire(self) -> None:
        if self.qps <= 0:
            return
        async with self._lock:
            now = time.monotonic()
            self.tokens = min(self.capacity, self.tokens + (now - self.stamp) * self.qps)
            self.stamp = now
            if self.tokens < 1:
                wait = (1 - self.tokens) / self.qps
                await asyncio.sleep(wait)
                self.stamp = time.monotonic()
                self.tokens = 0.0
            else:
                self.tokens -= 1


@dataclass
class WatchEvent:
    type: str  # ADDED, MODIFIED, DELETED, BOOKMARK, ERROR
    object: dict[str, Any]


class KubeClient:
    """One connection to one apiserver. Create inside a running event loop; ``await close()``."""

    MAX_429_RETRIES = 5
    READ_RETRIES = 3

    def __init__(self, config: ClientConfig, user_agent: str = "kuberay-py") -> None:
        self.config = config
        self._ssl = config.ssl_context() if config.server.startswith("https") else None
        headers = {"User-Agent": user_agent, "Accept": JSON}
        self._session = aiohttp.ClientSession(
            connector=aiohttp.TCPConnector(
                ssl=self._ssl or False,
                limit=config.max_connections,
                keepalive_timeout=config.idle_seconds,
            ),
            headers=headers,
        )
        self._watch_session = aiohttp.ClientSession(
            connector=aiohttp.TCPConnector(ssl=self._ssl or False, limit=0),
            headers=headers,
        )
        self._user_agent = user_agent
        self._h2: H2Pool | None = None
        self._h2_prefix = b""
        if config.http2 and self._ssl is not None and not config.proxy_url:
            url = urlsplit(config.server)
            self._h2 = H2Pool(
                url.hostname or "",
                url.port or 443,
                config.ssl_context(),  # its own: ALPN offers h2 there, never to aiohttp
                server_hostname=config.tls_server_name,
                read_idle=config.read_idle,
                ping_timeout=config.ping_timeout,
            )
            self._h2_prefix = url.path.rstrip("/").encode()
        self._h2_retired: list[H2Pool] = []
        # Per request: the TLS name to verify (kubeconfig tls-server-name) and the proxy.
        self._route: dict[str, Any] = {}
        if config.tls_server_name:
            self._route["server_hostname"] = config.tls_server_name
        if config.proxy_url:
            self._route["proxy"] = config.proxy_url
        self._impersonation = impersonation_headers(config.impersonate)
        self.limiter = TokenBucket(config.qps, config.burst)
        self.request_counts: dict[tuple[str, int], int] = {}
        # Called as observer(method, status, seconds, resource) after every request (metrics
        # hook); resource is the path's kind and subresource, e.g. "pods" or "rayclusters/status".
        self.observers: list[Callable[[str, int, float, str], None]] = []

    async def __aenter__(self) -> KubeClient:
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.close()

    async def close(self) -> None:
        await self._session.close()
        await self._watch_session.close()
        pools = [*self._h2_retired, *([self._h2] if self._h2 is not None else [])]
        self._h2, self._h2_retired = None, []
        for pool in pools:
            await pool.close()

    @property
    def http_version(self) -> str:
        """``HTTP/2`` while requests go over HTTP/2, else ``HTTP/1.1``."""
        return "HTTP/2" if self._h2 is not None else "HTTP/1.1"

    def _fall_back(self, pool: H2Pool, exc: NotNegotiated) -> None:
        """ALPN did not yield h2: HTTP/1.1 from now on (the pool is closed in ``close``)."""
        if self._h2 is pool:
            log.warning("apiserver does not speak HTTP/2 (%s); using HTTP/1.1", exc)
            self._h2 = None
            self._h2_retired.append(pool)

    def _h2_headers(
        self, method: str, path: str, query: Mapping[str, str], headers: CIMultiDict[str]
    ) -> list[tuple[bytes, bytes]]:
        target = self._h2_prefix + path.encode()
        if query:
            target += (b"&" if b"?" in target else b"?") + urlencode(query).encode()
        assert self._h2 is not None
        out = [
            (b":method", method.encode()),
            (b":scheme", b"https"),
            (b":authority", self._h2.authority.encode()),
            (b":path", target),
            (b"user-agent", self._user_agent.encode()),
        ]
        if "Accept" not in headers:
            out.append((b"accept", JSON.encode()))
        out.extend((k.lower().encode(), v.encode()) for k, v in headers.items())
        return out

    async def _exchange(
        self,
        method: str,
        path: str,
        query: Mapping[str, str],
        data: bytes | None,
        headers: CIMultiDict[str],
        timeout: float | None,
    ) -> tuple[int, bytes, str | None]:
        """One round trip: (status, body, Retry-After). Transport failures raise
        ``aiohttp.ClientError``, ``TransportError`` or ``TimeoutError``."""
        pool = self._h2
        if pool is not None:
            limit = timeout or self.config.timeout
            if data is not None:
                headers["Content-Length"] = str(len(data))
            try:
                stream = await pool.open(
                    self._h2_headers(method, path, query, headers),
                    data,
                    limit,
                    self.config.pool_wait,
                )
            except NotNegotiated as exc:
                self._fall_back(pool, exc)
                headers.popall("Content-Length", None)
            else:
                try:
                    status = await stream.response(limit)
                    raw = await stream.read(limit)
                    return status, raw, stream.header("Retry-After")
                finally:
                    stream.release()
        async with self._session.request(
            method,
            self.config.server + path,
            data=data,
            params=query,
            headers=headers,
            timeout=self._timeout(timeout),
            **self._route,
        ) as resp:
            return resp.status, await resp.read(), resp.headers.get("Retry-After")

    def _headers(
        self, content_type: str | None = None, accept: str | None = None
    ) -> CIMultiDict[str]:
        headers: CIMultiDict[str] = CIMultiDict()
        if accept:
            headers["Accept"] = accept
        token = self.config.bearer()
        if token:
            headers["Authorization"] = f"Bearer {token}"
        headers.extend(self._impersonation)
        if content_type:
            headers["Content-Type"] = content_type
        return headers

    async def request(
        self,
        method: str,
        path: str,
        body: Any = None,
        *,
        params: Mapping[str, str | int | bool] | None = None,
        content_type: str = JSON,
        timeout: float | None = None,
        accept: str | None = None,
    ) -> Any:
        """One API call; returns the decoded JSON body (the text when ``accept`` asks for
        text) or raises a typed ``ApiError``."""
        data: bytes | None = None
        if body is not None:
            data = body if isinstance(body, bytes) else orjson.dumps(body)
        query = {
            k: (str(v).lower() if isinstance(v, bool) else str(v))
            for k, v in (params or {}).items()
        }
        attempt = 0
        reads = 0  # read retries made
        while True:
            await self.limiter.acquire()
            started = time.monotonic()
            try:
                status, raw, retry_after = await self._exchange(
                    method,
                    path,
                    query,
                    data,
                    self._headers(content_type if data is not None else None, accept),
                    timeout,
                )
            except (aiohttp.ClientError, TransportError, TimeoutError) as exc:
                self._count(method, 0, started, path)
                timed_out = isinstance(exc, TimeoutError)
                # Never processed by the server: safe to send again, whatever the method.
                refused = isinstance(exc, Refused)
                if (method == "GET" or refused) and not timed_out and reads < self.READ_RETRIES:
                    reads += 1
                    await asyncio.sleep(_read_backoff(reads))
                    continue
                raise ApiError(0, f"{type(exc).__name__}: {exc}", method, path) from exc
            self._count(method, status, started, path)
            if status < 300:
                if accept is not None and accept.startswith("text/"):
                    return raw.decode(errors="replace")  # e.g. /metrics
                return orjson.loads(raw) if raw else None
            decoded: dict[str, Any] | str
            try:
                decoded = orjson.loads(raw)
            except orjson.JSONDecodeError:
                decoded = raw.decode(errors="replace")
            err = error_for(status, decoded, method, path)
            if isinstance(err, TooManyRequests) and attempt < self.MAX_429_RETRIES:
                attempt += 1
                delay = float(retry_after) if retry_after else (err.retry_after or 1.0)
                await asyncio.sleep(min(delay, 30.0))
                continue
            if method == "GET" and status >= 500 and reads < self.READ_RETRIES:
                reads += 1
                await asyncio.sleep(_read_backoff(reads))
                continue
            raise err

    def _timeout(self, override: float | None) -> aiohttp.ClientTimeout:
        limit = override or self.config.timeout
        # aiohttp's ``connect`` includes the wait for a pooled connection; ``sock_*`` do not.
        return aiohttp.ClientTimeout(
            total=None,
            connect=self.config.pool_wait + limit,
            sock_connect=limit,
            sock_read=limit,
        )

    def _count(
        self, method: str, status: int, started: float | None = None, path: str = ""
    ) -> None:
        key = (method, status)
        self.request_counts[key] = self.request_counts.get(key, 0) + 1
        if not self.observers:
            return
        elapsed = time.monotonic() - started if started is not None else 0.0
        resource = resource_of_path(path)
        for observer in self.observers:
            observer(method, status, elapsed, resource)

    # ------------------------------------------------------------------ verbs
    async def get(
        self, res: Resource, name: str, namespace: str | None = None, subresource: str | None = None
    ) -> dict[str, Any]:
        out: dict[str, Any] = await self.request("GET", res.path(namespace, name, subresource))
        return out

    async def list(
        self,
        res: Resource,
        namespace: str | None = None,
        *,
        label_selector: str | None = None,
        field_selector: str | None = None,
        limit: int = 500,
        resource_version: str | None = None,
        accept: str | None = None,
    ) -> dict[str, Any]:
        """All items (following ``continue`` tokens); the result's metadata is the last page's."""
        params: dict[str, str | int | bool] = {"limit": limit}
        if label_selector:
            params["labelSelector"] = label_selector
        if field_selector:
            params["fieldSelector"] = field_selector
        if resource_version is not None:
            params["resourceVersion"] = resource_version
        items: list[dict[str, Any]] = []
        while True:
            page = await self.request("GET", res.path(namespace), params=params, accept=accept)
            items.extend(page.get("items") or [])
            token = page.get("metadata", {}).get("continue")
            if not token:
                page["items"] = items
                result: dict[str, Any] = page
                return result
            params = {"limit": limit, "continue": token}

    async def create(
        self, res: Resource, obj: dict[str, Any], namespace: str | None = None
    ) -> dict[str, Any]:
        ns = namespace or obj.get("metadata", {}).get("namespace")
        out: dict[str, Any] = await self.request("POST", res.path(ns), obj)
        return out

    async def update(
        self, res: Resource, obj: dict[str, Any], *, subresource: str | None = None
    ) -> dict[str, Any]:
        """PUT the whole object; its resourceVersion makes a stale write fail with Conflict."""
        meta = obj["metadata"]
        path = res.path(meta.get("namespace"), meta["name"], subresource)
        out: dict[str, Any] = await self.request("PUT", path, obj)
        return out

    async def update_status(self, res: Resource, obj: dict[str, Any]) -> dict[str, Any]:
        return await self.update(res, obj, subresource="status")

    async def patch(
        self,
        res: Resource,
        name: str,
        patch: Any,
        namespace: str | None = None,
        *,
        content_type: str = MERGE_PATCH,
        subresource: str | None = None,
        field_manager: str | None = None,
        force: bool = False,
    ) -> dict[str, Any]:
        params: dict[str, str | int | bool] = {}
        if field_manager:
            params["fieldManager"] = field_manager
        if force:
            params["force"] = True
        body = patch
        if content_type == APPLY_PATCH and not isinstance(patch, bytes):
            body = orjson.dumps(patch)
        out: dict[str, Any] = await self.request(
            "PATCH",
            res.path(namespace, name, subresource),
            body,
            params=params,
            content_type=content_type,
        )
        return out

    async def delete(
        self,
        res: Resource,
        name: str,
        namespace: str | None = None,
        *,
        propagation: str | None = None,
        uid: str | None = None,
        resource_version: str | None = None,
        grace_period: int | None = None,
    ) -> Any:
        """Deletes; ``uid``/``resource_version`` preconditions protect against deleting a
        same-named successor."""
        opts: dict[str, Any] = {"kind": "DeleteOptions", "apiVersion": "v1"}
        if propagation:
            opts["propagationPolicy"] = propagation
        pre = {}
        if uid:
            pre["uid"] = uid
        if resource_version:
            pre["resourceVersion"] = resource_version
        if pre:
            opts["preconditions"] = pre
        if grace_period is not None:
            opts["gracePeriodSeconds"] = grace_period
        return await self.request("DELETE", res.path(namespace, name), opts)

    # ------------------------------------------------------------------ watch
    async def watch(
        self,
        res: Resource,
        namespace: str | None = None,
        *,
        resource_version: str | None = None,
        label_selector: str | None = None,
        field_selector: str | None = None,
        timeout_seconds: int = 300,
        bookmarks: bool = True,
        accept: str | None = None,
        stall_timeout: float | None = None,
    ) -> AsyncIterator[WatchEvent]:
        """Streams watch events until the server ends the watch.

        An HTTP error (for instance 410 for an expired resourceVersion) raises the typed error;
        an ERROR event is yielded as is so the caller can tell 410 apart from other failures.
        No byte for ``stall_timeout`` seconds (bookmarks count) ends the stream with an
        ``ApiError`` of status 0, so a silently dead connection is noticed and replaced.
        """
        params: dict[str, str] = {
            "watch": "true",
            "timeoutSeconds": str(timeout_seconds),
            "allowWatchBookmarks": "true" if bookmarks else "false",
        }
        if resource_version is not None:
            params["resourceVersion"] = resource_version
        if label_selector:
            params["labelSelector"] = label_selector
        if field_selector:
            params["fieldSelector"] = field_selector
        path = res.path(namespace)
        await self.limiter.acquire()
        silence = stall_timeout or timeout_seconds + 30
        body = await self._open_watch(path, params, accept, silence)
        try:
            self._count("WATCH", body.status, None, path)
            if body.status >= 300:
                raw = await body.read()
                try:
                    decoded: dict[str, Any] | str = orjson.loads(raw)
                except orjson.JSONDecodeError:
                    decoded = raw.decode(errors="replace")
                raise error_for(body.status, decoded, "WATCH", path)
            buf = b""
            try:
                async for chunk in body.chunks():
                    if b"\n" not in chunk:
                        buf += chunk
                        continue
                    lines = (buf + chunk).split(b"\n")
                    buf = lines.pop()
                    for line in lines:
                        if line.strip():
                            ev = orjson.loads(line)
                            yield WatchEvent(ev["type"], ev["object"])
            except TimeoutError as exc:
                raise WatchStalled(0, f"no data for {stall_timeout}s", "WATCH", path) from exc
            except (aiohttp.ClientError, TransportError) as exc:
                raise ApiError(0, f"{type(exc).__name__}: {exc}", "WATCH", path) from exc
        finally:
            body.release()

    async def _open_watch(
        self, path: str, params: dict[str, str], accept: str | None, silence: float
    ) -> _WatchBody:
        """Sends the watch request; ``silence`` bounds each wait for data (headers included)."""
        pool = self._h2
        if pool is not None:
            headers = self._h2_headers("GET", path, params, self._headers(accept=accept))
            try:
                stream = await pool.open(headers, None, self.config.timeout, self.config.pool_wait)
            except NotNegotiated as exc:
                self._fall_back(pool, exc)
            except (TransportError, TimeoutError) as exc:
                raise ApiError(0, f"{type(exc).__name__}: {exc}", "WATCH", path) from exc
            else:
                try:
                    status = await stream.response(silence)
                except (TransportError, TimeoutError) as exc:
                    stream.release()
                    raise ApiError(0, f"{type(exc).__name__}: {exc}", "WATCH", path) from exc
                except BaseException:
                    stream.release()
                    raise
                return _WatchBody(status, silence, h2=stream)
        try:
            resp = await self._watch_session.get(
                self.config.server + path,
                params=params,
                headers=self._headers(accept=accept),
                timeout=aiohttp.ClientTimeout(total=None, sock_read=silence),
                **self._route,
            )
        except (aiohttp.ClientError, TimeoutError) as exc:
            raise ApiError(0, f"{type(exc).__name__}: {exc}", "WATCH", path) from exc
        return _WatchBody(resp.status, silence, h1=resp)


class _WatchBody:
    """A watch answer over either protocol: status, then the body whole or in pieces."""

    def __init__(
        self,
        status: int,
        silence: float,
        *,
        h1: aiohttp.ClientResponse | None = None,
        h2: H2Stream | None = None,
    ) -> None:
        self.status = status
        self.silence = silence
        self.h1 = h1
        self.h2 = h2

    async def read(self) -> bytes:
        if self.h2 is not None:
            return await self.h2.read(self.silence)
        assert self.h1 is not None
        return await self.h1.read()

    async def chunks(self) -> AsyncIterator[bytes]:
        if self.h2 is not None:
            async for piece in self.h2.chunks(self.silence):
                yield piece
            return
        assert self.h1 is not None
        async for piece in self.h1.content.iter_any():
            yield piece

    def release(self) -> None:
        if self.h2 is not None:
            self.h2.release()
        if self.h1 is not None:
            self.h1.release()
