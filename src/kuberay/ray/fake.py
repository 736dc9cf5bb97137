"""An in-process Ray dashboard implementing ``DashboardClient``, with controls for tests.

It is trusted only as far as ``tests/e2e/test_dashboard_contract.py`` runs the same cases
against it and against a real ``ray start --head``; behaviour beyond those cases (auth
refusals, failure injection, scripted timelines) is the fake's own and says so below.

Invariants (as the real dashboard):
- One job per submission id: submitting an id that exists returns it and starts nothing
  (``jobs_started[id]`` stays 1); a deleted id may be submitted again.
- Statuses move PENDING -> RUNNING -> SUCCEEDED | FAILED | STOPPED; terminal ones never change
  (except by an explicit test override) and get ``end_time``.
- Unknown ids: info and logs are None, stop and delete are False; deleting an unfinished job is
  refused (``DashboardError(transient=False)``).

What a job does comes from its plan: by default ``plan_from_entrypoint`` reads a tiny shell
subset (``echo``, ``sleep``, ``exit N``, ``true``, ``false``, joined by ``;`` or ``&&``) so the
contract tests' entrypoints behave the same here and on Ray; tests can script a timeline per id
(``script_job``) or force a status (``set_job_status``). Time comes from an injectable clock
and ``time_scale`` shrinks sleeps for fast controller tests. Serve applications report the
status a test sets (``set_app_status``); with ``serve_settle_seconds`` they also turn from
DEPLOYING to RUNNING by themselves after each PUT, as on a healthy cluster.

Failure injection (fake-only): ``fail(op, times)`` makes the next calls of one operation raise
a transient ``DashboardError``, optionally after the operation took effect (a lost response),
which is what idempotent submission has to survive; ``down = True`` makes the whole dashboard
unreachable.
"""

from __future__ import annotations

import contextlib
import copy
import random
import shlex
import string
import time
from collections import Counter
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from typing import Any

from kuberay.ray.dashboard import (
    FAILED,
    PENDING,
    RUNNING,
    STOPPED,
    SUCCEEDED,
    TERMINAL_STATUSES,
    DashboardClient,
    DashboardError,
    DashboardFactory,
    JobInfo,
    JobSubmitRequest,
)

# Serve application statuses (ApplicationStatus in Ray).
APP_NOT_STARTED = "NOT_STARTED"
APP_DEPLOYING = "DEPLOYING"
APP_RUNNING = "RUNNING"
APP_DEPLOY_FAILED = "DEPLOY_FAILED"
APP_UNHEALTHY = "UNHEALTHY"
APP_DELETING = "DELETING"

_DEPLOYMENT_STATUS_FOR_APP = {
    APP_RUNNING: "HEALTHY",
    APP_DEPLOYING: "UPDATING",
    APP_DEPLOY_FAILED: "UNHEALTHY",
    APP_UNHEALTHY: "UNHEALTHY",
    APP_DELETING: "UPDATING",
}

MESSAGES = {
    PENDING: "Job has not started yet.",
    RUNNING: "Job is currently running.",
    SUCCEEDED: "Job finished successfully.",
    STOPPED: "Job was intentionally stopped.",
}


@dataclass
class JobStep:
    """One stage of a scripted job: ``status`` for ``seconds`` (the last step lasts forever),
    adding ``logs`` to the job's output when the stage begins."""

    status: str
    seconds: float = 0.0
    logs: str = ""
    message: str = ""
    error_type: str | None = None


def plan_from_entrypoint(entrypoint: str, pending_seconds: float = 0.0) -> list[JobStep]:
    """A timeline for a tiny shell subset, mirroring what Ray would run: PENDING for
    ``pending_seconds`` (Ray sets up the runtime env first), RUNNING for the total of the
    ``sleep``s, then SUCCEEDED or FAILED (``exit N``, ``false``). Unknown commands
    (``python ...``) count as succeeding instantly: the fake runs nothing."""
    logs: list[str] = []
    seconds = 0.0
    exit_code = 0
    normalised = entrypoint.replace("&&", ";").replace("\n", ";")
    for segment in normalised.split(";"):
        try:
            words = shlex.split(segment)
        except ValueError:
            words = segment.split()
        if not words:
            continue
        command, args = words[0], words[1:]
        if command == "echo":
            logs.append(" ".join(args) + "\n")
        elif command == "sleep" and args:
            with contextlib.suppress(ValueError):
                seconds += float(args[0])
        elif command == "exit":
            exit_code = int(args[0]) if args and args[0].lstrip("-").isdigit() else 0
            break
        elif command == "false":
            exit_code = 1
            break
    output = "".join(logs)
    if exit_code:
        final = JobStep(
            FAILED,
            message=f"Job entrypoint command failed with exit code {exit_code}, "
            f"last available logs (truncated to 20,000 chars):\n{output}",
            error_type="JOB_ENTRYPOINT_COMMAND_ERROR",
        )
    else:
        final = JobStep(SUCCEEDED)
    return [JobStep(PENDING, pending_seconds), JobStep(RUNNING, seconds, logs=output), final]


