"""Local builds' scratch in memory (edges/settings.build_scratch_root, core.cache.
private_scratch_root): where it is made, when it is refused (shared /dev/shm is
hostile), that a container runner's is there too (bound into its containers), and
that a killed run's goes."""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

import pytest

from vllm_plugin_release.core import cache as cache_mod
from vllm_plugin_release.core.cache import OWNER_FILE, Cache
from vllm_plugin_release.edges import settings
from vllm_plugin_release.edges.runner import LocalRunner
from vllm_plugin_release.edges.settings import build_scratch_root


@pytest.fixture
def base(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    folder = tmp_path / "ram"
    folder.mkdir()
    monkeypatch.setenv("VPR_BUILD_SCRATCH", str(folder))
    monkeypatch.setattr(cache_mod, "_SWEPT", set())
    # what is tested here is privacy, not room: a nearly full /tmp must not decide it
    # (test_a_missing_or_full_filesystem_falls_back is the one about room)
    monkeypatch.setattr(cache_mod, "SCRATCH_MIN_FREE", 0)
    return folder


def test_a_local_build_s_scratch_is_a_private_folder_in_memory(base: Path, tmp_path: Path) -> None:
    cache = Cache(tmp_path / ".vpr")
    with cache.scratch("build-core-", under=LocalRunner("off").scratch_root()) as scratch:
        root = base / f"vpr-{os.getuid()}"
        assert scratch.parent == root
        assert (root.stat().st_mode & 0o777) == 0o700
        assert (scratch / OWNER_FILE).is_file()
        (scratch / "tree").mkdir()
    assert not scratch.exists()
    with cache.scratch("build-core-") as other:  # no other root: in the cache, as before
        assert other.parent == tmp_path / ".vpr" / "tmp"


DOCKERFILE = Path(__file__).resolve().parents[2] / "docker" / "build.Dockerfile"
PINNED = "docker.io/library/python:3.11-slim@sha256:" + "a" * 64


def rw_binds(runner: Any) -> list[str]:
    """The folders a container of `runner` gets to write (beside a CA file, read-only)."""
    return [path for path, bind in runner._binds_for(["true"]).items() if bind["mode"] == "rw"]


def test_a_container_build_s_scratch_is_in_memory_and_bound_into_its_containers(
    base: Path, tmp_path: Path
) -> None:
    """As a local build's: the tree copy and the build's writes stay off the disk. The
    folder is bound into the containers started after `scratch_root` (a build's paths
    mean the same in them), but not written into an environment's marker."""
    from vllm_plugin_release.edges.container import ContainerRunner

    project = tmp_path / "project"
    project.mkdir()
    runner = ContainerRunner(PINNED, DOCKERFILE, [project])
    assert str(base / f"vpr-{os.getuid()}") not in runner._binds_for(["true"])
    root = runner.scratch_root()
    assert root == base / f"vpr-{os.getuid()}"
    assert runner._binds_for(["true"])[str(root)] == {"bind": str(root), "mode": "rw"}
    assert str(root) not in runner.binds_rw()  # not an environment's mount


def test_a_container_build_s_scratch_under_a_mount_is_not_bound_twice(
    base: Path, tmp_path: Path
) -> None:
    from vllm_plugin_release.edges.container import ContainerRunner

    runner = ContainerRunner(PINNED, DOCKERFILE, [base])
    root = runner.scratch_root()
    assert root is not None and rw_binds(runner) == [str(base)]


def test_a_container_build_s_scratch_turned_off_stays_in_the_mounted_cache(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from vllm_plugin_release.edges.container import ContainerRunner

    monkeypatch.setenv("VPR_BUILD_SCRATCH", "off")
    runner = ContainerRunner(PINNED, DOCKERFILE, [tmp_path])
    assert runner.scratch_root() is None
    assert rw_binds(runner) == [str(tmp_path.resolve())]


@pytest.mark.parametrize("value", ["off", "", "0"])
def test_scratch_in_memory_can_be_turned_off(
    value: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("VPR_BUILD_SCRATCH", value)
    assert build_scratch_root() is None
    with Cache(tmp_path / ".vpr").scratch("b-", under=build_scratch_root()) as scratch:
        assert scratch.parent == tmp_path / ".vpr" / "tmp"


def test_a_folder_planted_by_someone_else_is_not_used(base: Path, tmp_path: Path) -> None:
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir(mode=0o700)
    (base / f"vpr-{os.getuid()}").symlink_to(elsewhere)
    assert build_scratch_root() is None
    with Cache(tmp_path / ".vpr").scratch("b-", under=build_scratch_root()) as scratch:
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
    monkeypatch.setattr(cache_mod, "SCRATCH_MIN_FREE", 1 << 62)  # more than any disk
    assert build_scratch_root() is None


def test_a_killed_run_s_scratch_in_memory_is_swept_by_the_next_run(
    base: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
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
    monkeypatch.setenv("VPR_CACHE_DIR", str(tmp_path / ".vpr"))
    settings.cache_from_env()  # a later run's cache: it sweeps before anything is used
    assert not dead.exists()
    assert live.exists() and unowned.exists()
