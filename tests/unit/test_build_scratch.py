"""Local builds' scratch in memory (core.cache.build_scratch_root): where it is made,
when it is refused (shared /dev/shm is hostile), and that a killed run's is swept."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from vllm_plugin_release.core import cache as cache_mod
from vllm_plugin_release.core.cache import OWNER_FILE, Cache, build_scratch_root


@pytest.fixture
def base(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    folder = tmp_path / "ram"
    folder.mkdir()
    monkeypatch.setenv("VPR_BUILD_SCRATCH", str(folder))
    monkeypatch.setattr(cache_mod, "_SWEPT", set())
    return folder


def test_scratch_in_memory_is_a_private_folder_and_is_removed(base: Path, tmp_path: Path) -> None:
    cache = Cache(tmp_path / ".vpr")
    with cache.scratch("build-core-", in_memory=True) as scratch:
        root = base / f"vpr-{os.getuid()}"
        assert scratch.parent == root
        assert (root.stat().st_mode & 0o777) == 0o700
        assert (scratch / OWNER_FILE).is_file()
        (scratch / "tree").mkdir()
    assert not scratch.exists()
    with cache.scratch("build-core-") as other:  # not asked for: in the cache, as before
        assert other.parent == tmp_path / ".vpr" / "tmp"


@pytest.mark.parametrize("value", ["off", "", "0"])
def test_scratch_in_memory_can_be_turned_off(
    value: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("VPR_BUILD_SCRATCH", value)
    assert build_scratch_root() is None
    with Cache(tmp_path / ".vpr").scratch("b-", in_memory=True) as scratch:
        assert scratch.parent == tmp_path / ".vpr" / "tmp"


def test_a_folder_planted_by_someone_else_is_not_used(base: Path, tmp_path: Path) -> None:
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir(mode=0o700)
    (base / f"vpr-{os.getuid()}").symlink_to(elsewhere)
    assert build_scratch_root() is None
    with Cache(tmp_path / ".vpr").scratch("b-", in_memory=True) as scratch:
        assert scratch.parent == tmp_path / ".vpr" / "tmp"
    assert not list(elsewhere.iterdir())


def test_a_folder_open_to_others_is_not_used(base: Path) -> None:
    (base / f"vpr-{os.getuid()}").mkdir(mode=0o700)
    (base / f"vpr-{os.getuid()}").chmod(0o777)
    assert build_scratch_root() is None


def test_a_missing_or_full_filesystem_falls_back(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("VPR_BUILD_SCRATCH", str(tmp_path / "absent"))
    assert build_scratch_root() is None
    monkeypatch.setenv("VPR_BUILD_SCRATCH", str(tmp_path))
    monkeypatch.setattr(cache_mod, "BUILD_SCRATCH_MIN_FREE", 1 << 62)  # more than any disk
    assert build_scratch_root() is None


def test_a_killed_run_s_scratch_in_memory_is_swept_by_the_next_run(
    base: Path, tmp_path: Path
) -> None:
    root = build_scratch_root()
    assert root is not None
    dead = root / "build-core-dead"
    dead.mkdir()
    (dead / OWNER_FILE).write_text("999999999 1")  # no such process
    live = root / "build-core-live"
    live.mkdir()
    (live / OWNER_FILE).write_text(cache_mod.owner_stamp())
    unowned = root / "someone-elses"
    unowned.mkdir()
    Cache(tmp_path / ".vpr")  # a later run: it sweeps before it uses anything
    assert not dead.exists()
    assert live.exists() and unowned.exists()
