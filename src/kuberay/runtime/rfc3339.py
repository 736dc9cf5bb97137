"""RFC 3339 timestamps as Kubernetes writes them (``metav1.Time``): the one parser and printer.

Parsing accepts what ``datetime.fromisoformat`` accepts once a ``Z`` suffix reads as UTC; an
offset-less text gives a naive datetime (local time, as ``fromisoformat`` has it). ``parse`` is
strict (``ValueError`` on malformed text); ``parse_datetime`` and ``parse_time`` are lenient and
give ``None`` for anything that is not a parseable, non-empty string, since controllers read
these fields from objects other writers may have filled.

Printing always gives UTC with whole seconds and a ``Z`` suffix, the form the apiserver stores.
"""

from __future__ import annotations

import datetime as dt
from typing import Any, Final

FORMAT: Final = "%Y-%m-%dT%H:%M:%SZ"


def parse(text: str) -> dt.datetime:
    """``text`` as a datetime; raises ``ValueError`` if it is not one."""
    return dt.datetime.fromisoformat(text.replace("Z", "+00:00"))


def parse_datetime(value: Any) -> dt.datetime | None:
    """``value`` as a datetime, or ``None`` when it is empty, not a string or malformed."""
    if not value or not isinstance(value, str):
        return None
    try:
        return parse(value)
    except ValueError:
        return None


def parse_time(value: Any) -> float | None:
    """``value`` as seconds since the epoch, or ``None`` as ``parse_datetime`` would give."""
    when = parse_datetime(value)
    return None if when is None else when.timestamp()


def format_datetime(when: dt.datetime) -> str:
    return when.astimezone(dt.UTC).strftime(FORMAT)


def format_time(ts: float) -> str:
    """Seconds since the epoch as RFC 3339 (UTC, whole seconds)."""
    return dt.datetime.fromtimestamp(ts, dt.UTC).strftime(FORMAT)


def now() -> str:
    return dt.datetime.now(dt.UTC).strftime(FORMAT)
