"""What counts as a NetworkPolicy change: the apiserver's TCP default and labels others add do
not; a spec or label of ours that drifted does."""

from __future__ import annotations

import copy
from typing import Any

from kuberay.controllers.networkpolicy import policy_differs


def _policy(**spec: Any) -> dict[str, Any]:
    return {
        "metadata": {"name": "c-head", "labels": {"ray.io/cluster": "c"}},
        "spec": {"podSelector": {}, "policyTypes": ["Ingress"], **spec},
    }


def test_missing_protocol_equals_tcp() -> None:
    want = _policy(ingress=[{"ports": [{"port": 8265}]}])
    have = _policy(ingress=[{"ports": [{"port": 8265, "protocol": "TCP"}]}])
    assert not policy_differs(want, have)
    have["spec"]["ingress"][0]["ports"][0]["protocol"] = "UDP"
    assert policy_differs(want, have)


def test_extra_labels_are_kept_but_ours_must_match() -> None:
    want = _policy()
    have = copy.deepcopy(want)
    have["metadata"]["labels"]["team"] = "security"
    assert not policy_differs(want, have)
    have["metadata"]["labels"]["ray.io/cluster"] = "other"
    assert policy_differs(want, have)


def test_mode_change_is_a_difference() -> None:
    assert policy_differs(_policy(), _policy(policyTypes=["Ingress", "Egress"]))
