"""The PersistentVolumeClaim backing embedded (RocksDB) GCS fault tolerance.

A claim named by the user (``storage.claimName``) is theirs: nothing is built for it. With
``deletionPolicy: Retain`` the claim carries no owner reference, so deleting the RayCluster
keeps the GCS data; ``pvc_owner_references`` lets the reconciler add or drop the reference on an
existing claim when the policy changes.
"""

from __future__ import annotations

from typing import Any

from kuberay.api import constants as c
from kuberay.api.quantity import same_amount
from kuberay.builders import names
from kuberay.builders.common import (
    JsonDict,
    as_dict,
    as_list,
    cluster_name,
    cluster_namespace,
    gcs_ft_options,
    owner_reference,
)

DEFAULT_SIZE = "1Gi"
DEFAULT_ACCESS_MODES = ("ReadWriteOnce",)
RETAIN = "Retain"


def _storage(cluster: JsonDict) -> JsonDict:
    return as_dict(as_dict(gcs_ft_options(cluster)).get("storage"))


def uses_user_claim(cluster: JsonDict) -> bool:
    return bool(_storage(cluster).get("claimName"))


def pvc_owner_references(cluster: JsonDict) -> list[dict[str, Any]]:
    if _storage(cluster).get("deletionPolicy") == RETAIN:
        return []
    return [owner_reference(cluster)]


def build_gcs_pvc(cluster: JsonDict) -> JsonDict:
    """The PersistentVolumeClaim backing embedded RocksDB GCS storage.
    upstream: gcs_ft.go BuildGCSStoragePVC."""
    storage = _storage(cluster)
    spec: JsonDict = {
        "accessModes": list(as_list(storage.get("accessModes")) or DEFAULT_ACCESS_MODES),
        "resources": {"requests": {"storage": str(storage.get("size") or DEFAULT_SIZE)}},
    }
    if storage.get("storageClassName"):
        spec["storageClassName"] = storage["storageClassName"]
    metadata: JsonDict = {
        "name": names.gcs_pvc_name(cluster),
        "namespace": cluster_namespace(cluster),
        "labels": {c.LABEL_CLUSTER: cluster_name(cluster)},
    }
    owners = pvc_owner_references(cluster)
    if owners:
        metadata["ownerReferences"] = owners
    return {"apiVersion": "v1", "kind": "PersistentVolumeClaim", "metadata": metadata, "spec": spec}


def pvc_drift(want: JsonDict, have: JsonDict) -> list[str]:
    """How an existing claim differs from what the spec asks for (size, class, access modes),
    worded for an event. Kubernetes would refuse most of these changes, so they are reported,
    never applied."""
    want_spec, have_spec = as_dict(want.get("spec")), as_dict(have.get("spec"))
    drift: list[str] = []
    size = as_dict(as_dict(want_spec.get("resources")).get("requests")).get("storage")
    got = as_dict(as_dict(have_spec.get("resources")).get("requests")).get("storage")
    if not same_amount(size, got):
        drift.append(f"size {got}, spec asks {size}")
    wanted_class = want_spec.get("storageClassName")
    if wanted_class and have_spec.get("storageClassName") != wanted_class:
        drift.append(
            f"storageClassName {have_spec.get('storageClassName')}, spec asks {wanted_class}"
        )
    modes, got_modes = as_list(want_spec.get("accessModes")), as_list(have_spec.get("accessModes"))
    if sorted(modes) != sorted(got_modes):
        drift.append(f"accessModes {got_modes}, spec asks {modes}")
    return drift


def owner_references_for(cluster: JsonDict, have: JsonDict) -> list[dict[str, Any]] | None:
    """The claim's owner references after applying ``deletionPolicy`` (None: nothing to
    change). An existing claim is adopted only when no other controller owns it."""
    uid = as_dict(cluster.get("metadata")).get("uid")
    refs = [as_dict(r) for r in as_list(as_dict(have.get("metadata")).get("ownerReferences"))]
    ours = [r for r in refs if r.get("uid") == uid]
    if pvc_owner_references(cluster):
        if ours or any(r.get("controller") for r in refs):
            return None
        return [*refs, owner_reference(cluster)]
    if not ours:
        return None
    return [r for r in refs if r.get("uid") != uid]
