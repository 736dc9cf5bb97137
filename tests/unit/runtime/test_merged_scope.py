"""When many watched namespaces share one cluster-wide watch per resource (``merged_scope``),
and the knob that sets the threshold."""

from __future__ import annotations

import logging

import pytest

from kuberay.api import rbac_rules
from kuberay.cli.operator import MERGE_WATCHES_ABOVE, _merge_watches_above
from kuberay.runtime.cache import merged_scope

FIVE = ["a", "b", "c", "d", "e"]


@pytest.mark.parametrize(
    ("namespaces", "above", "allowed", "want"),
    [
        (FIVE, 4, True, frozenset(FIVE)),
        (FIVE, 4, False, None),  # no cluster-wide list/watch: keep one watch per namespace
        (FIVE[:4], 4, True, None),  # few namespaces: per-namespace watches are cheap
        ([*FIVE, "a"], 5, True, None),  # duplicates count once
        (FIVE, 0, True, None),  # 0 turns merging off
        (None, 4, True, None),  # all namespaces: one cluster-wide watch already
        ([], 4, True, None),
    ],
)
def test_merged_scope(
    namespaces: list[str] | None, above: int, allowed: bool, want: frozenset[str] | None
) -> None:
    assert merged_scope(namespaces, above=above, cluster_wide_allowed=allowed) == want


@pytest.mark.parametrize(
    ("value", "want"),
    [("", MERGE_WATCHES_ABOVE), ("0", 0), ("12", 12), ("-1", MERGE_WATCHES_ABOVE), ("x", 4)],
)
def test_merge_watches_above_knob(value: str, want: int, caplog: pytest.LogCaptureFixture) -> None:
    env = {"KUBERAY_MERGE_WATCHES_ABOVE": value} if value else {}
    with caplog.at_level(logging.WARNING):
        assert _merge_watches_above(env) == want
    assert ("ignored" in caplog.text) == (value in ("-1", "x"))


def test_watched_resources_are_those_granted_list_and_watch() -> None:
    pairs = rbac_rules.watched_resources()
    assert ("ray.io", "rayclusters") in pairs
    assert ("", "pods") in pairs
    assert all("/" not in plural for _, plural in pairs)
    for group, plural in pairs:
        for verb in ("list", "watch"):
            assert rbac_rules.grants(rbac_rules.OPERATOR_RULES, group, plural, verb)
