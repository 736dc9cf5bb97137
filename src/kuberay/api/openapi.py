"""Kubernetes core-type schemas for the CRDs, taken from the pinned apiserver's OpenAPI v3.

Our CRDs embed core objects (pod templates, Services, env vars, ...) whose schemas must be the
ones the pinned Kubernetes (v1.36.3) serves, otherwise the apiserver prunes or rejects fields a
user legitimately sets. Generating them by hand would drift, so a trimmed copy of the served
OpenAPI v3 document (only the definitions reachable from the roots we embed, descriptions
removed) is committed as package data; CRD generation then works without a running plane, and
an integration test proves the snapshot still equals what the apiserver serves.

Conversion rules (from OpenAPI v3 to a structural CRD schema, matching controller-gen):
- ``$ref``/``allOf`` are inlined; CRD schemas cannot reference anything.
- Quantity and IntOrString become ``anyOf: [integer, string]`` + ``x-kubernetes-int-or-string``
  (Quantity also gets its textual pattern); Time/MicroTime become ``string``/``date-time``.
- Embedded ObjectMeta keeps only the five fields the apiserver allows in embedded metadata.
- Enum lists and zero-value defaults the OpenAPI generator adds for non-pointer fields are
  dropped (controller-gen does not emit them); explicit ``+default`` values are kept.
- Patch-strategy extensions are dropped: they mean nothing to CRDs.

Failure modes: an unknown root or dangling reference raises ``KeyError`` at generation time,
never at runtime; a snapshot drifting from the apiserver fails the integration test.
"""

from __future__ import annotations

import copy
import json
from collections.abc import Iterable, Mapping
from functools import cache
from importlib import resources
from typing import Any

KUBERNETES_VERSION = "v1.36.3"
SNAPSHOT_NAME = f"k8s-openapi-{KUBERNETES_VERSION}.json"

# The OpenAPI v3 group documents the roots live in, as served under /openapi/v3/<path>.
GROUP_PATHS = ("api/v1", "apis/networking.k8s.io/v1")

# Definitions the CRDs embed directly.
ROOTS = (
    "io.k8s.api.core.v1.PodTemplateSpec",
    "io.k8s.api.core.v1.Service",
    "io.k8s.api.core.v1.EnvVar",
    "io.k8s.api.core.v1.EnvFromSource",
    "io.k8s.api.core.v1.EnvVarSource",
    "io.k8s.api.core.v1.VolumeMount",
    "io.k8s.api.core.v1.ResourceRequirements",
    "io.k8s.api.core.v1.SecurityContext",
    "io.k8s.api.networking.v1.IngressTLS",
    "io.k8s.api.networking.v1.NetworkPolicyIngressRule",
    "io.k8s.api.networking.v1.NetworkPolicyEgressRule",
)

REF_PREFIX = "#/components/schemas/"
QUANTITY = "io.k8s.apimachinery.pkg.api.resource.Quantity"
INT_OR_STRING = "io.k8s.apimachinery.pkg.util.intstr.IntOrString"
TIMES = (
    "io.k8s.apimachinery.pkg.apis.meta.v1.Time",
    "io.k8s.apimachinery.pkg.apis.meta.v1.MicroTime",
)
OBJECT_META = "io.k8s.apimachinery.pkg.apis.meta.v1.ObjectMeta"

QUANTITY_PATTERN = (
    r"^(\+|-)?(([0-9]+(\.[0-9]*)?)|(\.[0-9]+))(([KMGTPE]i)|[numkMGTPE]|"
    r"([eE](\+|-)?(([0-9]+(\.[0-9]*)?)|(\.[0-9]+))))?$"
)

# Extensions that only mean something to strategic merge patch or to the apiserver's own
# OpenAPI consumers; CRD schemas do not carry them.
_DROPPED_EXTENSIONS = (
    "x-kubernetes-patch-strategy",
    "x-kubernetes-patch-merge-key",
    "x-kubernetes-group-version-kind",
    "x-kubernetes-unions",
)

_LABEL_KEY_PATTERN = (
    r"^([a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*/)?"
    r"(([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9])$"
)

