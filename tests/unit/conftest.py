"""Fixtures shared by unit tests that need a tool binary from the control-plane cache.

Every test that asks for such a binary is marked ``needs_go`` (it may have to build it), so
that ``scripts/test-unit.sh`` can leave it out; in the full suite a missing one fails in CI.
Each fixture finds or builds its binary; when that is impossible (no Go, no network) the test
fails in strict runs (``CI`` or ``KUBERAY_TESTS_STRICT=1``) and skips on a developer's machine.
``render_chart`` runs the real ``helm template`` (the ``helm`` fixture is in tests/conftest.py)
on ``deploy/helm/kuberay-operator`` with Helm's own directories in a temporary one, so no test
reads or writes the user's Helm configuration.
"""

from __future__ import annotations

import os
import subprocess
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
import yaml

from kuberay.devenv import binaries
from kuberay.devenv.testing import skip_unless_strict

CHART = Path(__file__).resolve().parents[2] / "deploy" / "helm" / "kuberay-operator"
_GO_BUILT_FIXTURES = frozenset({"promtool", "helm"})


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


@pytest.fixture(scope="session")
def helm_env(tmp_path_factory: pytest.TempPathFactory) -> dict[str, str]:
    home = tmp_path_factory.mktemp("helm-home")
    dirs = {f"HELM_{kind}_HOME": str(home / kind.lower()) for kind in ("CACHE", "CONFIG", "DATA")}
    return dict(os.environ, **dirs)


HelmRun = Callable[..., subprocess.CompletedProcess[str]]
Render = Callable[..., list[dict[str, Any]]]


@pytest.fixture(scope="session")
def run_helm(helm: Path, helm_env: dict[str, str]) -> HelmRun:
    """``run_helm(*args, values=None)``: helm with ``args``, values (if any) on stdin (``-f -``)."""

    def run(*args: str, values: dict[str, Any] | None = None) -> subprocess.CompletedProcess[str]:
        extra = ["--values", "-"] if values is not None else []
        return subprocess.run(
            [str(helm), *args, *extra],
            input=yaml.safe_dump(values) if values is not None else None,
            capture_output=True,
            text=True,
            env=helm_env,
            timeout=120,
        )

    return run


@pytest.fixture(scope="session")
def render_chart(run_helm: HelmRun) -> Render:
    """``render_chart(values, namespace="ops", release="kr", files=())``: the chart's objects as
    ``helm template`` renders them (values files in ``files`` first, then ``values``)."""

    def render(
        values: dict[str, Any] | None = None,
        namespace: str = "ops",
        release: str = "kr",
        files: tuple[Path, ...] = (),
    ) -> list[dict[str, Any]]:
        args = ["template", release, str(CHART), "--namespace", namespace]
        for path in files:
            args += ["--values", str(path)]
        proc = run_helm(*args, values=values or {})
        assert proc.returncode == 0, proc.stderr
        return [d for d in yaml.safe_load_all(proc.stdout) if d]

    return render
