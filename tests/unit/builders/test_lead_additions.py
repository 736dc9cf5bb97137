"""Regression tests added by the lead while wiring the builders into the reconciler."""

from __future__ import annotations

import copy

from kuberay.builders.options import BuildOptions
from kuberay.builders.service import build_head_service


def test_user_head_service_ports_are_not_duplicated() -> None:
    cluster = {
        "metadata": {"name": "c", "namespace": "ns", "uid": "u"},
        "spec": {
            "headGroupSpec": {
                "headService": {
                    "metadata": {"name": "mine"},
                    "spec": {"ports": [{"name": "dashboard", "port": 8265, "nodePort": 31865}]},
                },
                "template": {"spec": {"containers": [{"name": "ray-head", "image": "ray"}]}},
            }
        },
    }
    svc = build_head_service(copy.deepcopy(cluster), BuildOptions())
    names = [p["name"] for p in svc["spec"]["ports"]]
    assert names.count("dashboard") == 1
    assert len(names) == len(set(names))
    assert svc["spec"]["ports"][0] == {"name": "dashboard", "port": 8265, "nodePort": 31865}
    assert "metrics" in names
