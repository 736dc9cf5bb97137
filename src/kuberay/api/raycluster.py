"""RayCluster (ray.io/v1): spec and status models.

Defaults follow the CRD (the apiserver applies them on admission); behavioural defaults the
controller applies later (autoscaler resources, ingress path, ...) are not model defaults, so
that a stored object and its model round-trip exactly. Pod templates, Services and the other
core objects stay plain dicts: the operator copies them into child objects and never needs
them typed.
"""

from __future__ import annotations

from typing import Annotated, Any

from pydantic import Field

from kuberay.api.schema import (
    ApiModel,
    Condition,
    Core,
    Default,
    Enum,
    Int32,
    Int64,
    ListType,
    Nullable,
    Quantity,
    Required,
    Rule,
    StrMap,
    Time,
)

MANAGED_BY_RULES = (
    Rule("self == oldSelf", "the managedBy field is immutable"),
    Rule(
        "self in ['ray.io/kuberay-operator', 'kueue.x-k8s.io/multikueue']",
        "the managedBy field value must be either 'ray.io/kuberay-operator' or "
        "'kueue.x-k8s.io/multikueue'",
    ),
)
ManagedBy = Annotated[str, *MANAGED_BY_RULES]

PodTemplate = Annotated[dict[str, Any], Core("io.k8s.api.core.v1.PodTemplateSpec")]
ServiceObject = Annotated[dict[str, Any], Core("io.k8s.api.core.v1.Service")]
EnvVar = Annotated[dict[str, Any], Core("io.k8s.api.core.v1.EnvVar")]
EnvFromSource = Annotated[dict[str, Any], Core("io.k8s.api.core.v1.EnvFromSource")]
EnvVarSource = Annotated[dict[str, Any], Core("io.k8s.api.core.v1.EnvVarSource")]
VolumeMount = Annotated[dict[str, Any], Core("io.k8s.api.core.v1.VolumeMount")]
ResourceRequirements = Annotated[dict[str, Any], Core("io.k8s.api.core.v1.ResourceRequirements")]
SecurityContext = Annotated[dict[str, Any], Core("io.k8s.api.core.v1.SecurityContext")]
IngressTLS = Annotated[dict[str, Any], Core("io.k8s.api.networking.v1.IngressTLS")]
IngressRule = Annotated[dict[str, Any], Core("io.k8s.api.networking.v1.NetworkPolicyIngressRule")]
EgressRule = Annotated[dict[str, Any], Core("io.k8s.api.networking.v1.NetworkPolicyEgressRule")]


class RayClusterUpgradeStrategy(ApiModel):
    type: Annotated[str, Enum(("Recreate", "None"))] | None = None


class AuthOptions(ApiModel):
    enable_k8s_token_auth: bool | None = Field(default=None, alias="enableK8sTokenAuth")
    secret_name: str | None = None
    mode: Annotated[str, Enum(("disabled", "token"))] | None = None


class AutoscalerOptions(ApiModel):
    resources: ResourceRequirements | None = None
    image: str | None = None
    image_pull_policy: str | None = None
    security_context: SecurityContext | None = None
    idle_timeout_seconds: Int32 | None = None
    upscaling_mode: Annotated[str, Enum(("Default", "Aggressive", "Conservative"))] | None = None
    version: Annotated[str, Enum(("v1", "v2"))] | None = None
    env: list[EnvVar] | None = None
    env_from: list[EnvFromSource] | None = None
    volume_mounts: list[VolumeMount] | None = None
    command: list[str] | None = None
    args: list[str] | None = None


class RedisCredential(ApiModel):
    value_from: EnvVarSource | None = None
    value: str | None = None


class GcsEmbeddedStorage(ApiModel):
    claim_name: str | None = None
    size: Quantity | None = None
    storage_class_name: str | None = None
    access_modes: list[str] | None = None
    sub_path: str | None = None
    deletion_policy: Annotated[str, Enum(("DeleteWithCluster", "Retain"))] | None = None


class GcsFaultToleranceOptions(ApiModel):
    backend: (
        Annotated[
            str,
            Enum(("redis", "rocksdb")),
            Rule("self == oldSelf", "gcsFaultToleranceOptions.backend is immutable"),
        ]
        | None
    ) = None
    redis_username: RedisCredential | None = None
    redis_password: RedisCredential | None = None
    external_storage_namespace: str | None = None
    redis_address: str | None = None
    storage: GcsEmbeddedStorage | None = None


class CollectorOptions(ApiModel):
    image: str | None = None
    image_pull_policy: str | None = None
    resources: ResourceRequirements | None = None
    env: list[EnvVar] | None = None


