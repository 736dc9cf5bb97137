"""HttpDashboardClient against a scripted aiohttp server on 127.0.0.1: request shapes, retries,
timeouts, the auth header, duplicate and lost-response submissions, and error mapping."""

from __future__ import annotations

import asyncio
import socket
import time
from collections.abc import AsyncIterator, Awaitable, Callable
from dataclasses import dataclass, field
from typing import Any

import aiohttp
import orjson
import pytest
from aiohttp import web

from kuberay.ray.dashboard import DashboardError, JobSubmitRequest
from kuberay.ray.http_client import (
    AUTH_HEADER,
    PROXY_TIMEOUT,
    HttpDashboardClient,
    HttpDashboardFactory,
    error_summary,
    proxy_factory,
    proxy_factory_for,
    service_proxy_base_url,
    submit_body,
)
from kuberay.runtime.client import ClientConfig

Handler = Callable[[web.Request], Awaitable[web.StreamResponse]]

TRACEBACK_DUPLICATE = (
    "Traceback (most recent call last):\n"
    '  File "job_head.py", line 419, in submit_job\n'
    "    resp = await job_agent_client.submit_job_internal(submit_request)\n"
    "RuntimeError: Request failed with status code 400: Traceback (most recent call last):\n"
    "ValueError: Job with submission_id {sid} already exists. "
    "Please use a different submission_id.\n.\n"
)


def job_json(sid: str, status: str = "RUNNING", **extra: Any) -> dict[str, Any]:
    data: dict[str, Any] = {
        "type": "SUBMISSION",
        "job_id": None,
        "submission_id": sid,
        "status": status,
        "entrypoint": "echo hi",
        "message": "Job is currently running.",
        "error_type": None,
        "start_time": 1700000000000,
        "end_time": None,
        "metadata": None,
        "runtime_env": None,
    }
    data.update(extra)
    return data


@dataclass
class Scripted:
    """A dashboard whose answers the test queues per route; records every request."""

    requests: list[tuple[str, str, dict[str, str], bytes]] = field(default_factory=list)
    queues: dict[tuple[str, str], list[Handler]] = field(default_factory=dict)
    defaults: dict[tuple[str, str], Handler] = field(default_factory=dict)
    url: str = ""

    def on(self, method: str, path: str, *handlers: Handler) -> None:
        self.queues.setdefault((method, path), []).extend(handlers)

    def always(self, method: str, path: str, handler: Handler) -> None:
        self.defaults[(method, path)] = handler

    def count(self, method: str, path: str) -> int:
        return sum(1 for m, p, _, _ in self.requests if m == method and p == path)

    async def dispatch(self, request: web.Request) -> web.StreamResponse:
        body = await request.read()
        self.requests.append((request.method, request.path, dict(request.headers), body))
        key = (request.method, request.path)
        queue = self.queues.get(key)
        if queue:
            return await queue.pop(0)(request)
        if key in self.defaults:
            return await self.defaults[key](request)
        return web.Response(status=404, text=f"no route {key}")


def answer(status: int = 200, body: Any = None, text: str | None = None) -> Handler:
    async def handler(request: web.Request) -> web.StreamResponse:
        if text is not None:
            return web.Response(status=status, text=text)
        return web.Response(status=status, body=orjson.dumps(body), content_type="application/json")

    return handler


def stall(seconds: float, then: Handler | None = None) -> Handler:
    async def handler(request: web.Request) -> web.StreamResponse:
        await asyncio.sleep(seconds)
        return await (then or answer(200, {}))(request)

    return handler


@pytest.fixture
async def server() -> AsyncIterator[Scripted]:
    scripted = Scripted()
    app = web.Application()
    app.router.add_route("*", "/{tail:.*}", scripted.dispatch)
    runner = web.AppRunner(app, shutdown_timeout=0.1)
    await runner.setup()
    site = web.TCPSite(runner, "127.0.0.1", 0)
    await site.start()
    port = runner.addresses[0][1]
    scripted.url = f"http://127.0.0.1:{port}"
    try:
        yield scripted
    finally:
        await runner.cleanup()


@pytest.fixture
async def client(server: Scripted) -> AsyncIterator[HttpDashboardClient]:
    async with HttpDashboardClient(server.url, timeout=1.0, backoff=0.01) as c:
        yield c


def closed_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


# ---------------------------------------------------------------------- request shapes