@dataclass
class _Failure:
    times: int
    status: int
    transient: bool
    after: bool
    message: str


@dataclass
class _Job:
    request: JobSubmitRequest
    submission_id: str
    steps: list[JobStep]
    started: float  # clock() when the current timeline began
    start_time_ms: int
    index: int = 0
    logs: str = ""
    override: JobStep | None = None
    end_time_ms: int | None = None


@dataclass
class _App:
    config: dict[str, Any]
    status: str
    message: str = ""
    deployed_at: float = field(default_factory=time.time)
    deployments: dict[str, str] = field(default_factory=dict)  # explicit statuses
    settle_at: float | None = None  # clock() when a DEPLOYING app turns RUNNING by itself


class FakeDashboard:
    """One fake Ray head's dashboard. All state is public for assertions."""

    def __init__(
        self,
        base_url: str = "http://fake-ray:8265",
        *,
        plan: Callable[[JobSubmitRequest], list[JobStep]] | None = None,
        clock: Callable[[], float] = time.monotonic,
        time_scale: float = 1.0,
        serve_initial_status: str = APP_DEPLOYING,
        serve_settle_seconds: float | None = None,
        pending_seconds: float = 0.2,
    ) -> None:
        self.base_url = base_url
        # Every real submission is PENDING for a moment (runtime env setup); by default the
        # fake is too, so callers that skip the PENDING case are caught.
        self.plan = plan or (
            lambda request: plan_from_entrypoint(request.entrypoint, pending_seconds)
        )
        self.clock = clock
        self.time_scale = time_scale
        self.serve_initial_status = serve_initial_status
        self.serve_settle_seconds = serve_settle_seconds
        self.jobs: dict[str, _Job] = {}
        self.scripts: dict[str, list[JobStep]] = {}
        self.calls: Counter[str] = Counter()
        self.submissions: Counter[str] = Counter()  # submit_job calls per id
        self.jobs_started: Counter[str] = Counter()  # jobs actually created per id
        self.down = False
        self.gcs_ok = True
        self.required_token: str | None = None
        self.serve_config: dict[str, Any] | None = None
        self.serve_updates = 0
        self.apps: dict[str, _App] = {}
        self.closed = 0
        self._failures: dict[str, list[_Failure]] = {}

    # ------------------------------------------------------------------ test controls

    def fail(
        self,
        op: str,
        times: int = 1,
        *,
        status: int = 503,
        transient: bool = True,
        after: bool = False,
        message: str = "injected failure",
    ) -> None:
        """The next ``times`` calls of ``op`` (a method name) raise ``DashboardError``; with
        ``after=True`` the call takes effect first (the answer is lost on the way back)."""
        self._failures.setdefault(op, []).append(_Failure(times, status, transient, after, message))

    def script_job(self, submission_id: str, steps: Iterable[JobStep]) -> None:
        """The timeline for ``submission_id``: used when it is submitted, or restarted now if
        it already exists."""
        plan = list(steps)
        if not plan:
            raise ValueError("a job script needs at least one step")
        job = self.jobs.get(submission_id)
        if job is None:
            self.scripts[submission_id] = plan
            return
        job.steps, job.index, job.started, job.override = plan, 0, self.clock(), None
        job.end_time_ms = None
        job.logs += plan[0].logs

    def set_job_status(
        self,
        submission_id: str,
        status: str,
        *,
        message: str = "",
        logs: str = "",
        error_type: str | None = None,
    ) -> None:
        """Forces a job's status from now on (it stays there until changed again)."""
        job = self._job(submission_id)
        self._advance(job)
        job.override = JobStep(status, message=message, error_type=error_type)
        job.logs += logs
        job.end_time_ms = _now_ms() if status in TERMINAL_STATUSES else None

    def set_app_status(
        self,
        name: str,
        status: str,
        *,
        message: str = "",
        deployments: dict[str, str] | None = None,
    ) -> None:
        """Sets a Serve application's status (and optionally its deployments' statuses)."""
        app = self.apps.get(name)
        if app is None:
            raise KeyError(f"no serve application {name!r}; PUT a config first")
        app.status, app.message, app.settle_at = status, message, None
        if deployments is not None:
            app.deployments = dict(deployments)

    def set_all_apps_status(self, status: str) -> None:
        for name in self.apps:
            self.set_app_status(name, status)

    def job_status(self, submission_id: str) -> str:
        return self._status(self._job(submission_id)).status

    # ------------------------------------------------------------------ internals

    def _job(self, submission_id: str) -> _Job:
        job = self.jobs.get(submission_id)
        if job is None:
            raise KeyError(f"no job {submission_id!r}")
        return job

    def _enter(self, op: str) -> _Failure | None:
        """Counts the call; raises an injected failure that fires before the effect, returns
        one that fires after it."""
        self.calls[op] += 1
        if self.down:
            raise DashboardError(f"{op}: connection refused (fake dashboard down)", status=0)
        queue = self._failures.get(op)
        if not queue:
            return None
        failure = queue[0]
        failure.times -= 1
        if failure.times <= 0:
            queue.pop(0)
        if failure.after:
            return failure
        raise DashboardError(
            f"{op}: {failure.message}", status=failure.status, transient=failure.transient
        )

    @staticmethod
    def _raise_after(op: str, failure: _Failure | None) -> None:
        if failure is not None:
            raise DashboardError(
                f"{op}: {failure.message} (after taking effect)",
                status=failure.status,
                transient=failure.transient,
            )

    def _advance(self, job: _Job) -> None:
        if job.override is not None:
            return
        elapsed = (self.clock() - job.started) / max(self.time_scale, 1e-9)
        # Walk the steps whose time is up; each one's logs appear when it begins.
        spent = sum(step.seconds for step in job.steps[: job.index + 1])
        while job.index < len(job.steps) - 1 and elapsed >= spent:
            job.index += 1
            job.logs += job.steps[job.index].logs
            spent += job.steps[job.index].seconds
        step = job.steps[job.index]
        if step.status in TERMINAL_STATUSES and job.end_time_ms is None:
            job.end_time_ms = _now_ms()
            job.override = step  # terminal: frozen

    def _status(self, job: _Job) -> JobStep:
        self._advance(job)
        return job.override if job.override is not None else job.steps[job.index]

    def _info(self, job: _Job) -> JobInfo:
        step = self._status(job)
        request = job.request
        return JobInfo(
            submission_id=job.submission_id,
            status=step.status,
            entrypoint=request.entrypoint,
            job_id=None,  # Ray reports no driver job id for a plain shell entrypoint
            message=step.message or MESSAGES.get(step.status, ""),
            error_type=step.error_type,
            start_time=job.start_time_ms,
            end_time=job.end_time_ms,
            metadata=dict(request.metadata or {}),
            runtime_env=copy.deepcopy(request.runtime_env or {}),
        )

    # ------------------------------------------------------------------ DashboardClient

    async def submit_job(self, request: JobSubmitRequest) -> str:
        failure = self._enter("submit_job")
        sid = request.submission_id or _generated_id()
        self.submissions[sid] += 1
        if sid not in self.jobs:
            steps = self.scripts.pop(sid, None) or self.plan(request)
            job = _Job(
                request=copy.deepcopy(request),
                submission_id=sid,
                steps=steps,
                started=self.clock(),
                start_time_ms=_now_ms(),
                logs=steps[0].logs,
            )
            self.jobs[sid] = job
            self.jobs_started[sid] += 1
        self._raise_after("submit_job", failure)
        return sid

    async def get_job_info(self, submission_id: str) -> JobInfo | None:
        failure = self._enter("get_job_info")
        job = self.jobs.get(submission_id)
        self._raise_after("get_job_info", failure)
        return None if job is None else self._info(job)

    async def list_jobs(self) -> list[JobInfo]:
        failure = self._enter("list_jobs")
        self._raise_after("list_jobs", failure)
        return [self._info(job) for job in self.jobs.values()]

    async def get_job_logs(self, submission_id: str) -> str | None:
        failure = self._enter("get_job_logs")
        job = self.jobs.get(submission_id)
        self._raise_after("get_job_logs", failure)
        if job is None:
            return None
        self._advance(job)
        return job.logs

    async def stop_job(self, submission_id: str) -> bool:
        failure = self._enter("stop_job")
        job = self.jobs.get(submission_id)
        stopped = False
        if job is not None and self._status(job).status not in TERMINAL_STATUSES:
            job.override = JobStep(STOPPED)
            job.end_time_ms = _now_ms()
            stopped = True
        self._raise_after("stop_job", failure)
        return stopped

    async def delete_job(self, submission_id: str) -> bool:
        failure = self._enter("delete_job")
        job = self.jobs.get(submission_id)
        if job is None:
            self._raise_after("delete_job", failure)
            return False
        status = self._status(job).status
        if status not in TERMINAL_STATUSES:
            raise DashboardError(
                f"Attempted to delete job '{submission_id}', but it is in a non-terminal "
                f"state {status}.",
                status=500,
                transient=False,
            )
        del self.jobs[submission_id]
        self._raise_after("delete_job", failure)
        return True

    async def get_serve_details(self) -> dict[str, Any]:
        failure = self._enter("get_serve_details")
        self._raise_after("get_serve_details", failure)
        return self._serve_details()

    async def update_serve_config(self, config: dict[str, Any]) -> None:
        failure = self._enter("update_serve_config")
        apps = _validate_serve_config(config)
        self.serve_config = copy.deepcopy(config)
        self.serve_updates += 1
        # Like Ray, every PUT redeploys each application it names (status back to the
        # initial one, DEPLOYING by default), even when its config did not change; that is
        # why RayService caches the last config it sent instead of PUTting every reconcile.
        settle_at = (
            None
            if self.serve_settle_seconds is None
            else self.clock() + self.serve_settle_seconds * self.time_scale
        )
        self.apps = {
            app_config.get("name", "default"): _App(
                copy.deepcopy(app_config), self.serve_initial_status, settle_at=settle_at
            )
            for app_config in apps
        }
        self._raise_after("update_serve_config", failure)

    async def gcs_healthy(self) -> bool:
        self.calls["gcs_healthy"] += 1
        return not self.down and self.gcs_ok

    async def close(self) -> None:
        self.closed += 1

    # ------------------------------------------------------------------ serve details

    def _serve_details(self) -> dict[str, Any]:
        config = self.serve_config or {}
        started = self.serve_config is not None
        applications: dict[str, Any] = {}
        for name, app in self.apps.items():
            if app.settle_at is not None and self.clock() >= app.settle_at:
                app.status, app.settle_at = APP_RUNNING, None
            deployments: dict[str, Any] = {}
            for deployment in app.config.get("deployments") or []:
                dname = deployment.get("name", "")
                status = app.deployments.get(
                    dname, _DEPLOYMENT_STATUS_FOR_APP.get(app.status, "UPDATING")
                )
                deployments[dname] = {
                    "name": dname,
                    "status": status,
                    "message": "",
                    "deployment_config": copy.deepcopy(deployment),
                    "replicas": [],
                }
            for dname, status in app.deployments.items():
                deployments.setdefault(
                    dname, {"name": dname, "status": status, "message": "", "replicas": []}
                )
            applications[name] = {
                "name": name,
                "route_prefix": app.config.get("route_prefix"),
                "docs_path": None,
                "status": app.status,
                "message": app.message,
                "last_deployed_time_s": app.deployed_at,
                "deployed_app_config": copy.deepcopy(app.config),
                "source": "declarative",
                "deployments": deployments,
            }
        return {
            "controller_info": (
                {"node_ip": "127.0.0.1", "actor_name": "SERVE_CONTROLLER_ACTOR"} if started else {}
            ),
            "proxy_location": config.get("proxy_location", "EveryNode") if started else None,
            "http_options": copy.deepcopy(config.get("http_options") or {}) if started else None,
            "proxies": {},
            "applications": applications,
            "target_capacity": config.get("target_capacity"),
        }


