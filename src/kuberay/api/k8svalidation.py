"""Kubernetes name/label syntax checks with the apimachinery error strings.

Upstream embeds these strings in its own messages (``... should be a valid DNS1035 label: [...]``),
so users grepping for them, and tests comparing messages, need them verbatim, including the
double spaces apimachinery puts between examples. Also Go-compatible helpers the validation
messages depend on: ``%v`` of a string slice, ``%q`` quoting, generic version parsing and
duration parsing.
"""

from __future__ import annotations

import datetime as _dt
import json
import re

_DNS1123_LABEL_FMT = "[a-z0-9]([-a-z0-9]*[a-z0-9])?"
_DNS1123_SUBDOMAIN_FMT = _DNS1123_LABEL_FMT + "(\\." + _DNS1123_LABEL_FMT + ")*"
_DNS1035_LABEL_FMT = "[a-z]([-a-z0-9]*[a-z0-9])?"
_QUALIFIED_NAME_FMT = "([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9]"
_LABEL_VALUE_FMT = "(" + _QUALIFIED_NAME_FMT + ")?"

_DNS1123_LABEL_MSG = (
    "a lowercase RFC 1123 label must consist of lower case alphanumeric characters or '-', "
    "and must start and end with an alphanumeric character"
)
_DNS1123_SUBDOMAIN_MSG = (
    "a lowercase RFC 1123 subdomain must consist of lower case alphanumeric characters, '-' "
    "or '.', and must start and end with an alphanumeric character"
)
_DNS1035_LABEL_MSG = (
    "a DNS-1035 label must consist of lower case alphanumeric characters or '-', start with "
    "an alphabetic character, and end with an alphanumeric character"
)
_QUALIFIED_NAME_MSG = (
    "must consist of alphanumeric characters, '-', '_' or '.', and must start and end with an "
    "alphanumeric character"
)
_LABEL_VALUE_MSG = (
    "a valid label must be an empty string or consist of alphanumeric characters, '-', '_' or "
    "'.', and must start and end with an alphanumeric character"
)


def regex_error(msg: str, fmt: str, *examples: str) -> str:
    if not examples:
        return f"{msg} (regex used for validation is '{fmt}')"
    out = msg + " (e.g. "
    for i, example in enumerate(examples):
        if i > 0:
            out += " or "
        out += f"'{example}', "
    return out + f"regex used for validation is '{fmt}')"


def max_len_error(n: int) -> str:
    return f"must be no more than {n} characters"


def _full(fmt: str, value: str) -> bool:
    return re.fullmatch(fmt, value) is not None


def dns1035_label(value: str) -> list[str]:
    errs = []
    if len(value) > 63:
        errs.append(max_len_error(63))
    if not _full(_DNS1035_LABEL_FMT, value):
        errs.append(regex_error(_DNS1035_LABEL_MSG, _DNS1035_LABEL_FMT, "my-name", "abc-123"))
    return errs


def dns1123_label(value: str) -> list[str]:
    errs = []
    if len(value) > 63:
        errs.append(max_len_error(63))
    if not _full(_DNS1123_LABEL_FMT, value):
        errs.append(regex_error(_DNS1123_LABEL_MSG, _DNS1123_LABEL_FMT, "my-name", "123-abc"))
    return errs


def dns1123_subdomain(value: str) -> list[str]:
    errs = []
    if len(value) > 253:
        errs.append(max_len_error(253))
    if not _full(_DNS1123_SUBDOMAIN_FMT, value):
        errs.append(regex_error(_DNS1123_SUBDOMAIN_MSG, _DNS1123_SUBDOMAIN_FMT, "example.com"))
    return errs


def qualified_name(value: str) -> list[str]:
    errs: list[str] = []
    parts = value.split("/")
    if len(parts) == 1:
        name = parts[0]
    elif len(parts) == 2:
        prefix, name = parts
        if not prefix:
            errs.append("prefix part must be non-empty")
        else:
            errs.extend("prefix part " + e for e in dns1123_subdomain(prefix))
    else:
        return [
            "a qualified name "
            + regex_error(_QUALIFIED_NAME_MSG, _QUALIFIED_NAME_FMT, "MyName", "my.name", "123-abc")
            + " with an optional DNS subdomain prefix and '/' (e.g. 'example.com/MyName')"
        ]
    if not name:
        errs.append("name part must be non-empty")
    elif len(name) > 63:
        errs.append("name part " + max_len_error(63))
    if name and not _full(_QUALIFIED_NAME_FMT, name):
        errs.append(
            "name part "
            + regex_error(_QUALIFIED_NAME_MSG, _QUALIFIED_NAME_FMT, "MyName", "my.name", "123-abc")
        )
    return errs


