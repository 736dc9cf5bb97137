"""Small readers shared by the builders: feature predicates over the RayCluster dict, owner
references, env-var list helpers and the shell wrapper for generated commands.

Every predicate reads the dict defensively (absent, ``null`` and wrong-typed optional fields
read as "not set"), because builders see objects exactly as stored, before any model
validation. The predicates match upstream's definitions, including their quirks: GCS fault
tolerance is on with either ``gcsFaultToleranceOptions`` or the legacy annotation; auth env is
injected only for ``mode: token``.
"""

from __future__ import annotations

import re
from typing import Any, Final

from kuberay.api import constants as c
from kuberay.api.resources import JsonDict as JsonDict
from kuberay.api.resources import owner_reference as owner_reference
from kuberay.builders.options import BuildOptions

_VERSION: Final = re.compile(r"^v?(\d+)((?:\.\d+)*)(.*)$")


def as_dict(value: Any) -> JsonDict:
    return value if isinstance(value, dict) else {}


def as_list(value: Any) -> list[Any]:
    return value if isinstance(value, list) else []


def spec_of(cluster: JsonDict) -> JsonDict:
    return as_dict(cluster.get("spec"))


def head_spec(cluster: JsonDict) -> JsonDict:
    return as_dict(spec_of(cluster).get("headGroupSpec"))


def worker_groups(cluster: JsonDict) -> list[JsonDict]:
    return [as_dict(g) for g in as_list(spec_of(cluster).get("workerGroupSpecs"))]


def cluster_name(cluster: JsonDict) -> str:
    return str(as_dict(cluster.get("metadata")).get("name") or "")


def cluster_namespace(cluster: JsonDict) -> str:
    return str(as_dict(cluster.get("metadata")).get("namespace") or "")


def cluster_annotations(cluster: JsonDict) -> dict[str, str]:
    return {
        str(k): str(v)
        for k, v in as_dict(as_dict(cluster.get("metadata")).get("annotations")).items()
    }


def cluster_labels(cluster: JsonDict) -> dict[str, str]:
    return {
        str(k): str(v) for k, v in as_dict(as_dict(cluster.get("metadata")).get("labels")).items()
    }


def is_autoscaling_enabled(cluster: JsonDict) -> bool:
    """``enableInTreeAutoscaling: true``. upstream: IsAutoscalingEnabled."""
    return spec_of(cluster).get("enableInTreeAutoscaling") is True


def autoscaler_version(cluster: JsonDict) -> str | None:
    version = as_dict(spec_of(cluster).get("autoscalerOptions")).get("version")
    return str(version) if version else None


def is_autoscaler_v2(cluster: JsonDict) -> bool:
    """Autoscaling on and ``autoscalerOptions.version: v2``. upstream: IsAutoscalingV2Enabled."""
    return is_autoscaling_enabled(cluster) and autoscaler_version(cluster) == c.AUTOSCALER_V2


def gcs_ft_options(cluster: JsonDict) -> JsonDict | None:
    options = spec_of(cluster).get("gcsFaultToleranceOptions")
    return options if isinstance(options, dict) else None


def is_gcs_ft_enabled(cluster: JsonDict) -> bool:
    """GCS FT by options, else by the legacy annotation. upstream: IsGCSFaultToleranceEnabled."""
    if gcs_ft_options(cluster) is not None:
        return True
    return cluster_annotations(cluster).get(c.ANNOTATION_FT_ENABLED, "").lower() == "true"


def is_gcs_ft_embedded(cluster: JsonDict) -> bool:
    options = gcs_ft_options(cluster)
    return options is not None and options.get("backend") == c.GCS_BACKEND_ROCKSDB


def auth_options(cluster: JsonDict) -> JsonDict | None:
    options = spec_of(cluster).get("authOptions")
    return options if isinstance(options, dict) else None


def is_auth_enabled(cluster: JsonDict) -> bool:
    """``authOptions.mode: token``. upstream: IsAuthEnabled."""
    options = auth_options(cluster)
    return options is not None and options.get("mode") == c.AUTH_MODE_TOKEN


def is_k8s_auth_enabled(cluster: JsonDict) -> bool:
    """``authOptions.enableK8sTokenAuth: true``. upstream: IsK8sAuthEnabled."""
    return as_dict(auth_options(cluster)).get("enableK8sTokenAuth") is True


def start_params(group: JsonDict) -> dict[str, str]:
    """A copy of a group's ``rayStartParams``; ``null`` reads as empty (as after defaulting)."""
    return {str(k): str(v) for k, v in as_dict(group.get("rayStartParams")).items()}


def head_port(cluster: JsonDict) -> str:
    """The GCS port from the head's start params, else the default. upstream: pod.go GetHeadPort."""
    return start_params(head_spec(cluster)).get("port", str(c.GCS_SERVER_PORT))


def creator_crd(cluster: JsonDict, options: BuildOptions) -> str:
    """Which CRD created the cluster: its ``ray.io/originated-from-crd`` label, else the option.
    upstream: getCreatorCRDType."""
    label = cluster_labels(cluster).get(c.LABEL_ORIGINATED_FROM_CRD)
    if label is None:
        return options.creator_crd
    if label in (c.KIND_RAYCLUSTER, c.KIND_RAYJOB, c.KIND_RAYSERVICE):
        return label
    return c.KIND_RAYCLUSTER


def shell_command(options: BuildOptions) -> list[str]:
    """The bash prefix of generated commands (login shell when enabled).
    upstream: GetContainerCommand."""
    return ["/bin/bash", "-lc" if options.enable_login_shell else "-c", "--"]


def env_exists(name: str, envs: list[Any]) -> bool:
    """Whether ``envs`` already has a variable called ``name``. upstream: EnvVarExists."""
    return any(isinstance(e, dict) and e.get("name") == name for e in envs)


def append_env_if_absent(envs: list[Any], name: str, value: str) -> None:
    if not env_exists(name, envs):
        envs.append({"name": name, "value": value})


def field_env(name: str, path: str) -> JsonDict:
    return {"name": name, "valueFrom": {"fieldRef": {"fieldPath": path}}}


def parse_version(text: str) -> tuple[int, ...] | None:
    """Kubernetes ``ParseGeneric``-style: at least ``major.minor``; trailing text is ignored."""
    match = _VERSION.match(text.strip())
    if match is None:
        return None
    parts = [match.group(1), *[p for p in match.group(2).split(".") if p]]
    if len(parts) < 2:
        return None
    return tuple(int(p) for p in parts)


def version_at_least(text: str | None, minimum: tuple[int, ...]) -> bool:
    version = parse_version(text or "")
    if version is None:
        return False
    width = max(len(version), len(minimum))
    padded = version + (0,) * (width - len(version))
    return padded >= minimum + (0,) * (width - len(minimum))


def is_tls_enabled(cluster: JsonDict, options: BuildOptions) -> bool:
    """mTLS needs both the RayClusterMTLS gate and ``tlsOptions.enabled: true``."""
    return options.mtls and as_dict(spec_of(cluster).get("tlsOptions")).get("enabled") is True


def collector_options(cluster: JsonDict, options: BuildOptions) -> JsonDict | None:
    """History collector settings when the RayClusterHistoryServer gate is on, else None."""
    if not options.history_server:
        return None
    history = as_dict(spec_of(cluster).get("historyServerOptions"))
    collector = history.get("collectorOptions")
    return collector if isinstance(collector, dict) else None
