"""Semantic comparison of two CRDs: every schema attribute except descriptions.

Used by the optional upstream-oracle test; lists differences as readable lines
("<kind> <version> <path>: ours X, upstream Y").
"""

from __future__ import annotations

import json
from typing import Any

IGNORED_KEYS = frozenset({"description"})


def _fmt(value: Any) -> str:
    text = json.dumps(value, sort_keys=True)
    return text if len(text) <= 120 else text[:117] + "..."


def _diff(ours: Any, theirs: Any, path: str, out: list[str]) -> None:
    if isinstance(ours, dict) and isinstance(theirs, dict):
        for key in sorted(set(ours) | set(theirs)):
            if key in IGNORED_KEYS:
                continue
            sub = f"{path}.{key}" if path else key
            if key not in theirs:
                out.append(f"{sub}: only ours {_fmt(ours[key])}")
            elif key not in ours:
                out.append(f"{sub}: only upstream {_fmt(theirs[key])}")
            else:
                _diff(ours[key], theirs[key], sub, out)
        return
    if isinstance(ours, list) and isinstance(theirs, list) and path.endswith("required"):
        ours, theirs = sorted(ours), sorted(theirs)
    if ours != theirs:
        out.append(f"{path}: ours {_fmt(ours)}, upstream {_fmt(theirs)}")


def compare(ours: dict[str, Any], theirs: dict[str, Any]) -> list[str]:
    """Differences between two CRDs (metadata annotations ignored)."""
    out: list[str] = []
    kind = theirs["spec"]["names"]["kind"]
    _diff(ours["spec"]["names"], theirs["spec"]["names"], f"{kind} names", out)
    for key in ("group", "scope"):
        _diff(ours["spec"].get(key), theirs["spec"].get(key), f"{kind} {key}", out)
    mine = {v["name"]: v for v in ours["spec"]["versions"]}
    upstream = {v["name"]: v for v in theirs["spec"]["versions"]}
    for name in sorted(set(mine) | set(upstream)):
        if name not in mine or name not in upstream:
            out.append(f"{kind} version {name}: only {'ours' if name in mine else 'upstream'}")
            continue
        _diff(mine[name], upstream[name], f"{kind} {name}", out)
    return out
