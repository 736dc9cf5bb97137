"""RayCronJob (ray.io/v1, behind the RayCronJob feature gate): spec and status models."""

from __future__ import annotations

from typing import Annotated, Any

from kuberay.api.rayjob import RayJobSpec
from kuberay.api.schema import ApiModel, MinLength, Time


class RayCronJobSpec(ApiModel):
    job_template: RayJobSpec
    schedule: str
    time_zone: Annotated[str, MinLength(1)] | None = None
    suspend: bool | None = None


class RayCronJobStatus(ApiModel):
    last_schedule_time: Time | None = None


class RayCronJob(ApiModel):
    api_version: str | None = None
    kind: str | None = None
    metadata: dict[str, Any] | None = None
    spec: RayCronJobSpec | None = None
    status: RayCronJobStatus | None = None
