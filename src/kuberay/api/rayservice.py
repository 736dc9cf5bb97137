"""RayService (ray.io/v1): spec and status models.

``upgradeStrategy.type`` has no CRD enum upstream (the controller reports invalid values), so
it is a plain string here too.
"""

from __future__ import annotations

from typing import Annotated, Any

from pydantic import Field

from kuberay.api.raycluster import (
    Conditions,
    ManagedBy,
    RayClusterSpec,
    RayClusterStatus,
    ServiceObject,
)
from kuberay.api.schema import ApiModel, Default, Int32, Int64, Minimum, Time


class ClusterUpgradeOptions(ApiModel):
    max_surge_percent: Annotated[Int32, Default(100)] | None = 100
    step_size_percent: Int32
    interval_seconds: Int32
    gateway_class_name: str


class RayServiceUpgradeStrategy(ApiModel):
    type: str | None = None
    cluster_upgrade_options: ClusterUpgradeOptions | None = None


class RayServiceSpec(ApiModel):
    ray_cluster_deletion_delay_seconds: Annotated[Int32, Minimum(0)] | None = None
    service_unhealthy_second_threshold: Int32 | None = None
    deployment_unhealthy_second_threshold: Int32 | None = None
    serve_service: ServiceObject | None = None
    upgrade_strategy: RayServiceUpgradeStrategy | None = None
    managed_by: ManagedBy | None = None
    serve_config_v2: str | None = Field(default=None, alias="serveConfigV2")
    ray_cluster_config: RayClusterSpec
    exclude_head_pod_from_serve_svc: bool | None = None
    suspend: bool | None = None


class ServeDeploymentStatus(ApiModel):
    status: str | None = None
    message: str | None = None


class AppStatus(ApiModel):
    serve_deployment_statuses: dict[str, ServeDeploymentStatus] | None = None
    status: str | None = None
    message: str | None = None


class RayServiceStatus(ApiModel):
    application_statuses: dict[str, AppStatus] | None = None
    target_capacity: Int32 | None = None
    traffic_routed_percent: Int32 | None = None
    last_traffic_migrated_time: Time | None = None
    ray_cluster_name: str | None = None
    ray_cluster_status: RayClusterStatus | None = None


class RayServiceStatuses(ApiModel):
    conditions: Conditions | None = None
    last_update_time: Time | None = None
    service_status: str | None = None
    active_service_status: RayServiceStatus | None = None
    pending_service_status: RayServiceStatus | None = None
    num_serve_endpoints: Int32 | None = None
    observed_generation: Int64 | None = None


class RayService(ApiModel):
    api_version: str | None = None
    kind: str | None = None
    metadata: dict[str, Any] | None = None
    spec: RayServiceSpec | None = None
    status: RayServiceStatuses | None = None
