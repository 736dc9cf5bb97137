"""The committed Kubernetes OpenAPI snapshot and the core-type conversion rules."""

from __future__ import annotations

from kuberay.api import openapi


def test_snapshot_is_trimmed_closure_of_roots() -> None:
    snap = openapi.snapshot()
    assert snap["kubernetesVersion"] == "v1.36.3"
    schemas = snap["schemas"]
    for root in openapi.ROOTS:
        assert root in schemas
    # Re-trimming the snapshot itself is a fixed point: nothing unreachable is kept.
    again = openapi.trim([{"components": {"schemas": schemas}}])
    assert again == snap
    assert "description" not in openapi.dumps_snapshot(snap)


def test_special_types() -> None:
    template = openapi.schema_for("io.k8s.api.core.v1.PodTemplateSpec")
    meta = template["properties"]["metadata"]
    assert sorted(meta["properties"]) == [
        "annotations",
        "finalizers",
        "labels",
        "name",
        "namespace",
    ]
    container = template["properties"]["spec"]["properties"]["containers"]
    assert container["x-kubernetes-list-map-keys"] == ["name"]
    item = container["items"]["properties"]
    limits = item["resources"]["properties"]["limits"]["additionalProperties"]
    assert limits["x-kubernetes-int-or-string"] is True
    assert limits["pattern"] == openapi.QUANTITY_PATTERN
    port = item["ports"]["items"]["properties"]
    assert port["protocol"] == {"default": "TCP", "type": "string"}
    assert port["containerPort"] == {"format": "int32", "type": "integer"}
    probe = item["livenessProbe"]["properties"]["httpGet"]["properties"]["port"]
    assert probe == {
        "anyOf": [{"type": "integer"}, {"type": "string"}],
        "x-kubernetes-int-or-string": True,
    }
    env_source = item["env"]["items"]["properties"]["valueFrom"]["properties"]
    assert env_source["configMapKeyRef"]["properties"]["name"]["default"] == ""


def test_conditions_carry_controller_gen_markers() -> None:
    cond = openapi.condition_schema()
    assert cond["required"] == ["lastTransitionTime", "message", "reason", "status", "type"]
    assert cond["properties"]["status"]["enum"] == ["True", "False", "Unknown"]
