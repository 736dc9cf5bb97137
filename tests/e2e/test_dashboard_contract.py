"""The dashboard contract: the same cases against the in-process fake and a real Ray head.

The fake (``kuberay.ray.fake``) backs every controller test, so it is trusted exactly as far as
these cases reach; each case runs once per backend (``[fake]`` and ``[ray]``). The real head is
``ray start --head`` on loopback (``tests/e2e/conftest.py``), shared by the session, so cases use
unique submission ids and never assume an empty job list. Where the fake needs a test control
to stand in for something only a real cluster does (losing a response on the wire), the
backend object hides the difference and the assertion stays the same.
"""

from __future__ import annotations

import asyncio
import time
import uuid
from collections.abc import AsyncIterator, Awaitable, Callable
from contextlib import AbstractAsyncContextManager, asynccontextmanager
from dataclasses import dataclass
from typing import Any

import aiohttp
import pytest
from aiohttp import web

from kuberay.devenv.testing import skip_unless_strict
from kuberay.ray.dashboard import (
    FAILED,
    PENDING,
    RUNNING,
    STOPPED,
    SUCCEEDED,
    TERMINAL_STATUSES,
    DashboardClient,
    DashboardError,
    JobInfo,
    JobSubmitRequest,
)
from kuberay.ray.fake import APP_RUNNING, FakeDashboard
from kuberay.ray.http_client import HttpDashboardClient

from .conftest import SERVE_APP_MODULE, RayHead, free_port

JOB_TIMEOUT = 60.0
SERVE_TIMEOUT = 120.0


@dataclass
class Backend:
    name: str
    client: DashboardClient
    fake: FakeDashboard | None
    head: RayHead | None
    # A client whose first job submission reaches the dashboard but whose answer is lost.
    lossy_client: Callable[[], AbstractAsyncContextManager[DashboardClient]]

    def serve_port(self) -> int:
        return self.head.serve_port if self.head is not None else free_port()


def new_id(prefix: str = "ct") -> str:
    return f"{prefix}-{uuid.uuid4().hex[:10]}"


async def wait_for(
    client: DashboardClient,
    sid: str,
    statuses: frozenset[str] | set[str],
    timeout: float = JOB_TIMEOUT,
) -> JobInfo:
    deadline = time.monotonic() + timeout
    info: JobInfo | None = None
    while time.monotonic() < deadline:
        info = await client.get_job_info(sid)
        if info is not None and info.status in statuses:
            return info
        await asyncio.sleep(0.2)
    raise AssertionError(f"job {sid} not in {sorted(statuses)} after {timeout}s: {info}")


async def eventually(
    check: Callable[[], Awaitable[bool]], timeout: float, what: str, step: float = 0.5
) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if await check():
            return
        await asyncio.sleep(step)
    raise AssertionError(f"not within {timeout}s: {what}")


async def count_jobs(client: DashboardClient, sid: str) -> int:
    return sum(1 for job in await client.list_jobs() if job.submission_id == sid)


@dataclass
class LossyProxy:
    url: str = ""
    dropped: bool = False


@asynccontextmanager
async def lossy_proxy(upstream: str) -> AsyncIterator[LossyProxy]:
    """A loopback reverse proxy to ``upstream`` that forwards the first ``POST /api/jobs/``,
    lets the dashboard act on it, then drops the connection instead of answering."""
    state = LossyProxy()

    async def forward(request: web.Request) -> web.StreamResponse:
        body = await request.read()
        async with (
            aiohttp.ClientSession() as session,
            session.request(
                request.method,
                upstream + request.rel_url.path_qs,
                data=body or None,
                headers={k: v for k, v in request.headers.items() if k.lower() != "host"},
            ) as resp,
        ):
            payload = await resp.read()
            status = resp.status
            content_type = resp.headers.get("Content-Type", "application/json")
        if request.method == "POST" and request.path == "/api/jobs/" and not state.dropped:
            state.dropped = True
            assert request.transport is not None
            request.transport.close()
        return web.Response(body=payload, status=status, headers={"Content-Type": content_type})

    app = web.Application()
    app.router.add_route("*", "/{tail:.*}", forward)
    runner = web.AppRunner(app)
    await runner.setup()
    site = web.TCPSite(runner, "127.0.0.1", 0)
    await site.start()
    state.url = f"http://127.0.0.1:{runner.addresses[0][1]}"
    try:
        yield state
    finally:
        await runner.cleanup()


