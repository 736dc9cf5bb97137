"""Controller-side validation of ray.io objects, with KubeRay v1.7's messages.

Every function is pure: it takes the object (or model) and the feature gates, and returns the
first problem as upstream words it, or ``None``. Callers decide what a failure means (RayCluster:
Warning event only; RayJob: ``ValidationFailed`` status; RayService: Ready=False/ValidationFailed;
RayCronJob: event only), so the same code also backs the optional admission webhook.

Invariants:
- Checks run in upstream's order, so the *first* message matches what KubeRay reports.
- Nothing here raises on bad input: the ``validate_<kind>`` entry points accept arbitrary
  JSON-like data and turn type errors into a message (pod templates are plain dicts, so every
  lookup into them tolerates wrong types).
"""

from __future__ import annotations

import re
import zoneinfo
from collections.abc import Mapping
from typing import Any

import pydantic
import yaml

from kuberay.api import constants as c
from kuberay.api import features
from kuberay.api.features import DEFAULT_GATES, FeatureGates
from kuberay.api.k8svalidation import (
    VersionError,
    dns1035_label,
    dns1123_label,
    go_list,
    go_quote,
    label_value,
    parse_generic_version,
    parse_go_duration,
    qualified_name,
    version_less,
)
from kuberay.api.raycluster import (
    CollectorOptions,
    RayCluster,
    RayClusterSpec,
    WorkerGroupSpec,
)
from kuberay.api.raycronjob import RayCronJob
from kuberay.api.rayjob import RayJob, RayJobSpec
from kuberay.api.rayservice import RayService

RAYJOB_PREFIX = "The RayJob spec is invalid: "
RAYSERVICE_PREFIX = "The RayService spec is invalid: "
RAYJOB_META_PREFIX = "The RayJob metadata is invalid: "
RAYSERVICE_META_PREFIX = "The RayService metadata is invalid: "

TLS_MANAGED = "the operator manages TLS configuration automatically"

# --------------------------------------------------------------------------- dict helpers


def _dict(value: Any) -> dict[str, Any]:
    return value if isinstance(value, dict) else {}


def _list(value: Any) -> list[Any]:
    return value if isinstance(value, list) else []


def pod_spec(template: Any) -> dict[str, Any]:
    return _dict(_dict(template).get("spec"))


def containers(template: Any) -> list[dict[str, Any]]:
    return [_dict(x) for x in _list(pod_spec(template).get("containers"))]


def ray_container(template: Any) -> dict[str, Any]:
    found = containers(template)
    return found[c.RAY_CONTAINER_INDEX] if found else {}


def env_list(container: Mapping[str, Any]) -> list[dict[str, Any]]:
    return [_dict(e) for e in _list(container.get("env"))]


def env_var(name: str, env: list[dict[str, Any]]) -> dict[str, Any] | None:
    for item in env:
        if item.get("name") == name:
            return item
    return None


def restart_policy(template: Any) -> str:
    value = pod_spec(template).get("restartPolicy")
    return value if isinstance(value, str) else ""


# --------------------------------------------------------------------------- predicates


def is_autoscaling_enabled(spec: RayClusterSpec | None) -> bool:
    """``enableInTreeAutoscaling: true`` on a typed spec. upstream: IsAutoscalingEnabled."""
    return spec is not None and spec.enable_in_tree_autoscaling is True


def is_autoscaling_v2_enabled(spec: RayClusterSpec) -> bool:
    """Explicit ``autoscalerOptions.version: v2`` (what the restartPolicy rule keys on).
    upstream: IsAutoscalingV2Enabled."""
    options = spec.autoscaler_options
    return options is not None and options.version == c.AUTOSCALER_V2


def autoscaler_v2_requested(spec: RayClusterSpec) -> bool:
    """v2 by version or by the legacy head env var (what group-level v2 fields accept)."""
    var = env_var(
        c.ENV_RAY_ENABLE_AUTOSCALER_V2, env_list(ray_container(spec.head_group_spec.template))
    )
    return is_autoscaling_v2_enabled(spec) or (
        var is not None and var.get("value") in ("1", "true")
    )


def is_gcs_ft_enabled(spec: RayClusterSpec, annotations: Mapping[str, str]) -> bool:
    """GCS FT by options, else by the legacy annotation. upstream: IsGCSFaultToleranceEnabled."""
    ft = annotations.get(c.ANNOTATION_FT_ENABLED, "")
    return spec.gcs_fault_tolerance_options is not None or ft.lower() == "true"


def is_auth_enabled(spec: RayClusterSpec) -> bool:
    """``authOptions.mode: token`` on a typed spec. upstream: IsAuthEnabled."""
    return spec.auth_options is not None and spec.auth_options.mode == c.AUTH_MODE_TOKEN


def is_k8s_token_auth(spec: RayClusterSpec | None) -> bool:
    """``authOptions.enableK8sTokenAuth: true`` on a typed spec. upstream: IsK8sAuthEnabled."""
    return (
        spec is not None
        and spec.auth_options is not None
        and spec.auth_options.enable_k8s_token_auth is True
    )


def is_incremental_upgrade(service: RayService, gates: FeatureGates) -> bool:
    """The NewClusterWithIncrementalUpgrade strategy is chosen.
    upstream: IsIncrementalUpgradeEnabled."""
    strategy = service.spec.upgrade_strategy if service.spec else None
    return (
        gates.enabled(features.RAY_SERVICE_INCREMENTAL_UPGRADE)
        and strategy is not None
        and strategy.type == c.RAYSERVICE_UPGRADE_INCREMENTAL
    )


# --------------------------------------------------------------------------- RayCluster


def validate_raycluster_metadata(metadata: Mapping[str, Any]) -> str | None:
    """Name and label rules of a RayCluster's metadata. upstream: ValidateRayClusterMetadata."""
    name = str(metadata.get("name") or "")
    if len(name) > c.MAX_RAYCLUSTER_NAME_LENGTH:
        return f"RayCluster name should be no more than {c.MAX_RAYCLUSTER_NAME_LENGTH} characters"
    errs = dns1035_label(name)
    if errs:
        return f"RayCluster name should be a valid DNS1035 label: {go_list(errs)}"
    return None


def validate_raycluster_status(cluster: RayCluster) -> str | None:
    """The status conditions must not contradict each other. upstream: ValidateRayClusterStatus."""
    conditions = (cluster.status.conditions if cluster.status else None) or []
    true = {cond.get("type") for cond in conditions if cond.get("status") == "True"}
    if c.COND_RAYCLUSTER_SUSPENDING in true and c.COND_RAYCLUSTER_SUSPENDED in true:
        return (
            "invalid RayCluster State: rayv1.RayClusterSuspending and rayv1.RayClusterSuspended "
            "conditions should not be both true"
        )
    return None