def _validate_serve_config(config: dict[str, Any]) -> list[dict[str, Any]]:
    """The checks the dashboard makes before accepting a declarative config (a subset)."""
    apps = config.get("applications")
    if not isinstance(apps, list):
        raise DashboardError(
            "PUT /api/serve/applications/: 'applications' must be a list",
            status=400,
            transient=False,
        )
    names: set[str] = set()
    for app in apps:
        if not isinstance(app, dict) or not app.get("import_path"):
            raise DashboardError(
                "PUT /api/serve/applications/: every application needs an import_path",
                status=400,
                transient=False,
            )
        name = app.get("name", "default")
        if name in names:
            raise DashboardError(
                f"PUT /api/serve/applications/: duplicate application name {name!r}",
                status=400,
                transient=False,
            )
        names.add(name)
    return apps


def _now_ms() -> int:
    return int(time.time() * 1000)


def _generated_id() -> str:
    alphabet = string.ascii_letters + string.digits
    return "raysubmit_" + "".join(random.choices(alphabet, k=16))


class FakeDashboardClient:
    """A client handle onto a ``FakeDashboard`` as a factory hands it out: carries the auth
    token (checked against ``required_token``, a fake-only check) and has its own close."""

    def __init__(self, dashboard: FakeDashboard, auth_token: str | None = None) -> None:
        self.dashboard = dashboard
        self.auth_token = auth_token
        self.closed = False

    def _check(self) -> FakeDashboard:
        required = self.dashboard.required_token
        if required is not None and self.auth_token != required:
            raise DashboardError("unauthorized (fake)", status=401, transient=False)
        return self.dashboard

    async def submit_job(self, request: JobSubmitRequest) -> str:
        return await self._check().submit_job(request)

    async def get_job_info(self, submission_id: str) -> JobInfo | None:
        return await self._check().get_job_info(submission_id)

    async def list_jobs(self) -> list[JobInfo]:
        return await self._check().list_jobs()

    async def get_job_logs(self, submission_id: str) -> str | None:
        return await self._check().get_job_logs(submission_id)

    async def stop_job(self, submission_id: str) -> bool:
        return await self._check().stop_job(submission_id)

    async def delete_job(self, submission_id: str) -> bool:
        return await self._check().delete_job(submission_id)

    async def get_serve_details(self) -> dict[str, Any]:
        return await self._check().get_serve_details()

    async def update_serve_config(self, config: dict[str, Any]) -> None:
        await self._check().update_serve_config(config)

    async def gcs_healthy(self) -> bool:
        return await self.dashboard.gcs_healthy()

    async def close(self) -> None:
        self.closed = True


