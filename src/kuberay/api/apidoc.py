"""Render the ray.io API reference (``docs/api-reference.md``) from the API models.

Pure: ``render()`` returns Markdown and touches no file; ``kuberay docs`` writes it and
``kuberay docs --check`` (the unit test's path) compares it with the committed file.

Invariants:
- One section per kind (RayCluster, RayJob, RayService, RayCronJob), then one section per model
  type reachable from them, each type once, in first-use order; a field whose type is another
  model links to that type's section (``#<lowercase name>``), so the reference is a tree walk
  of the v1 CRD schema (a unit test walks it that way and finds every schema property).
- Types, defaults, enums and "required" come from the same schema the CRDs are generated from
  (``schema.model_schema``/``type_schema``); prose comes from ``fielddocs``. Kubernetes core
  types are named (``core/v1 PodTemplateSpec``) and not expanded.
- Output is deterministic, so regeneration never produces noise.
"""

from __future__ import annotations

import json
from typing import Any, get_args, get_origin

from kuberay.api import constants, crdgen, fielddocs
from kuberay.api.schema import (
    ApiModel,
    ConditionMarker,
    Core,
    DateTime,
    Format,
    QuantityMarker,
    _split,
    model_schema,
    type_schema,
)

HEADER = (
    "<!-- Generated from the kuberay.api models by `kuberay docs`; do not edit. -->\n\n"
    "# ray.io API reference\n\n"
    "The custom resources of the `ray.io` group, as the CRDs in `deploy/crds/` define them. "
    "Every kind is served as `ray.io/v1` (the stored version); RayCluster, RayJob and "
    "RayService are also served as the deprecated `ray.io/v1alpha1`, which has the same schema "
    "minus the fields listed under each kind. Fields of Kubernetes types (pod templates, "
    "Services, ...) follow the Kubernetes API of the pinned version and are not repeated "
    "here.\n\n"
    "Columns: *Required* means the apiserver rejects an object without the field; *Default* is "
    "the value the apiserver fills in when the field is omitted.\n"
)


def anchor(name: str) -> str:
    return name.lower()


def _link(model: type[ApiModel]) -> str:
    return f"[{model.__name__}](#{anchor(model.__name__)})"


def _core(name: str) -> str:
    # io.k8s.api.core.v1.PodTemplateSpec -> core/v1 PodTemplateSpec
    parts = name.split(".")
    return f"{parts[-3]}/{parts[-2]} {parts[-1]}"


def type_name(annotation: Any, extra: list[Any] | None = None) -> str:
    """The Markdown type of a field: scalars, ``[]X``, ``map[string]X``, links, core types."""
    inner, markers = _split(annotation)
    markers = [*markers, *(extra or [])]
    for m in markers:
        if isinstance(m, Core):
            return _core(m.name)
        if isinstance(m, QuantityMarker):
            return "Quantity (int or string)"
        if isinstance(m, DateTime):
            return "string (date-time)"
        if isinstance(m, ConditionMarker):
            return "meta/v1 Condition"
    formats = [m.format for m in markers if isinstance(m, Format)]
    origin = get_origin(inner)
    if isinstance(inner, type) and issubclass(inner, ApiModel):
        return _link(inner)
    if origin is list:
        return "[]" + type_name(get_args(inner)[0])
    if origin is dict:
        return "map[string]" + type_name(get_args(inner)[1])
    base = {str: "string", bool: "boolean", int: "integer", float: "number"}[inner]
    return f"{base} ({formats[0]})" if formats else base


def nested_models(annotation: Any) -> list[type[ApiModel]]:
    inner, _ = _split(annotation)
    if isinstance(inner, type) and issubclass(inner, ApiModel):
        return [inner]
    return [m for arg in get_args(inner) for m in nested_models(arg)]


def reachable(roots: list[type[ApiModel]]) -> list[type[ApiModel]]:
    """Every model reachable from ``roots``, each once, depth-first in field order."""
    out: list[type[ApiModel]] = []

    def visit(model: type[ApiModel]) -> None:
        if model in out:
            return
        out.append(model)
        for info in model.model_fields.values():
            for sub in nested_models(info.annotation):
                visit(sub)

    for root in roots:
        visit(root)
    return out


def _code(value: Any) -> str:
    return f"`{json.dumps(value)}`" if not isinstance(value, str) else f'`"{value}"`'


def _cell(text: str) -> str:
    return text.replace("|", "\\|").replace("\n", " ")


