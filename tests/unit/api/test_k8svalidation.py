"""Go/apimachinery-compatible helpers used inside validation messages."""

from __future__ import annotations

import pytest

from kuberay.api import k8svalidation as k


def test_qualified_names() -> None:
    assert k.qualified_name("ray.io/node-type") == []
    assert k.qualified_name("/x") == ["prefix part must be non-empty"]
    assert k.qualified_name("Bad_Prefix/x")[0].startswith(
        "prefix part a lowercase RFC 1123 subdomain must consist of"
    )
    assert k.qualified_name("a/b/c")[0].startswith("a qualified name must consist of")
    assert k.qualified_name("x" * 64) == ["name part must be no more than 63 characters"]
    assert k.label_value("") == []
    assert k.label_value("v" * 64) == ["must be no more than 63 characters"]


def test_dns_labels() -> None:
    assert k.dns1035_label("abc-1") == []
    assert len(k.dns1035_label("1" * 64)) == 2
    assert k.dns1123_label("1abc") == []
    assert k.go_list(["a b", "c"]) == "[a b c]"


@pytest.mark.parametrize(
    ("text", "seconds"),
    [("5m", 300.0), ("1h30m", 5400.0), ("1.5s", 1.5), ("-2s", -2.0), ("0", 0.0), ("300ms", 0.3)],
)
def test_go_durations(text: str, seconds: float) -> None:
    assert k.parse_go_duration(text) == pytest.approx(seconds)


@pytest.mark.parametrize("text", ["", "5", "m", "1x", "1h 2m", "--1s"])
def test_go_duration_errors(text: str) -> None:
    with pytest.raises(ValueError, match="time: invalid duration"):
        k.parse_go_duration(text)


def test_generic_versions() -> None:
    assert k.parse_generic_version("2.52.0") == (2, 52, 0)
    assert k.parse_generic_version("v2.9") == (2, 9)
    assert k.parse_generic_version("2.52.0rc1") == (2, 52, 0)
    assert k.version_less((2, 9), (2, 9, 1))
    assert not k.version_less((2, 10, 0), (2, 9, 1))
    with pytest.raises(k.VersionError, match='illegal version string "2"'):
        k.parse_generic_version("2")
    with pytest.raises(k.VersionError, match='illegal zero-prefixed version component "02"'):
        k.parse_generic_version("02.1")