def validate_raycluster_upgrade_options(cluster: RayCluster) -> str | None:
    """Rules for ``upgradeStrategy`` of a RayCluster. upstream: ValidateRayClusterUpgradeOptions."""
    spec = cluster.spec
    if spec is None or spec.upgrade_strategy is None or spec.upgrade_strategy.type is None:
        return None
    kind = spec.upgrade_strategy.type
    if kind not in (c.UPGRADE_RECREATE, c.UPGRADE_NONE):
        return (
            f"The RayCluster spec is invalid: Spec.UpgradeStrategy.Type value {kind} is invalid, "
            "valid options are Recreate or None"
        )
    labels = _dict((cluster.metadata or {}).get("labels"))
    origin = labels.get(c.LABEL_ORIGINATED_FROM_CRD)
    if origin in (c.KIND_RAYJOB, c.KIND_RAYSERVICE):
        return f"upgradeStrategy cannot be set when RayCluster is created by {origin}"
    return None


def _group_resources(
    group: str, params: Mapping[str, str], resources: Mapping[str, str]
) -> str | None:
    """Group ``resources`` exclude the matching start params.
    upstream: validateRayGroupResources."""
    has_params = any(params.get(k) for k in ("num-cpus", "num-gpus", "memory", "resources"))
    if has_params and resources:
        return (
            f"resource fields should not be set in both rayStartParams and Resources for {group} "
            "group; please use only one"
        )
    return None


def _group_labels(group: str, params: Mapping[str, str], labels: Mapping[str, str]) -> str | None:
    """Group ``labels`` exclude the ``labels`` start param. upstream: validateRayGroupLabels."""
    if "labels" in params:
        return (
            f"rayStartParams['labels'] is not supported for {group} group; please use the "
            "top-level Labels field instead"
        )
    errs: list[str] = []
    for key, value in sorted(labels.items()):
        errs.extend(
            f"invalid label key for {group} group: '{key}', error: {e}" for e in qualified_name(key)
        )
        errs.extend(
            f"invalid label value for key '{key}' in {group} group: '{value}', error: {e}"
            for e in label_value(value)
        )
    return "; ".join(errs) if errs else None


def _ray_version_check(feature: str, ray_version: str | None, minimum: str) -> str | None:
    """Shared wording of the 'needs Ray >= X' rules (auth, priority)."""
    if not ray_version:
        return (
            f"{feature} but RayVersion was not specified. Ray version {minimum} or later is "
            "required"
        )
    try:
        parsed = parse_generic_version(ray_version)
    except VersionError as err:
        return f"{feature} but RayVersion format is invalid: {ray_version}, {err}"
    if version_less(parsed, parse_generic_version(minimum)):
        return f"{feature} but minimum Ray version is {minimum}, got {ray_version}"
    return None


def _worker_group(
    spec: RayClusterSpec, group: WorkerGroupSpec, autoscaling: bool, v2: bool
) -> str | None:
    name = group.group_name
    if not containers(group.template):
        return "workerGroupSpec should have at least one container"
    if not autoscaling and (group.min_replicas is None or group.max_replicas is None):
        return (
            f"worker group {name} must set both minReplicas and maxReplicas when autoscaling is "
            "disabled"
        )
    if group.min_replicas is not None and group.min_replicas < 0:
        return f"worker group {name} has negative minReplicas {group.min_replicas}"
    if group.max_replicas is not None and group.max_replicas < 0:
        return f"worker group {name} has negative maxReplicas {group.max_replicas}"
    if (
        group.min_replicas is not None
        and group.max_replicas is not None
        and group.min_replicas > group.max_replicas
    ):
        return (
            f"worker group {name} has minReplicas {group.min_replicas} greater than maxReplicas "
            f"{group.max_replicas}"
        )
    params = group.ray_start_params or {}
    err = _group_resources(name, params, group.resources or {})
    err = err or _group_labels(name, params, group.labels or {})
    if err:
        return err
    if group.idle_timeout_seconds is not None:
        if group.idle_timeout_seconds < 0:
            return (
                f"worker group {name}: idleTimeoutSeconds must be non-negative, got "
                f"{group.idle_timeout_seconds}"
            )
        if not v2:
            return (
                f"worker group {name}: idleTimeoutSeconds is set, but autoscaler v2 is not "
                "enabled. Please set .spec.autoscalerOptions.version to 'v2' (or set "
                "RAY_enable_autoscaler_v2 environment variable to 'true' in the head pod if "
                "using KubeRay < 1.4.0)"
            )
    if group.priority:
        err = _ray_version_check(
            f"worker group {name}: priority is set,", spec.ray_version, "2.56.0"
        )
        if err:
            return err
        if not v2:
            return (
                f"worker group {name}: priority is set to {group.priority}, but autoscaler v2 is "
                "not enabled. Priority is only supported with autoscaler v2 enabled"
            )
    return None


def _gcs_ft(
    spec: RayClusterSpec, annotations: Mapping[str, str], gates: FeatureGates
) -> str | None:
    options = spec.gcs_fault_tolerance_options
    head = spec.head_group_spec
    head_env = env_list(ray_container(head.template))
    params = head.ray_start_params or {}
    if annotations.get(c.ANNOTATION_FT_ENABLED) and options is not None:
        return (
            f"{c.ANNOTATION_FT_ENABLED} annotation and GcsFaultToleranceOptions are both set. "
            "Please use only GcsFaultToleranceOptions to configure GCS fault tolerance"
        )
    if not is_gcs_ft_enabled(spec, annotations) and env_var(c.ENV_RAY_REDIS_ADDRESS, head_env):
        return (
            f"{c.ENV_RAY_REDIS_ADDRESS} is set which implicitly enables GCS fault tolerance, but "
            "GcsFaultToleranceOptions is not set. Please set GcsFaultToleranceOptions to enable "
            "GCS fault tolerance"
        )
    if options is not None:
        enabled = "GcsFaultToleranceOptions is enabled"
        if params.get("redis-password"):
            return (
                f"cannot set `redis-password` in rayStartParams when {enabled} - use "
                "GcsFaultToleranceOptions.RedisPassword instead"
            )
        if env_var(c.ENV_REDIS_PASSWORD, head_env):
            return (
                f"cannot set `REDIS_PASSWORD` env var in head Pod when {enabled} - use "
                "GcsFaultToleranceOptions.RedisPassword instead"
            )
        if env_var(c.ENV_RAY_REDIS_ADDRESS, head_env):
            return (
                f"cannot set `RAY_REDIS_ADDRESS` env var in head Pod when {enabled} - use "
                "GcsFaultToleranceOptions.RedisAddress instead"
            )
        if annotations.get(c.ANNOTATION_EXTERNAL_STORAGE_NAMESPACE):
            return (
                f"cannot set `ray.io/external-storage-namespace` annotation when {enabled} - use "
                "GcsFaultToleranceOptions.ExternalStorageNamespace instead"
            )
        if (options.backend or c.GCS_BACKEND_REDIS) == c.GCS_BACKEND_ROCKSDB:
            err = _rocksdb(spec, gates)
            if err:
                return err
        elif options.storage is not None:
            return (
                "cannot set GcsFaultToleranceOptions.Storage when backend is 'redis' - it only "
                "applies to the 'rocksdb' backend"
            )
    if params.get("redis-username") or env_var(c.ENV_REDIS_USERNAME, head_env):
        return (
            "cannot set redis username in rayStartParams or environment variables - use "
            "GcsFaultToleranceOptions.RedisUsername instead"
        )
    return None