@pytest.fixture(params=["fake", "ray"])
async def backend(request: pytest.FixtureRequest) -> AsyncIterator[Backend]:
    if request.param == "fake":
        fake = FakeDashboard(serve_settle_seconds=0.3)

        @asynccontextmanager
        async def fake_lossy() -> AsyncIterator[DashboardClient]:
            fake.fail("submit_job", after=True)
            yield fake
            assert fake.calls["submit_job"] >= 2, "the lost answer was not exercised"

        yield Backend("fake", fake, fake, None, fake_lossy)
        return

    head: RayHead = request.getfixturevalue("ray_head")

    @asynccontextmanager
    async def real_lossy() -> AsyncIterator[DashboardClient]:
        async with (
            lossy_proxy(head.dashboard_url) as proxy,
            HttpDashboardClient(proxy.url, attempts=4) as lossy,
        ):
            yield lossy
            assert proxy.dropped, "the lost answer was not exercised"
            assert lossy.requests_sent >= 2

    async with HttpDashboardClient(head.dashboard_url, attempts=4) as client:
        yield Backend("ray", client, None, head, real_lossy)


# ---------------------------------------------------------------------- jobs


async def test_submit_runs_to_success_with_logs(backend: Backend) -> None:
    client = backend.client
    sid = new_id()
    marker = f"contract-output-{sid}"
    request = JobSubmitRequest(
        entrypoint=f"echo {marker}",
        submission_id=sid,
        metadata={"owner": "contract"},
        runtime_env={"env_vars": {"CONTRACT": "1"}},
    )
    assert await client.submit_job(request) == sid
    first = await client.get_job_info(sid)
    assert first is not None
    assert first.status in {PENDING, RUNNING, SUCCEEDED}

    info = await wait_for(client, sid, TERMINAL_STATUSES)
    assert info.status == SUCCEEDED, info
    assert info.submission_id == sid
    assert info.entrypoint == request.entrypoint
    assert info.metadata == {"owner": "contract"}
    assert info.runtime_env.get("env_vars") == {"CONTRACT": "1"}
    assert info.start_time is not None
    assert info.end_time is not None
    assert info.end_time >= info.start_time
    assert info.message

    logs = await client.get_job_logs(sid)
    assert logs is not None
    assert marker in logs
    assert await count_jobs(client, sid) == 1


async def test_failing_entrypoint_ends_failed(backend: Backend) -> None:
    client = backend.client
    sid = new_id()
    await client.submit_job(
        JobSubmitRequest(entrypoint="echo about-to-fail; exit 3", submission_id=sid)
    )
    info = await wait_for(client, sid, TERMINAL_STATUSES)
    assert info.status == FAILED, info
    assert "exit code 3" in info.message
    assert info.end_time is not None
    logs = await client.get_job_logs(sid)
    assert logs is not None
    assert "about-to-fail" in logs


async def test_duplicate_submission_starts_one_job(backend: Backend) -> None:
    client = backend.client
    sid = new_id()
    first = JobSubmitRequest(entrypoint="echo first-submission", submission_id=sid)
    second = JobSubmitRequest(entrypoint="echo second-submission", submission_id=sid)
    assert await client.submit_job(first) == sid
    assert await client.submit_job(second) == sid
    # Concurrent repeats (two reconciles racing) resolve the same way.
    results = await asyncio.gather(*(client.submit_job(first) for _ in range(3)))
    assert results == [sid, sid, sid]

    info = await wait_for(client, sid, TERMINAL_STATUSES)
    assert info.entrypoint == first.entrypoint
    assert await count_jobs(client, sid) == 1
    logs = await client.get_job_logs(sid) or ""
    assert "second-submission" not in logs
    if backend.fake is not None:
        assert backend.fake.jobs_started[sid] == 1
        assert backend.fake.submissions[sid] == 5


async def test_lost_submit_response_does_not_start_a_second_job(backend: Backend) -> None:
    sid = new_id()
    request = JobSubmitRequest(entrypoint="echo lost-answer", submission_id=sid)
    async with backend.lossy_client() as lossy:
        # What a controller does: retry a transient failure with the same submission id.
        result: str | None = None
        for _ in range(3):
            try:
                result = await lossy.submit_job(request)
                break
            except DashboardError as exc:
                if not exc.transient:
                    raise
        assert result == sid
    info = await wait_for(backend.client, sid, TERMINAL_STATUSES)
    assert info.status == SUCCEEDED
    assert await count_jobs(backend.client, sid) == 1


async def test_stop_running_job(backend: Backend) -> None:
    client = backend.client
    sid = new_id()
    await client.submit_job(
        JobSubmitRequest(entrypoint="echo started; sleep 120", submission_id=sid)
    )
    await wait_for(client, sid, {RUNNING})
    assert await client.stop_job(sid) is True
    info = await wait_for(client, sid, TERMINAL_STATUSES, timeout=30)
    assert info.status == STOPPED, info
    assert info.end_time is not None
    assert await client.stop_job(sid) is False  # already finished: nothing to stop
    assert await client.delete_job(sid) is True