def _constraints(schema: dict[str, Any], own_rules: bool = True) -> list[str]:
    notes = []
    if "enum" in schema:
        notes.append("One of " + ", ".join(f"`{v}`" for v in schema["enum"]) + ".")
    for key, label in (("minimum", "Minimum"), ("minLength", "Minimum length")):
        if key in schema:
            notes.append(f"{label} {schema[key]}.")
    if "minItems" in schema:
        notes.append(f"At least {schema['minItems']} item(s).")
    if schema.get("x-kubernetes-list-map-keys"):
        keys = ", ".join(f"`{k}`" for k in schema["x-kubernetes-list-map-keys"])
        notes.append(f"A map list keyed by {keys}.")
    if own_rules:
        rules = schema.get("x-kubernetes-validations", [])
        notes += [f"Rule: {r['message'].rstrip('.')}." for r in rules]
    return notes


def field_rows(model: type[ApiModel]) -> list[str]:
    """One table row per field, in the CRD's (alphabetical) order."""
    schema = model_schema(model)
    required = set(schema.get("required", []))
    rows = []
    infos = {info.alias or name: info for name, info in model.model_fields.items()}
    for alias in sorted(infos):
        info = infos[alias]
        extra = [m for m in info.metadata if not type(m).__module__.startswith("annotated_types")]
        sub = type_schema(info.annotation, extra)
        described = fielddocs.FIELD_DOCS[f"{model.__name__}.{alias}"]
        # A model's object-level rules are listed in its own section, not on every field using it.
        own_rules = not nested_models(info.annotation)
        text = " ".join([described, *_constraints(sub, own_rules)])
        default = _code(sub["default"]) if "default" in sub else ""
        rows.append(
            f"| `{alias}` | {_cell(type_name(info.annotation, extra))} | "
            f"{'yes' if alias in required else ''} | {_cell(default)} | {_cell(text)} |"
        )
    return rows


TABLE_HEAD = "| Field | Type | Required | Default | Description |\n|---|---|---|---|---|\n"


def type_section(model: type[ApiModel]) -> str:
    lines = [f"### {model.__name__}", "", fielddocs.TYPE_DOCS[model.__name__], ""]
    rules = model.crd_rules
    if rules:
        lines += ["Object rules:", "", *(f"- {r.message.rstrip('.')}." for r in rules), ""]
    return "\n".join(lines) + "\n" + TABLE_HEAD + "\n".join(field_rows(model)) + "\n"


def kind_section(kind: crdgen.Kind) -> str:
    versions = "`ray.io/v1`" + (", `ray.io/v1alpha1` (deprecated)" if kind.v1alpha1 else "")
    gate = ""
    if kind.kind == "RayCronJob":
        gate = " Reconciled only with the `RayCronJob` feature gate on."
    lines = [
        f"## {kind.kind}",
        "",
        f"Versions: {versions}. Plural `{kind.plural}`, namespaced.{gate}",
        "",
        TABLE_HEAD.rstrip("\n"),
        "| `apiVersion` | string |  |  | `ray.io/v1`. |",
        f"| `kind` | string |  |  | `{kind.kind}`. |",
        "| `metadata` | meta/v1 ObjectMeta |  |  | Name, namespace, labels, annotations. |",
        f"| `spec` | {_link(kind.spec)} |  |  | The desired state. |",
        f"| `status` | {_link(kind.status)} |  |  | Written by the operator. |",
        "",
    ]
    embedded = (".rayClusterSpec.", ".rayClusterConfig.", ".rayClusterStatus.")
    omitted = [
        p for p in crdgen.V1ALPHA1_OMIT.get(kind.kind, ()) if not any(e in p for e in embedded)
    ]
    if omitted:
        tail = (
            ""
            if kind.kind == "RayCluster"
            else "; nor, in the embedded cluster spec and status, the fields RayCluster's "
            "`v1alpha1` lacks"
        )
        lines += ["Not in `v1alpha1`: " + ", ".join(f"`{p}`" for p in omitted) + tail + ".", ""]
    return "\n".join(lines)


def render() -> str:
    kinds = "\n".join(f"- [{k.kind}](#{anchor(k.kind)})" for k in crdgen.KINDS)
    parts = [HEADER, f"Group `{constants.GROUP}`. Kinds:\n\n{kinds}\n"]
    parts += [kind_section(k) for k in crdgen.KINDS]
    roots: list[type[ApiModel]] = [m for k in crdgen.KINDS for m in (k.spec, k.status)]
    parts.append("## Types\n")
    parts += [type_section(m) for m in reachable(roots)]
    return "\n".join(parts)