def _rocksdb(spec: RayClusterSpec, gates: FeatureGates) -> str | None:
    options = spec.gcs_fault_tolerance_options
    assert options is not None
    if not gates.enabled(features.GCS_FAULT_TOLERANCE_EMBEDDED_STORAGE):
        return (
            "the embedded RocksDB GCS fault tolerance backend (GcsFaultToleranceOptions.Backend: "
            "'rocksdb') requires the GCSFaultToleranceEmbeddedStorage feature gate to be enabled"
        )
    for field, is_set in (
        ("RedisAddress", bool(options.redis_address)),
        ("RedisUsername", options.redis_username is not None),
        ("RedisPassword", options.redis_password is not None),
        ("ExternalStorageNamespace", bool(options.external_storage_namespace)),
    ):
        if is_set:
            return f"cannot set GcsFaultToleranceOptions.{field} when backend is 'rocksdb'"
    storage = options.storage
    if (
        storage is not None
        and storage.claim_name
        and (
            storage.size is not None
            or storage.storage_class_name is not None
            or storage.access_modes
        )
    ):
        return (
            "GcsFaultToleranceOptions.Storage.ClaimName is mutually exclusive with size, "
            "storageClassName, and accessModes"
        )
    template = spec.head_group_spec.template
    head = ray_container(template)
    env = env_list(head)
    if env_var(c.ENV_RAY_GCS_STORAGE, env) or env_var(c.ENV_RAY_GCS_STORAGE_PATH, env):
        return (
            "cannot set `RAY_gcs_storage` or `RAY_gcs_storage_path` env var in head Pod when the "
            "embedded GCS FT backend is used - these are managed by KubeRay"
        )
    for mount in _list(head.get("volumeMounts")):
        mount = _dict(mount)
        if (
            mount.get("name") == c.GCS_STORAGE_VOLUME
            or mount.get("mountPath") == c.GCS_STORAGE_PATH
        ):
            return (
                f'cannot set a volume mount named "{c.GCS_STORAGE_VOLUME}" or mounted at '
                f"{c.GCS_STORAGE_PATH} in the head container when the embedded GCS FT backend "
                "is used - it is managed by KubeRay"
            )
    for volume in _list(pod_spec(template).get("volumes")):
        if _dict(volume).get("name") == c.GCS_STORAGE_VOLUME:
            return (
                f'cannot set a volume named "{c.GCS_STORAGE_VOLUME}" in the head Pod when the '
                "embedded GCS FT backend is used - it is managed by KubeRay"
            )
    return None


_HISTORY_BACKEND_REQUIRED = {
    "GCS": ("GCS_BUCKET",),
    "S3": ("S3_REGION",),
    "ALIYUNOSS": ("OSS_BUCKET", "OSS_ENDPOINT", "OSS_REGION"),
}
_AZURE_CONN = "AZURE_STORAGE_CONNECTION_STRING"
_AZURE_URL = "AZURE_STORAGE_ACCOUNT_URL"
_AZURE_MODE = "AZURE_STORAGE_AUTH_MODE"


def _collector_options(collector: CollectorOptions) -> str | None:
    if not collector.image:
        return "historyServerOptions.collectorOptions.image must be set"
    env: dict[str, dict[str, Any]] = {}
    for raw in collector.env or []:
        item = _dict(raw)
        env[str(item.get("name"))] = item
    for name in c.HISTORY_COLLECTOR_MANAGED_ENV:
        if name in env:
            return (
                f"historyServerOptions.collectorOptions.env must not contain {name}: it is "
                "managed by KubeRay and injected automatically into the collector container"
            )

    def has_value(name: str) -> bool:
        item = env.get(name)
        return item is not None and (bool(item.get("value")) or item.get("valueFrom") is not None)

    backend = env.get(c.ENV_STORAGE_BACKEND, {}).get("value")
    if not backend or not isinstance(backend, str):
        return (
            f"{c.ENV_STORAGE_BACKEND} environment variable must be set with a literal string "
            "value in historyServerOptions.collectorOptions.env"
        )
    kind = backend.upper()
    for name in _HISTORY_BACKEND_REQUIRED.get(kind, ()):
        if not has_value(name):
            return f"{name} environment variable must be set when STORAGE_BACKEND is {kind}"
    if kind == "AZUREBLOB":
        raw_mode = env.get(_AZURE_MODE, {}).get("value")
        mode = raw_mode.strip().lower() if isinstance(raw_mode, str) else ""
        when = f"when STORAGE_BACKEND is AZUREBLOB and {_AZURE_MODE} is"
        if mode == "connection_string":
            if not has_value(_AZURE_CONN):
                return f"{_AZURE_CONN} environment variable must be set {when} connection_string"
        elif mode in ("workload_identity", "default"):
            if not has_value(_AZURE_URL):
                return f"{_AZURE_URL} environment variable must be set {when} {mode}"
        elif not has_value(_AZURE_CONN) and not has_value(_AZURE_URL):
            return (
                f"either {_AZURE_CONN} or {_AZURE_URL} environment variable must be set when "
                "STORAGE_BACKEND is AZUREBLOB"
            )
    return None


def _history_server(spec: RayClusterSpec, gates: FeatureGates) -> str | None:
    options = spec.history_server_options
    if options is None:
        return None
    if not gates.enabled(features.RAY_CLUSTER_HISTORY_SERVER):
        return "RayClusterHistoryServer feature gate is not enabled"
    if options.collector_options is None:
        return "historyServerOptions.collectorOptions must be set"
    err = _collector_options(options.collector_options)
    if err:
        return err
    name = c.HISTORY_COLLECTOR_CONTAINER_NAME
    enabled = "when history server collector options are enabled"
    if any(x.get("name") == name for x in containers(spec.head_group_spec.template)):
        return f"head pod template must not define a container with name '{name}' {enabled}"
    for group in spec.worker_group_specs or []:
        if any(x.get("name") == name for x in containers(group.template)):
            return (
                f"worker group {group.group_name} pod template must not define a container "
                f"with name '{name}' {enabled}"
            )
    return None


