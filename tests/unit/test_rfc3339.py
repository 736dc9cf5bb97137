"""The one RFC 3339 parser/printer: strict and lenient forms agree, printing is UTC seconds."""

from __future__ import annotations

import datetime as dt

import pytest

from kuberay.runtime import rfc3339

T0 = 1_700_000_000.0


def test_round_trip_through_the_printed_form() -> None:
    text = rfc3339.format_time(T0)
    assert text == "2023-11-14T22:13:20Z"
    assert rfc3339.parse_time(text) == T0
    assert rfc3339.parse(text) == dt.datetime.fromtimestamp(T0, dt.UTC)
    assert rfc3339.format_datetime(rfc3339.parse(text)) == text


def test_offsets_and_fractions_are_read() -> None:
    assert rfc3339.parse_time("2023-11-14T23:13:20+01:00") == T0
    assert rfc3339.parse_time("2023-11-14T22:13:20.5Z") == T0 + 0.5
    assert rfc3339.format_time(T0 + 0.9) == "2023-11-14T22:13:20Z"


@pytest.mark.parametrize("value", [None, "", 0, 12, "not a time", ["2023-11-14T22:13:20Z"]])
def test_lenient_forms_give_none(value: object) -> None:
    assert rfc3339.parse_datetime(value) is None
    assert rfc3339.parse_time(value) is None


def test_strict_form_raises() -> None:
    with pytest.raises(ValueError, match="Invalid isoformat"):
        rfc3339.parse("not a time")
