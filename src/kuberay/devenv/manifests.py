"""Apply YAML manifests (CRDs, samples) to a cluster with server-side apply.

The generated CRDs are too large for client-side apply's last-applied annotation (as upstream's
are), so everything is applied server-side with one field manager; re-applying is idempotent.
"""

from __future__ import annotations

from collections.abc import Iterable
from pathlib import Path
from typing import Any

import yaml

from kuberay.devenv.testing import has_condition, wait_for
from kuberay.runtime.client import APPLY_PATCH, CRDS, KubeClient, Resource

REPO_ROOT = Path(__file__).resolve().parents[3]
CRD_DIR = REPO_ROOT / "deploy" / "crds"
FIELD_MANAGER = "kuberay-devenv"


def resource_of(obj: dict[str, Any]) -> Resource:
    """The REST location of a manifest's kind, for the kinds the dev tools apply."""
    api_version, kind = obj["apiVersion"], obj["kind"]
    group, _, version = api_version.rpartition("/")
    plural = kind.lower() + ("es" if kind.endswith("s") else "s")
    namespaced = kind not in ("CustomResourceDefinition", "Namespace", "ClusterRole", "Node")
    if kind == "CustomResourceDefinition":
        return CRDS
    return Resource(group, version, plural, namespaced=namespaced, kind=kind)


async def apply(kube: KubeClient, obj: dict[str, Any], namespace: str | None = None) -> Any:
    res = resource_of(obj)
    ns = obj["metadata"].get("namespace") or namespace if res.namespaced else None
    if ns:
        obj["metadata"]["namespace"] = ns
    return await kube.patch(
        res,
        obj["metadata"]["name"],
        obj,
        ns,
        content_type=APPLY_PATCH,
        field_manager=FIELD_MANAGER,
        force=True,
    )


def load_documents(paths: Iterable[Path]) -> list[dict[str, Any]]:
    docs: list[dict[str, Any]] = []
    for path in paths:
        docs.extend(d for d in yaml.safe_load_all(path.read_text()) if d)
    return docs


async def install_crds(kube: KubeClient, crd_dir: Path = CRD_DIR, timeout: float = 180.0) -> None:
    await install_crds_from(kube, sorted(crd_dir.glob("*.yaml")), timeout=timeout)


async def install_crds_from(
    kube: KubeClient, paths: Iterable[Path], timeout: float = 180.0
) -> None:
    """Applies every CRD in ``paths`` and waits until each is Established (served)."""
    for crd in load_documents(paths):
        await apply(kube, crd)
        await wait_for(
            kube,
            CRDS,
            crd["metadata"]["name"],
            None,
            lambda o: has_condition(o, "Established"),
            timeout=timeout,
            what="Established",
        )
