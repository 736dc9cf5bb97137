"""Every RayCluster sample in deploy/samples goes through every builder without error."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
import yaml

from kuberay.api.resources import pod_resource_totals
from kuberay.builders.auth import build_auth_secret, wants_auth_secret
from kuberay.builders.hashing import spec_hash
from kuberay.builders.ingress import build_head_ingress
from kuberay.builders.options import BuildOptions
from kuberay.builders.pod import build_head_pod, build_worker_pod
from kuberay.builders.rbac import (
    build_autoscaler_role,
    build_autoscaler_role_binding,
    build_autoscaler_service_account,
)
from kuberay.builders.service import build_head_service, build_headless_service
from kuberay.builders.storage import build_gcs_pvc

SAMPLES = Path(__file__).resolve().parents[3] / "deploy" / "samples"


def _clusters() -> list[Any]:
    found = []
    for path in sorted(SAMPLES.glob("raycluster*.yaml")):
        for doc in yaml.safe_load_all(path.read_text()):
            if isinstance(doc, dict) and doc.get("kind") == "RayCluster":
                doc.setdefault("metadata", {}).setdefault("namespace", "default")
                doc["metadata"].setdefault("uid", "uid-1")
                found.append(pytest.param(doc, id=f"{path.stem}/{doc['metadata']['name']}"))
    return found


@pytest.mark.parametrize("cluster", _clusters())
def test_sample_builds(cluster: dict[str, Any]) -> None:
    opts = BuildOptions(mtls=True, history_server=True)
    head = build_head_pod(cluster, opts)
    ray = head["spec"]["containers"][0]
    assert any(e["name"] == "KUBERAY_GEN_RAY_START_CMD" for e in ray["env"])
    for group in cluster["spec"].get("workerGroupSpecs") or []:
        worker = build_worker_pod(
            cluster,
            group,
            opts,
            name_suffix="abcde",
            replica_index=0,
            replica_name="r",
            host_index=0,
        )
        assert worker["metadata"]["labels"]["ray.io/group"] == group["groupName"]
    build_head_service(cluster, opts)
    build_headless_service(cluster, opts)
    build_head_ingress(cluster, opts)
    build_autoscaler_service_account(cluster)
    build_autoscaler_role(cluster)
    build_autoscaler_role_binding(cluster)
    build_gcs_pvc(cluster)
    if wants_auth_secret(cluster):
        build_auth_secret(cluster, "token")
    assert set(pod_resource_totals(cluster)) == {
        "desiredCPU",
        "desiredMemory",
        "desiredGPU",
        "desiredTPU",
    }
    assert len(spec_hash(cluster["spec"])) == 32