def test_submit_body_sends_only_set_fields() -> None:
    full = JobSubmitRequest(
        entrypoint="python x.py",
        submission_id="s1",
        runtime_env={"pip": ["a"]},
        metadata={"k": "v"},
        entrypoint_num_cpus=1.5,
        entrypoint_num_gpus=0,
        entrypoint_resources={"TPU": 4},
    )
    assert submit_body(full) == {
        "entrypoint": "python x.py",
        "submission_id": "s1",
        "runtime_env": {"pip": ["a"]},
        "metadata": {"k": "v"},
        "entrypoint_num_cpus": 1.5,
        "entrypoint_num_gpus": 0,
        "entrypoint_resources": {"TPU": 4},
    }
    assert submit_body(JobSubmitRequest(entrypoint="e", submission_id="")) == {"entrypoint": "e"}


async def test_submit_posts_json_and_returns_the_id(
    server: Scripted, client: HttpDashboardClient
) -> None:
    server.on("POST", "/api/jobs/", answer(200, {"job_id": "s1", "submission_id": "s1"}))
    sid = await client.submit_job(
        JobSubmitRequest(entrypoint="echo hi", submission_id="s1", metadata={"a": "b"})
    )
    assert sid == "s1"
    method, path, headers, body = server.requests[0]
    assert (method, path) == ("POST", "/api/jobs/")
    assert headers["Content-Type"] == "application/json"
    assert orjson.loads(body) == {
        "entrypoint": "echo hi",
        "submission_id": "s1",
        "metadata": {"a": "b"},
    }
    assert AUTH_HEADER not in {k.lower() for k in headers}


async def test_auth_token_header(server: Scripted) -> None:
    server.always("GET", "/api/jobs/", answer(200, []))
    async with HttpDashboardClient(server.url, auth_token="s3cret") as c:
        assert await c.list_jobs() == []
    headers = {k.lower(): v for k, v in server.requests[0][2].items()}
    assert headers[AUTH_HEADER] == "Bearer s3cret"


async def test_extra_headers_are_asked_for_on_every_request(server: Scripted) -> None:
    server.always("GET", "/api/jobs/", answer(200, []))
    tokens = iter(["t1", "t2"])
    async with HttpDashboardClient(
        server.url, extra_headers=lambda: {"Authorization": f"Bearer {next(tokens)}"}
    ) as c:
        await c.list_jobs()
        await c.list_jobs()
    assert [r[2]["Authorization"] for r in server.requests] == ["Bearer t1", "Bearer t2"]


async def test_job_info_maps_fields_and_nulls(
    server: Scripted, client: HttpDashboardClient
) -> None:
    server.on(
        "GET",
        "/api/jobs/j1",
        answer(200, job_json("j1", "FAILED", end_time=1700000001000, error_type="X")),
    )
    info = await client.get_job_info("j1")
    assert info is not None
    assert (info.submission_id, info.status, info.error_type) == ("j1", "FAILED", "X")
    assert info.metadata == {}
    assert info.runtime_env == {}
    assert info.end_time == 1700000001000


async def test_list_jobs_accepts_a_list_or_a_mapping(
    server: Scripted, client: HttpDashboardClient
) -> None:
    server.on("GET", "/api/jobs/", answer(200, [job_json("x")]))
    server.on("GET", "/api/jobs/", answer(200, {"y": job_json("y")}))
    assert [j.submission_id for j in await client.list_jobs()] == ["x"]
    assert [j.submission_id for j in await client.list_jobs()] == ["y"]


async def test_not_found_is_a_value(server: Scripted, client: HttpDashboardClient) -> None:
    missing = answer(404, text="Job nope does not exist")
    for path in ("/api/jobs/nope", "/api/jobs/nope/logs", "/api/jobs/nope/stop"):
        server.always("GET", path, missing)
        server.always("POST", path, missing)
    server.always("DELETE", "/api/jobs/nope", missing)
    assert await client.get_job_info("nope") is None
    assert await client.get_job_logs("nope") is None
    assert await client.stop_job("nope") is False
    assert await client.delete_job("nope") is False
    assert len(server.requests) == 4  # a 404 is an answer, never retried


async def test_logs_stop_delete_answers(server: Scripted, client: HttpDashboardClient) -> None:
    server.on("GET", "/api/jobs/j/logs", answer(200, {"logs": "line1\nline2\n"}))
    server.on("POST", "/api/jobs/j/stop", answer(200, {"stopped": True}))
    server.on("POST", "/api/jobs/j/stop", answer(200, {"stopped": False}))
    server.on("DELETE", "/api/jobs/j", answer(200, {"deleted": True}))
    assert await client.get_job_logs("j") == "line1\nline2\n"
    assert await client.stop_job("j") is True
    assert await client.stop_job("j") is False
    assert await client.delete_job("j") is True


