"""Fixtures shared by unit tests that need a tool binary from the control-plane cache.

Every test that asks for such a binary is marked ``needs_go`` (it may have to build it), so
that ``scripts/test-unit.sh`` can leave it out; in the full suite a missing one fails in CI.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from kuberay.devenv import binaries
from kuberay.devenv.testing import skip_unless_strict

_GO_BUILT_FIXTURES = frozenset({"promtool"})


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    for item in items:
        if _GO_BUILT_FIXTURES & set(getattr(item, "fixturenames", ())):
            item.add_marker(pytest.mark.needs_go)


@pytest.fixture(scope="module")
def promtool() -> Path:
    """promtool, built on demand; a missing one fails in CI and skips elsewhere."""
    try:
        return binaries.prometheus_binaries(log=lambda _line: None)["promtool"]
    except binaries.BuildError as exc:
        skip_unless_strict(f"promtool is not available: {exc}")
