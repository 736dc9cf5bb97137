"""The GCS claim's drift report and the owner references ``deletionPolicy`` asks for."""

from __future__ import annotations

import copy
from typing import Any

from kuberay.builders import storage as storeb


def cluster(**storage: Any) -> dict[str, Any]:
    return {
        "apiVersion": "ray.io/v1",
        "kind": "RayCluster",
        "metadata": {"name": "c", "namespace": "ns", "uid": "u1"},
        "spec": {"gcsFaultToleranceOptions": {"backend": "rocksdb", "storage": storage}},
    }


def test_drift_compares_size_by_value_and_class_only_when_asked() -> None:
    want = storeb.build_gcs_pvc(cluster(size="1Gi"))
    have = copy.deepcopy(want)
    have["spec"]["resources"]["requests"]["storage"] = "1024Mi"
    have["spec"]["storageClassName"] = "standard"  # defaulted by the cluster: not drift
    assert storeb.pvc_drift(want, have) == []
    have["spec"]["resources"]["requests"]["storage"] = "2Gi"
    have["spec"]["accessModes"] = ["ReadWriteMany"]
    assert storeb.pvc_drift(want, have) == [
        "size 2Gi, spec asks 1Gi",
        "accessModes ['ReadWriteMany'], spec asks ['ReadWriteOnce']",
    ]


def test_owner_references_follow_the_deletion_policy() -> None:
    delete = cluster(size="1Gi")
    retain = cluster(size="1Gi", deletionPolicy="Retain")
    owned = storeb.build_gcs_pvc(delete)
    assert storeb.owner_references_for(delete, owned) is None  # already right
    assert storeb.owner_references_for(retain, owned) == []  # released
    bare = storeb.build_gcs_pvc(retain)
    assert storeb.owner_references_for(retain, bare) is None
    adopted = storeb.owner_references_for(delete, bare)
    assert adopted is not None
    assert [r["uid"] for r in adopted] == ["u1"]
    foreign = copy.deepcopy(bare)
    foreign["metadata"]["ownerReferences"] = [{"uid": "x", "controller": True}]
    assert storeb.owner_references_for(delete, foreign) is None  # never taken from another