# ---------------------------------------------------------------------- retries and errors


async def test_transient_5xx_is_retried_then_succeeds(
    server: Scripted, client: HttpDashboardClient
) -> None:
    server.on("GET", "/api/jobs/j", answer(503, text="busy"), answer(502, text="gateway"))
    server.on("GET", "/api/jobs/j", answer(200, job_json("j")))
    info = await client.get_job_info("j")
    assert info is not None
    assert server.count("GET", "/api/jobs/j") == 3


async def test_persistent_5xx_raises_transient_after_bounded_attempts(
    server: Scripted, client: HttpDashboardClient
) -> None:
    server.always("GET", "/api/jobs/", answer(500, text="Traceback...\nRuntimeError: boom\n"))
    with pytest.raises(DashboardError) as raised:
        await client.list_jobs()
    assert raised.value.transient is True
    assert raised.value.status == 500
    assert "RuntimeError: boom" in str(raised.value)
    assert server.count("GET", "/api/jobs/") == client.attempts == 3


async def test_connection_refused_is_transient_status_zero() -> None:
    async with HttpDashboardClient(
        f"http://127.0.0.1:{closed_port()}", attempts=2, backoff=0.01
    ) as c:
        with pytest.raises(DashboardError) as raised:
            await c.get_job_info("j")
        assert raised.value.status == 0
        assert raised.value.transient is True
        assert c.requests_sent == 2


async def test_timeout_is_bounded_and_transient(server: Scripted) -> None:
    server.always("GET", "/api/jobs/slow", stall(5))
    async with HttpDashboardClient(server.url, timeout=0.2, attempts=2, backoff=0.01) as c:
        started = time.monotonic()
        with pytest.raises(DashboardError) as raised:
            await c.get_job_info("slow")
        elapsed = time.monotonic() - started
    assert "timed out" in str(raised.value)
    assert raised.value.status == 0
    assert raised.value.transient
    assert elapsed < 2.0


async def test_bad_request_is_not_retried(server: Scripted, client: HttpDashboardClient) -> None:
    server.always(
        "POST",
        "/api/jobs/",
        answer(400, text="TypeError: __init__() missing 1 required positional argument"),
    )
    with pytest.raises(DashboardError) as raised:
        await client.submit_job(JobSubmitRequest(entrypoint="", submission_id="s"))
    assert raised.value.transient is False
    assert raised.value.status == 400
    assert server.count("POST", "/api/jobs/") == 1


async def test_unauthorized_is_not_transient(server: Scripted) -> None:
    server.always("GET", "/api/jobs/", answer(401, text="Unauthorized"))
    async with HttpDashboardClient(server.url, auth_token="wrong") as c:
        with pytest.raises(DashboardError) as raised:
            await c.list_jobs()
    assert (raised.value.status, raised.value.transient) == (401, False)


async def test_too_many_requests_is_transient(
    server: Scripted, client: HttpDashboardClient
) -> None:
    server.always("GET", "/api/jobs/", answer(429, text="slow down"))
    with pytest.raises(DashboardError) as raised:
        await client.list_jobs()
    assert (raised.value.status, raised.value.transient) == (429, True)


async def test_invalid_json_is_a_transient_error(
    server: Scripted, client: HttpDashboardClient
) -> None:
    server.always("GET", "/api/jobs/j", answer(200, text="<html>proxy error</html>"))
    with pytest.raises(DashboardError) as raised:
        await client.get_job_info("j")
    assert raised.value.transient


async def test_delete_of_an_unfinished_job_is_refused_without_retry(
    server: Scripted, client: HttpDashboardClient
) -> None:
    server.always(
        "DELETE",
        "/api/jobs/j",
        answer(
            500,
            text="Traceback (most recent call last):\nRuntimeError: Attempted to delete job "
            "'j', but it is in a non-terminal state RUNNING.\n.\n",
        ),
    )
    with pytest.raises(DashboardError) as raised:
        await client.delete_job("j")
    assert raised.value.transient is False
    assert "non-terminal state RUNNING" in str(raised.value)
    assert server.count("DELETE", "/api/jobs/j") == 1


def test_error_summary_keeps_the_last_traceback_line() -> None:
    body = TRACEBACK_DUPLICATE.format(sid="x").encode()
    assert error_summary(body).startswith("ValueError: Job with submission_id x already exists")
    assert error_summary(b"") == ""
    assert len(error_summary(b"x" * 1000)) == 300


