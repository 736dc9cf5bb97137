"""The two distributions built from this tree: the operator (``kuberay-py``, what the image
installs) and its development part (``kuberay-py-devenv``: local plane, node agent, test helpers).

The wheels are built offline (``pip wheel --no-build-isolation --no-index``) from a clean copy
of the files the Containerfile copies, so nothing a previous in-tree build left behind can hide a
packaging mistake. The operator wheel is then run from its unpacked files alone, as the image
runs it: ``--version`` works and ``kuberay dev``/``demo`` say in one line what is missing.
"""

from __future__ import annotations

import importlib.metadata
import os
import shutil
import subprocess
import sys
import sysconfig
import tomllib
import zipfile
from pathlib import Path

import pytest

import kuberay
from kuberay.devenv.testing import skip_unless_strict

ROOT = Path(__file__).resolve().parents[2]


def _toml(path: Path) -> dict[str, object]:
    with path.open("rb") as f:
        return tomllib.load(f)


def test_versions_agree() -> None:
    """One version for both distributions, and the development part pins the operator's."""
    operator = _toml(ROOT / "pyproject.toml")["project"]
    devenv = _toml(ROOT / "devenv" / "pyproject.toml")["project"]
    assert isinstance(operator, dict)
    assert isinstance(devenv, dict)
    assert operator["version"] == devenv["version"] == kuberay.__version__
    deps = devenv["dependencies"]
    assert isinstance(deps, list)
    assert f"kuberay-py=={kuberay.__version__}" in deps


def _can_build_offline() -> None:
    """The offline build uses the venv's setuptools, which must read ``license`` as an SPDX
    string (setuptools 77 on; the table form is deprecated and goes in 2027)."""
    version = tuple(int(p) for p in importlib.metadata.version("setuptools").split(".")[:2])
    if version < (77, 0):
        skip_unless_strict(
            f"setuptools {'.'.join(map(str, version))} cannot build these wheels offline; "
            "rerun scripts/bootstrap.sh (the dev extra brings setuptools>=77)"
        )


def _build(source: Path, out: Path) -> Path:
    proc = subprocess.run(
        [
            sys.executable,
            "-m",
            "pip",
            "wheel",
            "--no-deps",
            "--no-build-isolation",
            "--no-index",
            "--quiet",
            "--wheel-dir",
            str(out),
            str(source),
        ],
        capture_output=True,
        text=True,
        timeout=300,
        check=False,
    )
    assert proc.returncode == 0, proc.stdout + proc.stderr
    # setuptools warns when a directory it can import (data/) is not declared; a warning here
    # means a file may be left out of, or land unintended in, the wheel.
    assert "BuildBackendWarning" not in proc.stdout + proc.stderr, proc.stdout + proc.stderr
    (wheel,) = out.glob("*.whl")
    return wheel


@pytest.fixture(scope="module")
def tree(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """What the Containerfile copies (and ``devenv/``), without caches or build leftovers."""
    dest = tmp_path_factory.mktemp("tree")
    for name in ("pyproject.toml", "README.md"):
        shutil.copy2(ROOT / name, dest / name)
    ignore = shutil.ignore_patterns("__pycache__", "*.egg-info", "build")
    shutil.copytree(ROOT / "src", dest / "src", ignore=ignore)
    shutil.copytree(ROOT / "devenv", dest / "devenv", ignore=ignore)
    return dest


@pytest.fixture(scope="module")
def operator_wheel(tree: Path, tmp_path_factory: pytest.TempPathFactory) -> Path:
    _can_build_offline()
    return _build(tree, tmp_path_factory.mktemp("operator-wheel"))


def test_operator_wheel_has_the_operator_only(operator_wheel: Path) -> None:
    names = zipfile.ZipFile(operator_wheel).namelist()
    dist_info = f"kuberay_py-{kuberay.__version__}.dist-info/"
    assert operator_wheel.name == f"kuberay_py-{kuberay.__version__}-py3-none-any.whl"
    assert all(n.startswith(("kuberay/", dist_info)) for n in names), names
    assert not [n for n in names if n.startswith("kuberay/devenv")]
    assert not [n for n in names if "/tests/" in n or n.startswith("tests/")]
    for needed in ("kuberay/py.typed", "kuberay/cli/main.py", "kuberay/cli/operator.py"):
        assert needed in names
    assert [n for n in names if n.startswith("kuberay/api/data/") and n.endswith(".json")]
    entry_points = zipfile.ZipFile(operator_wheel).read(dist_info + "entry_points.txt").decode()
    assert "kuberay = kuberay.cli.main:main" in entry_points


def test_operator_wheel_runs_without_the_dev_part(operator_wheel: Path, tmp_path: Path) -> None:
    site = tmp_path / "site"
    zipfile.ZipFile(operator_wheel).extractall(site)
    # The unpacked wheel, then the dependencies; -S skips .pth files, so no editable install
    # (this checkout's, kuberay-py-devenv's import hook) is on the path.
    deps = {sysconfig.get_paths()["purelib"], sysconfig.get_paths()["platlib"]}
    env = dict(os.environ, PYTHONPATH=os.pathsep.join([str(site), *sorted(deps)]))

    def python(code: str, *args: str) -> subprocess.CompletedProcess[str]:
        return subprocess.run(
            [sys.executable, "-S", "-c", code, *args],
            capture_output=True,
            text=True,
            env=env,
            timeout=60,
            check=False,
        )

    # First make sure the dev part really is absent: the commands below must not start a plane.
    where = python("import kuberay; print(kuberay.__file__); import kuberay.devenv")
    assert where.stdout.strip() == str(site / "kuberay" / "__init__.py"), where.stderr
    assert "No module named 'kuberay.devenv'" in where.stderr, where.stderr

    cli = "import sys; from kuberay.cli.main import main; sys.exit(main(sys.argv[1:]))"
    version = python(cli, "operator", "--version")
    assert version.returncode == 0, version.stderr
    assert version.stdout.startswith(f"kuberay-py {kuberay.__version__} ")
    assert python(cli, "--version").stdout == version.stdout
    commands = [("dev", "up", "--name", "x"), ("dev", "--help"), ("demo", "--nodes", "1")]
    for args in commands:
        proc = python(cli, *args)
        assert proc.returncode == 2, proc.stdout + proc.stderr
        assert proc.stdout == ""
        (line,) = proc.stderr.splitlines()
        assert line.startswith(f"kuberay {args[0]}: the local development plane is not installed")
        assert "kuberay-py-devenv" in line


def test_devenv_wheel_has_the_dev_part_only(tree: Path, tmp_path: Path) -> None:
    _can_build_offline()
    wheel = _build(tree / "devenv", tmp_path)
    names = zipfile.ZipFile(wheel).namelist()
    files = [n for n in names if not n.startswith("kuberay_py_devenv-")]
    assert files
    assert all(n.startswith("kuberay/devenv/") for n in files), files
    for needed in ("plane.py", "testing.py", "nodeagent/agent.py", "nodeagent/launcher.py"):
        assert f"kuberay/devenv/{needed}" in files
    assert "kuberay/devenv/data/kwok.yaml" in files