class FakeDashboardRegistry:
    """A ``DashboardFactory`` over fakes: one ``FakeDashboard`` per base URL, made on first use
    with ``dashboard_options``; tests reach it with ``get(url)`` or ``matching(fragment)``."""

    def __init__(self, **dashboard_options: Any) -> None:
        self.dashboard_options = dashboard_options
        self.dashboards: dict[str, FakeDashboard] = {}
        self.tokens: dict[str, list[str | None]] = {}
        self.clients_made = 0

    def get(self, base_url: str) -> FakeDashboard:
        key = base_url.rstrip("/")
        dashboard = self.dashboards.get(key)
        if dashboard is None:
            dashboard = FakeDashboard(key, **self.dashboard_options)
            self.dashboards[key] = dashboard
        return dashboard

    def matching(self, fragment: str) -> FakeDashboard:
        """The one dashboard whose URL contains ``fragment`` (e.g. a cluster name)."""
        found = [d for url, d in self.dashboards.items() if fragment in url]
        if len(found) != 1:
            raise KeyError(f"{len(found)} fake dashboards match {fragment!r}")
        return found[0]

    def __call__(self, base_url: str, *, auth_token: str | None = None) -> FakeDashboardClient:
        dashboard = self.get(base_url)
        self.tokens.setdefault(dashboard.base_url, []).append(auth_token)
        self.clients_made += 1
        return FakeDashboardClient(dashboard, auth_token)

    def total_jobs_started(self, submission_id: str) -> int:
        """Jobs created under this id across every cluster (a retry on a new cluster counts)."""
        return sum(d.jobs_started[submission_id] for d in self.dashboards.values())


def _typecheck(
    fake: FakeDashboard, client: FakeDashboardClient, registry: FakeDashboardRegistry
) -> tuple[list[DashboardClient], DashboardFactory]:
    return [fake, client], registry  # mypy proves these satisfy the Protocols
