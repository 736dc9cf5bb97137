"""The in-process fake Ray dashboards (``kuberay.ray.fake``) served over HTTP, as an HTTP proxy.

On KWOK no Ray head runs, so nothing answers at ``http://<cluster>-head-svc.<ns>.svc.cluster.local
:8265``. A real operator subprocess started with ``HTTP_PROXY=http://127.0.0.1:<port>`` sends its
dashboard requests here in absolute form (the dashboard client honours HTTP_PROXY, as upstream's
does); this server picks the ``FakeDashboard`` for the request's host and port from one
``FakeDashboardRegistry`` and answers the Ray dashboard REST calls the operator's
``HttpDashboardClient`` makes, with the shapes Ray uses:

- ``POST /api/jobs/`` (submit; an id that exists is refused with Ray's 500 "already exists"),
  ``GET /api/jobs/``, ``GET /api/jobs/<id>``, ``GET /api/jobs/<id>/logs``,
  ``POST /api/jobs/<id>/stop``, ``DELETE /api/jobs/<id>`` (a running job: Ray's 500
  "non-terminal state");
- ``GET /api/serve/applications/`` and ``PUT /api/serve/applications/``;
- ``GET /api/gcs_healthz`` and ``GET /api/version``.

The registry (and so every fake's ``submissions``/``jobs_started`` counters and Serve state)
lives in the benchmark's process and outlives operator kills, as Ray clusters outlive their
operator. Nothing here reaches any network: requests are answered, never forwarded.
"""

from __future__ import annotations

import dataclasses
from collections import Counter
from typing import Any
from urllib.parse import unquote

import orjson
from aiohttp import web

from kuberay.ray.dashboard import DashboardError, JobInfo, JobSubmitRequest
from kuberay.ray.fake import FakeDashboard, FakeDashboardRegistry

RAY_VERSION = "2.52.0"


def job_json(info: JobInfo) -> dict[str, Any]:
    return {
        "type": "SUBMISSION",
        "job_id": info.job_id,
        "submission_id": info.submission_id,
        "driver_info": None,
        "status": info.status,
        "entrypoint": info.entrypoint,
        "message": info.message,
        "error_type": info.error_type,
        "start_time": info.start_time,
        "end_time": info.end_time,
        "metadata": info.metadata or None,
        "runtime_env": info.runtime_env or None,
    }


def _json(data: Any, status: int = 200) -> web.Response:
    return web.Response(status=status, body=orjson.dumps(data), content_type="application/json")


def _text(text: str, status: int) -> web.Response:
    return web.Response(status=status, text=text)


_SUBMIT_FIELDS = {f.name for f in dataclasses.fields(JobSubmitRequest)}


class FakeDashboardServer:
    """Serves every fake dashboard of ``registry`` through one HTTP-proxy port on 127.0.0.1."""

    def __init__(self, registry: FakeDashboardRegistry | None = None) -> None:
        self.registry = registry or FakeDashboardRegistry(serve_settle_seconds=1.0)
        self.requests: Counter[str] = Counter()  # by "METHOD /path-shape"
        self.errors = 0
        self._runner: web.AppRunner | None = None
        self.port = 0

    @property
    def proxy_url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    async def start(self, port: int = 0) -> int:
        app = web.Application()
        app.router.add_route("*", "/{tail:.*}", self.handle)
        self._runner = web.AppRunner(app, access_log=None)
        await self._runner.setup()
        await web.TCPSite(self._runner, "127.0.0.1", port).start()
        self.port = int(self._runner.addresses[0][1])
        return self.port

    async def stop(self) -> None:
        if self._runner is not None:
            await self._runner.cleanup()
            self._runner = None

    def dashboard_for(self, request: web.Request) -> FakeDashboard:
        url = request.url
        host = url.host or request.host.split(":")[0]
        port = url.port or 8265
        return self.registry.get(f"http://{host}:{port}")

    async def handle(self, request: web.Request) -> web.StreamResponse:
        fake = self.dashboard_for(request)
        path = request.path
        try:
            return await self._route(fake, request.method, path, request)
        except DashboardError as exc:
            self.errors += 1
            return _text(str(exc), exc.status or 503)

    async def _route(  # noqa: C901, PLR0912
        self, fake: FakeDashboard, method: str, path: str, request: web.Request
    ) -> web.StreamResponse:
        if path == "/api/jobs/" or path == "/api/jobs":
            if method == "POST":
                self.requests["POST /api/jobs/"] += 1
                return await self._submit(fake, await request.read())
            if method == "GET":
                self.requests["GET /api/jobs/"] += 1
                return _json([job_json(j) for j in await fake.list_jobs()])
        if path.startswith("/api/jobs/"):
            rest = path[len("/api/jobs/") :]
            sid, _, suffix = rest.partition("/")
            sid = unquote(sid)
            shape = f"{method} /api/jobs/<id>{'/' + suffix if suffix else ''}"
            self.requests[shape] += 1
            if method == "GET" and not suffix:
                info = await fake.get_job_info(sid)
                return _json(job_json(info)) if info else _text(f"Job {sid} does not exist", 404)
            if method == "GET" and suffix == "logs":
                logs = await fake.get_job_logs(sid)
                return _json({"logs": logs}) if logs is not None else _text("not found", 404)
            if method == "POST" and suffix == "stop":
                if sid not in fake.jobs:
                    return _text(f"Job {sid} does not exist", 404)
                return _json({"stopped": await fake.stop_job(sid)})
            if method == "DELETE" and not suffix:
                if sid not in fake.jobs:
                    return _text(f"Job {sid} does not exist", 404)
                try:
                    return _json({"deleted": await fake.delete_job(sid)})
                except DashboardError as exc:
                    return _text(f"Traceback (most recent call last):\nValueError: {exc}", 500)
        if path.rstrip("/") == "/api/serve/applications":
            self.requests[f"{method} /api/serve/applications/"] += 1
            if method == "GET":
                return _json(await fake.get_serve_details())
            if method == "PUT":
                try:
                    await fake.update_serve_config(orjson.loads(await request.read()))
                except DashboardError as exc:
                    return _text(str(exc), exc.status or 400)
                return _json({})
        if path == "/api/gcs_healthz":
            self.requests["GET /api/gcs_healthz"] += 1
            ok = await fake.gcs_healthy()
            return _text("success", 200) if ok else _text("GCS unhealthy", 503)
        if path == "/api/version":
            self.requests["GET /api/version"] += 1
            return _json({"version": "4", "ray_version": RAY_VERSION, "ray_commit": "fake"})
        self.requests[f"{method} other"] += 1
        return _text(f"no route {method} {path}", 404)

    async def _submit(self, fake: FakeDashboard, raw: bytes) -> web.Response:
        body = orjson.loads(raw or b"{}")
        if not isinstance(body, dict) or not body.get("entrypoint"):
            return _text("entrypoint is required", 400)
        unknown = set(body) - _SUBMIT_FIELDS
        if unknown:
            return _text(f"unexpected fields {sorted(unknown)}", 400)
        request = JobSubmitRequest(**body)
        sid = request.submission_id
        existed = bool(sid) and sid in fake.jobs
        sid = await fake.submit_job(request)  # counts the call; starts nothing when it existed
        if existed:
            return _text(
                "Traceback (most recent call last):\n"
                f"ValueError: Job with submission_id {sid} already exists. "
                "Please use a different submission_id.\n",
                500,
            )
        return _json({"job_id": sid, "submission_id": sid})