# ---------------------------------------------------------------------- idempotent submission


async def test_duplicate_submission_is_success_after_confirming(
    server: Scripted, client: HttpDashboardClient
) -> None:
    server.always("POST", "/api/jobs/", answer(500, text=TRACEBACK_DUPLICATE.format(sid="s1")))
    server.always("GET", "/api/jobs/s1", answer(200, job_json("s1")))
    sid = await client.submit_job(JobSubmitRequest(entrypoint="echo", submission_id="s1"))
    assert sid == "s1"
    assert server.count("POST", "/api/jobs/") == 1  # the refusal is final, not retried
    assert server.count("GET", "/api/jobs/s1") == 1


async def test_duplicate_reported_for_old_ray_as_400(
    server: Scripted, client: HttpDashboardClient
) -> None:
    server.always(
        "POST", "/api/jobs/", answer(400, text="Job with submission_id s1 already exists.")
    )
    server.always("GET", "/api/jobs/s1", answer(200, job_json("s1")))
    assert await client.submit_job(JobSubmitRequest(entrypoint="e", submission_id="s1")) == "s1"


async def test_duplicate_that_cannot_be_found_is_a_transient_error(
    server: Scripted, client: HttpDashboardClient
) -> None:
    server.always("POST", "/api/jobs/", answer(500, text=TRACEBACK_DUPLICATE.format(sid="s1")))
    server.always("GET", "/api/jobs/s1", answer(404, text="Job s1 does not exist"))
    with pytest.raises(DashboardError) as raised:
        await client.submit_job(JobSubmitRequest(entrypoint="e", submission_id="s1"))
    assert raised.value.transient


async def test_lost_submit_response_finds_the_job_instead_of_posting_again(
    server: Scripted,
) -> None:
    created: list[str] = []

    async def accept_then_hang(request: web.Request) -> web.StreamResponse:
        created.append(orjson.loads(await request.read())["submission_id"])
        await asyncio.sleep(5)  # the client gives up first: the answer is lost
        return web.Response(status=200)

    async def lookup(request: web.Request) -> web.StreamResponse:
        if created:
            return await answer(200, job_json("s1"))(request)
        return web.Response(status=404, text="Job s1 does not exist")

    server.on("POST", "/api/jobs/", accept_then_hang)
    server.always("GET", "/api/jobs/s1", lookup)
    async with HttpDashboardClient(server.url, timeout=0.3, backoff=0.01) as c:
        assert await c.submit_job(JobSubmitRequest(entrypoint="e", submission_id="s1")) == "s1"
    assert server.count("POST", "/api/jobs/") == 1
    assert created == ["s1"]


async def test_submit_retries_a_5xx_that_created_nothing(
    server: Scripted, client: HttpDashboardClient
) -> None:
    server.on("POST", "/api/jobs/", answer(500, text="RuntimeError: no available agent"))
    server.on("POST", "/api/jobs/", answer(200, {"submission_id": "s1", "job_id": "s1"}))
    server.always("GET", "/api/jobs/s1", answer(404, text="Job s1 does not exist"))
    assert await client.submit_job(JobSubmitRequest(entrypoint="e", submission_id="s1")) == "s1"
    assert server.count("POST", "/api/jobs/") == 2
    assert server.count("GET", "/api/jobs/s1") == 1  # looked before posting again


async def test_submit_gives_up_after_bounded_attempts(
    server: Scripted, client: HttpDashboardClient
) -> None:
    server.always("POST", "/api/jobs/", answer(503, text="unavailable"))
    server.always("GET", "/api/jobs/s1", answer(404, text="Job s1 does not exist"))
    with pytest.raises(DashboardError) as raised:
        await client.submit_job(JobSubmitRequest(entrypoint="e", submission_id="s1"))
    assert (raised.value.status, raised.value.transient) == (503, True)
    assert server.count("POST", "/api/jobs/") == 3


async def test_submit_without_id_uses_the_generated_one(
    server: Scripted, client: HttpDashboardClient
) -> None:
    server.on("POST", "/api/jobs/", answer(200, {"submission_id": "raysubmit_abc"}))
    assert await client.submit_job(JobSubmitRequest(entrypoint="e", submission_id="")) == (
        "raysubmit_abc"
    )


# ---------------------------------------------------------------------- serve, health, factory


