"""Apply YAML manifests (CRDs, samples) to a cluster with server-side apply.

The generated CRDs are too large for client-side apply's last-applied annotation (as upstream's
are), so everything is applied server-side with one field manager; re-applying is idempotent.

Installing CRDs is cheap when nothing changed. Our four CRDs are 4 MB of YAML: parsing them took
11 s and applying them another 9 s of apiserver time, and the test suite installs them in dozens
of fixtures. So each file is parsed once per process (keyed by its size and mtime), and a CRD is
applied only when the served object does not already carry the digest of exactly this document
at its current generation (two annotations written by the install). Someone else changing a
CRD's spec bumps its generation, so the next install re-applies it; deleting it removes the
annotations with it. What is not caught: a foreign edit of a CRD's labels or annotations alone.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Iterable
from pathlib import Path
from typing import Any

import yaml

from kuberay.devenv.testing import has_condition, wait_for
from kuberay.runtime.client import APPLY_PATCH, CRDS, KubeClient, Resource
from kuberay.runtime.errors import NotFound

REPO_ROOT = Path(__file__).resolve().parents[3]
CRD_DIR = REPO_ROOT / "deploy" / "crds"
FIELD_MANAGER = "kuberay-devenv"
# Set on each CRD the dev tools install: the digest of the applied document, and the generation
# the apply produced. Both matching the served object means there is nothing to apply.
APPLIED_DIGEST = "devenv.kuberay.io/applied-digest"
APPLIED_GENERATION = "devenv.kuberay.io/applied-generation"

# libyaml's parser where PyYAML has it (five times faster on the CRDs), else the pure-Python one.
_SafeLoader: Any = getattr(yaml, "CSafeLoader", yaml.SafeLoader)


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
    """Every non-empty document of every file, freshly parsed (callers may change them)."""
    docs: list[dict[str, Any]] = []
    for path in paths:
        docs.extend(d for d in yaml.load_all(path.read_text(), Loader=_SafeLoader) if d)
    return docs


# path -> ((size, mtime_ns), [(document, digest)]); the documents are never handed out to be
# changed: install_crds_from copies what it adds to.
_PARSED: dict[Path, tuple[tuple[int, int], list[tuple[dict[str, Any], str]]]] = {}


def _documents_with_digests(path: Path) -> list[tuple[dict[str, Any], str]]:
    """A file's documents with the digest of each, parsed once per version of the file."""
    key = path.resolve()
    stat = key.stat()
    version = (stat.st_size, stat.st_mtime_ns)
    cached = _PARSED.get(key)
    if cached is not None and cached[0] == version:
        return cached[1]
    parsed = [
        (doc, hashlib.sha256(json.dumps(doc, sort_keys=True).encode()).hexdigest())
        for doc in load_documents([key])
    ]
    _PARSED[key] = (version, parsed)
    return parsed


def _already_applied(served: dict[str, Any], digest: str) -> bool:
    """Whether ``served`` is the CRD this digest describes, unchanged since, and served."""
    meta = served.get("metadata", {})
    notes = meta.get("annotations") or {}
    return (
        notes.get(APPLIED_DIGEST) == digest
        and notes.get(APPLIED_GENERATION) == str(meta.get("generation"))
        and has_condition(served, "Established")
    )


async def install_crds(kube: KubeClient, crd_dir: Path = CRD_DIR, timeout: float = 180.0) -> None:
    await install_crds_from(kube, sorted(crd_dir.glob("*.yaml")), timeout=timeout)


async def install_crds_from(
    kube: KubeClient, paths: Iterable[Path], timeout: float = 180.0
) -> None:
    """Applies every CRD in ``paths`` that is not already served as it is there, and waits until
    each is Established (served)."""
    for path in paths:
        for crd, digest in _documents_with_digests(path):
            await _install_crd(kube, crd, digest, timeout)


async def _install_crd(kube: KubeClient, crd: dict[str, Any], digest: str, timeout: float) -> None:
    name = crd["metadata"]["name"]
    try:
        if _already_applied(await kube.get(CRDS, name), digest):
            return
    except NotFound:
        pass
    meta = crd["metadata"]
    notes = {**(meta.get("annotations") or {}), APPLIED_DIGEST: digest}
    applied = await apply(kube, {**crd, "metadata": {**meta, "annotations": notes}})
    # A metadata-only change: it does not bump the generation it records.
    await kube.patch(
        CRDS,
        name,
        {"metadata": {"annotations": {APPLIED_GENERATION: str(applied["metadata"]["generation"])}}},
    )
    await wait_for(
        kube,
        CRDS,
        name,
        None,
        lambda o: has_condition(o, "Established"),
        timeout=timeout,
        what="Established",
    )