def label_value(value: str) -> list[str]:
    errs = []
    if len(value) > 63:
        errs.append(max_len_error(63))
    if not _full(_LABEL_VALUE_FMT, value):
        errs.append(regex_error(_LABEL_VALUE_MSG, _LABEL_VALUE_FMT, "MyValue", "my_value", "12345"))
    return errs


def go_list(items: list[str]) -> str:
    """Go's ``%v`` of a ``[]string``."""
    return "[" + " ".join(items) + "]"


def go_quote(value: str) -> str:
    """Go's ``%q`` for the strings that appear in messages (ASCII-faithful)."""
    return json.dumps(value, ensure_ascii=False)


class VersionError(ValueError):
    pass


_VERSION_RE = re.compile(r"^\s*v?([0-9]+(?:\.[0-9]+)*)(.*)$", re.DOTALL)


def parse_generic_version(text: str) -> tuple[int, ...]:
    """apimachinery's ``version.ParseGeneric``: at least two numeric components, suffix ignored."""
    match = _VERSION_RE.match(text)
    if not match:
        raise VersionError(f"could not parse {go_quote(text)} as version")
    components = match.group(1).split(".")
    if len(components) < 2:
        raise VersionError(f"illegal version string {go_quote(text)}")
    out = []
    for i, comp in enumerate(components):
        if i == 0 and comp.startswith("0") and comp != "0":
            raise VersionError(
                f"illegal zero-prefixed version component {go_quote(comp)} in {go_quote(text)}"
            )
        out.append(int(comp))
    return tuple(out)


def version_less(a: tuple[int, ...], b: tuple[int, ...]) -> bool:
    width = max(len(a), len(b))
    return a + (0,) * (width - len(a)) < b + (0,) * (width - len(b))


_DURATION_UNITS = {
    "ns": 1e-9,
    "us": 1e-6,
    "µs": 1e-6,
    "μs": 1e-6,
    "ms": 1e-3,
    "s": 1.0,
    "m": 60.0,
    "h": 3600.0,
}
_DURATION_PART = re.compile(r"([0-9]*(?:\.[0-9]*)?)(ns|us|µs|μs|ms|s|m|h)")


def format_go_datetime(when: float, *, zone: bool = False) -> str:
    """A POSIX time in UTC in Go's ``time.DateTime`` layout (``2026-12-02 12:44:12``), which
    upstream's RayJob messages print; with ``zone`` it is ``%v`` of a ``metav1.Time`` in UTC
    (``2026-12-02 12:44:12 +0000 UTC``). upstream: ``time.Time.Format(time.DateTime)``."""
    text = _dt.datetime.fromtimestamp(when, tz=_dt.UTC).strftime("%Y-%m-%d %H:%M:%S")
    return text + " +0000 UTC" if zone else text


def format_go_duration(seconds: float) -> str:
    """Go's ``time.Duration.String`` of ``seconds`` (nanosecond precision): ``1h2m3.5s``,
    ``1m0s``, ``10s``; under a second in ms/µs/ns. Messages quote durations this way upstream.
    upstream: ``time.Duration.String``."""
    ns = round(seconds * 1e9)
    sign = "-" if ns < 0 else ""
    ns = abs(ns)
    if ns == 0:
        return "0s"
    if ns < 1_000_000_000:
        for unit, size in (("ms", 1_000_000), ("µs", 1_000), ("ns", 1)):
            if ns >= size:
                return sign + _trim_fraction(ns, size) + unit
    hours, rest = divmod(ns, 3_600_000_000_000)
    minutes, rest = divmod(rest, 60_000_000_000)
    text = _trim_fraction(rest, 1_000_000_000) + "s"
    if hours or minutes:
        text = f"{minutes}m{text}"
    if hours:
        text = f"{hours}h{text}"
    return sign + text


def _trim_fraction(value: int, unit: int) -> str:
    whole, frac = divmod(value, unit)
    if not frac:
        return str(whole)
    digits = len(str(unit)) - 1
    return f"{whole}.{frac:0{digits}d}".rstrip("0")


def parse_go_duration(text: str) -> float:
    """Go's ``time.ParseDuration`` (seconds); raises ``ValueError`` on what Go rejects."""
    s = text
    sign = 1.0
    if s[:1] in ("+", "-"):
        sign = -1.0 if s[0] == "-" else 1.0
        s = s[1:]
    if s == "0":
        return 0.0
    if not s:
        raise ValueError(f"time: invalid duration {go_quote(text)}")
    total = 0.0
    pos = 0
    while pos < len(s):
        match = _DURATION_PART.match(s, pos)
        if not match or match.group(1) in ("", "."):
            raise ValueError(f"time: invalid duration {go_quote(text)}")
        total += float(match.group(1)) * _DURATION_UNITS[match.group(2)]
        pos = match.end()
    return sign * total
