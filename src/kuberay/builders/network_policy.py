"""NetworkPolicies isolating a RayCluster (gate RayClusterNetworkPolicy, ``spec.networkPolicy``).

One policy for the head and one per worker group. Pods of the same cluster may always talk to
each other (in both directions when both directions are denied by the mode); anything else must
come from the user's rules. A RayJob's submitter is additionally let in to the head's dashboard
port when the cluster is owned by a RayJob running in K8sJobMode, since submission would
otherwise be cut off by the policy the user asked for.

Deliberately not added: DNS egress. Upstream does not add it either, so a DenyAll/DenyAllEgress
cluster needs a user egress rule for DNS; adding one silently would widen what users approved.
"""

from __future__ import annotations

import copy
from typing import Any

from kuberay.api import constants as c
from kuberay.builders.common import (
    JsonDict,
    as_dict,
    as_list,
    cluster_labels,
    cluster_name,
    cluster_namespace,
    owner_reference,
    spec_of,
    worker_groups,
)
from kuberay.builders.service import service_ports


def _rules(rules: Any) -> JsonDict:
    return as_dict(rules)


def _rayjob_owner(cluster: JsonDict) -> str | None:
    if cluster_labels(cluster).get(c.LABEL_JOB_SUBMISSION_MODE) != c.K8S_JOB_MODE:
        return None
    for ref in as_list(as_dict(cluster.get("metadata")).get("ownerReferences")):
        ref = as_dict(ref)
        if ref.get("controller") is True and ref.get("kind") == c.KIND_RAYJOB:
            return str(ref.get("name") or "")
    return None


def _policy(
    cluster: JsonDict,
    name: str,
    group: str,
    selector: dict[str, str],
    user: JsonDict,
    extra_ingress: list[JsonDict],
) -> JsonDict:
    cluster_name_value = cluster_name(cluster)
    mode = as_dict(spec_of(cluster).get("networkPolicy")).get("mode") or c.NETWORK_POLICY_DENY_ALL
    same_cluster = {"podSelector": {"matchLabels": {c.LABEL_CLUSTER: cluster_name_value}}}
    spec: JsonDict = {"podSelector": {"matchLabels": selector}, "policyTypes": []}
    if mode in (c.NETWORK_POLICY_DENY_ALL, c.NETWORK_POLICY_DENY_ALL_INGRESS):
        spec["policyTypes"].append("Ingress")
        spec["ingress"] = [
            {"from": [same_cluster]},
            *extra_ingress,
            *copy.deepcopy(as_list(user.get("ingressRules"))),
        ]
    if mode in (c.NETWORK_POLICY_DENY_ALL, c.NETWORK_POLICY_DENY_ALL_EGRESS):
        spec["policyTypes"].append("Egress")
        spec["egress"] = [
            {"to": [copy.deepcopy(same_cluster)]},
            *copy.deepcopy(as_list(user.get("egressRules"))),
        ]
    return {
        "apiVersion": "networking.k8s.io/v1",
        "kind": "NetworkPolicy",
        "metadata": {
            "name": name,
            "namespace": cluster_namespace(cluster),
            "labels": {
                c.LABEL_CLUSTER: cluster_name_value,
                c.LABEL_GROUP: group,
                c.LABEL_APP_NAME: c.APP_NAME,
                c.LABEL_CREATED_BY: c.CREATED_BY,
            },
            "ownerReferences": [owner_reference(cluster)],
        },
        "spec": spec,
    }


def build_network_policies(cluster: JsonDict) -> list[JsonDict]:
    """Head policy first, then one per worker group in spec order."""
    name = cluster_name(cluster)
    config = as_dict(spec_of(cluster).get("networkPolicy"))
    extra: list[JsonDict] = []
    rayjob = _rayjob_owner(cluster)
    if rayjob is not None:
        port = service_ports(cluster).get(c.DASHBOARD_PORT_NAME, c.DASHBOARD_PORT)
        extra.append(
            {
                "from": [
                    {
                        "podSelector": {
                            "matchLabels": {
                                c.LABEL_ORIGINATED_FROM_CR_NAME: rayjob,
                                c.LABEL_ORIGINATED_FROM_CRD: c.KIND_RAYJOB,
                            }
                        }
                    }
                ],
                "ports": [{"protocol": "TCP", "port": port}],
            }
        )
    policies = [
        _policy(
            cluster,
            f"{name}-head",
            c.HEAD_GROUP_NAME,
            {c.LABEL_CLUSTER: name, c.LABEL_NODE_TYPE: c.NODE_TYPE_HEAD},
            _rules(config.get("head")),
            extra,
        )
    ]
    per_group = {
        str(as_dict(g).get("groupName")): as_dict(g) for g in as_list(config.get("workerGroups"))
    }
    for group in worker_groups(cluster):
        group_name = str(group.get("groupName") or "")
        user = per_group.get(group_name, _rules(config.get("worker")))
        policies.append(
            _policy(
                cluster,
                f"{name}-workers-{group_name}",
                group_name,
                {
                    c.LABEL_CLUSTER: name,
                    c.LABEL_NODE_TYPE: c.NODE_TYPE_WORKER,
                    c.LABEL_GROUP: group_name,
                },
                user,
                [],
            )
        )
    return policies
