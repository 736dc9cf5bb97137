"""RayJob (ray.io/v1): spec and status models.

``submissionMode`` deliberately has no enum (upstream has none): an unknown mode is stored
and reported by the controller. The deletionStrategy CEL rules live on the models so the
apiserver rejects the same combinations upstream's CRD rejects.
"""

from __future__ import annotations

from typing import Annotated, Any

from pydantic import Field

from kuberay.api.raycluster import (
    Conditions,
    ManagedBy,
    PodTemplate,
    RayClusterSpec,
    RayClusterStatus,
)
from kuberay.api.schema import (
    ApiModel,
    Default,
    Enum,
    Int32,
    Int64,
    ListType,
    Minimum,
    MinItems,
    Rule,
    StrMap,
    Time,
)

DeletionPolicyType = Annotated[
    str, Enum(("DeleteCluster", "DeleteWorkers", "DeleteSelf", "DeleteNone"))
]


class DeletionPolicy(ApiModel):
    policy: DeletionPolicyType | None = None


class DeletionCondition(ApiModel):
    crd_rules = (
        Rule(
            "!(has(self.jobStatus) && has(self.jobDeploymentStatus))",
            "JobStatus and JobDeploymentStatus cannot be used together within the same "
            "deletion condition.",
        ),
        Rule(
            "has(self.jobStatus) || has(self.jobDeploymentStatus)",
            "the deletion condition requires either the JobStatus or the JobDeploymentStatus "
            "field.",
        ),
    )

    job_status: Annotated[str, Enum(("SUCCEEDED", "FAILED"))] | None = None
    job_deployment_status: Annotated[str, Enum(("Failed",))] | None = None
    ttl_seconds: Annotated[Int32, Default(0), Minimum(0)] | None = Field(
        default=0, alias="ttlSeconds"
    )


class DeletionRule(ApiModel):
    policy: DeletionPolicyType
    condition: DeletionCondition


class DeletionStrategy(ApiModel):
    crd_rules = (
        Rule(
            "!((has(self.onSuccess) || has(self.onFailure)) && has(self.deletionRules))",
            "legacy policies (onSuccess/onFailure) and deletionRules cannot be used together "
            "within the same deletionStrategy",
        ),
        Rule(
            "((has(self.onSuccess) && has(self.onFailure)) || has(self.deletionRules))",
            "deletionStrategy requires either BOTH onSuccess and onFailure, OR the "
            "deletionRules field (cannot be empty)",
        ),
    )

    on_success: DeletionPolicy | None = None
    on_failure: DeletionPolicy | None = None
    deletion_rules: Annotated[list[DeletionRule], MinItems(1), ListType("atomic")] | None = None


class SubmitterConfig(ApiModel):
    backoff_limit: Int32 | None = None


class RayJobSpec(ApiModel):
    active_deadline_seconds: Int32 | None = None
    backoff_limit: Annotated[Int32, Default(0)] | None = 0
    ray_cluster_spec: RayClusterSpec | None = None
    submitter_pod_template: PodTemplate | None = None
    metadata: StrMap | None = None
    cluster_selector: StrMap | None = None
    submitter_config: SubmitterConfig | None = None
    managed_by: ManagedBy | None = None
    deletion_strategy: DeletionStrategy | None = None
    entrypoint: str | None = None
    runtime_env_yaml: str | None = Field(default=None, alias="runtimeEnvYAML")
    job_id: str | None = None
    submission_mode: Annotated[str, Default("K8sJobMode")] | None = "K8sJobMode"
    entrypoint_resources: str | None = None
    entrypoint_num_cpus: float | None = None
    entrypoint_num_gpus: float | None = None
    ttl_seconds_after_finished: Annotated[Int32, Default(0)] | None = 0
    pre_running_deadline_seconds: Annotated[Int32, Minimum(1)] | None = None
    shutdown_after_job_finishes: bool | None = None
    suspend: bool | None = None


class RayJobInfo(ApiModel):
    start_time: Time | None = None
    end_time: Time | None = None


class RayJobStatus(ApiModel):
    ray_job_info: RayJobInfo | None = None
    job_id: str | None = None
    ray_cluster_name: str | None = None
    dashboard_url: str | None = Field(default=None, alias="dashboardURL")
    job_status: str | None = None
    job_deployment_status: str | None = None
    reason: str | None = None
    message: str | None = None
    start_time: Time | None = None
    end_time: Time | None = None
    succeeded: Annotated[Int32, Default(0)] | None = 0
    failed: Annotated[Int32, Default(0)] | None = 0
    ray_cluster_status: RayClusterStatus | None = None
    job_status_check_failure_start_time: Time | None = None
    observed_generation: Int64 | None = None
    # Beyond upstream (additive, asked for in kuberay#5152): Kubernetes-style conditions, e.g.
    # the RayCluster's stall reason while the job waits in Initializing.
    conditions: Conditions | None = None


class RayJob(ApiModel):
    api_version: str | None = None
    kind: str | None = None
    metadata: dict[str, Any] | None = None
    spec: RayJobSpec | None = None
    status: RayJobStatus | None = None