async def test_deleting_an_unfinished_job_is_refused(backend: Backend) -> None:
    client = backend.client
    sid = new_id()
    await client.submit_job(JobSubmitRequest(entrypoint="sleep 120", submission_id=sid))
    await wait_for(client, sid, {PENDING, RUNNING})
    with pytest.raises(DashboardError) as raised:
        await client.delete_job(sid)
    assert raised.value.transient is False
    assert await client.get_job_info(sid) is not None
    assert await client.stop_job(sid) is True
    await wait_for(client, sid, TERMINAL_STATUSES, timeout=30)
    assert await client.delete_job(sid) is True


async def test_unknown_job_is_a_value_not_an_error(backend: Backend) -> None:
    client = backend.client
    sid = new_id("missing")
    assert await client.get_job_info(sid) is None
    assert await client.get_job_logs(sid) is None
    assert await client.stop_job(sid) is False
    assert await client.delete_job(sid) is False


async def test_delete_finished_job(backend: Backend) -> None:
    client = backend.client
    sid = new_id()
    await client.submit_job(JobSubmitRequest(entrypoint="echo to-delete", submission_id=sid))
    await wait_for(client, sid, TERMINAL_STATUSES)
    assert await client.delete_job(sid) is True
    assert await client.get_job_info(sid) is None
    assert await client.get_job_logs(sid) is None
    assert await count_jobs(client, sid) == 0
    assert await client.delete_job(sid) is False


async def test_submission_without_id_gets_a_generated_one(backend: Backend) -> None:
    client = backend.client
    sid = await client.submit_job(JobSubmitRequest(entrypoint="echo anonymous", submission_id=""))
    assert sid.startswith("raysubmit_")
    info = await wait_for(client, sid, TERMINAL_STATUSES)
    assert info.status == SUCCEEDED


async def test_submission_with_entrypoint_resources(backend: Backend) -> None:
    client = backend.client
    sid = new_id()
    await client.submit_job(
        JobSubmitRequest(
            entrypoint="echo with-resources",
            submission_id=sid,
            entrypoint_num_cpus=0.1,
            entrypoint_num_gpus=0,
            entrypoint_resources={},
        )
    )
    info = await wait_for(client, sid, TERMINAL_STATUSES)
    assert info.status == SUCCEEDED


async def test_gcs_health(backend: Backend) -> None:
    probe: Any = backend.client
    assert await probe.gcs_healthy() is True


# ---------------------------------------------------------------------- serve


async def test_serve_details_without_applications(backend: Backend) -> None:
    details = await backend.client.get_serve_details()
    for key in ("controller_info", "proxies", "applications", "target_capacity"):
        assert key in details, details.keys()
    assert isinstance(details["applications"], dict)
    assert not any(
        app.get("source") == "declarative" and name.startswith("contract")
        for name, app in details["applications"].items()
    )


async def test_serve_config_rejects_an_invalid_config(backend: Backend) -> None:
    with pytest.raises(DashboardError) as raised:
        await backend.client.update_serve_config({"applications": [{"name": "contract-bad"}]})
    assert raised.value.transient is False
    assert 400 <= raised.value.status < 500


async def test_serve_config_put_deploys_and_removes_an_application(backend: Backend) -> None:
    if backend.head is not None and not backend.head.serve_available:
        skip_unless_strict("ray[serve] is not installed")
    client = backend.client
    app_config = {
        "name": "contract",
        "route_prefix": "/contract",
        "import_path": f"{SERVE_APP_MODULE}:app",
        "deployments": [{"name": "Hello", "num_replicas": 1}],
    }
    config = {
        "http_options": {"host": "127.0.0.1", "port": backend.serve_port()},
        "applications": [app_config],
    }
    await client.update_serve_config(config)

    async def running() -> bool:
        apps = (await client.get_serve_details())["applications"]
        return bool(apps.get("contract", {}).get("status") == APP_RUNNING)

    await eventually(running, SERVE_TIMEOUT, "serve application 'contract' RUNNING")
    details = await client.get_serve_details()
    app = details["applications"]["contract"]
    assert app["deployed_app_config"]["import_path"] == app_config["import_path"]
    assert app["route_prefix"] == "/contract"
    assert app["deployments"]["Hello"]["status"] == "HEALTHY"
    assert details["controller_info"]

    # The same config again is accepted and the application settles back to RUNNING with the
    # same config. (Ray briefly reports DEPLOYING after any PUT, even an unchanged one.)
    await client.update_serve_config(config)
    await eventually(running, SERVE_TIMEOUT, "serve application 'contract' RUNNING again")
    again = (await client.get_serve_details())["applications"]["contract"]
    assert again["deployed_app_config"] == app["deployed_app_config"]

    await client.update_serve_config({**config, "applications": []})

    async def gone() -> bool:
        return "contract" not in (await client.get_serve_details())["applications"]

    await eventually(gone, SERVE_TIMEOUT, "serve application 'contract' removed")
