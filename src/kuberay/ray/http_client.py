"""The Ray dashboard client over HTTP (aiohttp + orjson), implementing ``DashboardClient``.

Invariants:
- Every request is bounded: ``timeout`` seconds per attempt (2 s direct, 10 s through the API
  server's service proxy, as the operator's timers assume) and at most ``attempts`` attempts
  with capped exponential backoff, so one call never blocks a reconcile for long.
- Only transient failures are retried: connection errors, timeouts and 5xx answers that are
  not one of the dashboard's recognised "this will not change" errors (Ray reports several
  user errors, e.g. a duplicate submission id, as HTTP 500 with a traceback body).
- Submission is idempotent by submission id. The dashboard refuses a second job with an id it
  already has; that refusal, and any retry after an attempt whose outcome is unknown (timeout,
  dropped connection), is resolved by reading the job back: if it exists the submission is a
  success, so a lost response never leads to a second job.
- Sessions made here honour ``HTTP_PROXY``/``HTTPS_PROXY``/``NO_PROXY`` from the environment, as
  upstream's Go client (Go's default transport) does; a session passed in keeps its own settings.
- "Not found" is a value: ``get_job_info``/``get_job_logs`` return None, ``stop_job`` and
  ``delete_job`` return False. Every other failure raises ``DashboardError`` with the HTTP
  status (0 for transport failures) and whether retrying later may help.

Failure modes: an unreachable dashboard raises ``DashboardError(transient=True)`` after the
retries; a malformed request (HTTP 400) raises ``transient=False`` at once; deleting a job that
has not finished raises ``transient=False`` (stop it first).
"""

from __future__ import annotations

import asyncio
import random
import ssl
from collections.abc import Callable, Mapping
from typing import Any
from urllib.parse import quote

import aiohttp
import orjson

from kuberay.ray.dashboard import (
    DashboardClient,
    DashboardError,
    DashboardFactory,
    JobInfo,
    JobSubmitRequest,
)
from kuberay.runtime.client import ClientConfig

JOBS_PATH = "/api/jobs/"
SERVE_PATH = "/api/serve/applications/"
GCS_HEALTH_PATH = "/api/gcs_healthz"
VERSION_PATH = "/api/version"
AUTH_HEADER = "x-ray-authorization"

DIRECT_TIMEOUT = 2.0
PROXY_TIMEOUT = 10.0

# Body fragments of dashboard errors that retrying cannot fix (Ray answers these with 500).
_DUPLICATE_MARKERS = ("already exists",)
_NOT_TERMINAL_MARKERS = ("non-terminal state",)

HeaderProvider = Callable[[], Mapping[str, str]]


def error_summary(body: bytes, limit: int = 300) -> str:
    """The useful part of a dashboard error body: Ray often sends a whole Python traceback,
    whose last line carries the exception; logs and status messages only need that line."""
    text = body.decode("utf-8", "replace").strip()
    lines = [line.strip() for line in text.splitlines() if line.strip()]
    useful = [line for line in lines if line not in (".",)]
    summary = useful[-1] if useful else ""
    return summary[:limit]


def job_info_from_dict(data: Mapping[str, Any]) -> JobInfo:
    """Maps the dashboard's job JSON (``JobDetails``) to ``JobInfo``; nulls become defaults."""
    return JobInfo(
        submission_id=str(data.get("submission_id") or data.get("job_id") or ""),
        status=str(data.get("status") or ""),
        entrypoint=str(data.get("entrypoint") or ""),
        job_id=data.get("job_id"),
        message=str(data.get("message") or ""),
        error_type=data.get("error_type"),
        start_time=data.get("start_time"),
        end_time=data.get("end_time"),
        metadata=dict(data.get("metadata") or {}),
        runtime_env=dict(data.get("runtime_env") or {}),
    )


def submit_body(request: JobSubmitRequest) -> dict[str, Any]:
    """The ``POST /api/jobs/`` body: only the fields that are set (the dashboard rejects
    unknown keys, and an empty submission id means "generate one")."""
    body: dict[str, Any] = {"entrypoint": request.entrypoint}
    if request.submission_id:
        body["submission_id"] = request.submission_id
    if request.runtime_env:
        body["runtime_env"] = request.runtime_env
    if request.metadata:
        body["metadata"] = request.metadata
    if request.entrypoint_num_cpus is not None:
        body["entrypoint_num_cpus"] = request.entrypoint_num_cpus
    if request.entrypoint_num_gpus is not None:
        body["entrypoint_num_gpus"] = request.entrypoint_num_gpus
    if request.entrypoint_resources:
        body["entrypoint_resources"] = request.entrypoint_resources
    return body


