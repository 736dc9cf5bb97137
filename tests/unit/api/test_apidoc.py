"""The generated API reference: every field described, every CRD schema property documented."""

from __future__ import annotations

import re
from typing import Any

import pytest

from kuberay.api import apidoc, crdgen, fielddocs


def _models() -> list[Any]:
    return apidoc.reachable([m for k in crdgen.KINDS for m in (k.spec, k.status)])


def test_every_field_and_type_has_a_description_and_none_is_stale() -> None:
    fields = {f"{m.__name__}.{i.alias or n}" for m in _models() for n, i in m.model_fields.items()}
    assert sorted(fields - set(fielddocs.FIELD_DOCS)) == [], "fields without a description"
    assert sorted(set(fielddocs.FIELD_DOCS) - fields) == [], "descriptions of missing fields"
    types = {m.__name__ for m in _models()}
    assert set(fielddocs.TYPE_DOCS) == types
    texts = [*fielddocs.FIELD_DOCS.values(), *fielddocs.TYPE_DOCS.values()]
    assert all(text.strip() for text in texts)


_ROW = re.compile(r"^\| `([^`]+)` \| ([^|]*) \|")
_LINK = re.compile(r"\(#([a-z0-9-]+)\)")


def _sections(text: str) -> dict[str, dict[str, str]]:
    """Anchor of each ``##``/``###`` section -> its table's field -> type cell."""
    out: dict[str, dict[str, str]] = {}
    current: dict[str, str] = {}
    for line in text.splitlines():
        if line.startswith(("## ", "### ")):
            current = out.setdefault(apidoc.anchor(line.split(" ", 1)[1]), {})
        elif match := _ROW.match(line):
            current[match.group(1)] = match.group(2)
    return out


def _object(node: dict[str, Any]) -> dict[str, Any]:
    """The object schema under any number of list/map layers."""
    while "properties" not in node:
        if isinstance(node.get("items"), dict):
            node = node["items"]
        elif isinstance(node.get("additionalProperties"), dict):
            node = node["additionalProperties"]
        else:
            break
    return node


def _undocumented(
    sections: dict[str, dict[str, str]], anchor: str, schema: dict[str, Any], path: str
) -> list[str]:
    table = sections.get(anchor)
    if table is None:
        return [f"{path}: no section #{anchor}"]
    missing = []
    for name, sub in schema.get("properties", {}).items():
        if name not in table:
            missing.append(f"{path}.{name}")
            continue
        link = _LINK.search(table[name])
        # A ray.io type links to its section, which must document the nested properties too;
        # scalars and Kubernetes types (pod templates, conditions, ...) are not expanded.
        if link:
            missing += _undocumented(sections, link.group(1), _object(sub), f"{path}.{name}")
    return missing


@pytest.mark.parametrize("kind", crdgen.KINDS, ids=lambda k: k.kind)
def test_every_crd_schema_property_is_in_the_reference(kind: crdgen.Kind) -> None:
    sections = _sections(apidoc.render())
    (v1,) = [v for v in crdgen.crd(kind)["spec"]["versions"] if v["name"] == "v1"]
    schema = v1["schema"]["openAPIV3Schema"]
    assert _undocumented(sections, apidoc.anchor(kind.kind), schema, kind.kind) == []


def test_required_default_and_enum_come_from_the_schema() -> None:
    sections = apidoc.render()
    assert "| `groupName` | string | yes |  |" in sections
    assert "| `maxReplicas` | integer (int32) | yes | `2147483647` |" in sections
    assert "One of `Recreate`, `None`." in sections
    assert "| `template` | core/v1 PodTemplateSpec | yes |  |" in sections


def test_a_removed_row_is_caught() -> None:
    text = apidoc.render().replace("| `numOfHosts` |", "| `renamed` |")
    (kind,) = [k for k in crdgen.KINDS if k.kind == "RayCluster"]
    schema = crdgen.crd(kind)["spec"]["versions"][0]["schema"]["openAPIV3Schema"]
    missing = _undocumented(_sections(text), "raycluster", schema, "RayCluster")
    assert missing == ["RayCluster.spec.workerGroupSpecs.numOfHosts"]
