"""Wheel comparison: a differing member is named."""

from __future__ import annotations

import zipfile
from pathlib import Path

from vllm_plugin_release.core.wheeldiff import diff_wheels


def test_diff_wheels_names_members(tmp_path: Path) -> None:
    a, b = tmp_path / "a.whl", tmp_path / "b.whl"
    for path, body in ((a, b"1"), (b, b"2")):
        with zipfile.ZipFile(path, "w") as zf:
            zf.writestr("pkg/__init__.py", body)
            zf.writestr("pkg/same.py", b"x")
    assert diff_wheels(a, b) == ["pkg/__init__.py: content differs"]
