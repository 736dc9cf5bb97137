"""NetworkPolicies (upstream v1.7: networkpolicy_controller.go)."""

from __future__ import annotations

from typing import Any

from kuberay.builders.network_policy import build_network_policies

from . import samples

SAME = {"podSelector": {"matchLabels": {"ray.io/cluster": "demo"}}}


def test_deny_all_default_head_and_workers() -> None:
    rc = samples.cluster("demo", networkPolicy={})
    head, worker = build_network_policies(rc)
    assert head["metadata"]["name"] == "demo-head"
    assert head["metadata"]["labels"]["ray.io/group"] == "headgroup"
    assert head["spec"]["podSelector"] == {
        "matchLabels": {"ray.io/cluster": "demo", "ray.io/node-type": "head"}
    }
    assert head["spec"]["policyTypes"] == ["Ingress", "Egress"]
    assert head["spec"]["ingress"] == [{"from": [SAME]}]
    assert head["spec"]["egress"] == [{"to": [SAME]}]
    assert worker["metadata"]["name"] == "demo-workers-small-group"
    assert worker["spec"]["podSelector"]["matchLabels"]["ray.io/group"] == "small-group"


def test_modes_and_user_rules() -> None:
    custom: dict[str, Any] = {"from": [{"namespaceSelector": {}}]}
    rc = samples.cluster(
        "demo",
        networkPolicy={
            "mode": "DenyAllIngress",
            "head": {"ingressRules": [custom], "egressRules": [{"to": []}]},
            "worker": {"ingressRules": [{"from": []}]},
            "workerGroups": [{"groupName": "small-group", "ingressRules": [custom]}],
        },
    )
    head, worker = build_network_policies(rc)
    assert head["spec"]["policyTypes"] == ["Ingress"]
    assert "egress" not in head["spec"]
    assert head["spec"]["ingress"] == [{"from": [SAME]}, custom]
    assert worker["spec"]["ingress"] == [{"from": [SAME]}, custom]  # workerGroups replaces worker
    egress_only = samples.cluster("demo", networkPolicy={"mode": "DenyAllEgress"})
    assert build_network_policies(egress_only)[0]["spec"]["policyTypes"] == ["Egress"]


def test_rayjob_submitter_allowed_to_dashboard() -> None:
    rc = samples.cluster("demo", networkPolicy={"mode": "DenyAll"})
    rc["metadata"]["labels"] = {"ray.io/job-submission-mode": "K8sJobMode"}
    rc["metadata"]["ownerReferences"] = [
        {"apiVersion": "ray.io/v1", "kind": "RayJob", "name": "job", "uid": "u", "controller": True}
    ]
    head = build_network_policies(rc)[0]
    assert head["spec"]["ingress"][1] == {
        "from": [
            {
                "podSelector": {
                    "matchLabels": {
                        "ray.io/originated-from-cr-name": "job",
                        "ray.io/originated-from-crd": "RayJob",
                    }
                }
            }
        ],
        "ports": [{"protocol": "TCP", "port": 8265}],
    }
