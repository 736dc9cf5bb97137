"""Operator-wide settings that shape generated objects.

Upstream reads these from process environment variables and the operator config file at the
moment a pod is built; here they are one frozen value handed to every builder, so a test (or
two operators in one process) can use different settings side by side.

Parsing follows upstream's quirks: the two injection switches are on unless the variable is
exactly ``false`` (any case); the other switches are off unless exactly ``true``; an empty
``CLUSTER_DOMAIN`` falls back to ``cluster.local``.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from types import MappingProxyType
from typing import Any

from kuberay.api import constants as c

_EMPTY: Mapping[str, str] = MappingProxyType({})


def _is_false(value: str | None) -> bool:
    return (value or "").lower() == "false"


def _is_true(value: str | None) -> bool:
    return (value or "").lower() == "true"


@dataclass(frozen=True)
class BuildOptions:
    kuberay_version: str = c.KUBERAY_VERSION
    cluster_domain: str = "cluster.local"
    enable_init_container_injection: bool = True
    enable_probes_injection: bool = True
    enable_login_shell: bool = False
    deterministic_head_pod_name: bool = False
    head_cluster_ip_service: bool = False
    # Unhashable payloads are left out of the hash so options can still key a cache.
    default_container_envs: tuple[dict[str, Any], ...] = field(default=(), hash=False)
    default_pod_labels: Mapping[str, str] = field(default_factory=lambda: _EMPTY, hash=False)
    default_pod_annotations: Mapping[str, str] = field(default_factory=lambda: _EMPTY, hash=False)
    head_sidecar_containers: tuple[dict[str, Any], ...] = field(default=(), hash=False)
    worker_sidecar_containers: tuple[dict[str, Any], ...] = field(default=(), hash=False)
    creator_crd: str = c.KIND_RAYCLUSTER
    multi_host_indexing: bool = True
    # Alpha gates that change pod shape: RayClusterMTLS (TLS env, mounts, the IP-SAN wait) and
    # RayClusterHistoryServer (the collector sidecar and Ray event export env).
    mtls: bool = False
    history_server: bool = False

    @classmethod
    def from_env(cls, env: Mapping[str, str], **overrides: Any) -> BuildOptions:
        """Read the upstream environment switches; ``overrides`` win over the environment."""
        values: dict[str, Any] = {
            "cluster_domain": env.get(c.ENV_CLUSTER_DOMAIN) or "cluster.local",
            "enable_init_container_injection": not _is_false(
                env.get(c.ENV_ENABLE_INIT_CONTAINER_INJECTION)
            ),
            "enable_probes_injection": not _is_false(env.get(c.ENV_ENABLE_PROBES_INJECTION)),
            "enable_login_shell": _is_true(env.get(c.ENV_ENABLE_LOGIN_SHELL)),
            "deterministic_head_pod_name": _is_true(
                env.get(c.ENV_ENABLE_DETERMINISTIC_HEAD_POD_NAME)
            ),
            "head_cluster_ip_service": _is_true(env.get(c.ENV_ENABLE_RAY_HEAD_CLUSTER_IP_SERVICE)),
        }
        values.update(overrides)
        return cls(**values)
