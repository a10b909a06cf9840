"""edges/proc.copy_tree: the builds' private copies of a source tree (`cp -a`, else
shutil.copytree): contents, links as links, modes and times kept, failures named."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from vllm_plugin_release.core.errors import OutsideFailure
from vllm_plugin_release.edges import proc


def _tree(root: Path) -> Path:
    (root / "pkg").mkdir(parents=True)
    (root / "pkg" / "mod.py").write_text("X = 1\n")
    (root / "run.sh").write_text("#!/bin/sh\n")
    (root / "run.sh").chmod(0o755)
    (root / "link").symlink_to("pkg/mod.py")
    os.utime(root / "pkg" / "mod.py", (1700000000, 1700000000))
    return root


@pytest.mark.parametrize("with_cp", [True, False], ids=["cp", "copytree"])
def test_the_copy_is_the_tree(tmp_path: Path, monkeypatch, with_cp: bool) -> None:
    if not with_cp:
        monkeypatch.setattr(proc.shutil, "which", lambda name: None)
    src = _tree(tmp_path / "src")
    dst = tmp_path / "scratch" / "build-a" / "copy"  # its parents are made too
    proc.copy_tree(src, dst)
    assert (dst / "pkg" / "mod.py").read_text() == "X = 1\n"
    assert (dst / "link").is_symlink() and os.readlink(dst / "link") == "pkg/mod.py"
    assert (dst / "run.sh").stat().st_mode & 0o777 == 0o755
    assert (dst / "pkg" / "mod.py").stat().st_mtime == 1700000000
    assert not os.path.samefile(dst / "pkg" / "mod.py", src / "pkg" / "mod.py")  # a copy


def test_a_copy_that_fails_is_an_outside_failure(tmp_path: Path) -> None:
    with pytest.raises(OutsideFailure, match=r"copying .*gone"):
        proc.copy_tree(tmp_path / "gone", tmp_path / "copy")
