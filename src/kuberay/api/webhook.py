"""Validating admission for ray.io objects: ``AdmissionReview`` in, ``AdmissionReview`` out.

Off by default, as upstream (``ENABLE_WEBHOOKS``). What the webhook rejects mirrors upstream's
webhooks so that enabling it never refuses an object KubeRay would admit: for every kind the
metadata name rules, and for RayCluster also duplicate worker group names. ``strict=True``
additionally runs the full controller-side validation (with the given feature gates) so that
mistakes surface at ``kubectl apply`` time instead of in events or status; it is an opt-in
because it refuses objects upstream only reports on later.

Failure modes: a request this handler cannot read (missing ``request``, unknown kind) is
answered "allowed" with a warning rather than failing admission for unrelated objects; every
rejection is a 422 ``Invalid`` status shaped like the apiserver's own, with one cause per field.
"""

from __future__ import annotations

import base64
from collections.abc import Callable, Mapping
from typing import Any

from kuberay.api import constants as c
from kuberay.api import validation
from kuberay.api.features import DEFAULT_GATES, FeatureGates
from kuberay.api.k8svalidation import go_quote

ADMISSION_API_VERSION = "admission.k8s.io/v1"
PATHS = {
    "/validate-ray-io-v1-raycluster": (c.KIND_RAYCLUSTER, "rayclusters"),
    "/validate-ray-io-v1-rayjob": (c.KIND_RAYJOB, "rayjobs"),
    "/validate-ray-io-v1-rayservice": (c.KIND_RAYSERVICE, "rayservices"),
}
METADATA_RULES = {
    c.KIND_RAYCLUSTER: validation.validate_raycluster_metadata,
    c.KIND_RAYJOB: validation.validate_rayjob_metadata,
    c.KIND_RAYSERVICE: validation.validate_rayservice_metadata,
}

Cause = tuple[str, str, str]  # field path, printed value, detail


def _dict(value: Any) -> dict[str, Any]:
    return value if isinstance(value, dict) else {}


def field_causes(obj: Mapping[str, Any], kind: str) -> list[Cause]:
    """Upstream's webhook rules for one object, as (field, value, detail) triples."""
    causes: list[Cause] = []
    metadata = _dict(obj.get("metadata"))
    name = str(metadata.get("name") or "")
    err = METADATA_RULES[kind](metadata)
    if err:
        causes.append(("metadata.name", go_quote(name), err))
    if kind == c.KIND_RAYCLUSTER:
        seen: set[str] = set()
        groups = _dict(obj.get("spec")).get("workerGroupSpecs")
        for i, group in enumerate(groups if isinstance(groups, list) else []):
            group_name = str(_dict(group).get("groupName") or "")
            if group_name in seen:
                causes.append(
                    (
                        f"spec.workerGroupSpecs[{i}]",
                        go_quote(group_name),
                        "worker group names must be unique",
                    )
                )
            seen.add(group_name)
    return causes


def invalid_status(kind: str, name: str, causes: list[Cause]) -> dict[str, Any]:
    """A ``metav1.Status`` like ``apierrors.NewInvalid`` builds."""
    rendered = [f"{f}: Invalid value: {value}: {detail}" for f, value, detail in causes]
    summary = rendered[0] if len(rendered) == 1 else "[" + ", ".join(rendered) + "]"
    return {
        "metadata": {},
        "status": "Failure",
        "message": f'{kind}.{c.GROUP} "{name}" is invalid: {summary}',
        "reason": "Invalid",
        "code": 422,
        "details": {
            "name": name,
            "group": c.GROUP,
            "kind": kind,
            "causes": [
                {"reason": "FieldValueInvalid", "message": r.split(": ", 1)[1], "field": f}
                for r, (f, _, _) in zip(rendered, causes, strict=True)
            ],
        },
    }


def _response(uid: str, allowed: bool, **extra: Any) -> dict[str, Any]:
    return {
        "apiVersion": ADMISSION_API_VERSION,
        "kind": "AdmissionReview",
        "response": {"uid": uid, "allowed": allowed, **extra},
    }


def review(
    admission_review: Mapping[str, Any],
    *,
    gates: FeatureGates = DEFAULT_GATES,
    strict: bool = False,
) -> dict[str, Any]:
    """Judge one AdmissionReview request (CREATE and UPDATE; anything else is allowed)."""
    request = _dict(admission_review.get("request"))
    uid = str(request.get("uid") or "")
    obj = _dict(request.get("object"))
    kind = str(_dict(request.get("kind")).get("kind") or obj.get("kind") or "")
    if request.get("operation") not in ("CREATE", "UPDATE"):
        return _response(uid, True)
    if kind not in METADATA_RULES:
        return _response(uid, True, warnings=[f"kuberay webhook does not validate kind {kind!r}"])
    causes = field_causes(obj, kind)
    if not causes and strict:
        err = validation.validate(obj, gates)
        if err:
            causes.append(("spec", '"<object>"', err))
    if not causes:
        return _response(uid, True)
    name = str(_dict(obj.get("metadata")).get("name") or "")
    return _response(uid, False, status=invalid_status(kind, name, causes))


def handlers(
    *, gates: FeatureGates = DEFAULT_GATES, strict: bool = False
) -> dict[str, Callable[[dict[str, Any]], dict[str, Any]]]:
    """Path -> handler, ready for ``kuberay.runtime.webhook.WebhookServer``."""

    def handler(body: dict[str, Any]) -> dict[str, Any]:
        return review(body, gates=gates, strict=strict)

    return dict.fromkeys(PATHS, handler)


def webhook_configuration(
    name: str,
    ca_bundle: bytes,
    *,
    url: str | None = None,
    service: Mapping[str, Any] | None = None,
    namespace_selector: Mapping[str, Any] | None = None,
) -> dict[str, Any]:
    """A ValidatingWebhookConfiguration for the three kinds (client config by URL or Service)."""
    webhooks = []
    for path, (kind, plural) in PATHS.items():
        client: dict[str, Any] = {"caBundle": base64.b64encode(ca_bundle).decode()}
        if url is not None:
            client["url"] = url.rstrip("/") + path
        else:
            client["service"] = {**(service or {}), "path": path}
        hook: dict[str, Any] = {
            "name": f"v{kind.lower()}.kb.io",
            "admissionReviewVersions": ["v1"],
            "clientConfig": client,
            "failurePolicy": "Fail",
            "sideEffects": "None",
            "rules": [
                {
                    "apiGroups": [c.GROUP],
                    "apiVersions": [c.VERSION],
                    "operations": ["CREATE", "UPDATE"],
                    "resources": [plural],
                }
            ],
        }
        if namespace_selector is not None:
            hook["namespaceSelector"] = dict(namespace_selector)
        webhooks.append(hook)
    return {
        "apiVersion": "admissionregistration.k8s.io/v1",
        "kind": "ValidatingWebhookConfiguration",
        "metadata": {"name": name},
        "webhooks": webhooks,
    }
