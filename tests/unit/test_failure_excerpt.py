"""edges/runner.failure_excerpt and free_space_note: a tool's failure names its cause
even when the cause is far above the last lines (a disk that filled early)."""

from __future__ import annotations

from pathlib import Path

from vllm_plugin_release.edges.runner import failure_excerpt, free_space_note


def test_a_cause_above_the_tail_is_shown_first() -> None:
    log = ["I: fetching"] * 50 + ["dpkg: error: No space left on device"] + ["x" * 5000] * 3
    shown = failure_excerpt(log, tail=3).splitlines()
    assert shown[0] == "    dpkg: error: No space left on device"
    assert shown[1] == "    ..."
    assert len(shown) == 5
    assert all(len(line) <= 300 + 4 for line in shown)  # a kilobyte command line is cut
    assert shown[-1].endswith("...")


def test_a_log_with_no_named_cause_is_its_tail() -> None:
    log = [f"line {n}" for n in range(40)]
    assert failure_excerpt(log, tail=5).splitlines() == [f"    line {n}" for n in range(35, 40)]
    assert failure_excerpt([], tail=5) == ""


def test_causes_in_the_tail_are_not_shown_twice() -> None:
    log = ["ok", "E: broken"]
    assert failure_excerpt(log, tail=5).splitlines() == ["    ok", "    E: broken"]


def test_free_space_names_each_folder_that_exists(tmp_path: Path) -> None:
    note = free_space_note(tmp_path, tmp_path / "absent")
    assert note.startswith(f"free: {tmp_path} ")
    assert "absent" not in note
    assert note.endswith(("MiB", "GiB"))
    assert free_space_note(tmp_path / "absent") == ""
