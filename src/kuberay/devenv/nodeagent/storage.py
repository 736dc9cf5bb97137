"""Dynamic provisioning of PersistentVolumeClaims on process-runtime planes.

A KinD cluster answers a plain PersistentVolumeClaim at once: its default StorageClass
(``standard``) has a local-path provisioner. Without one a claim stays Pending and the scheduler
refuses every pod that mounts it ("pod has unbound immediate PersistentVolumeClaims"), which is
what upstream's ``ray-cluster.persistent-redis.yaml`` sample met here. The agent therefore
installs a default StorageClass ``standard`` and provisions its claims with host directories: a
claim of that class gets a PersistentVolume ``pvc-<claim uid>`` pre-bound to it (``claimRef``
with the uid), which kube-controller-manager's binder then binds. Pods see the directory the
agent already mounts for a claim (``<data dir>/claims/<namespace>/<claim>``, see ``pod.py``).

Invariants and failure modes:
- Only claims of our StorageClass are provisioned (the class is the default, so claims without
  ``storageClassName`` get it at admission); a claim of another class stays Pending, as on a
  cluster whose class has no provisioner.
- Creating the volume is idempotent (its name comes from the claim's uid): a second event or an
  agent restart never makes a second volume for one claim.
- ``reclaimPolicy: Delete``: a volume we provisioned that turns Released (its claim deleted) is
  deleted with its directory. Volumes someone else made are never touched.
- An existing StorageClass named ``standard`` (another provisioner) is left as it is.
- An API error while creating or deleting a volume is logged, not retried: the next event of
  that claim or volume tries again.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import shutil
from pathlib import Path
from typing import Any

from kuberay.runtime.client import PVCS, PVS, STORAGECLASSES, KubeClient
from kuberay.runtime.errors import AlreadyExists, ApiError, NotFound
from kuberay.runtime.informer import Handler, Informer

log = logging.getLogger("kuberay.devenv.storage")

CLASS_NAME = "standard"  # KinD's default StorageClass name
PROVISIONER = "devenv.kuberay.io/host-path"
PROVISIONED_BY = "pv.kubernetes.io/provisioned-by"
DEFAULT_CLASS = "storageclass.kubernetes.io/is-default-class"


def storage_class() -> dict[str, Any]:
    """The plane's default StorageClass: claims are bound as soon as they exist."""
    return {
        "apiVersion": "storage.k8s.io/v1",
        "kind": "StorageClass",
        "metadata": {"name": CLASS_NAME, "annotations": {DEFAULT_CLASS: "true"}},
        "provisioner": PROVISIONER,
        "reclaimPolicy": "Delete",
        "volumeBindingMode": "Immediate",
    }


def claim_dir(data_dir: Path, namespace: str, claim: str) -> Path:
    """Where a claim's data lives on the host (the directory ``pod.py`` mounts)."""
    return data_dir / "claims" / namespace / claim


def wants_volume(claim: dict[str, Any]) -> bool:
    """A claim of our class that no volume serves yet."""
    spec = claim.get("spec") or {}
    return (
        spec.get("storageClassName") == CLASS_NAME
        and not spec.get("volumeName")
        and (claim.get("status") or {}).get("phase", "Pending") == "Pending"
        and not claim["metadata"].get("deletionTimestamp")
    )


def volume_for(claim: dict[str, Any], data_dir: Path) -> dict[str, Any]:
    """The PersistentVolume for ``claim``, pre-bound to it by uid."""
    meta, spec = claim["metadata"], claim.get("spec") or {}
    size = ((spec.get("resources") or {}).get("requests") or {}).get("storage", "1Gi")
    path = claim_dir(data_dir, meta["namespace"], meta["name"])
    return {
        "apiVersion": "v1",
        "kind": "PersistentVolume",
        "metadata": {"name": f"pvc-{meta['uid']}", "annotations": {PROVISIONED_BY: PROVISIONER}},
        "spec": {
            "capacity": {"storage": size},
            "accessModes": list(spec.get("accessModes") or ["ReadWriteOnce"]),
            "volumeMode": spec.get("volumeMode") or "Filesystem",
            "hostPath": {"path": str(path), "type": "DirectoryOrCreate"},
            "claimRef": {
                "apiVersion": "v1",
                "kind": "PersistentVolumeClaim",
                "namespace": meta["namespace"],
                "name": meta["name"],
                "uid": meta["uid"],
            },
            "storageClassName": CLASS_NAME,
            "persistentVolumeReclaimPolicy": "Delete",
        },
    }


def ours_released(volume: dict[str, Any]) -> bool:
    """A volume we provisioned whose claim is gone."""
    annotations = volume["metadata"].get("annotations") or {}
    return (
        annotations.get(PROVISIONED_BY) == PROVISIONER
        and (volume.get("status") or {}).get("phase") == "Released"
        and not volume["metadata"].get("deletionTimestamp")
    )


class Provisioner:
    """Watches claims and volumes; creates and deletes volumes as described above."""

    def __init__(self, client: KubeClient, data_dir: Path) -> None:
        self.client = client
        self.data_dir = data_dir
        self.claims = Informer(client, PVCS)
        self.volumes = Informer(client, PVS)
        self._tasks: set[asyncio.Task[None]] = set()

    async def start(self) -> None:
        with contextlib.suppress(AlreadyExists):
            await self.client.create(STORAGECLASSES, storage_class())
        self.claims.add_handler(
            Handler(on_add=self._on_claim, on_update=lambda _old, new: self._on_claim(new))
        )
        self.volumes.add_handler(
            Handler(on_add=self._on_volume, on_update=lambda _old, new: self._on_volume(new))
        )
        self.claims.start()
        self.volumes.start()

    async def stop(self) -> None:
        for task in list(self._tasks):
            task.cancel()
        await self.claims.stop()
        await self.volumes.stop()

    def _spawn(self, work: Any) -> None:
        task: asyncio.Task[None] = asyncio.get_running_loop().create_task(work)
        self._tasks.add(task)
        task.add_done_callback(self._tasks.discard)

    def _on_claim(self, claim: dict[str, Any]) -> None:
        if wants_volume(claim):
            self._spawn(self._provision(claim))

    def _on_volume(self, volume: dict[str, Any]) -> None:
        if ours_released(volume):
            self._spawn(self._reclaim(volume))

    async def _provision(self, claim: dict[str, Any]) -> None:
        body = volume_for(claim, self.data_dir)
        try:
            await self.client.create(PVS, body)
        except AlreadyExists:
            return
        except ApiError as exc:
            log.warning("provisioning a volume for %s failed: %s", body["spec"]["claimRef"], exc)
            return
        log.info("provisioned %s for claim %s", body["metadata"]["name"], body["spec"]["claimRef"])

    async def _reclaim(self, volume: dict[str, Any]) -> None:
        name = volume["metadata"]["name"]
        try:
            await self.client.delete(PVS, name)
        except NotFound:
            return
        except ApiError as exc:
            log.warning("deleting released volume %s failed: %s", name, exc)
            return
        path = Path(((volume.get("spec") or {}).get("hostPath") or {}).get("path") or "")
        claims_root = self.data_dir / "claims"
        if path.is_relative_to(claims_root) and path != claims_root:
            await asyncio.to_thread(shutil.rmtree, path, True)