def _auth(spec: RayClusterSpec) -> str | None:
    options = spec.auth_options
    if options is None:
        return None
    if is_auth_enabled(spec):
        err = _ray_version_check("authOptions.mode is 'token'", spec.ray_version, "2.52.0")
        if err:
            return err
        if options.enable_k8s_token_auth:
            parsed = parse_generic_version(spec.ray_version or "0.0")
            if version_less(parsed, (2, 55, 0)):
                return (
                    "authOptions.enableK8sTokenAuth is enabled but minimum Ray version is 2.55.0, "
                    f"got {spec.ray_version}"
                )
            if options.secret_name:
                return (
                    "authOptions.enableK8sTokenAuth is enabled and authOptions.secretName is also "
                    "set"
                )
    elif options.enable_k8s_token_auth:
        return "authOptions.enableK8sTokenAuth is enabled but authOptions.mode not set to 'token'"
    return None


def _np_rules(where: str, mode: str, ingress: Any, egress: Any) -> str | None:
    if ingress and mode == c.NETWORK_POLICY_DENY_ALL_EGRESS:
        return (
            f'{where}.ingressRules cannot be set when mode is "{c.NETWORK_POLICY_DENY_ALL_EGRESS}" '
            "(ingress is not restricted)"
        )
    if egress and mode == c.NETWORK_POLICY_DENY_ALL_INGRESS:
        return (
            f'{where}.egressRules cannot be set when mode is "{c.NETWORK_POLICY_DENY_ALL_INGRESS}" '
            "(egress is not restricted)"
        )
    return None


def _network_policy(spec: RayClusterSpec, gates: FeatureGates) -> str | None:
    policy = spec.network_policy
    if policy is None:
        return None
    if not gates.enabled(features.RAY_CLUSTER_NETWORK_POLICY):
        return "spec.networkPolicy requires the RayClusterNetworkPolicy feature gate to be enabled"
    mode = policy.mode or c.NETWORK_POLICY_DENY_ALL
    for where, rules in (
        ("networkPolicy.head", policy.head),
        ("networkPolicy.worker", policy.worker),
    ):
        if rules is not None:
            err = _np_rules(where, mode, rules.ingress_rules, rules.egress_rules)
            if err:
                return err
    group_names = [g.group_name for g in spec.worker_group_specs or []]
    for name in group_names:
        errs = dns1123_label(name)
        if errs:
            return (
                f"worker group name {go_quote(name)} must be a valid DNS1123 label when "
                "networkPolicy is enabled (it is embedded in the NetworkPolicy name): "
                f"{go_list(errs)}"
            )
    for entry in policy.worker_groups or []:
        where = f"networkPolicy.workerGroups[{go_quote(entry.group_name)}]"
        err = _np_rules(where, mode, entry.ingress_rules, entry.egress_rules)
        if err:
            return err
        if entry.group_name not in group_names:
            return f"{where} does not match any group name in workerGroupSpecs"
    return None


def _tls_env(where: str, env: list[dict[str, Any]], managed: str = TLS_MANAGED) -> str | None:
    for name in c.TLS_ENV_VARS:
        if env_var(name, env):
            return (
                f"cannot set {name} environment variable in {where} when tlsOptions is set - "
                f"{managed}"
            )
    return None


def _tls_mounts(where: str, mounts: list[Any]) -> str | None:
    for raw in mounts:
        mount = _dict(raw)
        if mount.get("name") == c.RAY_TLS_VOLUME:
            return (
                f'cannot use volume mount named "{c.RAY_TLS_VOLUME}" in {where} when tlsOptions '
                f"is set - {TLS_MANAGED}"
            )
        if mount.get("mountPath") == c.RAY_TLS_PATH:
            return (
                f'cannot use volume mount at path "{c.RAY_TLS_PATH}" in {where} when tlsOptions '
                f"is set - {TLS_MANAGED}"
            )
    return None


def _tls(spec: RayClusterSpec, gates: FeatureGates) -> str | None:
    options = spec.tls_options
    if options is None:
        return None
    if not gates.enabled(features.RAY_CLUSTER_MTLS):
        return "spec.tlsOptions requires the RayClusterMTLS feature gate to be enabled"
    if not options.enabled:
        return None
    # Only the Ray container (index 0) gets the operator-managed TLS env and mount.
    targets: list[tuple[str, Any]] = [("head Pod", spec.head_group_spec.template)]
    targets += [
        (f"worker group {go_quote(g.group_name)}", g.template)
        for g in spec.worker_group_specs or []
    ]
    for where, template in targets:
        if not containers(template):
            continue
        ray = ray_container(template)
        err = _tls_env(where, env_list(ray)) or _tls_mounts(where, _list(ray.get("volumeMounts")))
        if err:
            return err
    auto = spec.autoscaler_options
    if auto is not None:
        err = _tls_env(
            "autoscalerOptions.env",
            [_dict(e) for e in auto.env or []],
            "the operator manages TLS configuration for the autoscaler automatically",
        ) or _tls_mounts("autoscalerOptions.volumeMounts", list(auto.volume_mounts or []))
        if err:
            return err
    return None


def validate_raycluster_spec(  # noqa: C901, PLR0912
    spec: RayClusterSpec,
    annotations: Mapping[str, str] | None = None,
    gates: FeatureGates = DEFAULT_GATES,
) -> str | None:
    """The first violated rule, unprefixed.
    upstream: ValidateRayClusterSpec."""
    annotations = annotations or {}
    head = spec.head_group_spec
    if not containers(head.template):
        return "headGroupSpec should have at least one container"
    head_params = head.ray_start_params or {}
    err = _group_resources("Head", head_params, head.resources or {})
    err = err or _group_labels("Head", head_params, head.labels or {})
    if err:
        return err
    autoscaling = is_autoscaling_enabled(spec)
    v2 = autoscaler_v2_requested(spec)
    seen: set[str] = set()
    for group in spec.worker_group_specs or []:
        # Upstream checks this in its webhook only; without the webhook (the default) two
        # groups of one name select each other's pods and the operator creates and deletes
        # workers for ever, so the controllers refuse it too, with the webhook's words.
        if group.group_name in seen:
            return f"worker group {group.group_name}: worker group names must be unique"
        seen.add(group.group_name)
        err = _worker_group(spec, group, autoscaling, v2)
        if err:
            return err
    err = _gcs_ft(spec, annotations, gates)
    if err:
        return err
    if not gates.enabled(features.RAY_JOB_DELETION_POLICY):
        for group in spec.worker_group_specs or []:
            if group.suspend:
                return (
                    f"worker group {group.group_name} can be suspended only when the "
                    "RayJobDeletionPolicy feature gate is enabled"
                )
    head_env = env_list(ray_container(head.template))
    v2_env = env_var(c.ENV_RAY_ENABLE_AUTOSCALER_V2, head_env)
    if not autoscaling:
        value = (v2_env or {}).get("value")
        if value in ("1", "true"):
            return (
                f"environment variable {c.ENV_RAY_ENABLE_AUTOSCALER_V2} cannot be set to "
                f"'{value}' when enableInTreeAutoscaling is false. Please set "
                "enableInTreeAutoscaling: true to use autoscaler v2"
            )
    else:
        for group in spec.worker_group_specs or []:
            if group.suspend:
                return (
                    f"worker group {group.group_name} cannot be suspended with Autoscaler enabled"
                )
        options = spec.autoscaler_options
        if options is not None and options.version is not None and v2_env is not None:
            return (
                "both .spec.autoscalerOptions.version and head Pod env var "
                f"{c.ENV_RAY_ENABLE_AUTOSCALER_V2} are set, please only use the former"
            )
        if is_autoscaling_v2_enabled(spec):
            if restart_policy(head.template) not in ("", "Never"):
                return (
                    "restartPolicy for head Pod should be Never or unset when using autoscaler V2"
                )
            for group in spec.worker_group_specs or []:
                if restart_policy(group.template) not in ("", "Never"):
                    return (
                        f"restartPolicy for worker group {group.group_name} should be Never or "
                        "unset when using autoscaler V2"
                    )
    options = spec.autoscaler_options
    if options is not None:
        if options.idle_timeout_seconds is not None and options.idle_timeout_seconds < 0:
            return (
                "autoscalerOptions.idleTimeoutSeconds must be non-negative, got "
                f"{options.idle_timeout_seconds}"
            )
        if env_var(c.ENV_KUBERAY_GEN_AUTOSCALER_START_CMD, [_dict(e) for e in options.env or []]):
            return (
                "autoscalerOptions.env must not contain KUBERAY_GEN_AUTOSCALER_START_CMD: it is "
                "managed by KubeRay and injected automatically into the autoscaler container"
            )
    return (
        _history_server(spec, gates)
        or _auth(spec)
        or _network_policy(spec, gates)
        or _tls(spec, gates)
    )