async def test_serve_details_and_put(server: Scripted, client: HttpDashboardClient) -> None:
    details: dict[str, Any] = {
        "controller_info": {},
        "proxies": {},
        "applications": {},
        "target_capacity": None,
    }
    server.on("GET", "/api/serve/applications/", answer(200, details))
    server.on("PUT", "/api/serve/applications/", answer(200, text=""))
    server.on("PUT", "/api/serve/applications/", answer(400, text="ValidationError: bad"))
    assert await client.get_serve_details() == details
    get = server.requests[0]
    assert get[0] == "GET"
    config = {"applications": [{"name": "a", "import_path": "m:app"}]}
    await client.update_serve_config(config)
    assert orjson.loads(server.requests[1][3]) == config
    with pytest.raises(DashboardError) as raised:
        await client.update_serve_config({"applications": "nope"})
    assert (raised.value.status, raised.value.transient) == (400, False)


async def test_serve_details_sends_the_declarative_query(server: Scripted) -> None:
    seen: list[str] = []

    async def handler(request: web.Request) -> web.StreamResponse:
        seen.append(request.query_string)
        return web.json_response({"applications": {}})

    server.always("GET", "/api/serve/applications/", handler)
    async with HttpDashboardClient(server.url) as c:
        await c.get_serve_details()
    assert seen == ["api_type=declarative"]


async def test_gcs_health_probe(server: Scripted, client: HttpDashboardClient) -> None:
    server.on("GET", "/api/gcs_healthz", answer(200, text="success"))
    server.on("GET", "/api/gcs_healthz", answer(500, text="GCS is down"))
    assert await client.gcs_healthy() is True
    assert await client.gcs_healthy() is False
    async with HttpDashboardClient(f"http://127.0.0.1:{closed_port()}") as c:
        assert await c.gcs_healthy() is False


async def test_version(server: Scripted, client: HttpDashboardClient) -> None:
    server.on("GET", "/api/version", answer(200, {"version": "4", "ray_version": "2.59.0"}))
    assert (await client.get_version())["ray_version"] == "2.59.0"


def test_service_proxy_base_url() -> None:
    assert (
        service_proxy_base_url("https://10.0.0.1:6443/", "team-a", "rc-head-svc")
        == "https://10.0.0.1:6443/api/v1/namespaces/team-a/services/rc-head-svc:dashboard/proxy"
    )
    assert service_proxy_base_url("https://api", "ns", "svc", "8265").endswith(
        "/services/svc:8265/proxy"
    )


async def test_factory_shares_one_session_and_owns_its_close(server: Scripted) -> None:
    server.always("GET", "/api/jobs/", answer(200, []))
    factory = HttpDashboardFactory()
    first = factory(server.url, auth_token="t")
    second = factory(server.url + "/")
    await first.list_jobs()
    await second.list_jobs()
    await first.close()  # borrowed session: still open for the other client
    await second.list_jobs()
    assert first._session is not None or second._session is not None
    await factory.close()
    assert len(server.requests) == 3
    assert AUTH_HEADER in {k.lower() for k in server.requests[0][2]}
    assert AUTH_HEADER not in {k.lower() for k in server.requests[1][2]}


async def test_proxy_factory_uses_the_given_session_and_ten_second_timeout(
    server: Scripted,
) -> None:
    server.always(
        "GET",
        "/api/v1/namespaces/ns/services/svc:dashboard/proxy/api/jobs/",
        answer(200, []),
    )
    async with aiohttp.ClientSession() as session:
        factory = proxy_factory(session, extra_headers=lambda: {"Authorization": "Bearer k8s"})
        client = factory(service_proxy_base_url(server.url, "ns", "svc"), auth_token="ray")
        assert client.timeout == PROXY_TIMEOUT == 10.0
        assert await client.list_jobs() == []
        await client.close()
        await factory.close()
        assert not session.closed  # the caller's session is never closed by us
    headers = {k.lower(): v for k, v in server.requests[0][2].items()}
    assert headers["authorization"] == "Bearer k8s"
    assert headers[AUTH_HEADER] == "Bearer ray"


async def test_proxy_factory_from_a_kube_client_config(server: Scripted) -> None:
    path = "/api/v1/namespaces/ns/services/svc:dashboard/proxy/api/gcs_healthz"
    server.always("GET", path, answer(200, text="success"))
    factory = proxy_factory_for(ClientConfig(server=server.url, token="k8s-token"))
    try:
        client = factory(service_proxy_base_url(server.url, "ns", "svc"))
        assert client.timeout == PROXY_TIMEOUT
        assert await client.gcs_healthy() is True
    finally:
        await factory.close()
    assert server.requests[0][2]["Authorization"] == "Bearer k8s-token"