class _Answer:
    __slots__ = ("body", "status")

    def __init__(self, status: int, body: bytes) -> None:
        self.status = status
        self.body = body

    def json(self) -> Any:
        try:
            return orjson.loads(self.body) if self.body else None
        except orjson.JSONDecodeError as exc:
            raise DashboardError(
                f"dashboard sent invalid JSON: {exc}", status=self.status, transient=True
            ) from exc

    def text(self) -> str:
        return error_summary(self.body)

    def mentions(self, markers: tuple[str, ...]) -> bool:
        text = self.body.decode("utf-8", "replace").lower()
        return any(marker in text for marker in markers)


class HttpDashboardClient:
    """One cluster's dashboard. Safe to share between tasks; not bound to a thread."""

    def __init__(
        self,
        base_url: str,
        *,
        auth_token: str | None = None,
        timeout: float = DIRECT_TIMEOUT,
        session: aiohttp.ClientSession | None = None,
        attempts: int = 3,
        backoff: float = 0.2,
        max_backoff: float = 2.0,
        ssl_context: ssl.SSLContext | bool | None = None,
        extra_headers: HeaderProvider | None = None,
        session_provider: Callable[[], aiohttp.ClientSession] | None = None,
    ) -> None:
        self.base_url = base_url.rstrip("/")
        self.timeout = timeout
        self.attempts = max(1, attempts)
        self.backoff = backoff
        self.max_backoff = max_backoff
        self._auth_token = auth_token
        self._session = session
        self._owns_session = session is None
        self._ssl = ssl_context
        self._extra_headers = extra_headers
        self._session_provider = session_provider
        # Requests sent (attempts, not calls); tests read it.
        self.requests_sent = 0

    # ------------------------------------------------------------------ transport

    def _get_session(self) -> aiohttp.ClientSession:
        # Created lazily: a ClientSession must be made inside a running event loop, and the
        # factory may be called from synchronous code. A factory's shared session is borrowed.
        if self._session is None and self._session_provider is not None:
            self._session = self._session_provider()
            self._owns_session = False
        if self._session is None or (self._owns_session and self._session.closed):
            self._session = aiohttp.ClientSession(trust_env=True)
            self._owns_session = True
        return self._session

    def _headers(self, has_body: bool) -> dict[str, str]:
        headers = {"Accept": "application/json"}
        if has_body:
            headers["Content-Type"] = "application/json"
        if self._extra_headers is not None:
            headers.update(self._extra_headers())
        if self._auth_token:
            headers[AUTH_HEADER] = f"Bearer {self._auth_token}"
        return headers

    def _delay(self, attempt: int) -> float:
        # Full jitter: concurrent reconciles hitting one recovering dashboard spread out.
        cap = min(self.max_backoff, self.backoff * (2**attempt))
        return random.uniform(cap / 2, cap)

    async def _send(
        self,
        method: str,
        path: str,
        *,
        body: Any = None,
        params: Mapping[str, str] | None = None,
    ) -> _Answer:
        """One attempt. Transport failures become ``DashboardError(status=0, transient)``."""
        data = orjson.dumps(body) if body is not None else None
        kwargs: dict[str, Any] = {
            "data": data,
            "params": params,
            "headers": self._headers(data is not None),
            "timeout": aiohttp.ClientTimeout(total=self.timeout),
        }
        if self._ssl is not None:
            kwargs["ssl"] = self._ssl
        self.requests_sent += 1
        try:
            async with self._get_session().request(method, self.base_url + path, **kwargs) as resp:
                return _Answer(resp.status, await resp.read())
        except TimeoutError as exc:
            raise DashboardError(
                f"{method} {path}: timed out after {self.timeout:g}s", status=0
            ) from exc
        except aiohttp.ClientError as exc:
            raise DashboardError(f"{method} {path}: {exc}", status=0) from exc

    async def _request(
        self,
        method: str,
        path: str,
        *,
        body: Any = None,
        params: Mapping[str, str] | None = None,
        final: tuple[tuple[str, ...], ...] = (),
    ) -> _Answer:
        """Sends with retries. Returns any answer below 500, or a 5xx whose body mentions one
        of the ``final`` marker groups (a dashboard verdict, not an outage); raises
        ``DashboardError`` once transient failures outlast the attempts."""
        last: DashboardError | None = None
        for attempt in range(self.attempts):
            if attempt:
                await asyncio.sleep(self._delay(attempt - 1))
            try:
                answer = await self._send(method, path, body=body, params=params)
            except DashboardError as exc:
                last = exc
                continue
            if answer.status < 500 or any(answer.mentions(markers) for markers in final):
                return answer
            last = DashboardError(
                f"{method} {path}: HTTP {answer.status}: {answer.text()}",
                status=answer.status,
                transient=True,
            )
        assert last is not None
        raise last

    @staticmethod
    def _unexpected(method: str, path: str, answer: _Answer) -> DashboardError:
        # 4xx other than 404 means the request itself is wrong (bad body, auth): retrying the
        # same request cannot help. 429 and 408 are the exceptions.
        transient = answer.status >= 500 or answer.status in (408, 429)
        return DashboardError(
            f"{method} {path}: HTTP {answer.status}: {answer.text()}",
            status=answer.status,
            transient=transient,
        )

    @staticmethod
    def _job_path(submission_id: str, suffix: str = "") -> str:
        return JOBS_PATH + quote(submission_id, safe="") + suffix

    # ------------------------------------------------------------------ jobs

    async def submit_job(self, request: JobSubmitRequest) -> str:
        body = submit_body(request)
        sid = request.submission_id
        last: DashboardError | None = None
        for attempt in range(self.attempts):
            if attempt:
                await asyncio.sleep(self._delay(attempt - 1))
                # The previous attempt may have created the job even though we saw no success
                # (lost response, or a 5xx after the job was recorded): look before posting.
                if sid and last is not None:
                    try:
                        if await self._get_job_once(sid) is not None:
                            return sid
                    except DashboardError as exc:
                        last = exc
                        continue
            try:
                answer = await self._send("POST", JOBS_PATH, body=body)
            except DashboardError as exc:
                last = exc
                continue
            if answer.status == 200:
                data = answer.json() or {}
                return str(data.get("submission_id") or data.get("job_id") or sid)
            if sid and answer.mentions(_DUPLICATE_MARKERS):
                # Ray refuses a second job with this id; make sure the first one is real.
                existing = await self.get_job_info(sid)
                if existing is not None:
                    return sid
                raise DashboardError(
                    f"submission {sid!r} reported as existing but not found: {answer.text()}",
                    status=answer.status,
                    transient=True,
                )
            if answer.status < 500:
                raise self._unexpected("POST", JOBS_PATH, answer)
            last = self._unexpected("POST", JOBS_PATH, answer)
        assert last is not None
        raise last

    async def _get_job_once(self, submission_id: str) -> JobInfo | None:
        answer = await self._send("GET", self._job_path(submission_id))
        if answer.status == 404:
            return None
        if answer.status != 200:
            raise self._unexpected("GET", JOBS_PATH, answer)
        return job_info_from_dict(answer.json() or {})

    async def get_job_info(self, submission_id: str) -> JobInfo | None:
        path = self._job_path(submission_id)
        answer = await self._request("GET", path)
        if answer.status == 404:
            return None
        if answer.status != 200:
            raise self._unexpected("GET", path, answer)
        return job_info_from_dict(answer.json() or {})

    async def list_jobs(self) -> list[JobInfo]:
        answer = await self._request("GET", JOBS_PATH)
        if answer.status != 200:
            raise self._unexpected("GET", JOBS_PATH, answer)
        data = answer.json() or []
        if isinstance(data, dict):  # some Ray versions answered {submission_id: details}
            data = list(data.values())
        return [job_info_from_dict(item) for item in data]

    async def get_job_logs(self, submission_id: str) -> str | None:
        path = self._job_path(submission_id, "/logs")
        answer = await self._request("GET", path)
        if answer.status == 404:
            return None
        if answer.status != 200:
            raise self._unexpected("GET", path, answer)
        data = answer.json() or {}
        return str(data.get("logs") or "")

    async def stop_job(self, submission_id: str) -> bool:
        # Stopping twice is harmless (the second answer is {"stopped": false}), so retries
        # after a lost response are safe.
        path = self._job_path(submission_id, "/stop")
        answer = await self._request("POST", path)
        if answer.status == 404:
            return False
        if answer.status != 200:
            raise self._unexpected("POST", path, answer)
        data = answer.json() or {}
        return bool(data.get("stopped"))

    async def delete_job(self, submission_id: str) -> bool:
        """True when deleted, False when there was no such job (also when an earlier attempt
        whose answer was lost deleted it). A job that has not finished is refused by Ray;
        that raises ``DashboardError(transient=False)``: stop it first."""
        path = self._job_path(submission_id)
        answer = await self._request("DELETE", path, final=(_NOT_TERMINAL_MARKERS,))
        if answer.status == 404:
            return False
        if answer.mentions(_NOT_TERMINAL_MARKERS) and answer.status != 200:
            raise DashboardError(
                f"DELETE {path}: job has not finished: {answer.text()}",
                status=answer.status,
                transient=False,
            )
        if answer.status != 200:
            raise self._unexpected("DELETE", path, answer)
        data = answer.json() or {}
        return bool(data.get("deleted", True))

    # ------------------------------------------------------------------ serve

    async def get_serve_details(self) -> dict[str, Any]:
        answer = await self._request("GET", SERVE_PATH, params={"api_type": "declarative"})
        if answer.status != 200:
            raise self._unexpected("GET", SERVE_PATH, answer)
        data = answer.json()
        if not isinstance(data, dict):
            raise DashboardError(
                f"GET {SERVE_PATH}: expected an object, got {type(data).__name__}",
                status=answer.status,
            )
        return data

    async def update_serve_config(self, config: dict[str, Any]) -> None:
        # PUT replaces the whole declarative config, so repeating it is idempotent.
        answer = await self._request("PUT", SERVE_PATH, body=config)
        if answer.status != 200:
            raise self._unexpected("PUT", SERVE_PATH, answer)

    # ------------------------------------------------------------------ health and misc

    async def gcs_healthy(self) -> bool:
        """One attempt at ``/api/gcs_healthz`` (what the submitter's wait loop polls): True
        only for a 200 whose body says success. Never raises: a probe answers yes or no."""
        try:
            answer = await self._send("GET", GCS_HEALTH_PATH)
        except DashboardError:
            return False
        return answer.status == 200 and b"success" in answer.body.lower()

    async def get_version(self) -> dict[str, Any]:
        """``/api/version``: ``ray_version`` and the dashboard API version."""
        answer = await self._request("GET", VERSION_PATH)
        if answer.status != 200:
            raise self._unexpected("GET", VERSION_PATH, answer)
        data = answer.json()
        return data if isinstance(data, dict) else {}

    async def close(self) -> None:
        if self._owns_session and self._session is not None:
            await self._session.close()
        self._session = None

    async def __aenter__(self) -> HttpDashboardClient:
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.close()