# --------------------------------------------------------------------------- RayJob


def validate_rayjob_metadata(metadata: Mapping[str, Any]) -> str | None:
    """Name rules of a RayJob's metadata. upstream: ValidateRayJobMetadata."""
    name = str(metadata.get("name") or "")
    if len(name) > c.MAX_RAYJOB_NAME_LENGTH:
        return (
            f"{RAYJOB_META_PREFIX}RayJob name should be no more than "
            f"{c.MAX_RAYJOB_NAME_LENGTH} characters"
        )
    errs = dns1035_label(name)
    if errs:
        return f"{RAYJOB_META_PREFIX}RayJob name should be a valid DNS1035 label: {go_list(errs)}"
    return None


def validate_rayjob_status(job: RayJob) -> str | None:
    """Status fields a RayJob may not carry in its current state. upstream: ValidateRayJobStatus."""
    status = job.status.job_deployment_status if job.status else None
    mode = job.spec.submission_mode if job.spec else c.K8S_JOB_MODE
    if status == c.DEPLOYMENT_WAITING and mode != c.INTERACTIVE_MODE:
        return (
            "The RayJob status is invalid: JobDeploymentStatus cannot be `Waiting` when "
            "SubmissionMode is not InteractiveMode"
        )
    return None


def _deletion_rules(spec: RayJobSpec) -> str | None:
    """Rules for ``deletionStrategy.deletionRules``. upstream: validateDeletionRules."""
    strategy = spec.deletion_strategy
    assert strategy is not None
    selector = bool(spec.cluster_selector)
    autoscaling = is_autoscaling_enabled(spec.ray_cluster_spec)
    errs: list[str] = []
    groups: dict[tuple[str, str], dict[str, int]] = {}
    for i, rule in enumerate(strategy.deletion_rules or []):
        cond = rule.condition
        if cond.job_status and cond.job_deployment_status:
            errs.append(
                f"deletionRules[{i}]: cannot set both JobStatus and JobDeploymentStatus at the "
                "same time"
            )
            continue
        if not cond.job_status and not cond.job_deployment_status:
            errs.append(
                f"deletionRules[{i}]: exactly one of JobStatus and JobDeploymentStatus must be set"
            )
            continue
        ttl = cond.ttl_seconds or 0
        if ttl < 0:
            errs.append(f"deletionRules[{i}]: TTLSeconds must be non-negative")
            continue
        if selector and rule.policy in (c.DELETE_CLUSTER, c.DELETE_WORKERS):
            errs.append(
                f"deletionRules[{i}]: DeletionPolicyType '{rule.policy}' not supported when "
                "ClusterSelector is set"
            )
            continue
        if autoscaling and rule.policy == c.DELETE_WORKERS:
            errs.append(
                f"deletionRules[{i}]: DeletionPolicyType 'DeleteWorkers' not supported with "
                "autoscaling enabled"
            )
            continue
        key = (
            ("JobStatus", cond.job_status)
            if cond.job_status
            else ("JobDeploymentStatus", cond.job_deployment_status or "")
        )
        ttls = groups.setdefault(key, {})
        if rule.policy in ttls:
            errs.append(
                f"deletionRules[{i}]: duplicate rule for DeletionPolicyType '{rule.policy}' and "
                f"{key[0]} '{key[1]}'"
            )
            continue
        ttls[rule.policy] = ttl
    # JobStatus groups first, then JobDeploymentStatus groups (upstream's two passes).
    ordered = sorted(groups.items(), key=lambda kv: (kv[0][0] != "JobStatus", kv[0][1]))
    for (field, status), ttls in ordered:
        previous: tuple[str, int] | None = None
        for policy in (c.DELETE_WORKERS, c.DELETE_CLUSTER, c.DELETE_SELF):
            if policy not in ttls:
                continue
            ttl = ttls[policy]
            if previous is not None and ttl < previous[1]:
                errs.append(
                    f"for {field} '{status}': {policy} TTL ({ttl}) must be >= {previous[0]} TTL "
                    f"({previous[1]})"
                )
            previous = (policy, ttl)
    return "\n".join(errs) if errs else None


def _legacy_deletion(spec: RayJobSpec) -> str | None:
    """Rules for ``deletionStrategy.onSuccess/onFailure``.
    upstream: validateLegacyDeletionPolicies."""
    strategy = spec.deletion_strategy
    assert strategy is not None
    if strategy.on_success is None or strategy.on_failure is None:
        return (
            "both DeletionStrategy.OnSuccess and DeletionStrategy.OnFailure must be set when using "
            "the legacy deletion policy fields of DeletionStrategy"
        )
    on_success, on_failure = strategy.on_success.policy, strategy.on_failure.policy
    if on_success is None:
        return (
            "the DeletionPolicyType field of DeletionStrategy.OnSuccess cannot be unset when "
            "DeletionStrategy is enabled"
        )
    if on_failure is None:
        return (
            "the DeletionPolicyType field of DeletionStrategy.OnFailure cannot be unset when "
            "DeletionStrategy is enabled"
        )
    if spec.cluster_selector:
        if on_success in (c.DELETE_CLUSTER, c.DELETE_WORKERS):
            return (
                f"the ClusterSelector mode doesn't support DeletionStrategy={on_success} on success"
            )
        if on_failure in (c.DELETE_CLUSTER, c.DELETE_WORKERS):
            return (
                f"the ClusterSelector mode doesn't support DeletionStrategy={on_failure} on failure"
            )
    if c.DELETE_WORKERS in (on_success, on_failure) and is_autoscaling_enabled(
        spec.ray_cluster_spec
    ):
        return (
            "DeletionStrategy=DeleteWorkers currently does not support RayCluster with autoscaling "
            "enabled"
        )
    if spec.shutdown_after_job_finishes and c.DELETE_NONE in (on_success, on_failure):
        return (
            f"{RAYJOB_PREFIX}shutdownAfterJobFinshes is set to 'true' while deletion policy is "
            "'DeleteNone'"
        )
    return None


