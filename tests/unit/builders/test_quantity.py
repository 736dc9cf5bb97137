from __future__ import annotations

from fractions import Fraction

import pytest
from hypothesis import given
from hypothesis import strategies as st

from kuberay.api.quantity import (
    BINARY_SI,
    DECIMAL_EXPONENT,
    DECIMAL_SI,
    QuantityError,
    canonical,
    format_quantity,
    go_json_float,
    parse_quantity,
)


@pytest.mark.parametrize(
    ("text", "value", "fmt"),
    [
        ("500m", Fraction(1, 2), DECIMAL_SI),
        ("2Gi", Fraction(2 * 1024**3), BINARY_SI),
        ("1e3", Fraction(1000), DECIMAL_EXPONENT),
        ("1.5", Fraction(3, 2), DECIMAL_SI),
        ("100Mi", Fraction(100 * 1024**2), BINARY_SI),
        ("2G", Fraction(2 * 10**9), DECIMAL_SI),
        ("-1.5k", Fraction(-1500), DECIMAL_SI),
        (".5", Fraction(1, 2), DECIMAL_SI),
        ("1E", Fraction(10**18), DECIMAL_SI),
        ("1E-3", Fraction(1, 1000), DECIMAL_EXPONENT),
        (" 7 ", Fraction(7), DECIMAL_SI),
    ],
)
def test_parse_exact(text: str, value: Fraction, fmt: str) -> None:
    q = parse_quantity(text)
    assert (q.value, q.format) == (value, fmt)


@pytest.mark.parametrize("text", ["", "abc", "1.2.3", "5X", "Mi", "1 Gi", "--1"])
def test_parse_rejects(text: str) -> None:
    with pytest.raises(QuantityError):
        parse_quantity(text)


def test_sub_nano_precision_rounds_up() -> None:
    assert parse_quantity("0.0000000001").value == Fraction(1, 10**9)


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("1000m", "1"),
        ("1.5", "1500m"),
        ("2000", "2k"),
        ("0.1", "100m"),
        ("1024Mi", "1Gi"),
        ("1.5Gi", "1536Mi"),
        ("0.5Ki", "512"),
        ("1e3", "1e3"),
        ("12e2", "1200"),
        ("0", "0"),
        ("0Gi", "0"),
        ("100Mi", "100Mi"),
    ],
)
def test_canonical_form(text: str, expected: str) -> None:
    assert canonical(text) == expected


def test_sum_keeps_first_format_and_is_exact() -> None:
    total = parse_quantity("1Gi") + parse_quantity("512Mi")
    assert str(total) == "1536Mi"
    mixed = parse_quantity("500m") + parse_quantity("1Gi")
    assert mixed.format == DECIMAL_SI
    tenths = parse_quantity("100m")
    acc = tenths
    for _ in range(9):
        acc = acc + tenths
    assert str(acc) == "1"
    # Binary sum that is not a whole number shows in decimal form.
    assert str(parse_quantity("1Gi") + parse_quantity("500m")) == "1073741824500m"


@pytest.mark.parametrize(("text", "ceil"), [("500m", 1), ("1", 1), ("1001m", 2), ("-1.5", -2)])
def test_ceil_rounds_away_from_zero(text: str, ceil: int) -> None:
    assert parse_quantity(text).ceil() == ceil


@pytest.mark.parametrize(
    ("value", "text"),
    [(1.0, "1"), (0.5, "0.5"), (4, "4"), (1e21, "1e+21"), (1e-7, "1e-7"), (1.5e-5, "0.000015")],
)
def test_go_json_float(value: float, text: str) -> None:
    assert go_json_float(value) == text


@given(
    st.integers(min_value=-(10**15), max_value=10**15),
    st.sampled_from(["n", "u", "m", "", "k", "M", "G", "Ki", "Mi", "Gi", "e3", "e-2"]),
)
def test_canonical_form_round_trips(number: int, suffix: str) -> None:
    q = parse_quantity(f"{number}{suffix}")
    again = parse_quantity(format_quantity(q))
    assert again.value == q.value
    assert format_quantity(again) == format_quantity(q)
