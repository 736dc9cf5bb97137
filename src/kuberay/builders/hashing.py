"""The spec hash behind ``upgradeStrategy: Recreate`` and RayService's "is this a new cluster".

Fields that autoscalers and Kueue rewrite at run time (replica counts, ``workersToDelete``,
tolerations, scheduling gates) and the upgrade strategy itself are removed first, so scaling or
admission never looks like a spec change.

The digest is SHA-1 over a canonical JSON form (sorted keys, no whitespace, with null values and
empty objects/lists dropped so that a field written as ``{}`` hashes like an absent one), encoded
in base32 with the extended-hex alphabet. It is stable across processes and Python versions.
It does not reproduce the Go operator's bytes (that would need Go's struct field order for
every core type); see the report for what that means when taking over head pods created by the
Go operator.
"""

from __future__ import annotations

import base64
import copy
import hashlib
import json
from typing import Any

_POD_SCHEDULING_FIELDS = ("tolerations", "schedulingGates")


def _prune(node: Any) -> Any:
    if isinstance(node, dict):
        out = {}
        for key, value in node.items():
            pruned = _prune(value)
            if pruned is None or pruned == {} or pruned == []:
                continue
            out[key] = pruned
        return out
    if isinstance(node, list):
        return [_prune(item) for item in node]
    return node


def _strip_template(group: dict[str, Any]) -> None:
    template = group.get("template")
    if isinstance(template, dict) and isinstance(template.get("spec"), dict):
        for key in _POD_SCHEDULING_FIELDS:
            template["spec"].pop(key, None)


def hashable_spec(spec: dict[str, Any]) -> dict[str, Any]:
    """The spec with every hash-ignored field removed (a deep copy).
    upstream: GenerateHashWithoutReplicasAndWorkersToDelete (the fields it drops)."""
    clean: dict[str, Any] = copy.deepcopy(spec)
    clean.pop("upgradeStrategy", None)
    head = clean.get("headGroupSpec")
    if isinstance(head, dict):
        _strip_template(head)
    for group in clean.get("workerGroupSpecs") or []:
        if not isinstance(group, dict):
            continue
        for key in ("replicas", "minReplicas", "maxReplicas"):
            group.pop(key, None)
        strategy = group.get("scaleStrategy")
        if isinstance(strategy, dict):
            strategy.pop("workersToDelete", None)
        _strip_template(group)
    result: dict[str, Any] = _prune(clean)
    return result


def json_hash(obj: Any) -> str:
    """Base32hex SHA-1 of the compact, key-sorted JSON. upstream: GenerateJsonHash."""
    text = json.dumps(obj, sort_keys=True, separators=(",", ":"), ensure_ascii=False)
    digest = hashlib.sha1(text.encode(), usedforsecurity=False).digest()
    return base64.b32hexencode(digest).decode()


def spec_hash(spec: dict[str, Any]) -> str:
    """Hash of a RayCluster spec, blind to replica counts.
    upstream: GenerateHashWithoutReplicasAndWorkersToDelete."""
    return json_hash(hashable_spec(spec))