def _deletion_config(spec: RayJobSpec, gates: FeatureGates) -> str | None:
    """How the deletion settings must fit together. upstream: validateDeletionConfiguration."""
    if not spec.shutdown_after_job_finishes and (spec.ttl_seconds_after_finished or 0) > 0:
        return (
            f"{RAYJOB_PREFIX}a RayJob with shutdownAfterJobFinishes set to false cannot have "
            "TTLSecondsAfterFinished"
        )
    strategy = spec.deletion_strategy
    if strategy is None:
        return None
    if not gates.enabled(features.RAY_JOB_DELETION_POLICY):
        return "RayJobDeletionPolicy feature gate must be enabled to use DeletionStrategy"
    legacy = strategy.on_success is not None or strategy.on_failure is not None
    rules = bool(strategy.deletion_rules)
    if rules and spec.shutdown_after_job_finishes:
        return (
            f"{RAYJOB_PREFIX}spec.shutdownAfterJobFinishes and spec.deletionStrategy.deletionRules "
            "are mutually exclusive"
        )
    if rules and legacy:
        return (
            f"{RAYJOB_PREFIX}Cannot use both legacy onSuccess/onFailure fields and deletionRules "
            "simultaneously"
        )
    if legacy:
        return _legacy_deletion(spec)
    if rules:
        return _deletion_rules(spec)
    return (
        f"{RAYJOB_PREFIX}DeletionStrategy requires either BOTH onSuccess and onFailure, OR the "
        "deletionRules field (cannot be empty)"
    )


def runtime_env_error(text: str | None) -> str | None:
    """Upstream parses runtimeEnvYAML into a map; anything else is an error."""
    if not text:
        return None
    try:
        value = yaml.safe_load(text)
    except (yaml.YAMLError, ValueError, RecursionError) as err:
        return f"failed to unmarshal RuntimeEnvYAML: {' '.join(str(err).split())}"
    if value is not None and not isinstance(value, dict):
        kind = "seq" if isinstance(value, list) else "str"
        return (
            f"failed to unmarshal RuntimeEnvYAML: yaml: unmarshal errors: cannot unmarshal "
            f"!!{kind} into map[string]interface {{}}"
        )
    return None


def validate_rayjob_spec(  # noqa: C901, PLR0912
    job: RayJob, gates: FeatureGates = DEFAULT_GATES, *, prefix: str = RAYJOB_PREFIX
) -> str | None:
    """The first violated rule; ``prefix`` is upstream's ``The RayJob spec is invalid: ``.
    upstream: ValidateRayJobSpec."""
    spec = job.spec
    if spec is None:
        spec = RayJobSpec()
    if spec.suspend and not spec.shutdown_after_job_finishes:
        return (
            f"{prefix}a RayJob with shutdownAfterJobFinishes set to false is not allowed to be "
            "suspended"
        )
    if (spec.ttl_seconds_after_finished or 0) < 0:
        return f"{prefix}TTLSecondsAfterFinished must be a non-negative integer"
    err = _deletion_config(spec, gates)
    if err:
        return err
    selector = bool(spec.cluster_selector)
    if spec.suspend and selector:
        return f"{prefix}the ClusterSelector mode doesn't support the suspend operation"
    if spec.ray_cluster_spec is None and not selector:
        return f"{prefix}one of RayClusterSpec or ClusterSelector must be set"
    mode = spec.submission_mode or c.K8S_JOB_MODE
    if selector:
        if not (spec.cluster_selector or {}).get(c.LABEL_CLUSTER):
            return "cluster name in ClusterSelector should not be empty"
        if mode == c.SIDECAR_MODE:
            return "ClusterSelector is not supported in SidecarMode"
        if (spec.backoff_limit or 0) > 0:
            return f"{prefix}BackoffLimit is incompatible with ClusterSelector mode"
    if mode == c.INTERACTIVE_MODE and (spec.backoff_limit or 0) > 0:
        return f"{prefix}BackoffLimit is incompatible with InteractiveMode"
    if mode == c.SIDECAR_MODE:
        if spec.submitter_pod_template is not None:
            return "Currently, SidecarMode doesn't support SubmitterPodTemplate"
        if spec.submitter_config is not None:
            return "Currently, SidecarMode doesn't support SubmitterConfig"
        template = spec.ray_cluster_spec.head_group_spec.template if spec.ray_cluster_spec else {}
        if restart_policy(template) not in ("", "Never"):
            return "restartPolicy for head Pod should be Never or unset when using SidecarMode"
    if is_k8s_token_auth(spec.ray_cluster_spec):
        return f"{prefix}K8s token auth mode is currently not supported for RayJob"
    if spec.ray_cluster_spec is not None:
        annotations = _dict((job.metadata or {}).get("annotations"))
        err = validate_raycluster_spec(spec.ray_cluster_spec, annotations, gates)
        if err:
            return f"{prefix}{err}"
    err = runtime_env_error(spec.runtime_env_yaml)
    if err:
        return err
    if spec.active_deadline_seconds is not None and spec.active_deadline_seconds <= 0:
        return f"{prefix}activeDeadlineSeconds must be a positive integer"
    if spec.pre_running_deadline_seconds is not None and spec.pre_running_deadline_seconds <= 0:
        return f"{prefix}preRunningDeadlineSeconds must be a positive integer"
    if spec.backoff_limit is not None and spec.backoff_limit < 0:
        return f"{prefix}backoffLimit must be a positive integer"
    return None


def metadata_version_error(spec: RayJobSpec) -> str | None:
    """Checked when the submit command is built: ``--metadata-json`` needs Ray >= 2.6.0.
    upstream: the version check of job.go GetMetadataJson."""
    ray_version = spec.ray_cluster_spec.ray_version if spec.ray_cluster_spec else None
    if not spec.metadata or not ray_version:
        return None
    try:
        parsed = parse_generic_version(ray_version)
    except VersionError:
        return None
    if version_less(parsed, (2, 6, 0)):
        return "the Ray version must be at least 2.6.0 to use the metadata field"
    return None


# --------------------------------------------------------------------------- RayService


