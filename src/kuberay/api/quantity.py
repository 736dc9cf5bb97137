"""Kubernetes resource quantities: exact parsing, the rounding the operator relies on, and the
canonical text form the apiserver would store.

Values are kept as exact ``Fraction``s, never floats, so sums of many ``"100m"`` requests stay
exact. Formatting mirrors apimachinery's canonicalisation so status fields such as
``desiredMemory`` read the same as under the Go operator: decimal values use the largest SI
suffix whose exponent is a multiple of three with an integral mantissa (``1500m``, ``2``,
``3k``); binary values stay binary only when they are whole numbers of at least 1024
(``1536Mi``), otherwise they are shown in decimal form; a sum takes the format of its first
term.

Failure modes: malformed text raises ``QuantityError`` (a ``ValueError``) naming the input.
Precision finer than nano units is rounded up to the next nano unit, as apimachinery does.
"""

from __future__ import annotations

import math
import re
from dataclasses import dataclass
from decimal import Decimal
from fractions import Fraction
from typing import Any, Final

DECIMAL_SI: Final = "DecimalSI"
BINARY_SI: Final = "BinarySI"
DECIMAL_EXPONENT: Final = "DecimalExponent"

_BINARY: Final = {"Ki": 10, "Mi": 20, "Gi": 30, "Ti": 40, "Pi": 50, "Ei": 60}
_DECIMAL: Final = {"n": -9, "u": -6, "m": -3, "": 0, "k": 3, "M": 6, "G": 9, "T": 12, "P": 15}
_DECIMAL["E"] = 18
_DEC_SUFFIX_BY_EXP: Final = {v: k for k, v in _DECIMAL.items()}
_BIN_SUFFIX_BY_EXP: Final = {v: k for k, v in _BINARY.items()}
_NUMBER: Final = re.compile(r"^([+-]?)(\d*)(?:\.(\d*))?(.*)$")
_EXPONENT: Final = re.compile(r"^[eE]([+-]?\d+)$")
_NANO: Final = Fraction(1, 10**9)


class QuantityError(ValueError):
    pass


@dataclass(frozen=True)
class Quantity:
    value: Fraction
    format: str = DECIMAL_SI

    def __add__(self, other: Quantity) -> Quantity:
        return Quantity(self.value + other.value, self.format)

    def ceil(self) -> int:
        """Integer value rounded away from zero (apimachinery ``Quantity.Value``)."""
        if self.value >= 0:
            return math.ceil(self.value)
        return -math.ceil(-self.value)

    def is_zero(self) -> bool:
        return self.value == 0

    def __str__(self) -> str:
        return format_quantity(self)


def parse_quantity(text: str) -> Quantity:
    """Parse ``"500m"``, ``"2Gi"``, ``"1e3"``, ``"1.5"`` ... exactly."""
    raw = str(text).strip()
    match = _NUMBER.match(raw)
    if not raw or match is None:
        raise QuantityError(f"quantities must match the regular expression: {text!r}")
    sign, whole, frac, suffix = match.groups()
    if not whole and not frac:
        raise QuantityError(f"quantities must match the regular expression: {text!r}")
    digits = Fraction(int(whole or "0"))
    if frac:
        digits += Fraction(int(frac), 10 ** len(frac))
    if suffix in _BINARY:
        value, fmt = digits * 2 ** _BINARY[suffix], BINARY_SI
    elif suffix in _DECIMAL:
        value, fmt = digits * Fraction(10) ** _DECIMAL[suffix], DECIMAL_SI
    else:
        exp = _EXPONENT.match(suffix)
        if exp is None:
            raise QuantityError(f"unable to parse quantity's suffix: {text!r}")
        value, fmt = digits * Fraction(10) ** int(exp.group(1)), DECIMAL_EXPONENT
    if sign == "-":
        value = -value
    scaled = value / _NANO
    if scaled.denominator != 1:
        value = Fraction(math.ceil(scaled)) * _NANO
    return Quantity(value, fmt)


def _decimal_parts(value: Fraction) -> tuple[int, int]:
    """``value == mantissa * 10**exponent`` with the exponent a multiple of three."""
    scaled = value / _NANO
    amount, exponent = math.ceil(scaled) if scaled > 0 else -math.ceil(-scaled), -9
    while amount % 10 == 0:
        amount //= 10
        exponent += 1
    shift = exponent % 3
    return amount * 10**shift, exponent - shift


def format_quantity(q: Quantity) -> str:
    """Canonical text, as the apiserver would serialise the same value."""
    value = q.value
    if value == 0:
        return "0"
    fmt = q.format
    if fmt == BINARY_SI and (-1024 < value < 1024 or value.denominator != 1):
        fmt = DECIMAL_SI
    if fmt == BINARY_SI:
        amount, power = int(value), 0
        while amount % 1024 == 0 and power < 60:
            amount //= 1024
            power += 10
        return f"{amount}{_BIN_SUFFIX_BY_EXP[power]}"
    amount, exponent = _decimal_parts(value)
    if fmt == DECIMAL_EXPONENT or exponent not in _DEC_SUFFIX_BY_EXP:
        return f"{amount}e{exponent}" if exponent else str(amount)
    return f"{amount}{_DEC_SUFFIX_BY_EXP[exponent]}"


def canonical(text: str) -> str:
    return format_quantity(parse_quantity(text))


def go_json_float(value: float) -> str:
    """A float the way Go's encoding/json writes it (``1`` not ``1.0``; ``1e+21``, ``1e-7``)."""
    value = float(value)
    magnitude = abs(value)
    if value == 0:
        return "0"
    if 1e-6 <= magnitude < 1e21:
        if value.is_integer():
            return str(int(value))
        text = repr(value)
        return format(Decimal(text), "f") if "e" in text else text
    mantissa, _, exp_text = repr(value).partition("e")
    exponent = int(exp_text)
    return f"{mantissa}e-{-exponent}" if exponent < 0 else f"{mantissa}e+{exponent:02d}"


def _dict(value: Any) -> dict[str, Any]:
    return value if isinstance(value, dict) else {}


def _list(value: Any) -> list[Any]:
    return value if isinstance(value, list) else []


def pod_resources(template: dict[str, Any]) -> dict[str, Quantity]:
    """Requests of every container, limits filling in keys a container does not request."""
    totals: dict[str, Quantity] = {}
    spec = _dict(template.get("spec"))
    for container in _list(spec.get("containers")):
        resources = _dict(_dict(container).get("resources"))
        merged = dict(_dict(resources.get("requests")))
        for key, value in _dict(resources.get("limits")).items():
            merged.setdefault(key, value)
        for key, value in merged.items():
            try:
                quantity = parse_quantity(str(value))
            except QuantityError:
                continue
            totals[key] = totals[key] + quantity if key in totals else quantity
    return totals


def formatted(amounts: dict[str, Quantity]) -> dict[str, str]:
    """A resource list in the apiserver's canonical text form."""
    return {key: format_quantity(q) for key, q in amounts.items()}


def same_amount(a: Any, b: Any) -> bool:
    """Whether two quantities (text as stored, or as built) are equal by value ("1Gi" and
    "1024Mi" are); text that does not parse only equals itself."""
    try:
        return parse_quantity(str(a)).value == parse_quantity(str(b)).value
    except QuantityError:
        return bool(a == b)
