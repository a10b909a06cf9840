"""The build environment's python is asked its version while the trees are copied and
built, not before (in a container that question is a container of its own), and when it
does not run, that is the failure reported. Real LocalRunner; the environment's `python`
is a stand-in program: `-c` answers a version, `-m build` leaves a stand-in wheel."""

from __future__ import annotations

from pathlib import Path

import pytest

from vllm_plugin_release.core.cache import Cache
from vllm_plugin_release.core.errors import GateFailed
from vllm_plugin_release.edges.runner import LocalRunner
from vllm_plugin_release.stages.wheelbuild import Builds, parallel_local_builds

# `-c`: waits (up to 10 s) for a build to have started, then answers; `-m build`: notes
# that it started and writes a wheel into --outdir.
STAND_IN = """#!/bin/sh
flag={flag}
if [ "$1" = "-c" ]; then
    {version}
fi
touch "$flag"
while [ "$#" -gt 0 ]; do
    if [ "$1" = "--outdir" ]; then mkdir -p "$2"; : > "$2/synth-0.1.0-py3-none-any.whl"; fi
    shift
done
exit {build_exit}
"""
WAITS = 'for i in $(seq 100); do [ -e "$flag" ] && echo 3.11.9 && exit 0; sleep 0.1; done; exit 1'


def _build(tmp_path: Path, version: str, build_exit: int = 0) -> list[dict]:
    venv = tmp_path / "venv"
    (venv / "bin").mkdir(parents=True)
    python = venv / "bin" / "python"
    flag = tmp_path / "a-build-started"
    python.write_text(STAND_IN.format(flag=flag, version=version, build_exit=build_exit))
    python.chmod(0o755)
    tree = tmp_path / "tree"
    tree.mkdir()
    (tree / "setup.py").write_text("")
    scratch = tmp_path / "scratch"
    scratch.mkdir()
    plan = Builds(2, 1700000000, None, "overlap-test")
    cache = Cache(tmp_path / "c")
    return parallel_local_builds(LocalRunner("off"), venv, tree, scratch, cache, plan)


def test_the_env_python_is_asked_while_the_builds_run(tmp_path: Path) -> None:
    results = _build(tmp_path, WAITS)  # asked first and alone, it would wait in vain
    assert [r["python"] for r in results] == ["3.11.9", "3.11.9"]
    assert all(r["wheel"].is_file() for r in results)


def test_an_env_python_that_does_not_run_is_the_failure_named(tmp_path: Path) -> None:
    with pytest.raises(GateFailed, match="the build environment's python does not run"):
        _build(tmp_path, "exit 1", build_exit=1)  # the builds fail too: not what is named