def initializing_timeout_error(annotations: Mapping[str, str]) -> str | None:
    """The initializing-timeout annotation must be a positive duration.
    upstream: validateInitializingTimeout."""
    key = c.ANNOTATION_INITIALIZING_TIMEOUT
    value = annotations.get(key)
    if not value:
        return None
    try:
        seconds = parse_go_duration(value)
    except ValueError:
        pass
    else:
        if seconds <= 0:
            return f"annotation {key} must be a positive duration, got: {value}"
        return None
    if re.fullmatch(r"[+-]?[0-9]+", value):
        if int(value) <= 0:
            return f"annotation {key} must be a positive integer (seconds), got: {value}"
        return None
    return (
        f"annotation {key} has invalid format: {value}. Expected Go duration format (e.g., '5m', "
        "'1h') or positive integer seconds"
    )


def validate_rayservice_metadata(metadata: Mapping[str, Any]) -> str | None:
    """Name rules of a RayService's metadata. upstream: ValidateRayServiceMetadata."""
    name = str(metadata.get("name") or "")
    if len(name) > c.MAX_RAYSERVICE_NAME_LENGTH:
        return (
            f"{RAYSERVICE_META_PREFIX}RayService name should be no more than "
            f"{c.MAX_RAYSERVICE_NAME_LENGTH} characters"
        )
    errs = dns1035_label(name)
    if errs:
        return (
            f"{RAYSERVICE_META_PREFIX}RayService name should be a valid DNS1035 label: "
            f"{go_list(errs)}"
        )
    err = initializing_timeout_error(_dict(metadata.get("annotations")))
    if err:
        return f"{RAYSERVICE_META_PREFIX}RayService annotations is invalid: {err}"
    return None


def validate_rayservice_spec(
    service: RayService, gates: FeatureGates = DEFAULT_GATES
) -> str | None:
    """The first spec rule a RayService breaks, or None. upstream: ValidateRayServiceSpec."""
    spec = service.spec
    if spec is None:
        return f"{RAYSERVICE_PREFIX}spec is required"
    if is_k8s_token_auth(spec.ray_cluster_config):
        return f"{RAYSERVICE_PREFIX}K8s token auth mode is currently not supported for RayService"
    annotations = _dict((service.metadata or {}).get("annotations"))
    err = validate_raycluster_spec(spec.ray_cluster_config, annotations, gates)
    if err:
        return f"{RAYSERVICE_PREFIX}{err}"
    head_service = spec.ray_cluster_config.head_group_spec.head_service
    if _dict(_dict(head_service).get("metadata")).get("name"):
        return (
            f"{RAYSERVICE_PREFIX}spec.rayClusterConfig.headGroupSpec.headService.metadata.name "
            "should not be set"
        )
    strategy = spec.upgrade_strategy
    valid = (c.RAYSERVICE_UPGRADE_INCREMENTAL, c.RAYSERVICE_UPGRADE_NEW_CLUSTER, c.UPGRADE_NONE)
    if strategy is not None and strategy.type is not None and strategy.type not in valid:
        return (
            f"{RAYSERVICE_PREFIX}Spec.UpgradeStrategy.Type value {strategy.type} is invalid, valid "
            "options are NewClusterWithIncrementalUpgrade, NewCluster, or None"
        )
    delay = spec.ray_cluster_deletion_delay_seconds
    if delay is not None and delay < 0:
        return (
            f"{RAYSERVICE_PREFIX}Spec.RayClusterDeletionDelaySeconds should be a non-negative "
            f"integer, got {delay}"
        )
    if is_incremental_upgrade(service, gates):
        err = _cluster_upgrade_options(service)
        if err:
            return f"{RAYSERVICE_PREFIX}{err}"
    return None


def _cluster_upgrade_options(service: RayService) -> str | None:
    """Rules for ``clusterUpgradeOptions`` of an incremental upgrade.
    upstream: ValidateClusterUpgradeOptions."""
    assert service.spec is not None
    assert service.spec.upgrade_strategy is not None
    if not is_autoscaling_enabled(service.spec.ray_cluster_config):
        return "Ray Autoscaler is required for NewClusterWithIncrementalUpgrade"
    options = service.spec.upgrade_strategy.cluster_upgrade_options
    if options is None:
        return "ClusterUpgradeOptions are required for NewClusterWithIncrementalUpgrade"
    surge = 100 if options.max_surge_percent is None else options.max_surge_percent
    if not 0 <= surge <= 100:
        return "maxSurgePercent must be between 0 and 100"
    if not 0 <= options.step_size_percent <= 100:
        return "stepSizePercent must be between 0 and 100"
    if options.step_size_percent > surge:
        return "stepSizePercent must be less than or equal to maxSurgePercent"
    if options.interval_seconds <= 0:
        return "intervalSeconds must be greater than 0"
    if not options.gateway_class_name:
        return "gatewayClassName is required for NewClusterWithIncrementalUpgrade"
    return None


# --------------------------------------------------------------------------- RayCronJob

_CRON_RANGES = ((0, 59), (0, 23), (1, 31), (1, 12), (0, 6))
_MONTHS = ("jan", "feb", "mar", "apr", "may", "jun", "jul", "aug", "sep", "oct", "nov", "dec")
_DAYS = ("sun", "mon", "tue", "wed", "thu", "fri", "sat")
_CRON_NAMES: tuple[dict[str, int], ...] = (
    {},
    {},
    {},
    {m: i + 1 for i, m in enumerate(_MONTHS)},
    {d: i for i, d in enumerate(_DAYS)},
)
_DESCRIPTORS = ("@yearly", "@annually", "@monthly", "@weekly", "@daily", "@midnight", "@hourly")


def _cron_value(text: str, names: Mapping[str, int]) -> int:
    if text.lower() in names:
        return names[text.lower()]
    if not text.isdigit():
        raise ValueError(
            f"failed to parse int from {text}: strconv.Atoi: parsing {go_quote(text)}: "
            "invalid syntax"
        )
    return int(text)


def _cron_field(text: str, low: int, high: int, names: Mapping[str, int]) -> None:
    for part in text.split(","):
        range_part, _, step = part.partition("/")
        if range_part in ("*", "?"):
            start, end = low, high
        else:
            first, dash, last = range_part.partition("-")
            start = _cron_value(first, names)
            end = _cron_value(last, names) if dash else start
        if step:
            if not step.isdigit():
                raise ValueError(
                    f"failed to parse int from {step}: strconv.Atoi: parsing {go_quote(step)}: "
                    "invalid syntax"
                )
            if int(step) == 0:
                raise ValueError(f"step of range should be a positive number: {part}")
        if start < low:
            raise ValueError(f"beginning of range ({start}) below minimum ({low}): {part}")
        if end > high:
            raise ValueError(f"end of range ({end}) above maximum ({high}): {part}")
        if start > end:
            raise ValueError(f"beginning of range ({start}) beyond end of range ({end}): {part}")


