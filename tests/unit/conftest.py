"""Fixtures shared by unit tests that need a tool binary from the control-plane cache."""

from __future__ import annotations

from pathlib import Path

import pytest

from kuberay.devenv import binaries
from kuberay.devenv.testing import skip_unless_strict


@pytest.fixture(scope="module")
def promtool() -> Path:
    """promtool, built on demand; a missing one fails in CI and skips elsewhere."""
    try:
        return binaries.prometheus_binaries(log=lambda _line: None)["promtool"]
    except binaries.BuildError as exc:
        skip_unless_strict(f"promtool is not available: {exc}")
