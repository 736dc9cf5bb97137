"""Our chart's values against the upstream kuberay-operator chart's (v1.7.0), key by key.

Every key upstream's values.yaml has must be in ours with the same default, unless ``DIFFERENT``
names it with the reason (the same reason is written next to the key in our values.yaml). An entry
of ``DIFFERENT`` that no longer differs fails too, so the list stays exact. Keys only we have are
allowed (they are extensions, never renames). Upstream's file is a reference copy outside the
repository (``../shared/reference``); without it the tests skip.
"""

from __future__ import annotations

import subprocess
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
import yaml

from kuberay.api import features
from kuberay.cli.main import build_parser

ROOT = Path(__file__).resolve().parents[2]
CHART = ROOT / "deploy" / "helm" / "kuberay-operator"
UPSTREAM = ROOT.parent / "shared" / "reference" / "upstream-chart-values.yaml"
Render = Callable[..., list[dict[str, Any]]]
HelmRun = Callable[..., subprocess.CompletedProcess[str]]

# Upstream key -> why our default differs.
DIFFERENT = {
    "image.repository": "upstream's image runs the Go operator; this project publishes none",
    "image.tag": "our package version, not upstream's",
    "operatorCommand": "the image's command is `kuberay` (subcommand `operator`), not /manager",
    "reconcileConcurrency": "8, the operator's own default: with 1 one big cluster stalls all",
    "featureGates": "lists every gate this operator has; upstream's gates keep their defaults",
    "env": "upstream's is null (only commented examples); ours is the equivalent empty list",
}


def _leaves(node: Any, prefix: str = "") -> dict[str, Any]:
    """Dotted key -> value for every leaf; an empty mapping is a leaf of its own."""
    if isinstance(node, dict) and node:
        out: dict[str, Any] = {}
        for key, value in node.items():
            out.update(_leaves(value, f"{prefix}.{key}" if prefix else str(key)))
        return out
    return {prefix: node}


def _load(path: Path) -> dict[str, Any]:
    loaded: dict[str, Any] = yaml.safe_load(path.read_text())
    return loaded


@pytest.fixture(scope="module")
def upstream() -> dict[str, Any]:
    if not UPSTREAM.is_file():
        pytest.skip(f"no reference copy of upstream's chart values at {UPSTREAM}")
    return _load(UPSTREAM)


def test_every_upstream_value_key_with_the_same_default(upstream: dict[str, Any]) -> None:
    theirs = _leaves(upstream)
    ours = _leaves(_load(CHART / "values.yaml"))
    missing = sorted(set(theirs) - set(ours))
    differing = sorted(
        key for key in set(theirs) & set(ours) if theirs[key] != ours[key] and key not in DIFFERENT
    )
    stale = sorted(key for key in DIFFERENT if key not in theirs or theirs[key] == ours.get(key))
    assert missing == [], "upstream keys our values.yaml lacks"
    assert differing == [], "defaults that differ without a documented reason"
    assert stale == [], "DIFFERENT entries that no longer differ"


def test_upstream_feature_gates_keep_their_defaults(upstream: dict[str, Any]) -> None:
    ours = {g.name: g.default for g in features.GATES}
    for gate in upstream["featureGates"]:
        assert ours.get(gate["name"]) == gate["enabled"], gate["name"]


def test_upstream_values_file_renders_an_operator_we_can_run(
    upstream: dict[str, Any], render_chart: Render
) -> None:
    """A user's upstream values file, given to our chart, gives flags our operator accepts."""
    docs = render_chart({"operatorCommand": "kuberay"}, files=(UPSTREAM,))
    dep = next(d for d in docs if d["kind"] == "Deployment")
    assert dep["metadata"]["name"] == "kuberay-operator"
    (ctr,) = dep["spec"]["template"]["spec"]["containers"]
    args = build_parser().parse_args(ctr["args"])
    assert args.reconcile_concurrency == upstream["reconcileConcurrency"]
    assert ctr["image"] == "quay.io/kuberay/operator:v1.7.0", "upstream's image, as asked"
    features.FeatureGates.parse(args.feature_gates)