class HistoryServerOptions(ApiModel):
    collector_options: CollectorOptions | None = None


class NetworkPolicyRules(ApiModel):
    ingress_rules: list[IngressRule] | None = None
    egress_rules: list[EgressRule] | None = None


class WorkerGroupNetworkPolicy(ApiModel):
    group_name: str
    ingress_rules: list[IngressRule] | None = None
    egress_rules: list[EgressRule] | None = None


class NetworkPolicyConfig(ApiModel):
    mode: (
        Annotated[str, Enum(("DenyAll", "DenyAllIngress", "DenyAllEgress")), Default("DenyAll")]
        | None
    ) = "DenyAll"
    head: NetworkPolicyRules | None = None
    worker: NetworkPolicyRules | None = None
    worker_groups: (
        Annotated[list[WorkerGroupNetworkPolicy], ListType("map", ("groupName",))] | None
    ) = None


class TLSOptions(ApiModel):
    enabled: bool | None = None


class IngressOptions(ApiModel):
    host: str | None = None
    path: str | None = None
    path_type: Annotated[str, Enum(("Exact", "Prefix", "ImplementationSpecific"))] | None = None
    tls: list[IngressTLS] | None = None


class HeadGroupSpec(ApiModel):
    template: PodTemplate
    head_service: ServiceObject | None = None
    enable_ingress: bool | None = None
    ingress_options: IngressOptions | None = None
    resources: StrMap | None = None
    labels: StrMap | None = None
    ray_start_params: StrMap | None = None
    service_type: str | None = None


class ScaleStrategy(ApiModel):
    workers_to_delete: list[str] | None = None


class WorkerGroupSpec(ApiModel):
    suspend: bool | None = None
    group_name: str
    replicas: Annotated[Int32, Default(0)] | None = 0
    min_replicas: Annotated[Int32, Default(0), Required()] | None = 0
    max_replicas: Annotated[Int32, Default(2147483647), Required()] | None = 2147483647
    idle_timeout_seconds: Int32 | None = None
    priority: Annotated[Int32, Default(0)] | None = 0
    resources: StrMap | None = None
    labels: StrMap | None = None
    ray_start_params: StrMap | None = None
    template: PodTemplate
    scale_strategy: ScaleStrategy | None = None
    num_of_hosts: Annotated[Int32, Default(1)] | None = 1


class RayClusterSpec(ApiModel):
    upgrade_strategy: RayClusterUpgradeStrategy | None = None
    auth_options: AuthOptions | None = None
    suspend: bool | None = None
    managed_by: ManagedBy | None = None
    autoscaler_options: AutoscalerOptions | None = None
    head_service_annotations: StrMap | None = None
    enable_in_tree_autoscaling: bool | None = None
    gcs_fault_tolerance_options: GcsFaultToleranceOptions | None = None
    history_server_options: HistoryServerOptions | None = None
    network_policy: NetworkPolicyConfig | None = None
    tls_options: TLSOptions | None = None
    head_group_spec: HeadGroupSpec
    ray_version: str | None = None
    worker_group_specs: list[WorkerGroupSpec] | None = None


class HeadInfo(ApiModel):
    pod_ip: str | None = Field(default=None, alias="podIP")
    service_ip: str | None = Field(default=None, alias="serviceIP")
    pod_name: str | None = None
    service_name: str | None = None


Conditions = Annotated[list[Condition], ListType("map", ("type",))]


class RayClusterStatus(ApiModel):
    state: str | None = None
    desired_cpu: Quantity | None = Field(default=None, alias="desiredCPU")
    desired_memory: Quantity | None = None
    desired_gpu: Quantity | None = Field(default=None, alias="desiredGPU")
    desired_tpu: Quantity | None = Field(default=None, alias="desiredTPU")
    last_update_time: Annotated[Time, Nullable()] | None = None
    state_transition_times: dict[str, Time] | None = None
    endpoints: StrMap | None = None
    head: HeadInfo | None = None
    reason: str | None = None
    conditions: Conditions | None = None
    ready_worker_replicas: Int32 | None = None
    available_worker_replicas: Int32 | None = None
    desired_worker_replicas: Int32 | None = None
    min_worker_replicas: Int32 | None = None
    max_worker_replicas: Int32 | None = None
    observed_generation: Int64 | None = None


class RayCluster(ApiModel):
    api_version: str | None = None
    kind: str | None = None
    metadata: dict[str, Any] | None = None
    spec: RayClusterSpec | None = None
    status: RayClusterStatus | None = None
