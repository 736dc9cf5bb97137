"""ServiceAccount, Role and RoleBinding that let the in-tree autoscaler sidecar scale its own
cluster (pods: read, patch and resize; the RayCluster: get and patch ``replicas`` /
``workersToDelete``). The Role is namespaced and named after the cluster, so an autoscaler can
never touch another cluster's pods through it.

Names go through ``check_name`` (tail-truncation QUIRK), and the binding's subject uses the
same checked name as the head pod's ``serviceAccountName`` so the three always line up.
"""

from __future__ import annotations

from kuberay.api import constants as c
from kuberay.builders import names
from kuberay.builders.common import JsonDict, cluster_name, cluster_namespace, owner_reference


def _metadata(cluster: JsonDict, name: str) -> JsonDict:
    return {
        "name": name,
        "namespace": cluster_namespace(cluster),
        "labels": {
            c.LABEL_CLUSTER: cluster_name(cluster),
            c.LABEL_APP_NAME: c.APP_NAME,
            c.LABEL_CREATED_BY: c.CREATED_BY,
        },
        "ownerReferences": [owner_reference(cluster)],
    }


def build_autoscaler_service_account(cluster: JsonDict) -> JsonDict:
    """The autoscaler's ServiceAccount, owned by the cluster.
    upstream: rbac.go BuildServiceAccount."""
    return {
        "apiVersion": "v1",
        "kind": "ServiceAccount",
        "metadata": _metadata(cluster, names.autoscaler_service_account_name(cluster)),
    }


def build_autoscaler_role(cluster: JsonDict) -> JsonDict:
    """What the autoscaler may do to pods and the RayCluster. upstream: rbac.go BuildRole."""
    return {
        "apiVersion": "rbac.authorization.k8s.io/v1",
        "kind": "Role",
        "metadata": _metadata(cluster, names.autoscaler_role_name(cluster_name(cluster))),
        "rules": [
            {"apiGroups": [""], "resources": ["pods"], "verbs": ["get", "list", "watch", "patch"]},
            {"apiGroups": [""], "resources": ["pods/resize"], "verbs": ["patch"]},
            {"apiGroups": [c.GROUP], "resources": ["rayclusters"], "verbs": ["get", "patch"]},
        ],
    }


def build_autoscaler_role_binding(cluster: JsonDict) -> JsonDict:
    """Binds the autoscaler Role to its ServiceAccount. upstream: rbac.go BuildRoleBinding."""
    role = names.autoscaler_role_name(cluster_name(cluster))
    return {
        "apiVersion": "rbac.authorization.k8s.io/v1",
        "kind": "RoleBinding",
        "metadata": _metadata(cluster, role),
        "subjects": [
            {
                "kind": "ServiceAccount",
                "name": names.autoscaler_service_account_name(cluster),
                "namespace": cluster_namespace(cluster),
            }
        ],
        "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "Role", "name": role},
    }
