"""A pinned runtime with no wheel for the pairing's Python and platform (ttnn 0.81.1 ships
cp310/cp312 only; here the reference pairing on 3.11 pins it): `vpr lock` says the runtime
is absent and why, the lock records it, and the environment stage fails its "runtime
installs" check with that reason (exit 1; the scorecard's environment check fails, so the
verdict is lab). Read from the real PyPI."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

from tests.support import REPO, git, vpr
from vllm_plugin_release.edges.uv import runtime_has_no_wheel


def test_the_index_says_which_pythons_a_runtime_has_wheels_for() -> None:
    assert runtime_has_no_wheel("ttnn==0.81.1", "3.10", "x86_64-manylinux_2_34") is None
    why = runtime_has_no_wheel("ttnn==0.81.1", "3.11", "x86_64-manylinux_2_34")
    assert why and "no wheel for CPython 3.11 on x86_64-manylinux_2_34" in why
    assert "cp310-cp310-manylinux_2_34_x86_64" in why
    # its wheels need glibc 2.34: a lock for manylinux_2_28 has none either
    assert runtime_has_no_wheel("ttnn==0.81.1", "3.10", "x86_64-manylinux_2_28")


def test_a_pinned_runtime_without_a_wheel_here_is_absent_and_says_why(
    tmp_path: Path, cache_root: Path, core_build: dict, session_dist: Path
) -> None:
    proj = tmp_path / "proj"
    shutil.copytree(REPO / "plugin" / "reference", proj / "plugin" / "reference")
    (proj / "buildspec").mkdir()
    text = (REPO / "buildspec" / "reference.toml").read_text()
    runtime = text[text.index("[runtime]") :]
    text = text.replace(
        runtime,
        '[runtime]\nname = "tt-metal"\nmodule = "ttnn"\npackage = "ttnn"\nversion = "0.81.1"\n',
    )
    spec = proj / "buildspec" / "reference.toml"
    spec.write_text(text)
    (proj / "constraints").mkdir()
    shutil.copy(REPO / "constraints" / "build-core-py311.txt", proj / "constraints")
    _commit(proj)  # a path plugin is read from the project's git history
    common = ("--spec", str(spec), "--cache-dir", str(cache_root))
    done = vpr("lock", *common)
    assert "the runtime is absent from env-reference-py311.txt because ttnn==0.81.1" in done.stderr
    lock = (proj / "constraints" / "env-reference-py311.txt").read_text()
    assert "# runtime-absent: ttnn==0.81.1 has no wheel for CPython 3.11" in lock
    assert "\nttnn==" not in lock
    vpr("lock", "--check", *common)  # the lock holds: checked as it was made
    dist = tmp_path / "dist"
    shutil.copytree(session_dist / "reference", dist / "reference")  # the built wheels
    vpr("build-plugin", *common, "--dist", str(dist))
    done = vpr("env", *common, "--dist", str(dist), check=False)
    assert done.returncode == 1 and "runtime installs" in done.stderr
    env = json.loads((dist / "reference" / "env.json").read_text())
    assert env["runtime"]["status"] == "absent"
    check = next(c for c in env["checks"] if c["name"] == "runtime installs")
    assert check["status"] == "fail"
    assert check["detail"].startswith("runtime absent because ttnn==0.81.1 has no wheel")


def _commit(proj: Path) -> None:
    git("init", "-q", "-b", "main", cwd=proj)
    git("add", ".", cwd=proj)
    git("commit", "-q", "-m", "project", cwd=proj, date="2026-08-01T12:00:00+00:00")
