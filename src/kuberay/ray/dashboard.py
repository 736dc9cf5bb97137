"""The Ray dashboard API the operator uses, as a Protocol with plain data types.

Controllers depend on this Protocol only, so they run against the real HTTP client in
production and the in-process fake in tests; the fake is trusted only as far as the contract
tests (run against both it and a real ``ray start --head``) cover it.

Invariants: a job submission is idempotent by submission id (submitting an id that already
exists returns that job and never starts a second one); "not found" is a value (None), not an
exception; every other failure is a ``DashboardError`` saying whether a retry may help.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Protocol

# Ray job statuses (JobStatus in Ray); terminal ones never change again.
PENDING = "PENDING"
RUNNING = "RUNNING"
STOPPED = "STOPPED"
SUCCEEDED = "SUCCEEDED"
FAILED = "FAILED"
TERMINAL_STATUSES = frozenset({STOPPED, SUCCEEDED, FAILED})


class DashboardError(Exception):
    """A dashboard call failed. ``transient`` says whether retrying later may succeed."""

    def __init__(self, message: str, *, status: int = 0, transient: bool = True) -> None:
        super().__init__(message)
        self.status = status
        self.transient = transient


@dataclass
class JobSubmitRequest:
    entrypoint: str
    submission_id: str
    runtime_env: dict[str, Any] | None = None
    metadata: dict[str, str] | None = None
    entrypoint_num_cpus: float | None = None
    entrypoint_num_gpus: float | None = None
    entrypoint_resources: dict[str, float] | None = None


@dataclass
class JobInfo:
    submission_id: str
    status: str
    entrypoint: str = ""
    job_id: str | None = None
    message: str = ""
    error_type: str | None = None
    start_time: int | None = None  # milliseconds since the epoch, as Ray reports them
    end_time: int | None = None
    metadata: dict[str, str] = field(default_factory=dict)
    runtime_env: dict[str, Any] = field(default_factory=dict)


class DashboardClient(Protocol):
    async def submit_job(self, request: JobSubmitRequest) -> str:
        """Submits; returns the submission id. Idempotent by ``submission_id``."""
        ...

    async def get_job_info(self, submission_id: str) -> JobInfo | None: ...

    async def list_jobs(self) -> list[JobInfo]: ...

    async def get_job_logs(self, submission_id: str) -> str | None: ...

    async def stop_job(self, submission_id: str) -> bool:
        """True when the job was running and is now stopping; False when already finished."""
        ...

    async def delete_job(self, submission_id: str) -> bool: ...

    async def get_serve_details(self) -> dict[str, Any]:
        """``GET /api/serve/applications/?api_type=declarative`` as a dict."""
        ...

    async def update_serve_config(self, config: dict[str, Any]) -> None:
        """``PUT /api/serve/applications/`` with the Serve config (serveConfigV2 as JSON)."""
        ...

    async def close(self) -> None: ...


class DashboardFactory(Protocol):
    """Makes a client for one cluster's dashboard (``http://host:port``, optional auth token)."""

    def __call__(self, base_url: str, *, auth_token: str | None = None) -> DashboardClient: ...
