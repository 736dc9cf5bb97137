from __future__ import annotations

from typing import Any

import pytest

from kuberay.builders.options import BuildOptions

from . import samples


@pytest.fixture
def options() -> BuildOptions:
    return BuildOptions()


@pytest.fixture
def rc() -> dict[str, Any]:
    return samples.cluster()
