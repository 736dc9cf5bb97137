"""A missing prerequisite skips on a developer's machine and fails in CI (issue 20)."""

from __future__ import annotations

import pytest

from kuberay.devenv.testing import skip_unless_strict, strict


def test_ci_fails_instead_of_skipping(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("KUBERAY_TESTS_STRICT", raising=False)
    monkeypatch.setenv("CI", "true")
    assert strict()
    with pytest.raises(pytest.fail.Exception, match=r"required by this run.*redis-server"):
        skip_unless_strict("redis-server is not installed")


def test_developer_machine_skips(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("CI", raising=False)
    monkeypatch.delenv("KUBERAY_TESTS_STRICT", raising=False)
    assert not strict()
    with pytest.raises(pytest.skip.Exception, match="no ray"):
        skip_unless_strict("no ray")


def test_explicit_switch_wins(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("CI", "true")
    monkeypatch.setenv("KUBERAY_TESTS_STRICT", "0")
    assert not strict()
    monkeypatch.delenv("CI")
    monkeypatch.setenv("KUBERAY_TESTS_STRICT", "1")
    assert strict()
