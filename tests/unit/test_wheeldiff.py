"""Wheel comparison: a differing member is named."""

from __future__ import annotations

import zipfile
from pathlib import Path

import pytest

from vllm_plugin_release.core.wheelfacts import diff_wheels


def test_diff_wheels_names_members(tmp_path: Path) -> None:
    a, b = tmp_path / "a.whl", tmp_path / "b.whl"
    for path, body in ((a, b"1"), (b, b"2")):
        with zipfile.ZipFile(path, "w") as zf:
            zf.writestr("pkg/__init__.py", body)
            zf.writestr("pkg/same.py", b"x")
    assert diff_wheels(a, b) == ["pkg/__init__.py: content differs"]


def _wheel(folder: Path, body: bytes, name: str = "pkg-1.0-py3-none-any.whl") -> Path:
    folder.mkdir(parents=True, exist_ok=True)
    path = folder / name
    with zipfile.ZipFile(path, "w") as zf:
        zf.writestr(zipfile.ZipInfo("pkg/__init__.py", (1980, 1, 1, 0, 0, 0)), body)
    return path


def test_two_builds_are_reproducible_only_when_byte_identical(tmp_path: Path) -> None:
    from vllm_plugin_release.core.cache import sha256_file
    from vllm_plugin_release.core.errors import GateFailed
    from vllm_plugin_release.stages.wheelbuild import compare_builds

    one, two = _wheel(tmp_path / "1", b"A"), _wheel(tmp_path / "2", b"A")
    digest = sha256_file(one)
    assert compare_builds([one, two], "t") == (digest, True)
    assert compare_builds([one, two], "t", [digest, None]) == (digest, True)
    assert compare_builds([one], "t") == (digest, None)  # one build: nothing to compare
    other = _wheel(tmp_path / "3", b"B")
    with pytest.raises(GateFailed, match=r"not reproducible(.|\n)*pkg/__init__.py: content"):
        compare_builds([one, other], "t")
    with pytest.raises(GateFailed, match="not reproducible"):  # the builds' own hashes
        compare_builds([one, two], "t", [digest, "0" * 64])
    with pytest.raises(ValueError):  # a hash missing for one build is no comparison
        compare_builds([one, other], "t", [digest])
    renamed = _wheel(tmp_path / "4", b"A", "pkg-1.0-py3-none-linux_x86_64.whl")
    with pytest.raises(GateFailed, match="named their wheels differently"):
        compare_builds([one, renamed], "t")
