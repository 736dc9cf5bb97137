"""Spot checks of the shared names (other tools match them literally)."""

from __future__ import annotations

from kuberay.api import constants as c


def test_well_known_names() -> None:
    assert c.LABEL_CLUSTER == "ray.io/cluster"
    assert c.LABEL_NODE_TYPE == "ray.io/node-type"
    assert c.FINALIZER_GCS_FT_REDIS_CLEANUP == "ray.io/gcs-ft-redis-cleanup-finalizer"
    assert c.FINALIZER_RAYJOB == "ray.io/rayjob-finalizer"
    assert c.FINALIZER_RAYSERVICE == "ray.io/rayservice-finalizer"
    assert c.DEFAULT_PORTS == {
        "client": 10001,
        "gcs-server": 6379,
        "dashboard": 8265,
        "metrics": 8080,
        "serve": 8000,
    }
    assert c.LEADER_ELECTION_ID == "ray-operator-leader"
    assert sorted(c.JOB_STATUS_TERMINAL) == ["FAILED", "STOPPED", "SUCCEEDED"]
    assert sorted(c.DEPLOYMENT_TERMINAL) == ["Complete", "Failed"]


def test_event_reasons_are_unique_and_unprefixed() -> None:
    reasons = {k: v for k, v in vars(c).items() if k.startswith("EVENT_") and isinstance(v, str)}
    assert len(set(reasons.values())) == len(reasons)
    assert all(v[0].isupper() and " " not in v for v in reasons.values())
    assert "InvalidRayClusterSpec" in reasons.values()
    assert "MTLSCertificateExpiringSoon" in reasons.values()


def test_operator_environment_defaults() -> None:
    assert c.OPERATOR_ENV_DEFAULTS[c.ENV_ENABLE_ZERO_DOWNTIME] == "true"
    assert c.OPERATOR_ENV_DEFAULTS[c.ENV_RAYJOB_STATUS_CHECK_TIMEOUT] == "300"
    assert len(c.OPERATOR_ENV_DEFAULTS) == 15