def cron_error(schedule: str) -> str | None:
    """A standard five-field cron expression or descriptor, as robfig/cron ParseStandard."""
    if not schedule:
        return "empty spec string"
    if schedule.startswith("@"):
        if schedule in _DESCRIPTORS:
            return None
        if schedule.startswith("@every "):
            try:
                if parse_go_duration(schedule[len("@every ") :]) > 0:
                    return None
            except ValueError:
                pass
            return f"failed to parse duration {schedule}"
        return f"unrecognized descriptor: {schedule}"
    fields = schedule.split()
    if len(fields) != 5:
        return f"expected exactly 5 fields, found {len(fields)}: {go_list(fields)}"
    try:
        for text, (low, high), names in zip(fields, _CRON_RANGES, _CRON_NAMES, strict=True):
            _cron_field(text, low, high, names)
    except ValueError as err:
        return str(err)
    return None


def validate_raycronjob(cron: RayCronJob, gates: FeatureGates = DEFAULT_GATES) -> str | None:
    """Name, schedule and job template rules of a RayCronJob. upstream: ValidateRayCronJobSpec."""
    name = str((cron.metadata or {}).get("name") or "")
    if len(name) > c.MAX_RAYCRONJOB_NAME_LENGTH:
        return f"RayCronJob name should be no more than {c.MAX_RAYCRONJOB_NAME_LENGTH} characters"
    spec = cron.spec
    if spec is None:
        return "jobTemplate cannot be nil"
    if "TZ" in spec.schedule:
        return "cannot use TZ or CRON_TZ in schedule, use timeZone field instead"
    err = cron_error(spec.schedule)
    if err:
        return f"invalid cron schedule: {err}"
    if spec.time_zone is not None:
        if spec.time_zone == "":
            return (
                "timeZone must not be empty string, omit the field to use the local time zone of "
                "the KubeRay operator"
            )
        try:
            zoneinfo.ZoneInfo(spec.time_zone)
        except (zoneinfo.ZoneInfoNotFoundError, ValueError, OSError):
            return f"invalid time zone: unknown time zone {spec.time_zone}"
    err = validate_rayjob_spec(RayJob(spec=spec.job_template), gates)
    if err:
        return f"invalid RayJob template: {err}"
    return None


# --------------------------------------------------------------------------- whole objects


def _parse_error(kind: str, err: pydantic.ValidationError) -> str:
    first = err.errors()[0]
    where = ".".join(str(p) for p in first["loc"])
    return f"invalid {kind}: {where}: {first['msg']}"


def validate_raycluster(obj: Mapping[str, Any], gates: FeatureGates = DEFAULT_GATES) -> str | None:
    """Metadata, spec, upgrade options and status of a RayCluster, in the controller's order."""
    try:
        cluster = RayCluster.model_validate(obj)
    except pydantic.ValidationError as err:
        return _parse_error(c.KIND_RAYCLUSTER, err)
    metadata = cluster.metadata or {}
    if cluster.spec is None:
        return validate_raycluster_metadata(metadata) or "invalid RayCluster: spec is required"
    annotations = _dict(metadata.get("annotations"))
    return (
        validate_raycluster_metadata(metadata)
        or validate_raycluster_spec(cluster.spec, annotations, gates)
        or validate_raycluster_upgrade_options(cluster)
        or validate_raycluster_status(cluster)
    )


def validate_rayjob(obj: Mapping[str, Any], gates: FeatureGates = DEFAULT_GATES) -> str | None:
    try:
        job = RayJob.model_validate(obj)
    except pydantic.ValidationError as err:
        return _parse_error(c.KIND_RAYJOB, err)
    return (
        validate_rayjob_metadata(job.metadata or {})
        or validate_rayjob_spec(job, gates)
        or validate_rayjob_status(job)
    )


def validate_rayservice(obj: Mapping[str, Any], gates: FeatureGates = DEFAULT_GATES) -> str | None:
    try:
        service = RayService.model_validate(obj)
    except pydantic.ValidationError as err:
        return _parse_error(c.KIND_RAYSERVICE, err)
    return validate_rayservice_metadata(service.metadata or {}) or validate_rayservice_spec(
        service, gates
    )


def validate_raycronjob_object(
    obj: Mapping[str, Any], gates: FeatureGates = DEFAULT_GATES
) -> str | None:
    try:
        cron = RayCronJob.model_validate(obj)
    except pydantic.ValidationError as err:
        return _parse_error(c.KIND_RAYCRONJOB, err)
    return validate_raycronjob(cron, gates)


VALIDATORS = {
    c.KIND_RAYCLUSTER: validate_raycluster,
    c.KIND_RAYJOB: validate_rayjob,
    c.KIND_RAYSERVICE: validate_rayservice,
    c.KIND_RAYCRONJOB: validate_raycronjob_object,
}


def validate(obj: Mapping[str, Any], gates: FeatureGates = DEFAULT_GATES) -> str | None:
    """Dispatch on ``kind``; unknown kinds are not ours to judge."""
    validator = VALIDATORS.get(str(obj.get("kind")))
    return validator(obj, gates) if validator else None


# --------------------------------------------------------------------------- runtime checks
# Not spec validation, but messages the controllers report verbatim.

CERT_MANAGER_MISSING = "tlsOptions requires cert-manager, but cert-manager is not installed"
SERVE_PORT_MISSING = (
    "Please specify a port named 'serve' (or with the prefix 'serve-', e.g. 'serve-grpc') in the "
    "Ray head container; otherwise, the Kubernetes service for Ray Serve will not be created."
)
BATCH_SCHEDULERS = ("volcano", "yunikorn", "kai-scheduler", "scheduler-plugins")


def too_many_head_pods(names: list[str]) -> str:
    return f"{len(names)} head pods found {go_list(names)}. Please delete extra head pods"


def not_multiple_of_hosts(desired: int, hosts: int, group: str) -> str:
    return (
        f"desired worker pods ({desired}) is not a multiple of NumOfHosts ({hosts}) for group "
        f"{group}"
    )


def validate_operator_options(
    gates: FeatureGates, batch_scheduler: str = "", enable_batch_scheduler: bool = False
) -> str | None:
    """Startup configuration errors (the operator refuses to start on them)."""
    if gates.enabled(features.KUBERNETES_WAS) and (batch_scheduler or enable_batch_scheduler):
        return (
            "the KubernetesWAS feature gate cannot be combined with --batch-scheduler or "
            "--enable-batch-scheduler"
        )
    if batch_scheduler and enable_batch_scheduler:
        return (
            "both feature flags enable-batch-scheduler (deprecated) and batch-scheduler are set. "
            "Please use batch-scheduler only"
        )
    if batch_scheduler and batch_scheduler not in BATCH_SCHEDULERS:
        return f"scheduler is not supported, name={batch_scheduler}"
    return None