def _typecheck(
    client: HttpDashboardClient, factory: HttpDashboardFactory
) -> tuple[DashboardClient, DashboardFactory]:
    return client, factory  # mypy proves these satisfy the Protocols


# ---------------------------------------------------------------------- factories


def service_proxy_base_url(
    apiserver: str, namespace: str, service: str, port: str = "dashboard"
) -> str:
    """The dashboard seen through the API server's service proxy, for an operator running
    outside the cluster network:
    ``<apiserver>/api/v1/namespaces/<ns>/services/<svc>:<port>/proxy``.
    """
    return (
        f"{apiserver.rstrip('/')}/api/v1/namespaces/{quote(namespace, safe='')}"
        f"/services/{quote(service, safe='')}:{quote(port, safe='')}/proxy"
    )


class HttpDashboardFactory:
    """A ``DashboardFactory`` whose clients share one connection pool.

    Clients made by it never close the shared session; ``close()`` on the factory does (when it
    created it). For the service proxy, give it the API server's session (TLS client
    certificates), ``extra_headers`` with the API server bearer token, and ``timeout=10``.
    """

    def __init__(
        self,
        *,
        timeout: float = DIRECT_TIMEOUT,
        session: aiohttp.ClientSession | None = None,
        ssl_context: ssl.SSLContext | bool | None = None,
        extra_headers: HeaderProvider | None = None,
        attempts: int = 3,
    ) -> None:
        self.timeout = timeout
        self._session = session
        self._owns_session = session is None
        self._ssl = ssl_context
        self._extra_headers = extra_headers
        self.attempts = attempts

    def _get_session(self) -> aiohttp.ClientSession:
        if self._session is None:
            self._session = aiohttp.ClientSession(trust_env=True)
        return self._session

    def __call__(self, base_url: str, *, auth_token: str | None = None) -> HttpDashboardClient:
        return HttpDashboardClient(
            base_url,
            auth_token=auth_token,
            timeout=self.timeout,
            attempts=self.attempts,
            session_provider=self._get_session,
            ssl_context=self._ssl,
            extra_headers=self._extra_headers,
        )

    async def close(self) -> None:
        if self._owns_session and self._session is not None:
            await self._session.close()
        self._session = None


def proxy_factory(
    session: aiohttp.ClientSession,
    *,
    ssl_context: ssl.SSLContext | bool | None = None,
    extra_headers: HeaderProvider | None = None,
) -> HttpDashboardFactory:
    """A factory for dashboards reached through the API server proxy (10 s timeout); pass base
    URLs built with ``service_proxy_base_url``."""
    return HttpDashboardFactory(
        timeout=PROXY_TIMEOUT,
        session=session,
        ssl_context=ssl_context,
        extra_headers=extra_headers,
    )


def proxy_factory_for(config: ClientConfig) -> HttpDashboardFactory:
    """A proxy factory that authenticates to the API server like the operator's own client:
    its TLS settings (CA, client certificate) and a bearer token read per request (projected
    and exec-plugin tokens rotate). Base URLs come from ``service_proxy_base_url``."""

    def bearer() -> dict[str, str]:
        token = config.bearer()
        return {"Authorization": f"Bearer {token}"} if token else {}

    ssl_context = config.ssl_context() if config.server.startswith("https") else None
    return HttpDashboardFactory(
        timeout=PROXY_TIMEOUT, ssl_context=ssl_context, extra_headers=bearer
    )
