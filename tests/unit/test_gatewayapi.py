"""The Gateway API CRD source: the pin is read from the wrapper module, and a missing Go is
reported as such (callers skip on it). The download itself needs Go (``needs_go``): without
it that test skips on a developer's machine and fails in strict (CI) runs."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest

from kuberay.devenv import gatewayapi
from kuberay.devenv.testing import skip_unless_strict


def test_pin_comes_from_the_wrapper_module() -> None:
    assert gatewayapi.pinned_version() == "v1.4.1"
    go_sum = (gatewayapi.MODULE_DIR / "go.sum").read_text()
    assert "sigs.k8s.io/gateway-api v1.4.1 h1:" in go_sum


def test_pin_parsing_block_and_single_line(tmp_path: Path) -> None:
    (tmp_path / "go.mod").write_text(
        "module x\n\nrequire (\n\tsigs.k8s.io/gateway-api v1.5.0 // pinned\n)\n"
    )
    assert gatewayapi.pinned_version(tmp_path) == "v1.5.0"
    (tmp_path / "go.mod").write_text("module x\n")
    with pytest.raises(gatewayapi.GatewayApiUnavailable):
        gatewayapi.pinned_version(tmp_path)


def test_no_go_is_reported_as_such(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr("kuberay.devenv.gatewayapi.shutil.which", lambda _name: None)
    with pytest.raises(gatewayapi.GatewayApiUnavailable) as err:
        gatewayapi.module_dir()
    assert err.value.no_go


@pytest.mark.needs_go
def test_crd_files_present_in_the_downloaded_module() -> None:
    if shutil.which("go") is None:
        skip_unless_strict("Go is not installed")
    paths = gatewayapi.crd_paths(gatewayapi.module_dir())
    assert [p.name for p in paths] == list(gatewayapi.CRD_FILES)
