"""The Kubernetes permissions the operator needs: the one list every install artefact is made from.

``kuberay manifests`` renders these rules into ``deploy/rbac/`` (ClusterRole and the leader-election
Role) and into the Helm chart's templates, so a permission is added or removed here and nowhere
else. A unit test reads the controllers and the runtime and fails when they call a verb on a
resource that no rule grants, or when a rule grants something no code uses; the integration test
runs the operator under exactly these rules.

Invariants and failure modes:
- Least privilege: only the verbs the code issues. The exceptions are deliberate and commented:
  the permissions the autoscaler Role hands out (Kubernetes refuses to let anyone create a Role
  granting more than they hold themselves, so a missing one turns into ``forbidden`` on the
  autoscaler Role's creation, not on use) and ``<kind>/finalizers`` (needed to set
  ``blockOwnerDeletion`` owner references where the OwnerReferencesPermissionEnforcement
  admission plugin is on, as on OpenShift).
- Leases live in the leader-election Role only (namespaced to the operator's own namespace), never
  in the ClusterRole: the operator cannot take over another controller's lock elsewhere.
- Optional rules (batch-scheduler PodGroups) are not in the static manifests; the chart adds them
  when a batch scheduler is configured.
- Discovery (``GET /apis``, ``/version``) needs no rule: every authenticated identity holds
  ``system:discovery``.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Final

from kuberay.api import constants as c


@dataclass(frozen=True)
class Rule:
    """One RBAC policy rule plus the reason it exists (kept out of the YAML, read in review)."""

    group: str
    resources: tuple[str, ...]
    verbs: tuple[str, ...]
    why: str

    def as_dict(self) -> dict[str, Any]:
        return {
            "apiGroups": [self.group],
            "resources": sorted(self.resources),
            "verbs": sorted(self.verbs),
        }


_WATCH = ("list", "watch")

OPERATOR_RULES: Final = (
    # ray.io: the four kinds the operator reconciles.
    Rule(
        c.GROUP,
        ("rayclusters",),
        ("create", "delete", "get", "list", "patch", "update", "watch"),
        "RayCluster controller, and RayJob/RayService create, suspend and delete their clusters",
    ),
    Rule(
        c.GROUP,
        ("rayjobs",),
        ("create", "delete", "list", "patch", "watch"),
        "finalizer patches, deleting finished jobs, RayCronJob creates RayJobs",
    ),
    Rule(c.GROUP, ("rayservices",), ("list", "patch", "watch"), "finalizer patches"),
    Rule(c.GROUP, ("raycronjobs",), _WATCH, "the RayCronJob controller's informer"),
    Rule(
        c.GROUP,
        ("rayclusters/status", "rayjobs/status", "rayservices/status", "raycronjobs/status"),
        ("update",),
        "status is written with PUT on the status subresource",
    ),
    Rule(
        c.GROUP,
        (
            "rayclusters/finalizers",
            "rayjobs/finalizers",
            "rayservices/finalizers",
            "raycronjobs/finalizers",
        ),
        ("update",),
        "blockOwnerDeletion owner references under OwnerReferencesPermissionEnforcement",
    ),
    # Core objects a cluster is made of.
    Rule(
        "",
        ("pods",),
        ("create", "delete", "get", "list", "patch", "watch"),
        "head/worker pods; get is not used directly but the autoscaler Role grants it",
    ),
    Rule("", ("pods/resize",), ("patch",), "granted by the autoscaler Role, so held here too"),
    Rule(
        "",
        ("services",),
        ("create", "delete", "get", "list", "patch", "watch"),
        "head, headless and serve Services; RayService switches and deletes them",
    ),
    Rule(
        "",
        ("services/proxy",),
        ("create", "delete", "get", "update"),
        "--use-kubernetes-proxy: dashboard GET/POST/PUT/DELETE through the API server",
    ),
    Rule(
        "",
        ("serviceaccounts",),
        ("create", "get", "list", "watch"),
        "the autoscaler's service account (create; cached to skip repeats) or the user's (get)",
    ),
    Rule(
        "",
        ("secrets",),
        ("create", "get", "update"),
        "the Ray auth-token Secret (created once, read); mTLS: read cert-manager's Secrets and "
        "add an owner reference to their Certificate",
    ),
    Rule(
        "",
        ("persistentvolumeclaims",),
        ("create", "get", "update"),
        "GCS fault tolerance RocksDB storage: created, checked for drift, owner set by policy",
    ),
    Rule(
        "discovery.k8s.io",
        ("endpointslices",),
        _WATCH,
        "RayService counts serve endpoints from the informer",
    ),
    Rule(
        "batch",
        ("jobs",),
        ("create", "delete", "get", "list", "watch"),
        "RayJob submitter Jobs and the GCS Redis cleanup Job",
    ),
    Rule(
        "events.k8s.io",
        ("events",),
        ("create", "patch"),
        "events.k8s.io/v1 Events; repeats patch the series",
    ),
    # Autoscaler RBAC: the operator creates a Role and RoleBinding per autoscaling cluster.
    Rule(
        "rbac.authorization.k8s.io",
        ("roles", "rolebindings"),
        ("create", "list", "watch"),
        "autoscaler Role/RoleBinding (create-only, never updated; cached to skip repeats)",
    ),
    # Networking the operator may create for a cluster or a RayService.
    Rule(
        "networking.k8s.io",
        ("ingresses",),
        ("create", "get", "update"),
        "headGroupSpec.enableIngress; updated when it drifts",
    ),
    Rule(
        "networking.k8s.io",
        ("networkpolicies",),
        ("create", "delete", "get", "list", "update", "watch"),
        "spec.networkPolicy (gate RayClusterNetworkPolicy): the policies isolating a cluster",
    ),
    Rule("route.openshift.io", ("routes",), ("create",), "enableIngress on OpenShift"),
    Rule(
        "cert-manager.io",
        ("issuers",),
        ("create", "list", "watch"),
        "RayClusterMTLS: a cluster's self-signed and CA Issuers (created once, cached)",
    ),
    Rule(
        "cert-manager.io",
        ("certificates",),
        ("create", "get", "list", "update", "watch"),
        "RayClusterMTLS: the CA and leaf Certificates; SANs follow the pods' IPs",
    ),
    Rule(
        "cert-manager.io",
        ("certificates/finalizers",),
        ("update",),
        "RayClusterMTLS: the Secrets' blockOwnerDeletion references to their Certificates "
        "under OwnerReferencesPermissionEnforcement (upstream does not grant it)",
    ),
    Rule(
        "gateway.networking.k8s.io",
        ("gateways", "httproutes"),
        ("create", "delete", "get", "patch"),
        "RayService incremental upgrade",
    ),
)

LEADER_ELECTION_RULES: Final = (
    Rule(
        "coordination.k8s.io",
        ("leases",),
        ("create", "get", "update"),
        "the ray-operator-leader Lease",
    ),
)

# Added by the Helm chart when a batch scheduler is configured; the plugins create PodGroups.
BATCH_SCHEDULER_RULES: Final = (
    Rule(
        "scheduling.volcano.sh",
        ("podgroups",),
        ("create", "get", "list", "update", "watch"),
        "Volcano PodGroups",
    ),
    Rule(
        "scheduling.x-k8s.io",
        ("podgroups",),
        ("create", "get", "list", "update", "watch"),
        "scheduler-plugins PodGroups",
    ),
)


def policy(rules: tuple[Rule, ...]) -> list[dict[str, Any]]:
    """The rules as RBAC YAML, in a stable order (by group, then resources)."""
    return [r.as_dict() for r in sorted(rules, key=lambda r: (r.group, sorted(r.resources)))]


def watched_resources(rules: tuple[Rule, ...] = OPERATOR_RULES) -> list[tuple[str, str]]:
    """The (group, plural) pairs ``rules`` grant both list and watch on (subresources aside):
    what the operator may keep informers of."""
    return sorted(
        {
            (rule.group, res)
            for rule in rules
            if {"list", "watch"} <= set(rule.verbs)
            for res in rule.resources
            if "/" not in res
        }
    )


def grants(rules: tuple[Rule, ...], group: str, resource: str, verb: str) -> bool:
    """Whether ``rules`` allow ``verb`` on ``group``/``resource`` (no wildcards are used here)."""
    return any(r.group == group and resource in r.resources and verb in r.verbs for r in rules)
