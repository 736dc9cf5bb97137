"""``kuberay docs``: the committed API reference and chart values table are current."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest

from kuberay.cli import docs
from kuberay.cli.main import main as cli_main

ROOT = Path(__file__).resolve().parents[2]


def test_committed_docs_are_current() -> None:
    stale = docs.stale_files(ROOT)
    assert not stale, f"regenerate with `kuberay docs`: {stale}"


def _copy(tmp_path: Path) -> Path:
    for rel in (docs.CHART_README, docs.VALUES):
        (tmp_path / rel).parent.mkdir(parents=True, exist_ok=True)
        shutil.copy(ROOT / rel, tmp_path / rel)
    return tmp_path


def test_check_flag_reports_stale_files_and_write_fixes_them(tmp_path: Path) -> None:
    root = _copy(tmp_path)
    assert cli_main(["docs", "--check", "--root", str(root)]) == 1  # no api-reference.md yet
    assert cli_main(["docs", "--root", str(root)]) == 0
    assert cli_main(["docs", "--check", "--root", str(root)]) == 0
    values = root / docs.VALUES
    values.write_text(values.read_text() + "# A new key.\nnewKey: 3\n")
    assert docs.stale_files(root) == [str(docs.CHART_README)]
    assert b"| `newKey` | `3` | A new key. |" in docs.expected(root)[str(docs.CHART_README)]


VALUES = """\
# Header comment, ended by a blank line.

# The image.
image:
  # Where from.
  repository: x
  tag: "1"
plain:
  child: true
# A list.
gates:
  - name: A
    enabled: true
empty: {}
"""


def test_values_rows() -> None:
    assert docs.values_rows(VALUES) == [
        ("image", "", "The image."),
        ("image.repository", '`"x"`', "Where from."),
        ("image.tag", '`"1"`', ""),
        ("plain.child", "`true`", ""),
        ("gates", '`[{"name": "A", "enabled": true}]`', "A list."),
        ("empty", "`{}`", ""),
    ]


def test_readme_without_markers_is_an_error() -> None:
    with pytest.raises(ValueError, match="markers"):
        docs.chart_readme("# no markers\n", VALUES)


def test_every_value_has_a_description() -> None:
    text = (ROOT / docs.VALUES).read_text()
    assert [key for key, _, described in docs.values_rows(text) if not described] == []
