"""The apiserver accepts every sample manifest under deploy/samples (after CRD install)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
import yaml

from kuberay.api import crdgen
from kuberay.devenv.crds import apply_crds
from kuberay.runtime.client import APPLY_PATCH, CRDS, KubeClient, Resource

SAMPLES = Path(__file__).resolve().parents[2] / "deploy" / "samples"
PLURALS = {k.kind: k.plural for k in crdgen.KINDS}


def documents() -> list[tuple[str, dict[str, Any]]]:
    out = []
    for path in sorted(SAMPLES.glob("*.yaml")):
        out += [(path.name, doc) for doc in yaml.safe_load_all(path.read_text()) if doc]
    return out


@pytest.fixture(scope="module")
async def crds(kube: KubeClient) -> None:
    await apply_crds(kube, field_manager="kuberay-samples-test")


async def test_apiserver_accepts_every_sample(kube: KubeClient, crds: None, namespace: str) -> None:
    docs = documents()
    assert len(docs) >= 20
    for name, doc in docs:
        res = Resource("ray.io", "v1", PLURALS[doc["kind"]], kind=doc["kind"])
        applied = await kube.patch(
            res,
            doc["metadata"]["name"],
            doc,
            namespace,
            content_type=APPLY_PATCH,
            field_manager="kuberay-samples-test",
            force=True,
        )
        # Nothing in a sample is pruned: every field we wrote is part of the schema.
        assert _contains(applied["spec"], doc["spec"]), name
    crd = await kube.get(CRDS, "rayclusters.ray.io")
    assert crd["status"]["acceptedNames"]["kind"] == "RayCluster"


def _contains(have: Any, want: Any) -> bool:
    """``want`` is a subset of ``have`` (the apiserver may add defaults, never drop fields)."""
    if isinstance(want, dict):
        return isinstance(have, dict) and all(
            k in have and _contains(have[k], v) for k, v in want.items()
        )
    if isinstance(want, list):
        return (
            isinstance(have, list)
            and len(have) == len(want)
            and all(_contains(h, w) for h, w in zip(have, want, strict=True))
        )
    return bool(have == want)
