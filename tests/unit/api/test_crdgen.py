"""The generated CRDs: committed YAML is current, structural, and carries upstream's metadata."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from kuberay.api import crdgen
from kuberay.cli.main import main as cli_main

DEPLOY = Path(__file__).resolve().parents[3] / "deploy" / "crds"


def test_committed_crds_are_current() -> None:
    stale = crdgen.stale_files(DEPLOY)
    assert not stale, f"regenerate with `python -m kuberay.api.crdgen`: {stale}"


def test_check_flag_reports_stale_files(tmp_path: Path) -> None:
    assert crdgen.main(["--check", "--output", str(tmp_path)]) == 1
    assert crdgen.main(["--output", str(tmp_path)]) == 0
    assert crdgen.main(["--check", "--output", str(tmp_path)]) == 0
    (tmp_path / "ray.io_rayjobs.yaml").write_text("stale\n")
    assert crdgen.stale_files(tmp_path) == ["ray.io_rayjobs.yaml"]


def test_cli_subcommand_writes_the_same_files(tmp_path: Path) -> None:
    assert cli_main(["crds", "--output", str(tmp_path)]) == 0
    assert sorted(p.name for p in tmp_path.iterdir()) == sorted(
        crdgen.filename(k) for k in crdgen.KINDS
    )
    assert cli_main(["crds", "--check", "--output", str(tmp_path)]) == 0


def _versions(crd: dict[str, Any]) -> dict[str, dict[str, Any]]:
    return {v["name"]: v for v in crd["spec"]["versions"]}


@pytest.mark.parametrize("kind", crdgen.KINDS, ids=lambda k: k.kind)
def test_versions_and_names(kind: crdgen.Kind) -> None:
    crd = crdgen.crd(kind)
    assert crd["metadata"]["name"] == f"{kind.plural}.ray.io"
    names = crd["spec"]["names"]
    assert names["categories"] == ["all"]
    assert "shortNames" not in names
    versions = _versions(crd)
    assert versions["v1"]["storage"] is True
    assert versions["v1"]["subresources"] == {"status": {}}
    if kind.kind == "RayCronJob":
        assert set(versions) == {"v1"}
    else:
        alpha = versions["v1alpha1"]
        assert alpha["served"] is True
        assert alpha["storage"] is False
        assert alpha["deprecated"] is True
        assert alpha["deprecationWarning"] == (
            f"ray.io/v1alpha1 {kind.kind} is deprecated; use ray.io/v1 {kind.kind}. v1alpha1 "
            "receives no new fields and will be unavailable in KubeRay 1.9."
        )


def _walk(node: dict[str, Any], path: str) -> list[str]:
    """Structural-schema violations (every node typed, unless int-or-string/preserve)."""
    problems = []
    typed = "type" in node or node.get("x-kubernetes-int-or-string")
    if not typed and not node.get("x-kubernetes-preserve-unknown-fields"):
        problems.append(path)
    for key in ("$ref", "allOf", "oneOf", "definitions"):
        if key in node:
            problems.append(f"{path}: {key}")
    for name, sub in node.get("properties", {}).items():
        problems += _walk(sub, f"{path}.{name}")
    if isinstance(node.get("items"), dict):
        problems += _walk(node["items"], f"{path}[]")
    if isinstance(node.get("additionalProperties"), dict):
        problems += _walk(node["additionalProperties"], f"{path}{{}}")
    return problems


@pytest.mark.parametrize("kind", crdgen.KINDS, ids=lambda k: k.kind)
def test_schemas_are_structural_and_description_free(kind: crdgen.Kind) -> None:
    crd = crdgen.crd(kind)
    for version in crd["spec"]["versions"]:
        schema = version["schema"]["openAPIV3Schema"]
        assert _walk(schema, version["name"]) == []
        assert "description" not in json.dumps(schema)


def test_cel_rules_and_markers_land_where_upstream_has_them() -> None:
    spec = crdgen.crd(crdgen.KINDS[0])["spec"]["versions"][0]["schema"]["openAPIV3Schema"]
    cluster = spec["properties"]["spec"]["properties"]
    rules = [r["message"] for r in cluster["managedBy"]["x-kubernetes-validations"]]
    assert rules[0] == "the managedBy field is immutable"
    backend = cluster["gcsFaultToleranceOptions"]["properties"]["backend"]
    assert backend["enum"] == ["redis", "rocksdb"]
    assert backend["x-kubernetes-validations"][0]["rule"] == "self == oldSelf"
    worker = cluster["workerGroupSpecs"]["items"]
    assert worker["required"] == ["groupName", "maxReplicas", "minReplicas", "template"]
    assert worker["properties"]["maxReplicas"] == {
        "default": 2147483647,
        "format": "int32",
        "type": "integer",
    }
    groups = cluster["networkPolicy"]["properties"]["workerGroups"]
    assert groups["x-kubernetes-list-type"] == "map"
    assert groups["x-kubernetes-list-map-keys"] == ["groupName"]


def test_v1alpha1_is_a_subset_of_v1() -> None:
    def paths(node: dict[str, Any], prefix: str = "") -> set[str]:
        out = {prefix}
        for name, sub in node.get("properties", {}).items():
            out |= paths(sub, f"{prefix}.{name}")
        if isinstance(node.get("items"), dict):
            out |= paths(node["items"], prefix + "[]")
        if isinstance(node.get("additionalProperties"), dict):
            out |= paths(node["additionalProperties"], prefix + "{}")
        return out

    for kind in crdgen.KINDS[:3]:
        versions = _versions(crdgen.crd(kind))
        v1 = paths(versions["v1"]["schema"]["openAPIV3Schema"])
        alpha = paths(versions["v1alpha1"]["schema"]["openAPIV3Schema"])
        extra = {p for p in alpha - v1 if not p.endswith("healthLastUpdateTime")}
        assert extra == set()
        assert len(alpha) < len(v1)
