"""A killed run's temporary folders are removed by a later run; nothing else is."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

from vllm_plugin_release.core.cache import OWNER_FILE, _start_time, owner_stamp
from vllm_plugin_release.edges import proc

PREFIX = "vpr-test-owned-"


def _ended_pid() -> tuple[int, str]:
    """The id of a process that has ended (and reaped), with the start time it had."""
    child = subprocess.Popen(
        [sys.executable, "-c", "import sys; sys.stdin.read()"], stdin=subprocess.PIPE
    )
    started = _start_time(child.pid) or ""
    child.communicate(b"")
    return child.pid, started


def _folder(root: Path, name: str, owner: str | None) -> Path:
    folder = root / f"{PREFIX}{name}"
    folder.mkdir()
    (folder / "request.json").write_text("{}")
    if owner is not None:
        (folder / OWNER_FILE).write_text(owner)
    return folder


def test_make_marks_the_folder_as_this_process(tmp_path: Path) -> None:
    folder = proc.owned_tmp(PREFIX, tmp_path)
    pid, started = (folder / OWNER_FILE).read_text().split()
    assert int(pid) == os.getpid() and started == _start_time(os.getpid())
    assert proc.sweep_owned_tmp(PREFIX, tmp_path) == 0 and folder.is_dir()  # we are alive


def test_sweep_removes_only_the_folders_of_ended_runs(tmp_path: Path) -> None:
    pid, started = _ended_pid()
    dead = _folder(tmp_path, "dead", f"{pid} {started}\n")
    dead_no_time = _folder(tmp_path, "dead-no-time", f"{pid}\n")
    live = _folder(tmp_path, "live", owner_stamp())
    parent = _folder(tmp_path, "parent", owner_stamp(os.getppid()))
    # the id is taken again by a later process: its start time differs
    reused = _folder(tmp_path, "reused", f"{os.getppid()} 1")
    unmarked = _folder(tmp_path, "unmarked", None)  # being made right now, or older code's
    garbage = _folder(tmp_path, "garbage", "rm -rf /\n")
    huge = _folder(tmp_path, "huge", f"{pid} {started}" + " " * 100)
    other = tmp_path / "other-prefix"
    other.mkdir()
    (other / OWNER_FILE).write_text(f"{pid} {started}\n")
    target = tmp_path / "elsewhere"
    target.mkdir()
    (target / OWNER_FILE).write_text(f"{pid} {started}\n")
    (tmp_path / f"{PREFIX}link").symlink_to(target)  # a link is never followed

    assert proc.sweep_owned_tmp(PREFIX, tmp_path) == 3
    assert not dead.exists() and not dead_no_time.exists() and not reused.exists()
    for kept in (live, parent, unmarked, garbage, huge, other, target):
        assert kept.is_dir(), kept


def test_the_envrun_job_folder_is_owned_and_removed(tmp_path: Path, monkeypatch) -> None:
    from vllm_plugin_release.edges import envrun

    monkeypatch.setattr("tempfile.tempdir", str(tmp_path))
    pid, started = _ended_pid()
    left = tmp_path / "vpr-inenv-worker-left"  # a killed run's worker folder
    left.mkdir()
    (left / OWNER_FILE).write_text(f"{pid} {started}\n")
    monkeypatch.setattr(proc, "_swept", set())
    with envrun._job_folder() as folder:
        assert (Path(folder) / OWNER_FILE).is_file()
        assert not left.exists()
    assert not Path(folder).exists()
