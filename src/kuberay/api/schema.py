"""Schema markers for the API models and the emitter that turns models into CRD schemas.

The models are the single source of the ray.io API: field names, JSON names, defaults and
every schema constraint the apiserver enforces live next to the field, as ``Annotated``
markers. The models themselves stay lenient (they only check JSON types): a value the CRD
would reject never reaches the operator, and values the CRD accepts but the controller
rejects must parse so that validation can report upstream's message instead of a pydantic
error.

Failure modes: an annotation the emitter does not understand raises ``TypeError`` during CRD
generation (caught by the stale-YAML unit test), never at runtime.
"""

from __future__ import annotations

import types
from dataclasses import dataclass
from typing import Annotated, Any, ClassVar, Union, get_args, get_origin

from pydantic import BaseModel, ConfigDict
from pydantic.alias_generators import to_camel
from pydantic_core import PydanticUndefined

from kuberay.api import openapi


@dataclass(frozen=True)
class Core:
    """The value is a Kubernetes core object kept as a plain dict; schema from OpenAPI."""

    name: str


@dataclass(frozen=True)
class Format:
    format: str


@dataclass(frozen=True)
class Default:
    value: Any


@dataclass(frozen=True)
class Enum:
    values: tuple[str, ...]


@dataclass(frozen=True)
class Minimum:
    value: int


@dataclass(frozen=True)
class MinLength:
    value: int


@dataclass(frozen=True)
class MinItems:
    value: int


@dataclass(frozen=True)
class Rule:
    """A CEL rule (``x-kubernetes-validations`` entry)."""

    rule: str
    message: str


@dataclass(frozen=True)
class ListType:
    kind: str
    keys: tuple[str, ...] = ()


@dataclass(frozen=True)
class Nullable:
    pass


@dataclass(frozen=True)
class Required:
    """Required in the CRD although the model has a default (Go field without omitempty)."""


@dataclass(frozen=True)
class QuantityMarker:
    pass


@dataclass(frozen=True)
class DateTime:
    pass


@dataclass(frozen=True)
class ConditionMarker:
    pass


Int32 = Annotated[int, Format("int32")]
Int64 = Annotated[int, Format("int64")]
Quantity = Annotated[str | int, QuantityMarker()]
Time = Annotated[str, DateTime()]
StrMap = dict[str, str]
Condition = Annotated[dict[str, Any], ConditionMarker()]


class ApiModel(BaseModel):
    """Base of every ray.io model: camelCase JSON names, unknown fields dropped (pruned)."""

    model_config = ConfigDict(
        alias_generator=to_camel,
        populate_by_name=True,
        extra="ignore",
        validate_default=False,
    )

    # Object-level CEL rules.
    crd_rules: ClassVar[tuple[Rule, ...]] = ()

    def to_dict(self) -> dict[str, Any]:
        """JSON form with only the fields that were set (so a parsed object round-trips)."""
        out: dict[str, Any] = self.model_dump(by_alias=True, exclude_unset=True, mode="json")
        return out


# --------------------------------------------------------------------------- emitter


def _split(annotation: Any) -> tuple[Any, list[Any]]:
    """Strip ``Annotated`` and ``Optional`` layers, collecting markers."""
    markers: list[Any] = []
    while True:
        origin = get_origin(annotation)
        if origin is Annotated:
            args = get_args(annotation)
            annotation = args[0]
            markers.extend(args[1:])
            continue
        if origin in (Union, types.UnionType):
            members = [a for a in get_args(annotation) if a is not type(None)]
            if len(members) == 1:
                annotation = members[0]
                continue
        return annotation, markers


def _base_schema(annotation: Any, markers: list[Any]) -> dict[str, Any]:
    for m in markers:
        if isinstance(m, Core):
            return openapi.schema_for(m.name)
        if isinstance(m, QuantityMarker):
            return {
                "anyOf": [{"type": "integer"}, {"type": "string"}],
                "pattern": openapi.QUANTITY_PATTERN,
                "x-kubernetes-int-or-string": True,
            }
        if isinstance(m, DateTime):
            return {"type": "string", "format": "date-time"}
        if isinstance(m, ConditionMarker):
            return openapi.condition_schema()
    origin = get_origin(annotation)
    if isinstance(annotation, type) and issubclass(annotation, ApiModel):
        return model_schema(annotation)
    if annotation is str:
        return {"type": "string"}
    if annotation is bool:
        return {"type": "boolean"}
    if annotation is int:
        return {"type": "integer"}
    if annotation is float:
        return {"type": "number"}
    if origin is list:
        (item,) = get_args(annotation)
        return {"type": "array", "items": type_schema(item)}
    if origin is dict:
        _, value = get_args(annotation)
        return {"type": "object", "additionalProperties": type_schema(value)}
    raise TypeError(f"no CRD schema for {annotation!r}")


def _apply(schema: dict[str, Any], markers: list[Any]) -> dict[str, Any]:
    rules: list[dict[str, str]] = []
    for m in markers:
        if isinstance(m, Format):
            schema["format"] = m.format
        elif isinstance(m, Default):
            schema["default"] = m.value
        elif isinstance(m, Enum):
            schema["enum"] = list(m.values)
        elif isinstance(m, Minimum):
            schema["minimum"] = m.value
        elif isinstance(m, MinLength):
            schema["minLength"] = m.value
        elif isinstance(m, MinItems):
            schema["minItems"] = m.value
        elif isinstance(m, Nullable):
            schema["nullable"] = True
        elif isinstance(m, ListType):
            schema["x-kubernetes-list-type"] = m.kind
            if m.keys:
                schema["x-kubernetes-list-map-keys"] = list(m.keys)
        elif isinstance(m, Rule):
            rules.append({"message": m.message, "rule": m.rule})
    if rules:
        schema["x-kubernetes-validations"] = [*schema.get("x-kubernetes-validations", []), *rules]
    return schema


def type_schema(annotation: Any, extra: list[Any] | None = None) -> dict[str, Any]:
    inner, markers = _split(annotation)
    markers = [*markers, *(extra or [])]
    return _apply(_base_schema(inner, markers), markers)


def model_schema(model: type[ApiModel], exclude: frozenset[str] = frozenset()) -> dict[str, Any]:
    properties: dict[str, Any] = {}
    required: list[str] = []
    for name, info in model.model_fields.items():
        alias = info.alias or name
        if alias in exclude:
            continue
        extra = [m for m in info.metadata if not type(m).__module__.startswith("annotated_types")]
        properties[alias] = type_schema(info.annotation, extra)
        if (info.default is PydanticUndefined and info.default_factory is None) or any(
            isinstance(m, Required) for m in _split(info.annotation)[1] + extra
        ):
            required.append(alias)
    schema: dict[str, Any] = {"type": "object"}
    if properties:
        schema["properties"] = dict(sorted(properties.items()))
    if required:
        schema["required"] = sorted(required)
    if model.crd_rules:
        schema["x-kubernetes-validations"] = [
            {"message": r.message, "rule": r.rule} for r in model.crd_rules
        ]
    return schema