# Validation markers on Go types that kube-openapi does not publish but controller-gen does.
_FIELD_OVERRIDES: dict[tuple[str, str], dict[str, Any]] = {
    ("io.k8s.api.core.v1.PortStatus", "error"): {"maxLength": 316, "pattern": _LABEL_KEY_PATTERN},
}
_REQUIRED_OVERRIDES: dict[str, list[str]] = {
    "io.k8s.api.core.v1.PortStatus": ["error", "port", "protocol"],
}
# Go markers that controller-gen reads but the served OpenAPI does not carry: since Kubernetes
# 1.35 these reference structs are ``+structType=atomic`` (a patch replaces them whole) ...
_ATOMIC_STRUCTS = frozenset(
    {
        "io.k8s.api.core.v1.ConfigMapEnvSource",
        "io.k8s.api.core.v1.SecretEnvSource",
        "io.k8s.api.core.v1.ConfigMapVolumeSource",
        "io.k8s.api.core.v1.ConfigMapProjection",
        "io.k8s.api.core.v1.SecretProjection",
    }
)
# ... and these defaults are ``+default=ref(...)`` markers, which the apiserver resolves and
# publishes but controller-gen does not emit.
_DEFAULTS_NOT_EMITTED = frozenset(
    {
        ("io.k8s.api.core.v1.AzureDiskVolumeSource", "cachingMode"),
        ("io.k8s.api.core.v1.AzureDiskVolumeSource", "kind"),
    }
)
CONDITION = "io.k8s.apimachinery.pkg.apis.meta.v1.Condition"


def condition_schema() -> dict[str, Any]:
    """metav1.Condition as controller-gen renders it (with its kubebuilder markers)."""
    return {
        "type": "object",
        "properties": {
            "lastTransitionTime": {"type": "string", "format": "date-time"},
            "message": {"type": "string", "maxLength": 32768},
            "observedGeneration": {"type": "integer", "format": "int64", "minimum": 0},
            "reason": {
                "type": "string",
                "maxLength": 1024,
                "minLength": 1,
                "pattern": r"^[A-Za-z]([A-Za-z0-9_,:]*[A-Za-z0-9_])?$",
            },
            "status": {"type": "string", "enum": ["True", "False", "Unknown"]},
            "type": {"type": "string", "maxLength": 316, "pattern": _LABEL_KEY_PATTERN},
        },
        "required": ["lastTransitionTime", "message", "reason", "status", "type"],
    }


def _strip_descriptions(node: Any) -> Any:
    if isinstance(node, dict):
        return {k: _strip_descriptions(v) for k, v in node.items() if k != "description"}
    if isinstance(node, list):
        return [_strip_descriptions(v) for v in node]
    return node


def _refs(node: Any) -> Iterable[str]:
    if isinstance(node, dict):
        ref = node.get("$ref")
        if isinstance(ref, str):
            yield ref.removeprefix(REF_PREFIX)
        for value in node.values():
            yield from _refs(value)
    elif isinstance(node, list):
        for value in node:
            yield from _refs(value)


def trim(documents: Iterable[Mapping[str, Any]], roots: Iterable[str] = ROOTS) -> dict[str, Any]:
    """The definitions reachable from ``roots``, descriptions removed, keys sorted."""
    schemas: dict[str, Any] = {}
    for doc in documents:
        schemas.update(doc.get("components", {}).get("schemas", {}))
    out: dict[str, Any] = {}
    pending = list(roots)
    while pending:
        name = pending.pop()
        if name in out:
            continue
        definition = _strip_descriptions(schemas[name])
        out[name] = definition
        pending.extend(_refs(definition))
    return {"kubernetesVersion": KUBERNETES_VERSION, "schemas": dict(sorted(out.items()))}


def dumps_snapshot(snapshot: Mapping[str, Any]) -> str:
    return json.dumps(snapshot, indent=1, sort_keys=True) + "\n"


@cache
def snapshot() -> dict[str, Any]:
    text = resources.files("kuberay.api").joinpath("data", SNAPSHOT_NAME).read_text("utf-8")
    data: dict[str, Any] = json.loads(text)
    return data


def _is_zero(value: Any) -> bool:
    return value in ("", 0, False) or value == {} or value == []


