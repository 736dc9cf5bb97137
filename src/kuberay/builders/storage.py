"""The PersistentVolumeClaim backing embedded (RocksDB) GCS fault tolerance.

A claim named by the user (``storage.claimName``) is theirs: nothing is built for it. With
``deletionPolicy: Retain`` the claim carries no owner reference, so deleting the RayCluster
keeps the GCS data; ``pvc_owner_references`` lets the reconciler add or drop the reference on an
existing claim when the policy changes.
"""

from __future__ import annotations

from typing import Any

from kuberay.api import constants as c
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
