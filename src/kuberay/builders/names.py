"""Names of every object the operator creates for a RayCluster, with upstream's truncation rules.

The QUIRKs are deliberate and must not be "fixed": ``check_name`` keeps the *tail* of a long
name (so two long clusters differing only in their prefix collide, exactly as upstream), while
pod name prefixes keep the *head*. Objects already created by the Go operator carry these names,
and a drop-in must find them again.

Failure modes: none; an empty string is returned unchanged (upstream would panic on it).
"""

from __future__ import annotations

import unicodedata
from typing import Any

from kuberay.builders.options import BuildOptions

_MAX_NAME = 50  # room for "-worker-" plus the apiserver's 5-character suffix within 63
_MAX_LABEL = 63


def _is_punct(ch: str) -> bool:
    # Go's unicode.IsPunct: Unicode category P* ("$", "+", "^" ... are symbols, not punctuation).
    return unicodedata.category(ch).startswith("P")


def check_name(s: str) -> str:
    """Shorten to the last 50 characters; a leading digit or punctuation becomes ``r``.
    upstream: CheckName."""
    if len(s) > _MAX_NAME:
        s = s[len(s) - _MAX_NAME :]
    if s and s[0].isdigit() and s[0].isascii():
        s = "r" + s[1:]
    if s and _is_punct(s[0]):
        s = "r" + s[1:]
    return s


def check_label(s: str) -> str:
    """Shorten to the last 63 characters; a leading punctuation character becomes ``r``.
    upstream: CheckLabel."""
    if len(s) > _MAX_LABEL:
        s = s[len(s) - _MAX_LABEL :]
    if s and _is_punct(s[0]):
        s = "r" + s[1:]
    return s


def trim_job_name(s: str) -> str:
    """Job names follow the label limit, not the name one. upstream: TrimJobName."""
    return check_label(s)


def _pod_name(prefix: str, node_type: str, generate: bool) -> str:
    """``<prefix>-<type>``; a trailing dash when the apiserver adds a suffix. upstream: PodName."""
    result = (prefix[:_MAX_NAME] + "-" + node_type).lower()
    return result + "-" if generate else result


def head_pod_name_prefix(cluster_name: str) -> str:
    """The head pod's ``generateName``. upstream: PodName (head, generateName)."""
    return _pod_name(cluster_name, "head", True)


def deterministic_head_pod_name(cluster_name: str) -> str:
    """The fixed head pod name. upstream: PodName (head, deterministic)."""
    return _pod_name(cluster_name, "head", False)


def worker_pod_name_prefix(cluster_name: str, group: str) -> str:
    """A worker group's pod ``generateName``. upstream: PodName (worker)."""
    return _pod_name(f"{cluster_name}-{group}", "worker", True)


def _name(cluster: dict[str, Any]) -> str:
    return str(cluster["metadata"]["name"])


def head_service_name(cluster: dict[str, Any]) -> str:
    """The user's head Service name, else the default. upstream: GenerateHeadServiceName."""
    head_service = (cluster.get("spec") or {}).get("headGroupSpec", {}).get("headService") or {}
    custom = (head_service.get("metadata") or {}).get("name")
    return str(custom) if custom else f"{_name(cluster)}-head-svc"


def headless_service_name(cluster_name: str) -> str:
    """Name of the multi-host peer-DNS Service.
    upstream: BuildHeadlessServiceForRayCluster (its name)."""
    return f"{cluster_name}-headless"


def serve_service_name(cluster_name: str) -> str:
    """Default name of a cluster's serve Service. upstream: GenerateServeServiceName."""
    return f"{cluster_name}-serve-svc"


def ingress_name(cluster_name: str) -> str:
    """The head Ingress name. upstream: GenerateIngressName, then CheckName (createHeadIngress)."""
    return check_name(f"{cluster_name}-head-ingress")


def route_name(cluster_name: str, namespace: str) -> str:
    """OpenShift Route name: the first ``51 - len(namespace)`` characters, then ``check_name``.
    upstream: GenerateRouteName / CheckRouteName."""
    name = f"{cluster_name}-head-route"
    limit = 51 - len(namespace)
    if len(name) > limit:
        name = name[: max(limit, 0)]
    return check_name(name)


def autoscaler_service_account_name(cluster: dict[str, Any]) -> str:
    """The head template's service account, else the cluster name.
    upstream: GetHeadGroupServiceAccountName."""
    spec = cluster.get("spec") or {}
    template_spec = (spec.get("headGroupSpec") or {}).get("template", {}).get("spec") or {}
    return check_name(str(template_spec.get("serviceAccountName") or _name(cluster)))


def autoscaler_role_name(cluster_name: str) -> str:
    """Name of the autoscaler's Role and RoleBinding. upstream: rbac.go BuildRole (its name)."""
    return check_name(cluster_name)


def auth_secret_name(cluster_name: str) -> str:
    """Name of the cluster's auth token Secret.
    upstream: reconcileAuthSecret (CheckName of the cluster name)."""
    return check_name(cluster_name)


def gcs_pvc_name(cluster: dict[str, Any]) -> str:
    """The user's claim name, else ``<cluster>-gcs-pvc``. upstream: GetGCSStoragePVCName."""
    options = (cluster.get("spec") or {}).get("gcsFaultToleranceOptions") or {}
    claim = (options.get("storage") or {}).get("claimName")
    return str(claim) if claim else f"{_name(cluster)}-gcs-pvc"


def redis_cleanup_job_name(cluster_name: str) -> str:
    """Name of the Job that clears a deleted cluster's Redis keys.
    upstream: buildRedisCleanupJob (its name)."""
    return trim_job_name(f"{cluster_name}-redis-cleanup")


def head_fqdn(cluster: dict[str, Any], options: BuildOptions) -> str:
    """The head Service's in-cluster DNS name. upstream: GenerateFQDNServiceName."""
    namespace = cluster["metadata"].get("namespace") or ""
    domain = options.cluster_domain or "cluster.local"
    return f"{head_service_name(cluster)}.{namespace}.svc.{domain}"


def identifier(cluster_name: str, node_type: str) -> str:
    """Value of ``ray.io/identifier``: ``<cluster>-head`` / ``<cluster>-worker``, label-checked.
    upstream: GenerateIdentifier (label-checked with CheckLabel)."""
    return check_label(f"{cluster_name}-{node_type}")