# kube-openapi publishes a zero-value default for every non-pointer field, controller-gen only
# the explicit ``+default`` markers. Zero defaults are therefore dropped, except these fields,
# whose explicit marker happens to be a zero value (reference names, the gRPC probe service and
# a few optional flags).
_EXPLICIT_ZERO_DEFAULT_FIELDS = {
    ("io.k8s.api.core.v1.ConfigMapKeySelector", "name"),
    ("io.k8s.api.core.v1.SecretKeySelector", "name"),
    ("io.k8s.api.core.v1.ConfigMapEnvSource", "name"),
    ("io.k8s.api.core.v1.SecretEnvSource", "name"),
    ("io.k8s.api.core.v1.LocalObjectReference", "name"),
    ("io.k8s.api.core.v1.ConfigMapVolumeSource", "name"),
    ("io.k8s.api.core.v1.ConfigMapProjection", "name"),
    ("io.k8s.api.core.v1.SecretProjection", "name"),
    ("io.k8s.api.core.v1.GRPCAction", "service"),
    ("io.k8s.api.core.v1.FileKeySelector", "optional"),
    ("io.k8s.api.core.v1.AzureDiskVolumeSource", "readOnly"),
}


def _convert_property(
    owner: str, field: str, node: Mapping[str, Any], defs: Mapping[str, Any]
) -> Any:
    out = _convert(node, defs)
    if (owner, field) in _EXPLICIT_ZERO_DEFAULT_FIELDS and "default" in node:
        out["default"] = node["default"]
    if (owner, field) in _DEFAULTS_NOT_EMITTED:
        out.pop("default", None)
    for key, value in _FIELD_OVERRIDES.get((owner, field), {}).items():
        out[key] = value
    return out


def _convert_ref(name: str, defs: Mapping[str, Any]) -> dict[str, Any]:
    if name == QUANTITY:
        return {
            "anyOf": [{"type": "integer"}, {"type": "string"}],
            "pattern": QUANTITY_PATTERN,
            "x-kubernetes-int-or-string": True,
        }
    if name == INT_OR_STRING:
        return {
            "anyOf": [{"type": "integer"}, {"type": "string"}],
            "x-kubernetes-int-or-string": True,
        }
    if name in TIMES:
        return {"type": "string", "format": "date-time"}
    if name == OBJECT_META:
        return embedded_object_meta()
    if name == CONDITION:
        return condition_schema()
    definition = defs[name]
    if "type" not in definition and "properties" not in definition and "$ref" not in definition:
        # Opaque types (RawExtension and friends): anything goes, fields preserved.
        return {"type": "object", "x-kubernetes-preserve-unknown-fields": True}
    out: dict[str, Any] = _convert({k: v for k, v in definition.items() if k != "properties"}, defs)
    if "properties" in definition:
        out["properties"] = {
            key: _convert_property(name, key, value, defs)
            for key, value in sorted(definition["properties"].items())
        }
    if name in _REQUIRED_OVERRIDES:
        out["required"] = _REQUIRED_OVERRIDES[name]
    if name in _ATOMIC_STRUCTS:
        out["x-kubernetes-map-type"] = "atomic"
    return out


def _convert(node: Any, defs: Mapping[str, Any]) -> Any:
    if isinstance(node, list):
        return [_convert(v, defs) for v in node]
    if not isinstance(node, dict):
        return node
    if "$ref" in node:
        return _convert_ref(node["$ref"].removeprefix(REF_PREFIX), defs)
    if "allOf" in node and len(node["allOf"]) == 1:
        base = _convert(node["allOf"][0], defs)
        rest = {k: v for k, v in node.items() if k != "allOf"}
        merged = {**base, **_convert(rest, defs)}
        return merged
    out: dict[str, Any] = {}
    for key, value in node.items():
        if key in ("description", "enum", *_DROPPED_EXTENSIONS):
            continue
        if key == "default" and _is_zero(value):
            continue
        if key == "required":
            out[key] = sorted(value)
            continue
        if key == "properties":
            out[key] = {k: _convert(v, defs) for k, v in sorted(value.items())}
        elif key in ("items", "additionalProperties"):
            out[key] = _convert(value, defs)
        else:
            out[key] = copy.deepcopy(value)
    if "items" in out and "type" not in out:
        out["type"] = "array"
    return out


def embedded_object_meta() -> dict[str, Any]:
    """The metadata schema the apiserver accepts for an object embedded in a CRD."""
    string_map = {"type": "object", "additionalProperties": {"type": "string"}}
    return {
        "type": "object",
        "properties": {
            "annotations": dict(string_map),
            "finalizers": {"type": "array", "items": {"type": "string"}},
            "labels": dict(string_map),
            "name": {"type": "string"},
            "namespace": {"type": "string"},
        },
    }


def schema_for(name: str, snap: Mapping[str, Any] | None = None) -> dict[str, Any]:
    """The structural CRD schema of one core definition, fully inlined."""
    defs = (snap or snapshot())["schemas"]
    return _convert_ref(name, defs)
