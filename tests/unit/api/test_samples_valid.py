"""The sample manifests parse into the models unchanged and pass controller validation."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
import yaml

from kuberay.api import validation
from kuberay.api.features import FeatureGates
from kuberay.api.raycluster import RayCluster
from kuberay.api.raycronjob import RayCronJob
from kuberay.api.rayjob import RayJob
from kuberay.api.rayservice import RayService

SAMPLES = Path(__file__).resolve().parents[3] / "deploy" / "samples"
MODELS: dict[str, Any] = {
    "RayCluster": RayCluster,
    "RayJob": RayJob,
    "RayService": RayService,
    "RayCronJob": RayCronJob,
}


def documents() -> list[tuple[str, dict[str, Any]]]:
    out = []
    for path in sorted(SAMPLES.glob("*.yaml")):
        out += [(path.name, doc) for doc in yaml.safe_load_all(path.read_text()) if doc]
    return out


def test_samples_cover_every_kind() -> None:
    kinds = {doc["kind"] for _, doc in documents()}
    assert kinds == set(MODELS)


@pytest.mark.parametrize(("name", "doc"), documents(), ids=[n for n, _ in documents()])
def test_sample_round_trips_and_validates(name: str, doc: dict[str, Any]) -> None:
    model = MODELS[doc["kind"]].model_validate(doc)
    assert model.to_dict() == doc
    # Samples that need alpha features say so; with every gate on, all must be valid.
    assert validation.validate(doc, FeatureGates.with_all(True)) is None
