"""kuberay.devenv.kueue's pure parts: the webhook configurations and Kueue's configuration."""

from __future__ import annotations

import base64
from pathlib import Path
from typing import Any

from kuberay.devenv.kueue import NAMESPACE_LABEL, configuration, webhook_configurations


def _hook(name: str, group: str, resource: str, path: str) -> dict[str, Any]:
    return {
        "name": name,
        "admissionReviewVersions": ["v1"],
        "clientConfig": {"service": {"name": "webhook-service", "path": path}},
        "failurePolicy": "Fail",
        "sideEffects": "None",
        "rules": [
            {
                "apiGroups": [group],
                "apiVersions": ["v1"],
                "operations": ["CREATE"],
                "resources": [resource],
            }
        ],
    }


MANIFESTS: list[dict[str, Any]] = [
    {
        "apiVersion": "admissionregistration.k8s.io/v1",
        "kind": "MutatingWebhookConfiguration",
        "metadata": {"name": "mutating-webhook-configuration"},
        "webhooks": [
            _hook("mrayjob.kb.io", "ray.io", "rayjobs", "/mutate-ray-io-v1-rayjob"),
            _hook("mrayservice.kb.io", "ray.io", "rayservices", "/mutate-ray-io-v1-rayservice"),
            _hook("mjob.kb.io", "batch", "jobs", "/mutate-batch-v1-job"),
            _hook("mcq.kb.io", "kueue.x-k8s.io", "clusterqueues", "/mutate-cq"),
        ],
    },
    {"apiVersion": "v1", "kind": "Service", "metadata": {"name": "webhook-service"}},
]


def test_webhooks_point_at_loopback_for_kueue_kinds_and_enabled_ray_integrations() -> None:
    configs = webhook_configurations(MANIFESTS, "https://127.0.0.1:9443", b"CA")
    assert [c["kind"] for c in configs] == ["MutatingWebhookConfiguration"]
    (config,) = configs
    assert config["metadata"]["name"] == "kueue-mutating-webhook-configuration"
    hooks = {h["name"]: h for h in config["webhooks"]}
    # rayservices is not enabled by default; batch/job never is here.
    assert set(hooks) == {"mrayjob.kb.io", "mcq.kb.io"}
    rayjob = hooks["mrayjob.kb.io"]
    assert rayjob["clientConfig"] == {
        "url": "https://127.0.0.1:9443/mutate-ray-io-v1-rayjob",
        "caBundle": base64.b64encode(b"CA").decode(),
    }
    key, value = NAMESPACE_LABEL
    assert rayjob["namespaceSelector"] == {"matchLabels": {key: value}}
    # The input is not modified.
    assert "service" in MANIFESTS[0]["webhooks"][0]["clientConfig"]


def test_configuration_is_loopback_without_cert_management_or_leader_election() -> None:
    cfg = configuration(
        webhook_port=1,
        health_port=2,
        cert_dir=Path("/certs"),
        feature_gates={"ElasticJobsViaWorkloadSlices": True},
    )
    assert cfg["webhook"] == {"host": "127.0.0.1", "port": 1, "certDir": "/certs"}
    assert cfg["health"]["healthProbeBindAddress"] == "127.0.0.1:2"
    assert cfg["internalCertManagement"] == {"enable": False}
    assert cfg["leaderElection"] == {"leaderElect": False}
    assert cfg["integrations"]["frameworks"] == ["ray.io/rayjob", "ray.io/raycluster"]
    assert cfg["featureGates"] == {
        "VisibilityOnDemand": False,
        "ElasticJobsViaWorkloadSlices": True,
    }
